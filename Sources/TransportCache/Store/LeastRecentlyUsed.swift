/// A dictionary with a byte budget that evicts the least recently used values first, and values
/// on probation before any other.
///
/// Values live in a flat array of slots chained into two recency lists by index, so a hit moves an
/// entry to the front with a few integer writes and no allocation or reference counting of nodes.
/// A value stored on probation (a prefetched answer no screen has read) sits in the second list:
/// room is made from that list first, and a use moves the value to the front of the first. Not
/// thread-safe: ``ResponseStore`` guards it with a lock.
struct LeastRecentlyUsed<Key: Hashable, Value> {
    fileprivate struct Slot {
        var key: Key?
        var value: Value?
        var cost: Int
        var older: Int
        var newer: Int
        /// When the value was last made the most recently used: a larger stamp is more recent.
        var lastUse: UInt64
        /// Whether it is on probation: stored, never used.
        var onProbation = false
    }

    /// The two ends of one recency list.
    fileprivate struct Ends {
        var newest = -1
        var oldest = -1
    }

    /// A key and its value, taken out.
    typealias Removed = (key: Key, value: Value)

    private var index: [Key: Int] = [:]
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    /// The values used, or stored not on probation.
    private var used = Ends()
    /// The values on probation.
    private var probation = Ends()
    /// The most the values on probation may cost together when making room for one of them
    /// evicts used values.
    private(set) var probationLimit: Int
    /// The sum of the costs of the values on probation.
    private(set) var probationCost = 0
    /// The stamp of the latest use.
    private var uses: UInt64 = 0

    /// The byte budget; setting a smaller one evicts at once.
    private(set) var capacity: Int
    /// The sum of the costs of the values held; never above ``capacity`` after a mutation.
    private(set) var totalCost = 0

    /// - Parameter probationLimit: see ``probationLimit``; the capacity when not given.
    init(capacity: Int, probationLimit: Int? = nil) {
        self.capacity = max(0, capacity)
        self.probationLimit = min(self.capacity, max(0, probationLimit ?? capacity))
    }

    /// Whether `key`'s value is on probation.
    func isOnProbation(_ key: Key) -> Bool {
        guard let position = index[key] else { return false }
        return slots[position].onProbation
    }

    var count: Int { index.count }

    /// The value for `key` and where it is held, without changing its recency: a use of it is
    /// marked with ``markUsed(at:)``, so that a hit looks the key up once.
    /// - Complexity: O(1).
    @inline(__always)
    func find(_ key: Key) -> (position: Int, value: Value)? {
        guard let position = index[key], let value = slots[position].value else { return nil }
        return (position, value)
    }

    /// Marks the value held at `position` (``find(_:)``) as the most recently used.
    /// - Complexity: O(1).
    mutating func markUsed(at position: Int) {
        moveToFront(position)
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
        if slots[position].onProbation { probationCost += amount }
        moveToFront(position)
        return evictToBudget(keeping: position)
    }

    /// Charges `key`'s value `amount` less, without changing its recency.
    /// - Complexity: O(1).
    mutating func reduceCost(by amount: Int, forKey key: Key) {
        guard let position = index[key] else { return }
        let reduction = min(max(0, amount), slots[position].cost)
        slots[position].cost -= reduction
        totalCost -= reduction
        if slots[position].onProbation { probationCost -= reduction }
    }

    /// Removes least recently used values (those on probation first) until the total cost is at
    /// most `limit`, or `count` of them are removed.
    /// - Returns: the removed values, in the order removed.
    /// - Complexity: O(1) per removed value.
    mutating func removeLeastRecentlyUsed(untilTotalCostIsAtMost limit: Int, atMost count: Int = .max) -> [Removed] {
        removeLeastRecentlyUsed(atMost: count) { totalCost in totalCost > max(0, limit) }
    }

    /// Removes the `count` least recently used values (those on probation first), or every value
    /// when it holds fewer.
    /// - Returns: the removed values, in the order removed.
    /// - Complexity: O(1) per removed value.
    mutating func removeLeastRecentlyUsed(atMost count: Int) -> [Removed] {
        removeLeastRecentlyUsed(atMost: count) { _ in true }
    }

    private mutating func removeLeastRecentlyUsed(atMost count: Int, while more: (_ totalCost: Int) -> Bool)
        -> [Removed]
    {
        var removed: [Removed] = []
        while more(totalCost), removed.count < count {
            let position = probation.oldest >= 0 ? probation.oldest : used.oldest
            guard position >= 0 else { break }
            evict(position, into: &removed)
        }
        return removed
    }

    private mutating func evict(_ position: Int, into removed: inout [Removed]) {
        if let key = slots[position].key {
            index.removeValue(forKey: key)
            if let value = release(position) { removed.append((key, value)) }
        } else {
            release(position)
        }
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
        var emptied = LeastRecentlyUsed(capacity: capacity, probationLimit: probationLimit)
        emptied.uses = uses
        swap(&self, &emptied)
        return emptied
    }

    /// Calls `body` with each key and value, from the most to the least recently used, those on
    /// probation last: the reverse of the order they are evicted in.
    /// - Complexity: O(n).
    func forEachEntry(_ body: (Key, Value) throws -> Void) rethrows {
        for start in [used.newest, probation.newest] {
            var position = start
            while position >= 0 {
                if let key = slots[position].key, let value = slots[position].value { try body(key, value) }
                position = slots[position].older
            }
        }
    }

    /// Appends the keys of the `count` most recently used values to `keys`, most recently used
    /// first, those on probation last. Reserve room in `keys` beforehand to keep allocation out of
    /// the caller's lock.
    /// - Complexity: O(count).
    func appendKeys(mostRecentlyUsedFirst count: Int, to keys: inout [Key]) {
        let end = keys.count + count
        for start in [used.newest, probation.newest] {
            var position = start
            while position >= 0, keys.count < end {
                if let key = slots[position].key { keys.append(key) }
                position = slots[position].older
            }
        }
    }

