import Dispatch

/// What waits in a ``DeliveryQueue``: an item ready to deliver, or one that is made only once no
/// lock is held, such as the announcement of the keys an invalidation removed, which names each
/// key's URL.
protocol QueuedItem: Sendable {
    /// Whether it is still to be made, at a cost that would keep whoever delivers it waiting: it
    /// is then made on a thread of its own, and the items behind it wait for it.
    var isCostlyToMake: Bool { get }
    /// It, made.
    func made() -> Self
}

/// Items queued while a lock is held and delivered once none is: whoever finds the queue idle
/// delivers everything queued, in the order it was queued, so that each subscriber receives items
/// in the order they were made, and no continuation is resumed under a lock.
///
/// Each batch is delivered to the subscribers registered when the batch is taken, so a subscriber
/// hears every item made after it registered.
///
/// An item costly to make (``QueuedItem/isCostlyToMake``) is made on a thread of its own when its
/// turn comes, which then delivers it and what followed it: a caller who delivers, often one whose
/// fetch has just completed, never pays for an invalidation of a hundred thousand keys.
final class DeliveryQueue<Item: QueuedItem, Subscribers>: @unchecked Sendable {
    // `@unchecked`: the closures are `@Sendable`; `Subscribers` is only made and used by them.
    private struct State {
        var items: [Item] = []
        var isDelivering = false
        /// Whether the first item is being made on a thread of its own.
        var isMaking = false
    }

    private let state = Locked(State(), rank: .leaf)
    /// The subscribers now.
    private let subscribers: @Sendable () -> Subscribers
    /// Hands one item to the subscribers.
    private let deliver: @Sendable (Item, Subscribers) -> Void

    init(subscribers: @escaping @Sendable () -> Subscribers, deliver: @escaping @Sendable (Item, Subscribers) -> Void) {
        self.subscribers = subscribers
        self.deliver = deliver
    }

    /// Queues `item` behind those queued before it. May be called with any lock held.
    func enqueue(_ item: Item) {
        state.withLock { $0.items.append(item) }
    }

    /// Delivers `item` to `current`, the subscribers now, behind every item queued before it: at
    /// once when nothing waits (without queueing it), else through the queue. Call with no lock
    /// held.
    func deliver(_ item: Item, to current: Subscribers) {
        let isIdle = state.withLock { state in
            guard !state.isDelivering, state.items.isEmpty else {
                state.items.append(item)
                return false
            }
            state.isDelivering = true
            return true
        }
        guard isIdle else { return deliverQueued() }
        deliver(item.isCostlyToMake ? item.made() : item, current)
        deliverUntilEmpty()
    }

    /// Hands every queued item to the subscribers, unless another caller is delivering already
    /// (it then delivers these too). Call with no lock held.
    func deliverQueued() {
        let claimed = state.withLock { state in
            guard !state.isDelivering, !state.isMaking, !state.items.isEmpty else { return false }
            state.isDelivering = true
            return true
        }
        if claimed { deliverUntilEmpty() }
    }

    /// Delivers batches until none is left, or until an item costly to make comes first, which
    /// a thread of its own makes and delivers; then lets the next caller deliver. Call as the one
    /// delivering.
    private func deliverUntilEmpty() {
        while true {
            let (batch, costly) = state.withLock { state -> ([Item], Item?) in
                let end = state.items.firstIndex(where: \.isCostlyToMake) ?? state.items.endIndex
                guard end > 0 else {
                    state.isDelivering = false
                    guard let first = state.items.first else { return ([], nil) }
                    state.isMaking = true
                    return ([], first)
                }
                defer { state.items.removeFirst(end) }
                return (Array(state.items[..<end]), nil)
            }
            if let costly { return make(costly) }
            guard !batch.isEmpty else { return }
            let current = subscribers()
            for item in batch { deliver(item, current) }
        }
    }

    /// Makes `item`, the first queued, on a thread of its own, puts it in its place, and delivers.
    private func make(_ item: Item) {
        DispatchQueue.global(qos: .utility).async { [self] in
            let made = item.made()
            state.withLock { state in
                state.items[0] = made
                state.isMaking = false
            }
            deliverQueued()
        }
    }
}
