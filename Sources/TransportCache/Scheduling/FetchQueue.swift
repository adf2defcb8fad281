import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one place that decides when a request goes to the network: at most ``limit`` loads in
/// flight per host, the others waiting by priority.
///
/// Every load the transport starts passes through it (its fetches, and the requests it sends as
/// they are); a hit never reaches it. Its rules:
/// - a host (scheme, host and port) has at most ``limit`` loads in flight;
/// - a waiting load goes before every load of a lower ``FetchPriority``, and after the loads of its
///   own priority that waited before it;
/// - loads that yield to screens (``FetchPriority/yieldsToScreens``: below normal) take at most
///   `limit - 1` of a host's places (all of them when the limit is 1), counted by their priority
///   now: a screen's request arriving while prefetches fill the host starts at once;
/// - no waiting load waits for ever: a priority whose oldest load could have started is passed
///   over at most ``agingLimit`` times in a row by higher ones, then that load goes next;
/// - a load cancelled while it waits is never sent.
///
/// Its lock is a leaf: nothing is taken while it is held, and no load is started, cancelled or
/// completed under it.
final class FetchQueue: Sendable {
    let loader: any NetworkLoading
    /// The most loads one host has in flight, at least 1.
    let limit: Int
    /// How many times in a row a priority with loads waiting may be passed over by a higher one.
    static let agingLimit = 8
    private let hosts = Locked(Hosts(), rank: .leaf)

    /// Called as each request is handed to the loader: the one place a request counts as sent.
    private let sending: @Sendable () -> Void

    /// - Parameters:
    ///   - limit: the most loads per host in flight; values below 1 count as 1.
    ///   - sending: called as each request is handed to the loader (its ``begin(_:)``), a retry's,
    ///     a resend's and a credential refresh's own included, and never for a load cancelled
    ///     while it waited.
    init(loader: any NetworkLoading, limit: Int, sending: @escaping @Sendable () -> Void = {}) {
        self.loader = loader
        self.limit = max(1, limit)
        self.sending = sending
    }

    /// What identifies a host: loads of two URLs share a limit when these are equal.
    struct HostKey: Hashable, Sendable {
        let scheme: String
        let host: String
        let port: Int

