extension ResponseStore {
    /// Gives memory back for `pressure`: a warning drops every decoded value, then the least
    /// recently used keys until at most half the capacity is held; a critical level removes every
    /// key. Removed keys count as evictions. Call with the in-flight lock held.
    /// - Returns: the removed keys and their answers, to release once no lock is held.
    /// - Complexity: O(n) in the keys held, under the lock a hit takes a batch at a time; a
    ///   critical trim takes the entries out at once.
    func trim(for pressure: MemoryPressure) -> Removal {
        state.withLock { $0.statistics.trims += 1 }
        switch pressure {
        case .critical:
            let emptied = removeEverything(because: .evicted)
            var removal = Removal()
            // Decodes under way on these entries still reach them; the values they keep go now.
            var start = 0
            while start < emptied.slotCount {
                state.withLock { state in
                    emptied.forEachEntry(inSlots: start..<start + Self.batchSize) { _, variants, _ in
                        for stored in variants.all {
                            state.statistics.decodedEvictions += stored.decoded.removeKeptValues().dropped
                        }
                    }
                }
                start += Self.batchSize
                Self.yieldBetweenBatches()
            }
            emptied.forEachEntry { key, _ in removal.keys.append(key) }
            let count = emptied.count
            removal.released.append(consume emptied, count: count)
            return removal
        case .warning:
            dropDecodedValues()
            var removal = Removal()
            while true {
                let batch = state.withLock { state in
                    let removed = state.entries.removeLeastRecentlyUsed(
                        untilTotalCostIsAtMost: state.entries.capacity / 2, atMost: Self.batchSize)
                    state.statistics.evictions += removed.count
                    for (key, _) in removed { state.departures.record(key, .evicted) }
                    state.syncGauges()
                    return removed
                }
                removal.keys.append(contentsOf: batch.map(\.key))
                removal.released.append(batch, count: batch.count)
                guard batch.count == Self.batchSize else { break }
                Self.yieldBetweenBatches()
            }
            index.withLock { $0.remove(removal.keys) }
            return removal
        }
    }

    /// Drops every entry's decoded values and their charge, a batch of slots at a time.
    private func dropDecodedValues() {
        var start = 0
        while true {
            let more = state.withLock { state in
                var charges: [(key: CacheKey, cost: Int)] = []
                state.entries.forEachEntry(inSlots: start..<start + Self.batchSize) { key, variants, _ in
                    for stored in variants.all {
                        let removed = stored.decoded.removeKeptValues()
                        state.statistics.decodedEvictions += removed.dropped
                        if removed.cost > 0 { charges.append((key, removed.cost)) }
                    }
                }
                for charge in charges { state.entries.reduceCost(by: charge.cost, forKey: charge.key) }
                state.syncGauges()
                return start + Self.batchSize < state.entries.slotCount
            }
            guard more else { return }
            start += Self.batchSize
            Self.yieldBetweenBatches()
        }
    }
}
