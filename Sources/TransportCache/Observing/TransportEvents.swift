import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(os)
import os
#endif

/// Where a transport reports what it does: to the streams of ``CachedTransport/events()``, and on
/// Apple platforms to the unified log and to signpost intervals around each fetch.
///
/// Nothing is made for a stream when none is registered: each report first asks whether anyone
/// listens. A hit asks the store instead, under the lock its lookup holds anyway
/// (``ResponseStore/State/isObserved``), so without a listener it pays one branch.
///
/// On Apple platforms the log's subsystem is `TransportCache`, category `transport`: a debug
/// line per fetch, store and invalidation, and a `fetch` signpost interval per origin fetch, which
/// Instruments shows beside the app's own intervals. These do not depend on a stream. URLs are
/// private (shown as a hash unless private data is enabled, as when a debugger is attached):
/// a query may hold a token.
///
/// Every event goes through one queue (a ``DeliveryQueue``) in the order the transport acted, and
/// is yielded once no lock is held: an event of a request or a fetch at once, where it happens;
/// an event of the store (stored, not stored, evicted, invalidated), which happens under the
/// in-flight lock, by ``deliverQueued()`` once that lock is released. So one stream sees them in
/// order (a hit after the store it reads, an answer after its fetch's store), and no consumer is
/// resumed under a lock.
final class TransportEvents: Sendable {
    private let subscribers: StreamSubscribers<EventInbox, Void>
    /// The events not yet yielded, in the order they happened.
    private let queued: DeliveryQueue<Delivery>

    /// Events as they wait to be yielded. The keys an invalidation or an eviction removed become
    /// events only once no lock is held: made under the in-flight lock, as they are queued, the
    /// events of a hundred thousand keys kept every join and every fetch's completion waiting for
    /// a third of a second; made by whoever yields them, a caller whose fetch completed.
    private enum Queued: QueuedItem {
        case event(CacheEvent)
        case events([CacheEvent])
        case departed([CacheKey], CacheEvent.Kind)

        var isCostlyToMake: Bool {
            if case .departed(let keys, _) = self { keys.count > Committer.namedAtOnce } else { false }
        }

        func made() -> Queued {
            switch self {
            case .event, .events: self
            case .departed(let keys, let kind):
                .events(Committer.urls(of: keys).map { CacheEvent(url: $0, kind: kind) })
            }
        }
    }

    #if canImport(os)
    // Made where used rather than kept in a static: the system keeps one handle per subsystem and
    // category, and a static would need each type's `Sendable` conformance in every SDK.
    static var logger: Logger { Logger(subsystem: "TransportCache", category: "transport") }
    static var signposter: OSSignposter { OSSignposter(logger: logger) }
    #endif

    init(bufferLimit: Int, store: ResponseStore) {
        let subscribers = StreamSubscribers<EventInbox, Void>(bufferLimit: bufferLimit) { count in
            store.state.withLock { $0.isObserved = count > 0 }
            return []
        }
        self.subscribers = subscribers
        queued = DeliveryQueue(Delivery(streams: subscribers))
    }

    func subscribe() -> CacheEvents {
        let inbox = EventInbox(limit: subscribers.bufferLimit)
        subscribers.subscribe(inbox, filter: ())
        return CacheEvents(inbox)
    }

    /// Yields the event `make` returns to every stream, behind the events queued before it,
    /// making it only when one is registered. Call with no lock held.
    private func emit(_ make: () -> CacheEvent) {
        let current = subscribers.current
        guard !current.isEmpty else { return }
        queued.deliver(.event(make()), to: current)
    }

    /// Where the queue delivers: every stream.
    private struct Delivery: DeliveryTarget {
        let streams: StreamSubscribers<EventInbox, Void>

        var current: [StreamSubscribers<EventInbox, Void>.Subscriber] { streams.current }

        static func deliver(_ queued: Queued, to current: [StreamSubscribers<EventInbox, Void>.Subscriber]) {
            guard !current.isEmpty else { return }
            switch queued {
            case .event(let event):
                for subscriber in current { subscriber.sink.send(event) }
            case .events(let events):
                for event in events {
                    for subscriber in current { subscriber.sink.send(event) }
                }
            case .departed:
                guard case .events(let events) = queued.made() else { return }
                for event in events {
                    for subscriber in current { subscriber.sink.send(event) }
                }
            }
        }
    }

    /// Queues the event `make` returns for ``deliverQueued()``, making it only when a stream is
    /// registered. For events made under a lock.
    private func enqueue(_ make: () -> CacheEvent) {
        guard !subscribers.current.isEmpty else { return }
        queued.enqueue(.event(make()))
    }

    /// Yields the queued events to every stream. Call with no lock held.
    func deliverQueued() {
        queued.deliverQueued()
    }

    // MARK: - Requests

    /// A request to `url` was answered with `response`. An answer that is not HTTP (another
    /// scheme, passed through) cannot carry its outcome, and is reported with it here.
    func answered(_ url: URL?, _ response: URLResponse) {
        guard let url else { return }
        emit {
            let outcome = response.cacheOutcome ?? CacheOutcome(source: .passedThrough(.notHTTP))
            return CacheEvent(url: url, kind: .answered(outcome))
        }
    }

