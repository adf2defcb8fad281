import Foundation

/// The subscribers of a transport's changes, and the changes waiting to reach them.
///
/// Registration is synchronous, so a stream returned by `changes()` hears every change made after
/// the call returned. Changes are queued by the ``Committer`` while it holds the lock that orders
/// the store's changes, and delivered by ``deliverQueued()`` once no lock is held (a
/// ``DeliveryQueue``), so each subscriber receives changes in the order the store changed.
final class ChangeBroadcaster: Sendable {
    /// The streams, each with the endpoint it is about (nil: every change).
    private let subscribers: StreamSubscribers<AsyncStream<CacheChange>.Continuation, Endpoint?>
    private let queue = DeliveryQueue<CacheChange>()
    /// The number of streams registered, for tests to wait on.
    let subscriberCount = SubscriberCount()

    init(bufferLimit: Int) {
        subscribers = StreamSubscribers(bufferLimit: bufferLimit) { [subscriberCount] in subscriberCount.update($0) }
    }

    /// A new stream of the changes that concern `endpoint` (all when nil). It unregisters itself
    /// when its consumer stops iterating or it is dropped, and then calls `onTermination`.
    func subscribe(to endpoint: Endpoint?, onTermination: (@Sendable () -> Void)? = nil) -> AsyncStream<CacheChange> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: CacheChange.self, bufferingPolicy: .bufferingNewest(subscribers.bufferLimit))
        subscribers.subscribe(continuation, filter: endpoint, onTermination: onTermination)
        return stream
    }

    /// Queues `change` behind those queued before it.
    func enqueue(_ change: CacheChange) {
        queue.enqueue(change)
    }

    /// Delivers every queued change, unless another caller is delivering already (it then
    /// delivers this caller's changes too). Never waits for a subscriber. Call with no lock held.
    /// - Complexity: O(c × s) in the changes and subscribers.
    func deliverQueued() {
        queue.deliverQueued(subscribers: { subscribers.current }, with: Self.yield)
    }

    private static func yield(
        _ change: CacheChange,
        to current: [StreamSubscribers<AsyncStream<CacheChange>.Continuation, Endpoint?>.Subscriber]
    ) {
        for subscriber in current {
            if let endpoint = subscriber.filter {
                if let filtered = change.filtered(by: endpoint) { subscriber.sink.send(filtered) }
            } else {
                subscriber.sink.send(change)
            }
        }
    }

    var count: Int { subscribers.count }

    /// The endpoints streams watch now (``CachedTransport/changes(for:)`` and `values` streams;
    /// a stream of every change watches none in particular).
    var watchedEndpoints: Set<Endpoint> { Set(subscribers.current.compactMap(\.filter)) }
}
