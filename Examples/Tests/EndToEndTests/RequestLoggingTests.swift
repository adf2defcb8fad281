import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Logging
import Synchronization
import Testing
import TransportCache
import TransportCacheTesting
import TransportCacheLogging

@Suite("Request logging through swift-log")
struct RequestLoggingTests {
    @Test("one line per request at info, saying where its answer came from; every other event at debug")
    func oneLinePerRequest() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let record = LogRecord()
            let logging = logRequests(of: transport, to: record.logger(level: .trace))
            defer { logging.cancel() }
            let articles = origin.url("/articles")
            let broken = origin.url("/broken?reset=1")
            let last = origin.url("/last")

            _ = try await transport.data(from: articles)
            _ = try await transport.data(from: articles)
            _ = await thrownError { try await transport.data(from: broken) }
            _ = try await transport.data(for: request(articles, method: "POST"))
            _ = try await transport.data(from: last)
            // The stream keeps the order of events: once the last request's line is written,
            // every earlier one is too.
            await record.waitForLine { $0.message.hasPrefix("\(last.absoluteString) ") }

            let requests = record.lines.filter { $0.level == .info }
            try #require(requests.count == 5, "\(requests.map(\.message))")
            #expect(requests[0].message.hasPrefix("\(articles.absoluteString) network (no entry), stored, "))
            #expect(requests[1].message == "\(articles.absoluteString) memory (fresh)")
            let code = URLError.Code.networkConnectionLost.rawValue
            #expect(
                requests[2].message.hasPrefix("\(broken.absoluteString) failed (URLError \(code)) network (no entry), ")
            )
            #expect((requests[2].error as? URLError)?.code == .networkConnectionLost)
            #expect(requests[3].message.hasPrefix("\(articles.absoluteString) passed through (unsafe method), "))
            #expect(requests[4].message.hasPrefix("\(last.absoluteString) network (no entry), stored, "))

            // The rest is detail: the fetches, what was stored, and the POST's invalidation.
            let details = record.lines.filter { $0.level != .info }.map(\.message)
            #expect(record.lines.allSatisfy { $0.level == .info || $0.level == .debug })
            #expect(details.contains("fetch \(articles.absoluteString): no entry"))
            #expect(details.contains { $0.hasPrefix("fetched \(articles.absoluteString): status 200, ") })
            #expect(details.contains { $0.hasPrefix("stored \(articles.absoluteString): ") })
            #expect(details.contains { $0.hasPrefix("fetched \(broken.absoluteString): failed, ") })
            #expect(details.contains("invalidated \(articles.absoluteString)"))
            #expect(!details.contains { $0.hasPrefix("answered ") || $0.hasPrefix("failed ") })
        }
    }

    @Test("a logger at info writes the request lines alone, at the levels asked for")
    func levels() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let record = LogRecord()
            let logging = logRequests(
                of: transport, to: record.logger(level: .info), requestLevel: .notice, detailLevel: .debug)
            defer { logging.cancel() }
            let url = origin.url("/quiet")
            _ = try await transport.data(from: url)
            _ = try await transport.data(from: url)
            await record.waitForLine { $0.message == "\(url.absoluteString) memory (fresh)" }
            #expect(record.lines.map(\.level) == [.notice, .notice])
        }
    }

    @Test("logging ends when its task is cancelled, and when the transport goes away")
    func ends() async throws {
        let record = LogRecord()
        let cancelled = logRequests(of: CachedTransport(), to: record.logger(level: .trace))
        cancelled.cancel()
        #expect(await ending(within: .seconds(30)) { await cancelled.value } != nil)

        var transport: CachedTransport? = CachedTransport()
        let logging = logRequests(of: transport!, to: record.logger(level: .trace))
        transport = nil
        #expect(await ending(within: .seconds(30)) { await logging.value } != nil)
        #expect(record.lines.isEmpty)
    }
}

/// Every line logged through its loggers, for a test to read and wait for.
private final class LogRecord: Sendable {
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
        let error: (any Error)?
    }

    private struct State {
        var lines: [Line] = []
        var waiters: [(matches: @Sendable (Line) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    /// A logger whose lines go here, writing those at `level` and above.
    func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "transport") { _ in RecordingLogHandler(record: self) }
        logger.logLevel = level
        return logger
    }

    var lines: [Line] { state.withLock { $0.lines } }

    func append(_ line: Line) {
        let ready = state.withLock { state in
            state.lines.append(line)
            let ready = state.waiters.filter { $0.matches(line) }
            state.waiters.removeAll { $0.matches(line) }
            return ready
        }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Suspends until a line that `matches` has been logged.
    func waitForLine(where matches: @escaping @Sendable (Line) -> Bool) async {
        await withCheckedContinuation { continuation in
            let found = state.withLock { state in
                if state.lines.contains(where: matches) { return true }
                state.waiters.append((matches, continuation))
                return false
            }
            if found { continuation.resume() }
        }
    }
}

/// A `LogHandler` that keeps its lines in a ``LogRecord``.
private struct RecordingLogHandler: LogHandler {
    let record: LogRecord
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        record.append(LogRecord.Line(level: event.level, message: event.message.description, error: event.error))
    }
}
