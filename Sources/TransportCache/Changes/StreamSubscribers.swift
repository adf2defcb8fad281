/// The subscribers of one kind of stream a transport offers (``CachedTransport/changes()``,
/// ``CachedTransport/events()``), each with its filter.
///
/// Registration is synchronous, so a stream hears everything yielded after the call that made it
/// returned. Each stream keeps at most ``bufferLimit`` undelivered elements, dropping the oldest,
/// and unregisters itself when its consumer stops iterating or it is dropped; the rest are
/// finished when the registry goes away.
final class StreamSubscribers<Element: Sendable, Filter: Sendable>: Sendable {
    struct Subscriber {
        let continuation: AsyncStream<Element>.Continuation
        let filter: Filter
    }

    private struct State {
        private(set) var byID: [Int: Subscriber] = [:]
        /// The same streams, in an array made when one registers or unregisters: what every
        /// element is yielded to, read with one retain rather than copied out of ``byID``.
        private(set) var current: [Subscriber] = []
        var lastID = 0

        mutating func register(_ subscriber: Subscriber, as id: Int) {
            byID[id] = subscriber
            current = Array(byID.values)
        }

        /// Whether the stream `id` was registered until now.
        mutating func unregister(_ id: Int) -> Bool {
            guard byID.removeValue(forKey: id) != nil else { return false }
            current = Array(byID.values)
            return true
        }

        mutating func unregisterAll() -> [Subscriber] {
            defer {
                byID.removeAll()
                current = []
            }
            return current
        }
    }

    private let state = Locked(State())
    let bufferLimit: Int
    /// Called with the new count whenever a stream registers or unregisters, under the registry's
    /// lock, so that calls arrive in the order the count changed. It returns the waiters its
    /// change let through, resumed once that lock is released.
    private let countChanged: (@Sendable (Int) -> [CheckedContinuation<Void, Never>])?

    init(bufferLimit: Int, countChanged: (@Sendable (Int) -> [CheckedContinuation<Void, Never>])? = nil) {
        self.bufferLimit = max(1, bufferLimit)
        self.countChanged = countChanged
    }

    /// A new registered stream with `filter`; `onTermination` is called once it has unregistered.
    func subscribe(_ filter: Filter, onTermination: (@Sendable () -> Void)? = nil) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: Element.self, bufferingPolicy: .bufferingNewest(bufferLimit))
        let (id, watchers) = state.withLock { state in
            state.lastID += 1
            state.register(Subscriber(continuation: continuation, filter: filter), as: state.lastID)
            return (state.lastID, countChanged?(state.byID.count) ?? [])
        }
        for watcher in watchers { watcher.resume() }
        continuation.onTermination = { [weak self] _ in
            if let self {
                let watchers = state.withLock { state in
                    guard state.unregister(id) else { return [CheckedContinuation<Void, Never>]() }
                    return countChanged?(state.byID.count) ?? []
                }
                for watcher in watchers { watcher.resume() }
            }
            onTermination?()
        }
        return stream
    }

    /// The registered streams now.
    var current: [Subscriber] { state.withLock { $0.current } }

    var count: Int { state.withLock { $0.byID.count } }

    deinit {
        let current = state.withLock { $0.unregisterAll() }
        for subscriber in current { subscriber.continuation.finish() }
    }
}
