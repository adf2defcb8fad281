import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension MemoryURLCache.State {
    /// Drops every kept decoded value and takes its charge off its entry, leaving the entries'
    /// recency as it was. Decodes under way go on, and their callers get their values.
    /// - Returns: how many values were dropped.
    /// - Complexity: O(n) in the number of entries.
    @discardableResult
    mutating func removeDecodedValues() -> Int {
        var charges: [(key: CacheKey, cost: Int)] = []
        var dropped = 0
        forEachStoredResponse { key, stored in
            let removed = stored.decoded.removeKeptValues()
            dropped += removed.dropped
            if removed.cost > 0 { charges.append((key, removed.cost)) }
        }
        for charge in charges { entries.reduceCost(by: charge.cost, forKey: charge.key) }
        statistics.decodedEvictions += dropped
        return dropped
    }
}

extension MemoryURLCache {
    /// Gives memory back for `pressure`: a warning drops every decoded value, then the least
    /// recently used entries until at most half the capacity is held; a critical level removes
    /// every entry. Removed entries count as evictions.
    /// - Returns: the keys of the removed entries.
    /// - Complexity: O(n) in the number of entries.
    func trim(for pressure: MemoryPressure) -> [CacheKey] {
        state.withLock { state in
            state.statistics.trims += 1
            state.removeDecodedValues()
            let removed: [CacheKey]
            switch pressure {
            case .warning:
                removed = state.entries.removeLeastRecentlyUsed(untilTotalCostIsAtMost: state.entries.capacity / 2)
            case .critical:
                removed = state.entries.keysByRecency
                // Also releases the store's tables.
                state.entries.removeAll()
            }
            state.statistics.evictions += removed.count
            state.syncGauges()
            return removed
        }
    }
}
