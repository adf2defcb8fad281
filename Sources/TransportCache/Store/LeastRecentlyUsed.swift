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
    }

    private var index: [Key: Int] = [:]
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var newest = -1
    private var oldest = -1

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

    /// Charges `key`'s value `amount` more (less when negative), marks it the most recently used,
    /// and evicts the least recently used other values until the budget holds.
    /// - Returns: the keys of the values evicted, or nil when `key` has no value or its new cost
    ///   alone would exceed the budget (then nothing changes).
    /// - Complexity: O(1) plus O(1) per evicted value.
    mutating func addCost(_ amount: Int, forKey key: Key) -> [Key]? {
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

    /// Removes least recently used values until the total cost is at most `limit`.
    /// - Returns: the removed keys, least recently used first.
    /// - Complexity: O(1) per removed value.
    mutating func removeLeastRecentlyUsed(untilTotalCostIsAtMost limit: Int) -> [Key] {
        var removed: [Key] = []
        while totalCost > max(0, limit), oldest >= 0 {
            let position = oldest
            if let key = slots[position].key {
                index.removeValue(forKey: key)
                removed.append(key)
            }
            release(position)
        }
        return removed
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

    /// Stores `value`, replacing any value for `key`, then evicts least recently used values until
    /// the budget holds. A value whose cost alone exceeds the budget is not stored.
    /// - Returns: the replaced value, and the keys of the other values evicted.
    /// - Complexity: amortised O(1) plus O(1) per evicted value.
    @discardableResult
    mutating func setValue(_ value: Value, forKey key: Key, cost: Int) -> (replaced: Value?, evicted: [Key]) {
        let replaced = removeValue(forKey: key)
        guard cost <= capacity else { return (replaced, []) }
        let position: Int
        let slot = Slot(key: key, value: value, cost: cost, older: -1, newer: -1)
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

    /// Removes every value for which `predicate` is true.
    /// - Returns: the removed keys.
    /// - Complexity: O(n).
    mutating func removeAll(where predicate: (Key, Value) throws -> Bool) rethrows -> [Key] {
        var doomed: [Key] = []
        for (key, position) in index {
            if let value = slots[position].value, try predicate(key, value) { doomed.append(key) }
        }
        for key in doomed { removeValue(forKey: key) }
        return doomed
    }

    private mutating func evictToBudget() -> [Key] {
        var evicted: [Key] = []
        while totalCost > capacity, oldest >= 0 {
            let position = oldest
            if let key = slots[position].key {
                index.removeValue(forKey: key)
                evicted.append(key)
            }
            release(position)
        }
        return evicted
    }

    @discardableResult
    private mutating func release(_ position: Int) -> Value? {
        unlink(position)
        let value = slots[position].value
        totalCost -= slots[position].cost
        slots[position] = Slot(key: nil, value: nil, cost: 0, older: -1, newer: -1)
        freeSlots.append(position)
        return value
    }

    private mutating func moveToFront(_ position: Int) {
        guard position != newest else { return }
        unlink(position)
        linkAtFront(position)
    }

    private mutating func linkAtFront(_ position: Int) {
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
