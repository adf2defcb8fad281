/// Items queued while a lock is held and delivered once none is: whoever finds the queue idle
/// delivers everything queued, in the order it was queued, so that each subscriber receives items
/// in the order they were made, and no continuation is resumed under a lock.
///
/// Each batch is delivered to the subscribers registered when the batch is taken (`subscribers`),
/// so a subscriber hears every item made after it registered.
final class DeliveryQueue<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var isDelivering = false
    }

    private let state = Locked(State(), rank: .leaf)

    /// Queues `item` behind those queued before it. May be called with any lock held.
    func enqueue(_ item: Item) {
        state.withLock { $0.items.append(item) }
    }

    /// Delivers `item` to `current`, the subscribers now, behind every item queued before it: at
    /// once when nothing waits (without queueing it), else through the queue. Call with no lock
    /// held.
    func deliver<Subscribers>(
        _ item: Item, to current: Subscribers, subscribers: () -> Subscribers,
        with deliver: (Item, Subscribers) -> Void
    ) {
        let isIdle = state.withLock { state in
            guard !state.isDelivering, state.items.isEmpty else {
                state.items.append(item)
                return false
            }
            state.isDelivering = true
            return true
        }
        guard isIdle else { return deliverQueued(subscribers: subscribers, with: deliver) }
        deliver(item, current)
        deliverUntilEmpty(subscribers: subscribers, with: deliver)
    }

    /// Hands every queued item to `deliver`, unless another caller is delivering already (it then
    /// delivers these too). Call with no lock held.
    func deliverQueued<Subscribers>(subscribers: () -> Subscribers, with deliver: (Item, Subscribers) -> Void) {
        let claimed = state.withLock { state in
            guard !state.isDelivering, !state.items.isEmpty else { return false }
            state.isDelivering = true
            return true
        }
        if claimed { deliverUntilEmpty(subscribers: subscribers, with: deliver) }
    }

    /// Delivers batches until none is left, then lets the next caller deliver. Call as the one
    /// delivering.
    private func deliverUntilEmpty<Subscribers>(
        subscribers: () -> Subscribers, with deliver: (Item, Subscribers) -> Void
    ) {
        while true {
            let batch = state.withLock { state -> [Item] in
                guard !state.items.isEmpty else {
                    state.isDelivering = false
                    return []
                }
                defer { state.items.removeAll() }
                return state.items
            }
            guard !batch.isEmpty else { return }
            let current = subscribers()
            for item in batch { deliver(item, current) }
        }
    }
}
