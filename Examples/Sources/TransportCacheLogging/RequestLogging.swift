import Foundation
import Logging
import TransportCache

/// Logs what `transport` does to `logger`, read from ``CachedTransport/events()``: one line per
/// request, answered or failed, at `requestLevel`, saying where its answer came from and why; and
/// one line per fetch started or ended, answer stored or not, entry evicted or invalidated and body
/// decoded, at `detailLevel`.
///
/// ```swift
/// var logger = Logger(label: "transport")
/// logger.logLevel = .debug
/// let logging = logRequests(of: transport, to: logger)
/// _ = try await transport.data(from: url)
/// // debug: fetch http://127.0.0.1:8080/articles: no entry
/// // debug: fetched http://127.0.0.1:8080/articles: status 200, 512 bytes, 3.1 ms
/// // debug: stored http://127.0.0.1:8080/articles: 512 bytes
/// // info:  http://127.0.0.1:8080/articles network (no entry), stored, 3.1 ms
/// _ = try await transport.data(from: url)
/// // info:  http://127.0.0.1:8080/articles memory (fresh)
/// logging.cancel()
/// ```
///
/// A request line is the URL followed by the answer's ``CacheOutcome``; a failed request's line
/// says `failed`, names the error (a `URLError` by its code, a cancelled caller as `cancelled`)
/// and carries it as the log event's error. The event stream does not say which method a request
/// used; an unsafe one shows as `passed through (unsafe method)`.
///
/// The stream is registered before this function returns, so every request made after it is
/// logged, in the order the transport reported it. Logging happens on the returned task, never on
/// the requests' path: a logger slower than the requests loses the oldest events first
/// (``CachedTransport/Configuration/StayingCurrent/changeBufferLimit``), and no request ever waits for it.
///
/// - Parameters:
///   - transport: the transport to watch. The task does not keep it alive.
///   - logger: where the lines go; its own level decides which of them are written.
///   - requestLevel: the level of the one line per request. Default: `.info`.
///   - detailLevel: the level of every other line. Default: `.debug`.
/// - Returns: the task that logs; it ends when cancelled or when the transport goes away.
@discardableResult
public func logRequests(
    of transport: CachedTransport,
    to logger: Logger,
    requestLevel: Logger.Level = .info,
    detailLevel: Logger.Level = .debug
) -> Task<Void, Never> {
    // Registered here, before the task runs, so that nothing the caller does next is missed.
    let events = transport.events()
    return Task {
        for await event in events {
            log(event, to: logger, requestLevel: requestLevel, detailLevel: detailLevel)
        }
    }
}

/// Writes the one line `event` makes to `logger`.
private func log(_ event: CacheEvent, to logger: Logger, requestLevel: Logger.Level, detailLevel: Logger.Level) {
    switch event.kind {
    case .answered(let outcome):
        logger.log(level: requestLevel, "\(event.url.absoluteString) \(outcome)")
    case .failed(let outcome, let error):
        let ending = outcome.map { " \($0)" } ?? ""
        logger.log(
            level: requestLevel, "\(event.url.absoluteString) failed (\(name(of: error)))\(ending)", error: error)
    default:
        logger.log(level: detailLevel, "\(event)")
    }
}

/// A short name for `error`: a `URLError` by its code, cancellation as `cancelled`.
private func name(of error: any Error) -> String {
    if let error = error as? URLError { return "URLError \(error.code.rawValue)" }
    if error is CancellationError { return "cancelled" }
    return String(describing: type(of: error))
}
