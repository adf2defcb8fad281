import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One thing a ``CachedTransport`` did, for ``CachedTransport/events()``: a request answered,
/// a fetch started or ended, an answer stored or not, entries evicted or invalidated, a body
/// decoded.
///
/// ```swift
/// for await event in transport.events() {
///     print(event)   // answered https://api.example.com/articles: network (expired), stored, 38 ms
/// }
/// ```
public struct CacheEvent: Sendable, CustomStringConvertible {
    /// What happened.
    public enum Kind: Sendable {
        /// A request was answered, with how and why.
        case answered(CacheOutcome)
        /// A request failed: the error it threw, and the outcome of the attempt (nil for a
        /// cancelled caller).
        case failed(CacheOutcome?, any Error)
        /// A fetch went to the origin, for the reason of the request that started it
        /// (``CacheOutcome/FetchReason/expired`` for a background revalidation); `conditional`
        /// when it asked the origin to confirm a stored entry.
        case fetchStarted(CacheOutcome.FetchReason, conditional: Bool)
        /// A fetch's attempt failed (a connectivity error, or a status such as 503) and it will be
        /// tried again (``RetryPolicy``): the attempt to come, from 2, after waiting `delay`.
        case retrying(attempt: Int, delay: Duration)
        /// A fetch ended: the status (nil when it failed), the body bytes received and how long
        /// it waited on the network.
        case fetchEnded(status: Int?, bytes: Int, duration: Duration)
        /// URLSession's metrics of a network task the transport sent for the URL (a fetch, each
        /// of its retries, or a request passed through), reported as the task ends, beside its
        /// `fetchEnded`. Apple platforms only: swift-corelibs-foundation collects no metrics.
        case networkMetrics(NetworkMetrics)
        /// A fetched answer was stored; `changedBytes` is false when the same bytes were held.
        case stored(bytes: Int, changedBytes: Bool)
        /// A fetched answer was not stored, for this reason.
        case notStored(CacheOutcome.NotStoredReason)
        /// The entries of the URL were evicted: the byte budget or memory pressure.
        case evicted
        /// The entries of the URL were invalidated.
        case invalidated
        /// A stored body was decoded as the named type by a decoded-value call.
        case decoded(type: String)

        /// The case's name, as written here (`answered`, `fetchStarted` …): for filters and
        /// metrics keyed by kind.
        public var name: String {
            switch self {
            case .answered: "answered"
            case .failed: "failed"
            case .fetchStarted: "fetchStarted"
            case .retrying: "retrying"
            case .fetchEnded: "fetchEnded"
            case .networkMetrics: "networkMetrics"
            case .stored: "stored"
            case .notStored: "notStored"
            case .evicted: "evicted"
            case .invalidated: "invalidated"
            case .decoded: "decoded"
            }
        }
    }

    /// The URL the event concerns.
    public let url: URL
    /// What happened.
    public let kind: Kind

    /// An event; the transport makes these.
    public init(url: URL, kind: Kind) {
        self.url = url
        self.kind = kind
    }

    /// One line, as in `answered https://api.example.com/articles: memory (fresh)`.
    public var description: String {
        let url = url.absoluteString
        switch kind {
        case .answered(let outcome): return "answered \(url): \(outcome)"
        case .failed(let outcome, let error):
            let code = (error as? URLError).map { " (URLError \($0.code.rawValue))" } ?? ""
            return "failed \(url)\(code)" + (outcome.map { ": \($0)" } ?? "")
        case .fetchStarted(let reason, let conditional):
            return "fetch \(url): \(reason)" + (conditional ? ", conditional" : "")
        case .retrying(let attempt, let delay):
            return "retry \(url): attempt \(attempt) in \(CacheOutcome.milliseconds(delay))"
        case .fetchEnded(let status, let bytes, let duration):
            let ended = status.map { "status \($0)" } ?? "failed"
            return "fetched \(url): \(ended), \(bytes) bytes, \(CacheOutcome.milliseconds(duration))"
        case .networkMetrics(let metrics): return "metrics \(url): \(metrics)"
        case .stored(let bytes, let changedBytes):
            return "stored \(url): \(bytes) bytes" + (changedBytes ? "" : ", same bytes")
        case .notStored(let reason): return "not stored \(url): \(reason)"
        case .evicted: return "evicted \(url)"
        case .invalidated: return "invalidated \(url)"
        case .decoded(let type): return "decoded \(url) as \(type)"
        }
    }
}
