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
