/// Items queued while a lock is held and delivered once none is: whoever finds the queue idle
/// delivers everything queued, in the order it was queued, so that each subscriber receives items
/// in the order they were made, and no continuation is resumed under a lock.
final class DeliveryQueue<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var isDelivering = false
    }

    private let state = Locked(State())

    /// Queues `item` behind those queued before it. May be called with any lock held.
    func enqueue(_ item: Item) {
        state.withLock { $0.items.append(item) }
    }

    /// Hands every queued item to `deliver`, a batch at a time, unless another caller is
    /// delivering already (it then delivers these too). Call with no lock held.
    func deliverQueued(_ deliver: ([Item]) -> Void) {
        while true {
            let batch = state.withLock { state -> [Item] in
                guard !state.isDelivering, !state.items.isEmpty else { return [] }
                state.isDelivering = true
                defer { state.items.removeAll() }
                return state.items
            }
            guard !batch.isEmpty else { return }
            deliver(batch)
            state.withLock { $0.isDelivering = false }
        }
    }
}
