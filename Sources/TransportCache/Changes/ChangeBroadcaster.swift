import Foundation

/// The subscribers of a transport's changes, and the changes waiting to reach them.
///
/// Registration is synchronous, so a stream returned by `changes()` hears every change made after
/// the call returned. Changes are queued by the ``Committer`` while it holds the lock that orders
/// the store's changes, and delivered by ``deliverQueued()`` once no lock is held: whoever finds
/// the queue idle delivers everything queued, in order, so each subscriber receives changes in
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

    private struct Queue {
        var changes: [CacheChange] = []
        var isDelivering = false
    }

    private let subscribers = Locked(Subscribers())
    private let queue = Locked(Queue())
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

    /// Queues `change` behind those queued before it.
    func enqueue(_ change: CacheChange) {
        queue.withLock { $0.changes.append(change) }
    }

    /// Delivers every queued change, unless another caller is delivering already (it then
    /// delivers this caller's changes too). Never waits for a subscriber. Call with no lock held.
    /// - Complexity: O(c × s) in the changes and subscribers.
    func deliverQueued() {
        while true {
            let batch = queue.withLock { queue -> [CacheChange] in
                guard !queue.isDelivering, !queue.changes.isEmpty else { return [] }
                queue.isDelivering = true
                defer { queue.changes.removeAll() }
                return queue.changes
            }
            guard !batch.isEmpty else { return }
            let current = subscribers.withLock { Array($0.byID.values) }
            for change in batch {
                for subscriber in current {
                    if let endpoint = subscriber.endpoint {
                        if let filtered = change.filtered(by: endpoint) { subscriber.continuation.yield(filtered) }
                    } else {
                        subscriber.continuation.yield(change)
                    }
                }
            }
            queue.withLock { $0.isDelivering = false }
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
