import Foundation

/// Polls the endpoints that streams watch, at their ``CachedTransport/Configuration/StayingCurrent/refreshIntervals``:
/// one loop per watched endpoint however many streams watch it, running from the first stream's
/// registration to the last one's end.
final class Poller: Sendable {
    private struct Watch {
        var watchers: Int
        /// Nil for the moment between the first stream's registration and its loop's start.
        var loop: Task<Void, Never>?
    }

    private let intervals: [EndpointSetting<Duration>]
    private let clock: CacheClock
    private let watches = Locked([Endpoint: Watch]())

    init(intervals: [EndpointSetting<Duration>], clock: CacheClock) {
        self.intervals = intervals
        self.clock = clock
    }

    /// The polling interval of a stream watching `endpoint`: the setting made for that endpoint,
    /// or, for a stream of one URL, the first setting that matches the URL.
    func interval(for endpoint: Endpoint) -> Duration? {
        if let setting = intervals.first(where: { $0.endpoint == endpoint }) { return setting.value }
        return endpoint.exactURL.flatMap { intervals.value(for: $0) }
    }

    /// A stream now watches `endpoint`: polls it with `poll` every interval, unless it is polled
    /// already. - Returns: what to call when the stream ends, or nil when the endpoint has no interval.
    func watch(_ endpoint: Endpoint, poll: @escaping @Sendable (Duration) async -> Void) -> (@Sendable () -> Void)? {
        guard !intervals.isEmpty, let interval = interval(for: endpoint), interval > .zero else { return nil }
        let clock = clock
        let isFirst = watches.withLock { watches in
            if watches[endpoint] != nil {
                watches[endpoint]?.watchers += 1
                return false
            }
            watches[endpoint] = Watch(watchers: 1, loop: nil)
            return true
        }
        if isFirst {
            // Started with no lock held, then handed to the watch; cancelled at once when the
            // watch ended meanwhile.
            let loop = Task {
                while true {
                    do { try await clock.sleep(for: interval) } catch { return }
                    await poll(interval)
                }
            }
            let ended = watches.withLock { watches in
                guard watches[endpoint] != nil, watches[endpoint]?.loop == nil else { return true }
                watches[endpoint]?.loop = loop
                return false
            }
            if ended { loop.cancel() }
        }
        return { [weak self] in self?.unwatch(endpoint) }
    }

    /// A stream watching `endpoint` ended: the last one stops its polling at once, cancelling a
    /// poll under way (a fetch it shares with a caller goes on for that caller).
    private func unwatch(_ endpoint: Endpoint) {
        let ended = watches.withLock { watches -> Task<Void, Never>? in
            guard var watch = watches[endpoint] else { return nil }
            watch.watchers -= 1
            guard watch.watchers == 0 else {
                watches[endpoint] = watch
                return nil
            }
            watches[endpoint] = nil
            return watch.loop
        }
        ended?.cancel()
    }

    /// The endpoints being polled now.
    var polledEndpoints: Int { watches.withLock { $0.count } }

    deinit {
        for watch in watches.withLock({ $0.values }) { watch.loop?.cancel() }
    }
}
