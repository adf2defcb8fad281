import Foundation

/// The subscribers of a transport's changes, and the changes waiting to reach them.
///
/// Registration is synchronous, so a stream returned by `changes()` hears every change made after
/// the call returned. Changes are queued by the ``Committer`` while it holds the lock that orders
/// the store's changes, and delivered by ``deliverQueued()`` once no lock is held (a
/// ``DeliveryQueue``), so each subscriber receives changes in the order the store changed.
final class ChangeBroadcaster: Sendable {
    private typealias Streams = StreamSubscribers<AsyncStream<CacheChange>.Continuation, Endpoint?>

    /// The streams, each with the endpoint it is about (nil: every change).
    private let subscribers: Streams
    private let queue: DeliveryQueue<Delivery>
    /// The number of streams registered, for tests to wait on.
    let subscriberCount = SubscriberCount()

    init(bufferLimit: Int) {
        let subscribers = Streams(bufferLimit: bufferLimit) { [subscriberCount] in subscriberCount.update($0) }
        self.subscribers = subscribers
        queue = DeliveryQueue(Delivery(streams: subscribers))
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
        queue.enqueue(.change(change))
    }

    /// Queues the invalidation of `keys` (of `endpoint`, when one was invalidated) behind the
    /// changes queued before it. Their URLs are named as it is delivered, once no lock is held.
    func enqueueInvalidation(of keys: [CacheKey], endpoint: Endpoint?) {
        queue.enqueue(.invalidated(keys, endpoint: endpoint))
    }

    /// A change as it waits to be delivered. The keys of an invalidation become URLs only once no
    /// lock is held: made under the in-flight lock, as the change is queued, naming a hundred
    /// thousand of them kept every join and every fetch's completion waiting for a third of a
    /// second; made by whoever delivers, a caller whose fetch completed.
    private enum Queued: QueuedItem {
        case change(CacheChange)
        case invalidated([CacheKey], endpoint: Endpoint?)

        var isCostlyToMake: Bool {
            if case .invalidated(let keys, _) = self { keys.count > Committer.namedAtOnce } else { false }
        }

        func made() -> Queued { .change(change) }

        var change: CacheChange {
            switch self {
            case .change(let change): change
            case .invalidated(let keys, let endpoint): .invalidated(urls: Committer.urls(of: keys), endpoint: endpoint)
            }
        }
    }

    /// Delivers every queued change, unless another caller is delivering already (it then
    /// delivers this caller's changes too). Never waits for a subscriber. Call with no lock held.
    /// - Complexity: O(c × s) in the changes and subscribers.
    func deliverQueued() {
        queue.deliverQueued()
    }

    /// Where the queue delivers: every stream, each change filtered by the endpoint it watches.
    private struct Delivery: DeliveryTarget {
        let streams: Streams

        var current: [Streams.Subscriber] { streams.current }

        static func deliver(_ queued: Queued, to current: [Streams.Subscriber]) {
            guard !current.isEmpty else { return }
            let change = queued.change
            for subscriber in current {
                if let endpoint = subscriber.filter {
                    if let filtered = change.filtered(by: endpoint) { subscriber.sink.send(filtered) }
                } else {
                    subscriber.sink.send(change)
                }
            }
        }
    }

    var count: Int { subscribers.count }

    /// The endpoints streams watch now (``CachedTransport/changes(for:)`` and `values` streams;
    /// a stream of every change watches none in particular).
    var watchedEndpoints: Set<Endpoint> { Set(subscribers.current.compactMap(\.filter)) }
}
