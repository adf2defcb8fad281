/// Why keys recently left the store, so that a request that finds nothing can be told why: its
/// entry was invalidated or evicted, rather than never stored.
///
/// Bounded: it remembers at most the last ``limit`` departures, the oldest forgotten first. Consulted
/// only on a miss, and written only when keys leave, so a hit never touches it.
struct Departures {
    enum Reason: Sendable {
        case invalidated
        case evicted
    }

    /// How many departed keys it remembers.
    static let limit = 1_024

    private var reasons: [CacheKey: Reason] = [:]
    /// Keys in the order they departed, as a ring of at most ``limit``.
    private var order: [CacheKey] = []
    private var next = 0

    /// Records that `key` left for `reason`.
    mutating func record(_ key: CacheKey, _ reason: Reason) {
        if reasons.updateValue(reason, forKey: key) != nil { return }
        if order.count < Self.limit {
            order.append(key)
            return
        }
        reasons[order[next]] = nil
        order[next] = key
        next = (next + 1) % Self.limit
    }

    /// Forgets `key`, stored again.
    mutating func forget(_ key: CacheKey) {
        // The ring keeps the key until its turn comes: a departure recorded again meanwhile
        // finds its reason slot free and takes the key's place in the order once more.
        if !reasons.isEmpty { reasons[key] = nil }
    }

    /// Why `key` left, when it left recently.
    func reason(for key: CacheKey) -> Reason? {
        reasons.isEmpty ? nil : reasons[key]
    }
}