    /// Stores `value`, replacing any value for `key`, then evicts values until the budget holds:
    /// those on probation first, oldest first, then the least recently used. A value whose cost
    /// alone exceeds the budget is not stored.
    /// - Parameter onProbation: stores it on probation (see the type's description). Making room
    ///   for it evicts used values only while the values on probation cost at most
    ///   ``probationLimit``; beyond, older values on probation go instead. It is never evicted to
    ///   make room for itself.
    /// - Returns: the replaced value, and the other values evicted.
    /// - Complexity: amortised O(1) plus O(1) per evicted value.
    @discardableResult
    mutating func setValue(_ value: Value, forKey key: Key, cost: Int, onProbation: Bool = false) -> (
        replaced: Value?, evicted: [Removed]
    ) {
        let replaced = removeValue(forKey: key)
        guard cost <= capacity, !onProbation || cost <= probationLimit else { return (replaced, []) }
        let position: Int
        let slot = Slot(key: key, value: value, cost: cost, older: -1, newer: -1, lastUse: 0, onProbation: onProbation)
        if let free = freeSlots.popLast() {
            position = free
            slots[position] = slot
        } else {
            position = slots.count
            slots.append(slot)
        }
        index[key] = position
        totalCost += cost
        if onProbation { probationCost += cost }
        linkAtFront(position)
        return (replaced, evictToBudget(keeping: position))
    }

    /// Removes the value for `key`.
    /// - Complexity: O(1).
    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        guard let position = index.removeValue(forKey: key) else { return nil }
        return release(position)
    }

    /// Evicts until the budget holds, never the value at `kept` (the one just stored or charged):
    /// values on probation first, oldest first, then the least recently used; except that room
    /// for a value on probation is taken from used values while the values on probation cost at
    /// most ``probationLimit``, and from older values on probation beyond.
    private mutating func evictToBudget(keeping kept: Int) -> [Removed] {
        var removed: [Removed] = []
        let keptOnProbation = slots[kept].onProbation
        while totalCost > capacity {
            let takesFromUsed =
                keptOnProbation ? probationCost <= probationLimit : probation.oldest < 0 || probation.oldest == kept
            var position = takesFromUsed ? used.oldest : probation.oldest
            if position == kept || position < 0 { position = takesFromUsed ? probation.oldest : used.oldest }
            guard position >= 0, position != kept else { break }
            evict(position, into: &removed)
        }
        return removed
    }

    @discardableResult
    private mutating func release(_ position: Int) -> Value? {
        unlink(position)
        let value = slots[position].value
        totalCost -= slots[position].cost
        if slots[position].onProbation { probationCost -= slots[position].cost }
        slots[position] = Slot(key: nil, value: nil, cost: 0, older: -1, newer: -1, lastUse: 0)
        freeSlots.append(position)
        return value
    }

    /// Makes the value at `position` the most recently used; one on probation leaves it. A hit's
    /// path: a used value moves with a few integer writes, as in a list of one kind.
    @inline(__always)
    private mutating func moveToFront(_ position: Int) {
        guard position != used.newest else { return }
        guard !slots[position].onProbation else { return promote(position) }
        // Not the newest, so it has a newer neighbour, and the list a newest value. The slots
        // are written through one buffer: each subscript write would check again that the array
        // is not shared.
        uses &+= 1
        var used = used
        let stamp = uses
        slots.withUnsafeMutableBufferPointer { slots in
            let older = slots[position].older
            let newer = slots[position].newer
            if older >= 0 { slots[older].newer = newer } else { used.oldest = newer }
            slots[newer].older = older
            slots[position].lastUse = stamp
            slots[position].older = used.newest
            slots[position].newer = -1
            slots[used.newest].newer = position
        }
        used.newest = position
        self.used = used
    }

    /// Moves a value on probation, just used, to the front of the used values.
    @inline(never)
    private mutating func promote(_ position: Int) {
        unlink(position)
        slots[position].onProbation = false
        probationCost -= slots[position].cost
        linkAtFront(position)
    }

    private mutating func linkAtFront(_ position: Int) {
        uses &+= 1
        slots[position].lastUse = uses
        if slots[position].onProbation {
            Self.link(position, atFrontOf: &probation, in: &slots)
        } else {
            Self.link(position, atFrontOf: &used, in: &slots)
        }
    }

    private static func link(_ position: Int, atFrontOf ends: inout Ends, in slots: inout [Slot]) {
        slots[position].older = ends.newest
        slots[position].newer = -1
        if ends.newest >= 0 { slots[ends.newest].newer = position }
        ends.newest = position
        if ends.oldest < 0 { ends.oldest = position }
    }

    private mutating func unlink(_ position: Int) {
        if slots[position].onProbation {
            Self.unlink(position, from: &probation, in: &slots)
        } else {
            Self.unlink(position, from: &used, in: &slots)
        }
    }

    private static func unlink(_ position: Int, from ends: inout Ends, in slots: inout [Slot]) {
        let older = slots[position].older
        let newer = slots[position].newer
        if older >= 0 { slots[older].newer = newer } else if ends.oldest == position { ends.oldest = newer }
        if newer >= 0 { slots[newer].older = older } else if ends.newest == position { ends.newest = older }
        slots[position].older = -1
        slots[position].newer = -1
    }
}

extension LeastRecentlyUsed: Sendable where Key: Sendable, Value: Sendable {}

extension LeastRecentlyUsed.Slot: Sendable where Key: Sendable, Value: Sendable {}