        init(_ url: URL?) {
            let scheme = url?.scheme?.lowercased() ?? ""
            self.scheme = scheme
            host = url?.host?.lowercased() ?? ""
            port = url?.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : 0)
        }
    }

    /// Starts loading `request` at `priority` as soon as its host has room, and calls `completion`
    /// exactly once with the outcome and when the load went to the network (nil when it was
    /// cancelled while it waited), never synchronously inside this call.
    /// - Returns: what cancels the load, or changes its priority while it waits or runs.
    func start(
        _ request: URLRequest, priority: FetchPriority,
        completion:
            @escaping @Sendable (Result<(Data, URLResponse), any Error>, _ sentAt: ContinuousClock.Instant?) ->
            Void
    ) -> QueuedLoad {
        let load = QueuedLoad(request: request, host: HostKey(request.url), priority: priority, completion: completion)
        load.queue = self
        let startsNow = hosts.withLock { hosts in
            hosts[load.host, default: Host()].admit(load, limit: limit)
        }
        if let startsNow { begin(startsNow) }
        return load
    }

    /// Loads `request` at the caller's priority (``FetchPriority/current``), waiting for room on
    /// its host first: a request the transport sends as it is. A caller cancelled while it waits
    /// gets `URLError(.cancelled)`, and nothing is sent.
    func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let priority = FetchPriority.current
        let handle = Locked<QueuedLoad?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let load = start(request, priority: priority) { result, _ in continuation.resume(with: result) }
                handle.withLock { $0 = load }
                if Task.isCancelled { load.cancel() }
            }
        } onCancel: {
            handle.withLock { $0 }?.cancel()
        }
    }

    /// Sends `load` through the loader; it has its place among its host's loads in flight.
    private func begin(_ load: QueuedLoad) {
        // Cancelled between being given its place and now (waiting to be started after a rise):
        // it is never sent, and its place goes to the next.
        if hosts.withLock({ _ in load.cancelsWhenStarted }) {
            finished(load, with: .failure(URLError(.cancelled)), sent: false)
            return
        }
        sending()
        let inner = loader.start(load.request) { result in self.finished(load, with: result) }
        let (cancels, priority) = hosts.withLock { _ in load.started(inner) }
        if cancels { inner.cancel() } else if priority != .normal { inner.prioritize(priority) }
    }

    /// `load` has its answer: its place goes to the next load of its host, which starts before the
    /// answer is handed over.
    private func finished(_ load: QueuedLoad, with result: Result<(Data, URLResponse), any Error>, sent: Bool = true) {
        let (next, sentAt) = hosts.withLock { hosts in
            load.phase = .finished
            return (hosts.leave(load, limit: limit), load.sentAt)
        }
        if let next { begin(next) }
        load.completion(result, sent ? sentAt : nil)
    }

    /// Cancels `load`: taken out of its host's line when it waits (and then answered
    /// `URLError(.cancelled)` at once), cancelled in the loader when it runs.
    fileprivate func cancel(_ load: QueuedLoad) {
        enum Then { case nothing, answerCancelled, cancel(any NetworkLoad) }
        let then = hosts.withLock { hosts -> Then in
            switch load.phase {
            case .waiting:
                load.phase = .cancelled
                hosts[load.host]?.waiting -= 1
                hosts.forgetIfIdle(load.host)
                return .answerCancelled
            case .starting:
                load.cancelsWhenStarted = true
                return .nothing
            case .running(let inner):
                load.phase = .cancelled
                return .cancel(inner)
            case .cancelled, .finished:
                return .nothing
            }
        }
        switch then {
        case .nothing: break
        case .answerCancelled: load.completion(.failure(URLError(.cancelled)), nil)
        case .cancel(let inner): inner.cancel()
        }
    }

    /// Moves `load` to `priority`: within its host's line when it waits, and in the loader (where
    /// the platform uses it) when it runs. A waiting load that may start now (it rose to a place
    /// kept for screens) is given its place and started by the next ``startReady()``: this may be
    /// called under the transport's in-flight lock, where no load is started.
    fileprivate func prioritize(_ load: QueuedLoad, _ priority: FetchPriority) {
        let running = hosts.withLock { hosts -> (any NetworkLoad)? in
            guard load.priority != priority else { return nil }
            load.priority = priority
            switch load.phase {
            case .waiting:
                hosts[load.host]?.requeue(load)
                if let next = hosts[load.host]?.next(limit: limit) { hosts.ready.append(next) }
                return nil
            case .running(let inner):
                hosts.recount(load, limit: limit)
                return inner
            case .starting:
                hosts.recount(load, limit: limit)
                return nil
            case .cancelled, .finished:
                return nil
            }
        }
        running?.prioritize(priority)
    }

    /// Starts the loads whose priority rose into a free place (see ``prioritize(_:_:)``). Call
    /// with no lock held, after a fetch's priority rose.
    func startReady() {
        let ready = hosts.withLock { hosts in
            defer { hosts.ready = [] }
            return hosts.ready
        }
        for load in ready { begin(load) }
    }

    /// How many loads are in flight and waiting for `url`'s host: for tests.
    func counts(for url: URL) -> (running: Int, waiting: Int) {
        hosts.withLock { hosts in
            let host = hosts[HostKey(url)]
            return (host?.running ?? 0, host?.waiting ?? 0)
        }
    }
}

extension FetchQueue {
    /// Every host's loads, and the loads whose place was given while a lock above the queue's
    /// was held (see ``FetchQueue/startReady()``).
    struct Hosts: Sendable {
        private var lines: [HostKey: Host] = [:]
        /// Loads given a place in flight by a priority's rise, to start once no lock is held.
        var ready: [QueuedLoad] = []

        subscript(host: HostKey) -> Host? {
            get { lines[host] }
            set { lines[host] = newValue }
        }

        subscript(host: HostKey, default value: @autoclosure () -> Host) -> Host {
            get { lines[host] ?? value() }
            set { lines[host] = newValue }
        }