    /// A request to `url` failed with `error`.
    func failed(_ url: URL?, _ error: any Error) {
        guard let url else { return }
        emit { CacheEvent(url: url, kind: .failed((error as? URLError)?.cacheOutcome, error)) }
    }

    // MARK: - Fetches

    /// A fetch in progress, for its end to report.
    struct FetchInterval: @unchecked Sendable {
        // Unchecked: the signpost state is written once, here, and read once when the fetch ends.
        let url: URL
        let sentAt: ContinuousClock.Instant
        #if canImport(os)
        let signpost: OSSignpostIntervalState
        #endif

        /// The same interval, timed from `instant` when given: when the fetch left the
        /// ``FetchQueue`` for the network.
        func sent(at instant: ContinuousClock.Instant?) -> FetchInterval {
            guard let instant else { return self }
            #if canImport(os)
            return FetchInterval(url: url, sentAt: instant, signpost: signpost)
            #else
            return FetchInterval(url: url, sentAt: instant)
            #endif
        }
    }

    /// A fetch of `url` is being sent.
    func fetchStarted(_ url: URL, reason: CacheOutcome.FetchReason, conditional: Bool) -> FetchInterval {
        emit { CacheEvent(url: url, kind: .fetchStarted(reason, conditional: conditional)) }
        #if canImport(os)
        let signposter = Self.signposter
        let signpost = signposter.beginInterval(
            "fetch", id: signposter.makeSignpostID(), "\(url.absoluteString, privacy: .private(mask: .hash))")
        Self.logger.debug(
            "fetch \(url.absoluteString, privacy: .private(mask: .hash)): \(reason.description, privacy: .public)")
        return FetchInterval(url: url, sentAt: .now, signpost: signpost)
        #else
        return FetchInterval(url: url, sentAt: .now)
        #endif
    }

    /// An attempt of a fetch of `url` failed; attempt `attempt` follows after `delay`.
    func retrying(_ url: URL, attempt: Int, delay: Duration) {
        emit { CacheEvent(url: url, kind: .retrying(attempt: attempt, delay: delay)) }
        #if canImport(os)
        Self.logger.debug(
            "retry \(url.absoluteString, privacy: .private(mask: .hash)): attempt \(attempt, privacy: .public)")
        #endif
    }

    /// The fetch `interval` ended with `result`. - Returns: how long it waited on the network.
    func fetchEnded(_ interval: FetchInterval, with result: Result<(Data, URLResponse), any Error>) -> Duration {
        let duration = ContinuousClock.now - interval.sentAt
        var status: Int?
        var bytes = 0
        if case .success(let (data, response)) = result {
            status = (response as? HTTPURLResponse)?.statusCode
            bytes = data.count
        }
        emit { CacheEvent(url: interval.url, kind: .fetchEnded(status: status, bytes: bytes, duration: duration)) }
        #if canImport(os)
        Self.signposter.endInterval("fetch", interval.signpost, "status \(status ?? 0, privacy: .public)")
        #endif
        return duration
    }

    /// A network task that fetched `url` finished collecting its metrics.
    func networkMetrics(_ url: URL, _ metrics: URLSessionTaskMetrics) {
        emit { CacheEvent(url: url, kind: .networkMetrics(NetworkMetrics(metrics))) }
    }

    // MARK: - The store (queued: see ``deliverQueued()``)

    func stored(_ url: URL, bytes: Int, changedBytes: Bool) {
        enqueue { CacheEvent(url: url, kind: .stored(bytes: bytes, changedBytes: changedBytes)) }
        #if canImport(os)
        Self.logger.debug(
            "stored \(url.absoluteString, privacy: .private(mask: .hash)): \(bytes, privacy: .public) bytes")
        #endif
    }

    func notStored(_ url: URL, _ reason: CacheOutcome.NotStoredReason) {
        enqueue { CacheEvent(url: url, kind: .notStored(reason)) }
        #if canImport(os)
        Self.logger.debug(
            "not stored \(url.absoluteString, privacy: .private(mask: .hash)): \(reason.description, privacy: .public)")
        #endif
    }

    func evicted(_ keys: [CacheKey]) {
        guard !keys.isEmpty else { return }
        report(keys, as: .evicted)
    }

    /// Whether anyone listens: a report that is costly to prepare asks first.
    var isListening: Bool { !subscribers.current.isEmpty }

    func invalidated(_ keys: [CacheKey]) {
        guard !keys.isEmpty else { return }
        report(keys, as: .invalidated)
    }

    func decoded(_ url: URL, type: Any.Type) {
        emit { CacheEvent(url: url, kind: .decoded(type: String(describing: type))) }
    }

    private func report(_ keys: [CacheKey], as kind: CacheEvent.Kind) {
        #if canImport(os)
        let name = if case .evicted = kind { "evicted" } else { "invalidated" }
        Self.logger.debug("\(name, privacy: .public) \(keys.count, privacy: .public) keys")
        #endif
        guard !subscribers.current.isEmpty else { return }
        queued.enqueue(.departed(keys, kind))
    }
}
