extension ResponseStore {
    /// Gives memory back for `pressure`: a warning drops every decoded value, then the least
    /// recently used keys until at most half the capacity is held; a critical level removes every
    /// key. Removed keys count as evictions. Call with the in-flight lock held.
    /// - Returns: the removed keys and their answers, to release once no lock is held.
    /// - Complexity: O(n) in the keys held, under the lock a hit takes in short holds; a
    ///   critical trim takes the entries out at once.
    func trim(for pressure: MemoryPressure) -> Removal {
        state.withLock { $0.statistics.trims += 1 }
        switch pressure {
        case .critical:
            let (emptied, emptying) = removeEverything(because: .evicted)
            var removal = emptying
            // Decodes under way on these entries still reach them; the values they keep go now.
            var start = 0
            inShortHolds { state in
                emptied.entries.forEachEntry(inSlots: start..<start + Self.stepSize) { _, variants, _ in
                    for stored in variants.all {
                        state.statistics.decodedEvictions += stored.decoded.removeKeptValues().dropped
                    }
                }
                start += Self.stepSize
                return start < emptied.entries.slotCount
            }
            emptied.entries.forEachEntry { key, _ in removal.keys.append(key) }
            let count = emptied.count
            removal.released.append(consume emptied, count: count)
            return removal
        case .warning:
            dropDecodedValues()
            var removal = Removal()
            var values: [StoredVariants] = []
            inShortHolds { state in
                let removed = state.entries.removeLeastRecentlyUsed(
                    untilTotalCostIsAtMost: state.entries.capacity / 2, atMost: Self.stepSize)
                for (key, value) in removed {
                    values.append(value)
                    state.depart(.key(key), because: .evicted, into: &removal)
                }
                return removed.count == Self.stepSize
            }
            removal.released.append(values, count: values.count)
            unindex(removal)
            return removal
        }
    }

    /// Drops every entry's decoded values and their charge, a few slots at a time.
    private func dropDecodedValues() {
        var start = 0
        inShortHolds { state in
            var charges: [(key: CacheKey, cost: Int)] = []
            state.entries.forEachEntry(inSlots: start..<start + Self.stepSize) { key, variants, _ in
                for stored in variants.all {
                    let removed = stored.decoded.removeKeptValues()
                    state.statistics.decodedEvictions += removed.dropped
                    if removed.cost > 0 { charges.append((key, removed.cost)) }
                }
            }
            for charge in charges { state.entries.reduceCost(by: charge.cost, forKey: charge.key) }
            state.syncGauges()
            start += Self.stepSize
            return start < state.entries.slotCount
        }
    }
}