        /// A load of `load`'s host ended: the next one waiting, if any, takes its place (and is
        /// returned to start); a host with nothing in flight or waiting is forgotten.
        mutating func leave(_ load: QueuedLoad, limit: Int) -> QueuedLoad? {
            guard var line = lines.removeValue(forKey: load.host) else { return nil }
            line.ended(load)
            let next = line.next(limit: limit)
            if line.running > 0 || line.waiting > 0 { lines[load.host] = line }
            return next
        }

        /// `load`, in flight, changed priority: it counts among the loads that yield to screens
        /// when its new priority does. A load that rose out of them frees one of their places,
        /// which the next one waiting may take (started by ``FetchQueue/startReady()``).
        mutating func recount(_ load: QueuedLoad, limit: Int) {
            guard var line = lines[load.host], load.priority.yieldsToScreens != load.countedBelowNormal else { return }
            line.count(load, yieldingToScreens: load.priority.yieldsToScreens)
            if let next = line.next(limit: limit) { ready.append(next) }
            lines[load.host] = line
        }

        mutating func forgetIfIdle(_ host: HostKey) {
            if let line = lines[host], line.running == 0, line.waiting == 0 { lines[host] = nil }
        }
    }
}

extension FetchQueue {
    /// One host's loads: how many are in flight, and those waiting, one first-in-first-out line
    /// per priority.
    struct Host: Sendable {
        var running = 0
        /// Loads waiting, cancelled ones excluded.
        var waiting = 0
        /// Loads in flight that yield to screens (``FetchPriority/yieldsToScreens``).
        var runningBelowNormal = 0
        /// One line per priority, lowest first. A line may hold loads that left it (cancelled, or
        /// moved to another priority): they are skipped when they reach its head.
        private var lines = [Line](repeating: Line(), count: FetchPriority.allCases.count)
        /// For each priority, how many times in a row a higher one started while its oldest load
        /// could have started instead.
        private var passedOver = [Int](repeating: 0, count: FetchPriority.allCases.count)
        /// Numbers each entry of a line, so that a load moved to another line is known as gone
        /// from the first.
        private var lastTicket = 0

        /// `load` arrives and waits in its line; it starts now when the host has room for it and
        /// nothing waiting goes before it.
        /// - Returns: the load to start now, if any.
        mutating func admit(_ load: QueuedLoad, limit: Int) -> QueuedLoad? {
            enqueue(load)
            return next(limit: limit)
        }

        /// A load that had its place in flight ended.
        mutating func ended(_ load: QueuedLoad) {
            running -= 1
            if load.countedBelowNormal { runningBelowNormal -= 1 }
        }

        /// Whether a load of `priority` may start now.
        private func hasRoom(for priority: FetchPriority, limit: Int) -> Bool {
            guard running < limit else { return false }
            return !priority.yieldsToScreens || limit == 1 || runningBelowNormal < limit - 1
        }

        private mutating func take(_ load: QueuedLoad) {
            load.sentAt = .now
            running += 1
            count(load, yieldingToScreens: load.priority.yieldsToScreens)
            load.phase = .starting
        }

        /// Counts `load`, in flight, among the loads that yield to screens or not.
        mutating func count(_ load: QueuedLoad, yieldingToScreens yields: Bool) {
            if load.countedBelowNormal { runningBelowNormal -= 1 }
            if yields { runningBelowNormal += 1 }
            load.countedBelowNormal = yields
        }

        private mutating func enqueue(_ load: QueuedLoad) {
            lastTicket += 1
            load.phase = .waiting(ticket: lastTicket)
            lines[load.priority.rawValue].append((load, lastTicket))
            waiting += 1
        }

        /// `load`, waiting, changed priority: it moves to the end of its new priority's line.
        mutating func requeue(_ load: QueuedLoad) {
            waiting -= 1
            enqueue(load)
        }

