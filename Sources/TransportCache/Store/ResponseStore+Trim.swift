extension ResponseStore {
    /// Gives memory back for `pressure`: a warning drops every decoded value, then the least
    /// recently used keys until at most half the capacity is held; a critical level removes every
    /// key. Removed keys count as evictions.
    /// - Returns: the removed keys.
    /// - Complexity: O(n) in the number of keys.
    func trim(for pressure: MemoryPressure) -> [CacheKey] {
        state.withLock { state in
            state.statistics.trims += 1
            var charges: [(key: CacheKey, cost: Int)] = []
            state.entries.forEachEntry { key, variants in
                for stored in variants.all {
                    let removed = stored.decoded.removeKeptValues()
                    state.statistics.decodedEvictions += removed.dropped
                    if removed.cost > 0 { charges.append((key, removed.cost)) }
                }
            }
            for charge in charges { state.entries.reduceCost(by: charge.cost, forKey: charge.key) }
            let limit = pressure == .warning ? state.entries.capacity / 2 : 0
            let removed = state.entries.removeLeastRecentlyUsed(untilTotalCostIsAtMost: limit)
            state.statistics.evictions += removed.count
            for key in removed { state.departures.record(key, .evicted) }
            state.syncGauges()
            return removed
        }
    }
}
