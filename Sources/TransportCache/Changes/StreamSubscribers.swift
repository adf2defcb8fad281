/// The subscribers of one kind of stream a transport offers (``CachedTransport/changes()``,
/// ``CachedTransport/events()``), each with its filter.
///
/// Registration is synchronous, so a stream hears everything yielded after the call that made it
/// returned. Each stream keeps at most ``bufferLimit`` undelivered elements, dropping the oldest,
/// and unregisters itself when its consumer stops iterating or it is dropped; the rest are
/// finished when the registry goes away.
final class StreamSubscribers<Sink: StreamSink, Filter: Sendable>: Sendable {
    typealias Element = Sink.Element

    /// One registered stream. A class, so that handing the streams to each element copies
    /// references.
    final class Subscriber: Sendable {
        let sink: Sink
        let filter: Filter

        init(sink: Sink, filter: Filter) {
            self.sink = sink
            self.filter = filter
        }
    }

    private struct State {
        /// The streams, in no particular order: what every element is yielded to, read with one
        /// retain rather than copied out of a table.
        private(set) var current: [Subscriber] = []
        /// The id of each stream in ``current``, at the same place.
        private var ids: [Int] = []
        /// Where each stream's id is in ``current``.
        private var places: [Int: Int] = [:]
        var lastID = 0

        mutating func register(_ subscriber: Subscriber, as id: Int) {
            places[id] = current.count
            current.append(subscriber)
            ids.append(id)
        }

        /// Whether the stream `id` was registered until now. The last stream takes the place of
        /// the one leaving, so that a stream leaves in constant time (amortised: the first to
        /// leave while an element is being delivered copies the array the delivery holds), where
        /// rebuilding the array as each left made a thousand streams ending after one change cost
        /// half a million copies.
        mutating func unregister(_ id: Int) -> Bool {
            guard let place = places.removeValue(forKey: id) else { return false }
            let last = current.count - 1
            if place != last {
                current.swapAt(place, last)
                ids.swapAt(place, last)
                places[ids[place]] = place
            }
            current.removeLast()
            ids.removeLast()
            return true
        }

        mutating func unregisterAll() -> [Subscriber] {
            defer {
                current = []
                ids = []
                places = [:]
            }
            return current
        }
    }

    private let state = Locked(State(), rank: .streamRegistry)
    let bufferLimit: Int
    /// Called with the new count whenever a stream registers or unregisters, under the registry's
    /// lock, so that calls arrive in the order the count changed. It returns the waiters its
    /// change let through, resumed once that lock is released.
    private let countChanged: (@Sendable (Int) -> [CheckedContinuation<Void, Never>])?

    init(bufferLimit: Int, countChanged: (@Sendable (Int) -> [CheckedContinuation<Void, Never>])? = nil) {
        self.bufferLimit = max(1, bufferLimit)
        self.countChanged = countChanged
    }

    /// Registers `sink`, the inlet of a new stream, with `filter`; `onTermination` is called once
    /// it has unregistered.
    func subscribe(_ sink: Sink, filter: Filter, onTermination: (@Sendable () -> Void)? = nil) {
        let (id, watchers) = state.withLock { state in
            state.lastID += 1
            state.register(Subscriber(sink: sink, filter: filter), as: state.lastID)
            return (state.lastID, countChanged?(state.current.count) ?? [])
        }
        for watcher in watchers { watcher.resume() }
        sink.onEnd { [weak self] in
            if let self {
                let watchers = state.withLock { state in
                    guard state.unregister(id) else { return [CheckedContinuation<Void, Never>]() }
                    return countChanged?(state.current.count) ?? []
                }
                for watcher in watchers { watcher.resume() }
            }
            onTermination?()
        }
    }

    /// The registered streams now.
    var current: [Subscriber] { state.withLock { $0.current } }

    var count: Int { state.withLock { $0.current.count } }

    deinit {
        let current = state.withLock { $0.unregisterAll() }
        for subscriber in current { subscriber.sink.finish() }
    }
}

/// The inlet of one stream of a ``StreamSubscribers``: what the transport hands elements to.
protocol StreamSink: Sendable {
    associatedtype Element: Sendable
    /// Hands `element` to the stream's consumer, dropping the oldest undelivered one when the
    /// stream's buffer is full. Never waits.
    func send(_ element: sending Element)
    /// Ends the stream: its consumer receives what is buffered, then the end.
    func finish()
    /// Sets what runs once the stream has ended: finished, its consumer stopped, or it was dropped.
    func onEnd(_ ended: @escaping @Sendable () -> Void)
}

extension AsyncStream.Continuation: StreamSink {
    func send(_ element: sending Element) {
        yield(element)
    }

    func onEnd(_ ended: @escaping @Sendable () -> Void) {
        onTermination = { _ in ended() }
    }
}
