/// Why keys recently left the store, so that a request that finds nothing can be told why: its
/// entry was invalidated or evicted, rather than never stored.
///
/// Bounded: it remembers at most the last ``limit`` departures, the oldest forgotten first.
/// Consulted only on a miss, and written only when keys leave or a fetch of them completes, so a
/// hit never touches it.
struct Departures {
    enum Reason: Sendable {
        case invalidated
        case evicted
    }

    /// How many departed keys it remembers.
    static let limit = 1_024

    /// Each remembered key's reason, and its place in ``order``.
    private var reasons: [CacheKey: (reason: Reason, slot: Int)] = [:]
    /// Keys in the order they departed, as a ring of at most ``limit``; a slot whose key was
    /// forgotten or recorded again elsewhere is stale, and skipped when its turn comes.
    private var order: [CacheKey] = []
    private var next = 0

    /// Records that `key` left for `reason`.
    mutating func record(_ key: CacheKey, _ reason: Reason) {
        if let held = reasons[key] {
            reasons[key] = (reason, held.slot)
            return
        }
        let slot: Int
        if order.count < Self.limit {
            slot = order.count
            order.append(key)
        } else {
            slot = next
            let oldest = order[slot]
            if reasons[oldest]?.slot == slot { reasons[oldest] = nil }
            order[slot] = key
            next = (next + 1) % Self.limit
        }
        reasons[key] = (reason, slot)
    }

    /// Forgets `key`: it is stored again, or a fetch of it completed.
    mutating func forget(_ key: CacheKey) {
        if !reasons.isEmpty { reasons[key] = nil }
    }

    /// Why `key` left, when it left recently.
    func reason(for key: CacheKey) -> Reason? {
        reasons.isEmpty ? nil : reasons[key]?.reason
    }
}

extension Departures: ReleasableInSteps {
    /// Departures replaced whole are let go of whole.
    func releaseSome(_ limit: Int) -> Bool { false }
}

extension ResponseStore.State {
    /// What leaves the store, already taken out of ``entries``.
    enum Departing {
        /// A key, with every variant it held.
        case key(CacheKey)
        /// Variants of a key that stays held, dropped for good: this many.
        case variants(Int, of: CacheKey)
        /// Every key, this many, taken out at once. `departures` records the most recently used
        /// of them already (as many as ``Departures`` remembers), made outside the lock; the
        /// departures it replaces go into the removal, to be let go of outside the lock too.
        case everything(count: Int, departures: Departures)
    }

    /// The one bookkeeping of what leaves the store, whatever took it out of ``entries``: an
    /// invalidation, a trim, room made for a write or for a decoded value's charge, a variant a
    /// write drops or a removal takes out. It remembers why each key left (``Departures``), counts
    /// each key or dropped variant as an eviction or an invalidation, keeps the gauges, and notes
    /// in `removal` the keys that left, which the index then loses
    /// (``ResponseStore/unindex(_:)``), and those thinned: the caller announces
    /// ``ResponseStore/Removal/departed`` once the lock is released, as evicted or invalidated.
    ///
    /// A variant replaced by an answer for the same request, or by one that selects on other
    /// fields, does not depart: the answer that replaces it is announced as stored.
    /// - Complexity: O(1), not counting the departures ``Departing/everything(count:departures:)``
    ///   replaces, which are released with the removal.
    mutating func depart(
        _ departing: Departing, because reason: Departures.Reason, into removal: inout ResponseStore.Removal
    ) {
        let count: Int
        switch departing {
        case .key(let key):
            departures.record(key, reason)
            removal.keys.append(key)
            count = 1
        case .variants(let dropped, let key):
            guard dropped > 0 else { return }
            removal.thinned.append(key)
            count = dropped
        case .everything(let emptied, var recorded):
            swap(&departures, &recorded)
            removal.released.append(recorded, count: 0)
            count = emptied
        }
        switch reason {
        case .invalidated: statistics.invalidations += count
        case .evicted: statistics.evictions += count
        }
        syncGauges()
    }
}
