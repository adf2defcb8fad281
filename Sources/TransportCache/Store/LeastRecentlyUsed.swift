/// A dictionary with a byte budget that evicts the least recently used values first.
///
/// Values live in a flat array of slots chained into a recency list by index, so a hit moves an
/// entry to the front with a few integer writes and no allocation or reference counting of nodes.
/// Not thread-safe: ``ResponseStore`` guards it with a lock.
struct LeastRecentlyUsed<Key: Hashable, Value> {
    fileprivate struct Slot {
        var key: Key?
        var value: Value?
        var cost: Int
        var older: Int
        var newer: Int
        /// When the value was last made the most recently used: a larger stamp is more recent.
        var lastUse: UInt64
    }

    /// A key and its value, taken out.
    typealias Removed = (key: Key, value: Value)

    private var index: [Key: Int] = [:]
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var newest = -1
    private var oldest = -1
    /// The stamp of the latest use.
    private var uses: UInt64 = 0

    /// The byte budget; setting a smaller one evicts at once.
    private(set) var capacity: Int
    /// The sum of the costs of the values held; never above ``capacity`` after a mutation.
    private(set) var totalCost = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int { index.count }

    /// The value for `key` if `accept` takes it, then marked as the most recently used; one hash
    /// lookup in all.
    /// - Complexity: O(1).
    mutating func value(forKey key: Key, where accept: (Value) -> Bool) -> Value? {
        guard let position = index[key], let value = slots[position].value, accept(value) else { return nil }
        moveToFront(position)
        return value
    }

    /// The value for `key` without changing its recency.
    func peekValue(forKey key: Key) -> Value? {
        guard let position = index[key] else { return nil }
        return slots[position].value
    }

    /// The value for `key` and when it was last used, without changing its recency.
    func peekEntry(forKey key: Key) -> (value: Value, lastUse: UInt64)? {
        guard let position = index[key], let value = slots[position].value else { return nil }
        return (value, slots[position].lastUse)
    }

    /// Charges `key`'s value `amount` more (less when negative), marks it the most recently used,
    /// and evicts the least recently used other values until the budget holds.
    /// - Returns: the values evicted, or nil when `key` has no value or its new cost alone would
    ///   exceed the budget (then nothing changes).
    /// - Complexity: O(1) plus O(1) per evicted value.
    mutating func addCost(_ amount: Int, forKey key: Key) -> [Removed]? {
        guard let position = index[key], slots[position].cost + amount <= capacity else { return nil }
        slots[position].cost += amount
        totalCost += amount
        moveToFront(position)
        return evictToBudget()
    }

    /// Charges `key`'s value `amount` less, without changing its recency.
    /// - Complexity: O(1).
    mutating func reduceCost(by amount: Int, forKey key: Key) {
        guard let position = index[key] else { return }
        let reduction = min(max(0, amount), slots[position].cost)
        slots[position].cost -= reduction
        totalCost -= reduction
    }

    /// Removes least recently used values until the total cost is at most `limit`, or `count`
    /// of them are removed.
    /// - Returns: the removed values, least recently used first.
    /// - Complexity: O(1) per removed value.
    mutating func removeLeastRecentlyUsed(untilTotalCostIsAtMost limit: Int, atMost count: Int = .max) -> [Removed] {
        removeLeastRecentlyUsed(atMost: count) { totalCost in totalCost > max(0, limit) }
    }

    /// Removes the `count` least recently used values, or every value when it holds fewer.
    /// - Returns: the removed values, least recently used first.
    /// - Complexity: O(1) per removed value.
    mutating func removeLeastRecentlyUsed(atMost count: Int) -> [Removed] {
        removeLeastRecentlyUsed(atMost: count) { _ in true }
    }

    private mutating func removeLeastRecentlyUsed(atMost count: Int, while more: (_ totalCost: Int) -> Bool)
        -> [Removed]
    {
        var removed: [Removed] = []
        while more(totalCost), oldest >= 0, removed.count < count {
            let position = oldest
            if let key = slots[position].key {
                index.removeValue(forKey: key)
                if let value = release(position) { removed.append((key, value)) }
            } else {
                release(position)
            }
        }
        return removed
    }

    /// The number of slots, held or free: ``forEachEntry(inSlots:_:)`` visits them by position.
    var slotCount: Int { slots.count }

