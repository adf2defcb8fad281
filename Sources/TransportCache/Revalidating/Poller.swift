import Foundation

/// Polls the endpoints that streams watch, at their ``CachedTransport/Configuration/StayingCurrent/refreshIntervals``:
/// one loop per watched endpoint however many streams watch it, running from the first stream's
/// registration to the last one's end. Which endpoints are watched is part of the fetch graph
/// (``FetchStateMachine/polls``), behind the in-flight lock.
final class Poller: Sendable {
    private let intervals: [EndpointSetting<Duration>]
    private let clock: CacheClock
    private let graph: Locked<FetchStateMachine>

    init(intervals: [EndpointSetting<Duration>], clock: CacheClock, graph: Locked<FetchStateMachine>) {
        self.intervals = intervals
        self.clock = clock
        self.graph = graph
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
        let isFirst = graph.withLock { $0.polls.add(endpoint) }
        if isFirst {
            // Started with no lock held, then handed to the watch; cancelled at once when the
            // watch ended meanwhile.
            let loop = Task {
                while true {
                    do { try await clock.sleep(for: interval) } catch { return }
                    await poll(interval)
                }
            }
            if !graph.withLock({ $0.polls.started(loop, for: endpoint) }) { loop.cancel() }
        }
        return { [weak self] in self?.unwatch(endpoint) }
    }

    /// A stream watching `endpoint` ended: the last one stops its polling at once, cancelling a
    /// poll under way (a fetch it shares with a caller goes on for that caller).
    private func unwatch(_ endpoint: Endpoint) {
        graph.withLock { $0.polls.remove(endpoint) }?.cancel()
    }

    /// The endpoints being polled now.
    var polledEndpoints: Int { graph.withLock { $0.polls.count } }

    deinit {
        for loop in graph.withLock({ $0.polls.takeLoops() }) { loop.cancel() }
    }
}

/// The endpoints streams watch, and each one's polling loop: what ``Poller`` keeps in the fetch
/// graph.
struct PolledEndpoints {
    private struct Watch {
        var watchers: Int
        /// Nil for the moment between the first stream's registration and its loop's start.
        var loop: Task<Void, Never>?
    }

    private var watches: [Endpoint: Watch] = [:]

    var count: Int { watches.count }

    /// A stream watches `endpoint`. - Returns: whether it is the first: its loop is to start.
    mutating func add(_ endpoint: Endpoint) -> Bool {
        if watches[endpoint] != nil {
            watches[endpoint]?.watchers += 1
            return false
        }
        watches[endpoint] = Watch(watchers: 1, loop: nil)
        return true
    }

    /// `endpoint`'s loop started. - Returns: false when its last stream ended meanwhile: cancel it.
    mutating func started(_ loop: Task<Void, Never>, for endpoint: Endpoint) -> Bool {
        guard watches[endpoint] != nil, watches[endpoint]?.loop == nil else { return false }
        watches[endpoint]?.loop = loop
        return true
    }

    /// A stream watching `endpoint` ended. - Returns: the loop to cancel when it was the last.
    mutating func remove(_ endpoint: Endpoint) -> Task<Void, Never>? {
        guard var watch = watches[endpoint] else { return nil }
        watch.watchers -= 1
        guard watch.watchers == 0 else {
            watches[endpoint] = watch
            return nil
        }
        watches[endpoint] = nil
        return watch.loop
    }

    /// Forgets every watch. - Returns: their loops, to cancel.
    mutating func takeLoops() -> [Task<Void, Never>] {
        defer { watches = [:] }
        return watches.values.compactMap(\.loop)
    }
}
