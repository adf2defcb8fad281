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

/// Where a ``DeliveryQueue`` delivers: the subscribers now, and how an item reaches them.
protocol DeliveryTarget: Sendable {
    associatedtype Item: QueuedItem
    associatedtype Subscribers
    /// The subscribers now.
    var current: Subscribers { get }
    /// Hands `item`, made or not, to `subscribers`.
    static func deliver(_ item: Item, to subscribers: Subscribers)
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
final class DeliveryQueue<Target: DeliveryTarget>: Sendable {
    typealias Item = Target.Item

    private struct State {
        var items: [Item] = []
        var isDelivering = false
        /// Whether the first item is being made on a thread of its own.
        var isMaking = false
    }

    private let state = Locked(State(), rank: .leaf)
    private let target: Target

    init(_ target: Target) {
        self.target = target
    }

    /// Queues `item` behind those queued before it. May be called with any lock held.
    func enqueue(_ item: Item) {
        state.withLock { $0.items.append(item) }
    }

    /// Delivers `item` to `current`, the subscribers now, behind every item queued before it: at
    /// once when nothing waits (without queueing it), else through the queue. Call with no lock
    /// held. An item delivered at once is handed over as it is, made or not: `deliver` makes
    /// what it is handed.
    @inline(__always)
    func deliver(_ item: Item, to current: Target.Subscribers) {
        let isIdle = state.withLock { state in
            guard !state.isDelivering, state.items.isEmpty else {
                state.items.append(item)
                return false
            }
            state.isDelivering = true
            return true
        }
        guard isIdle else { return deliverQueued() }
        Target.deliver(item, to: current)
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
            let (batch, makesFirst) = state.withLock { state -> ([Item], Bool) in
                if state.items.isEmpty {
                    state.isDelivering = false
                    return ([], false)
                }
                let end = state.items.firstIndex(where: \.isCostlyToMake) ?? state.items.endIndex
                guard end > 0 else {
                    state.isDelivering = false
                    state.isMaking = true
                    return ([], true)
                }
                guard end < state.items.endIndex else {
                    defer { state.items = [] }
                    return (state.items, false)
                }
                defer { state.items.removeFirst(end) }
                return (Array(state.items[..<end]), false)
            }
            if makesFirst { return makeFirst() }
            guard !batch.isEmpty else { return }
            let current = target.current
            for item in batch { Target.deliver(item, to: current) }
        }
    }

    /// Makes the first item queued on a thread of its own, puts it in its place, and delivers.
    /// Call once ``State/isMaking`` is set for it: nothing else takes it out meanwhile.
    @inline(never)
    private func makeFirst() {
        DispatchQueue.global(qos: .utility).async { [self] in
            let made = state.withLock { $0.items[0] }.made()
            state.withLock { state in
                state.items[0] = made
                state.isMaking = false
            }
            deliverQueued()
        }
    }
}