        /// The load to start next, taken out of its line, if the host has room for one: the
        /// oldest of the highest priority that has room, unless a priority with room was passed
        /// over ``FetchQueue/agingLimit`` times in a row, whose oldest then goes.
        mutating func next(limit: Int) -> QueuedLoad? {
            guard running < limit, waiting > 0 else { return nil }
            var highest: Int?
            var aged: Int?
            var eligible = 0  // One bit per priority.
            for level in lines.indices.reversed() {
                lines[level].dropLeft()
                // A priority passed over counts from when it has loads waiting.
                if lines[level].isEmpty { passedOver[level] = 0 }
                guard !lines[level].isEmpty, let priority = FetchPriority(rawValue: level),
                    hasRoom(for: priority, limit: limit)
                else { continue }
                eligible |= 1 << level
                if highest == nil { highest = level }
                if aged == nil, passedOver[level] >= FetchQueue.agingLimit { aged = level }
            }
            guard let chosen = aged ?? highest, let load = lines[chosen].popFirst() else { return nil }
            passedOver[chosen] = 0
            // Passed over: a priority whose oldest load could have gone instead.
            for level in 0..<chosen where eligible & (1 << level) != 0 { passedOver[level] += 1 }
            waiting -= 1
            take(load)
            return load
        }

        /// One priority's waiting loads, first in first out.
        private struct Line: Sendable {
            private var entries: [(load: QueuedLoad, ticket: Int)] = []
            private var head = 0

            var isEmpty: Bool { head == entries.count }

            mutating func append(_ entry: (QueuedLoad, Int)) { entries.append(entry) }

            /// Drops the entries at its head whose load left the line.
            mutating func dropLeft() {
                while head < entries.count, !entries[head].load.isWaiting(ticket: entries[head].ticket) {
                    head += 1
                }
                compact()
            }

            mutating func popFirst() -> QueuedLoad? {
                guard head < entries.count else { return nil }
                let load = entries[head].load
                head += 1
                compact()
                return load
            }

            private mutating func compact() {
                if head == entries.count {
                    entries.removeAll(keepingCapacity: true)
                    head = 0
                } else if head > 64, head * 2 > entries.count {
                    entries.removeFirst(head)
                    head = 0
                }
            }
        }
    }
}

/// A load in a ``FetchQueue``: waiting for room on its host, then running in the loader.
///
/// `@unchecked Sendable` is safe here: its mutable fields are read and written only under the
/// queue's lock (``FetchQueue``), and `queue` is set once, before the load is shared.
final class QueuedLoad: NetworkLoad, @unchecked Sendable {
    enum Phase {
        case waiting(ticket: Int)
        /// Given a place in flight; its loader's load is being started, with no lock held.
        case starting
        case running(any NetworkLoad)
        case cancelled
        case finished
    }

    let request: URLRequest
    let host: FetchQueue.HostKey
    let completion: @Sendable (Result<(Data, URLResponse), any Error>, ContinuousClock.Instant?) -> Void
    var priority: FetchPriority
    /// When it was given its place in flight, and so went to the network.
    var sentAt: ContinuousClock.Instant?
    var phase: Phase
    /// Cancelled while starting: cancelled in the loader as soon as its load exists.
    var cancelsWhenStarted = false
    /// Whether it counts among its host's loads in flight that yield to screens.
    var countedBelowNormal = false
    weak var queue: FetchQueue?

    init(
        request: URLRequest, host: FetchQueue.HostKey, priority: FetchPriority,
        completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>, ContinuousClock.Instant?) -> Void
    ) {
        self.request = request
        self.host = host
        self.priority = priority
        self.completion = completion
        phase = .finished
    }

    func isWaiting(ticket: Int) -> Bool {
        if case .waiting(ticket) = phase { return true }
        return false
    }

    /// Its loader's load has started. Call under the queue's lock.
    /// - Returns: whether to cancel that load at once (it was cancelled while starting), and the
    ///   priority to give it.
    func started(_ inner: any NetworkLoad) -> (cancels: Bool, priority: FetchPriority) {
        guard case .starting = phase else { return (false, priority) }
        if cancelsWhenStarted {
            phase = .cancelled
            return (true, priority)
        }
        phase = .running(inner)
        return (false, priority)
    }

    func cancel() { queue?.cancel(self) }

    func prioritize(_ priority: FetchPriority) { queue?.prioritize(self, priority) }
}
