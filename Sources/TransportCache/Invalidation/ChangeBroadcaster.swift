import Foundation

/// The subscribers of a transport's changes.
///
/// Registration is synchronous, so a stream returned by `changes()` hears every change made after
/// the call returned. Only the transport's actor publishes, so each subscriber receives changes in
/// the order the store changed.
final class ChangeBroadcaster: Sendable {
    private struct Subscriber {
        let continuation: AsyncStream<CacheChange>.Continuation
        let endpoint: Endpoint?
    }

    private struct Subscribers {
        var byID: [Int: Subscriber] = [:]
        var lastID = 0
    }

    private let subscribers = Locked(Subscribers())
    let bufferLimit: Int

    init(bufferLimit: Int) {
        self.bufferLimit = max(1, bufferLimit)
    }

    /// A new stream of the changes that concern `endpoint` (all when nil). It unregisters itself
    /// when its consumer stops iterating or it is dropped.
    func subscribe(to endpoint: Endpoint?) -> AsyncStream<CacheChange> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: CacheChange.self,
            bufferingPolicy: .bufferingNewest(bufferLimit)
        )
        let id = subscribers.withLock { subscribers in
            subscribers.lastID += 1
            subscribers.byID[subscribers.lastID] = Subscriber(continuation: continuation, endpoint: endpoint)
            return subscribers.lastID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.byID.removeValue(forKey: id) }
        }
        return stream
    }

    /// Delivers `change` to every subscriber it concerns, without waiting for any of them.
    /// - Complexity: O(s) in the number of subscribers.
    func publish(_ change: CacheChange) {
        let current = subscribers.withLock { Array($0.byID.values) }
        for subscriber in current {
            if let endpoint = subscriber.endpoint {
                if let filtered = change.filtered(by: endpoint) { subscriber.continuation.yield(filtered) }
            } else {
                subscriber.continuation.yield(change)
            }
        }
    }

    var count: Int { subscribers.withLock { $0.byID.count } }

    deinit {
        let current = subscribers.withLock { state in
            defer { state.byID.removeAll() }
            return Array(state.byID.values)
        }
        for subscriber in current { subscriber.continuation.finish() }
    }
}