    /// Calls `body` with the key, value and last use of each value held in the slots at
    /// `positions`. Slots keep their positions while nothing is stored or removed, whatever is
    /// used meanwhile, so a walk over every position in turn visits each value once.
    /// - Complexity: O(p) in the positions.
    func forEachEntry(inSlots positions: Range<Int>, _ body: (Key, Value, UInt64) throws -> Void) rethrows {
        for position in positions.clamped(to: slots.indices) {
            if let key = slots[position].key, let value = slots[position].value {
                try body(key, value, slots[position].lastUse)
            }
        }
    }

    /// Takes every value out, leaving an empty dictionary with the same budget.
    /// - Returns: what it held.
    /// - Complexity: O(1).
    mutating func removeAll() -> LeastRecentlyUsed {
        var emptied = LeastRecentlyUsed(capacity: capacity)
        emptied.uses = uses
        swap(&self, &emptied)
        return emptied
    }

    /// Calls `body` with each key and value, from the most to the least recently used.
    /// - Complexity: O(n).
    func forEachEntry(_ body: (Key, Value) throws -> Void) rethrows {
        var position = newest
        while position >= 0 {
            if let key = slots[position].key, let value = slots[position].value { try body(key, value) }
            position = slots[position].older
        }
    }

    /// Appends the keys of the `count` most recently used values to `keys`, most recently used
    /// first. Reserve room in `keys` beforehand to keep allocation out of the caller's lock.
    /// - Complexity: O(count).
    func appendKeys(mostRecentlyUsedFirst count: Int, to keys: inout [Key]) {
        let end = keys.count + count
        var position = newest
        while position >= 0, keys.count < end {
            if let key = slots[position].key { keys.append(key) }
            position = slots[position].older
        }
    }

    /// Stores `value`, replacing any value for `key`, then evicts least recently used values until
    /// the budget holds. A value whose cost alone exceeds the budget is not stored.
    /// - Returns: the replaced value, and the other values evicted.
    /// - Complexity: amortised O(1) plus O(1) per evicted value.
    @discardableResult
    mutating func setValue(_ value: Value, forKey key: Key, cost: Int) -> (replaced: Value?, evicted: [Removed]) {
        let replaced = removeValue(forKey: key)
        guard cost <= capacity else { return (replaced, []) }
        let position: Int
        let slot = Slot(key: key, value: value, cost: cost, older: -1, newer: -1, lastUse: 0)
        if let free = freeSlots.popLast() {
            position = free
            slots[position] = slot
        } else {
            position = slots.count
            slots.append(slot)
        }
        index[key] = position
        totalCost += cost
        linkAtFront(position)
        return (replaced, evictToBudget())
    }

    /// Removes the value for `key`.
    /// - Complexity: O(1).
    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        guard let position = index.removeValue(forKey: key) else { return nil }
        return release(position)
    }

    private mutating func evictToBudget() -> [Removed] {
        removeLeastRecentlyUsed(untilTotalCostIsAtMost: capacity)
    }

    @discardableResult
    private mutating func release(_ position: Int) -> Value? {
        unlink(position)
        let value = slots[position].value
        totalCost -= slots[position].cost
        slots[position] = Slot(key: nil, value: nil, cost: 0, older: -1, newer: -1, lastUse: 0)
        freeSlots.append(position)
        return value
    }

    private mutating func moveToFront(_ position: Int) {
        guard position != newest else { return }
        unlink(position)
        linkAtFront(position)
    }

    private mutating func linkAtFront(_ position: Int) {
        uses &+= 1
        slots[position].lastUse = uses
        slots[position].older = newest
        slots[position].newer = -1
        if newest >= 0 { slots[newest].newer = position }
        newest = position
        if oldest < 0 { oldest = position }
    }

    private mutating func unlink(_ position: Int) {
        let older = slots[position].older
        let newer = slots[position].newer
        if older >= 0 { slots[older].newer = newer } else if oldest == position { oldest = newer }
        if newer >= 0 { slots[newer].older = older } else if newest == position { newest = older }
        slots[position].older = -1
        slots[position].newer = -1
    }
}

extension LeastRecentlyUsed: Sendable where Key: Sendable, Value: Sendable {}

extension LeastRecentlyUsed.Slot: Sendable where Key: Sendable, Value: Sendable {}
