#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension ResponseStore {
    /// How many entries an operation over many entries removes or reads per hold of the lock
    /// every hit takes: a few hundred microseconds at most, however large the store.
    static let batchSize = 512

    /// Lets a hit that waited for the lock during a batch take it before the next batch does.
    ///
    /// A mutex does not queue its waiters: the thread that just released it would take it again
    /// at once, ahead of a hit woken a few microseconds later, batch after batch, and the hit
    /// would wait for the whole operation after all. Giving up the processor lets the woken hit
    /// run first.
    static func yieldBetweenBatches() {
        sched_yield()
    }

    /// Which keys an invalidation drops.
    enum KeySelection {
        /// These keys: one request's, or a tag's.
        case keys(Set<CacheKey>)
        /// Every key of these normalised URLs (every method and identity).
        case urls(Set<String>)
        /// Every key whose URL the endpoint matches.
        case endpoint(Endpoint)
        /// The keys the tag names (``CachedTransport/data(for:tags:)``); the tag is forgotten.
        case tag(String)

        /// Whether `key` is one of those selected (a tag selects nothing before it is read).
        func selects(_ key: CacheKey) -> Bool {
            switch self {
            case .keys(let keys): keys.contains(key)
            case .urls(let urls): urls.contains(key.url)
            case .endpoint(let endpoint): endpoint.matches(normalizedURL: key.url)
            case .tag: false
            }
        }
    }

    /// What an operation took out of the store.
    struct Removal {
        /// The keys removed.
        var keys: [CacheKey] = []
        /// Their answers, to release once no lock is held.
        var released = Released()
    }

    /// Removes the held keys `selection` names, except `spared`, finding them through the index,
    /// and counts them as invalidated. Call with the in-flight lock held.
    /// - Complexity: O(k) in the keys removed (reading each key's URL for ``KeySelection/keys``),
    ///   plus O(s) per URL or prefix segment named; for a predicate endpoint, O(n) in the keys held,
    ///   each asked outside the lock a hit takes. The lock a hit takes is held a batch at a time.
    func removeKeys(_ selection: KeySelection, sparing spared: Set<CacheKey>) -> Removal {
        switch selection {
        case .keys(let keys):
            let removal = removeHeld(spared.isEmpty ? keys : keys.subtracting(spared), because: .invalidated)
            index.withLock { $0.remove(removal.keys) }
            return removal
        case .tag(let tag):
            return removeKeys(.keys(keys(taggedWith: tag)), sparing: spared)
        case .urls(let urls):
            return removeFound(index.withLock { index in urls.flatMap { index.removeURL($0) } }, sparing: spared)
        case .endpoint(let endpoint):
            return removeFound(index.withLock { $0.remove(endpoint) }, sparing: spared)
        }
    }

    /// Removes the keys `found` (already out of the index) but the spared ones, which go back
    /// into the index.
    private func removeFound(_ found: [CacheKey], sparing spared: Set<CacheKey>) -> Removal {
        var doomed: [CacheKey] = []
        var kept: [CacheKey] = []
        for key in found {
            if spared.contains(key) { kept.append(key) } else { doomed.append(key) }
        }
        if !kept.isEmpty { index.withLock { index in for key in kept { index.insert(key) } } }
        return removeHeld(doomed, because: .invalidated)
    }

    /// Removes those of `keys` that are held, a batch per hold of the lock, leaving the index
    /// to the caller.
    func removeHeld(_ keys: some Collection<CacheKey>, because reason: Departures.Reason) -> Removal {
        var removal = Removal()
        guard !keys.isEmpty else { return removal }
        let keys = Array(keys)
        for start in stride(from: 0, to: keys.count, by: Self.batchSize) {
            if start > 0 { Self.yieldBetweenBatches() }
            state.withLock { state in
                var removed = 0
                for key in keys[start..<min(start + Self.batchSize, keys.count)] {
                    guard let value = state.entries.removeValue(forKey: key) else { continue }
                    state.departures.record(key, reason)
                    removal.keys.append(key)
                    removal.released.append(value)
                    removed += 1
                }
                switch reason {
                case .invalidated: state.statistics.invalidations += removed
                case .evicted: state.statistics.evictions += removed
                }
                state.syncGauges()
            }
        }
        return removal
    }

    /// Takes every entry out at once, counting them as `reason` says, and empties the index.
    /// Call with the in-flight lock held.
    /// - Returns: what the store held, to read and release once no lock is held.
    /// - Complexity: O(1) under the lock a hit takes, plus remembering why the most recently used
    ///   keys left (at most ``Departures/limit``).
    func removeEverything(because reason: Departures.Reason) -> LeastRecentlyUsed<CacheKey, StoredVariants> {
        let emptied = state.withLock { state in
            let emptied = state.entries.removeAll()
            switch reason {
            case .invalidated: state.statistics.invalidations += emptied.count
            case .evicted: state.statistics.evictions += emptied.count
            }
            // Only the latest departures are remembered: the most recently used keys, recorded
            // last, as the ones most likely to be asked for again.
            for key in emptied.keys(mostRecentlyUsedFirst: Departures.limit).reversed() {
                state.departures.record(key, reason)
            }
            state.syncGauges()
            return emptied
        }
        let index = index.withLock { index in
            var emptiedIndex = URLIndex()
            swap(&index, &emptiedIndex)
            return emptiedIndex
        }
        var released = Released()
        let count = index.count
        // Moved, so that the last reference is the one the background queue lets go of.
        released.append(consume index, count: count)
        released.release()
        return emptied
    }

    /// Calls `copy` with each held key and its variants, under the lock a hit takes but a batch
    /// of slots at a time, and returns what it made, most recently used first. Call with the
    /// in-flight lock held: then no key comes or goes between two batches, and hits meanwhile
    /// only change the order, which each batch reads as it is.
    /// - Complexity: O(n) in the keys held, in batches of ``batchSize`` under the lock.
    func copyHeld<Copy>(_ copy: (CacheKey, StoredVariants) -> Copy?) -> [Copy] {
        var copies: [(lastUse: UInt64, copy: Copy)] = []
        // Grown here, not by a copy of everything so far in the middle of a batch.
        copies.reserveCapacity(state.withLock { $0.entries.count })
        var start = 0
        while true {
            let more = state.withLock { state in
                state.entries.forEachEntry(inSlots: start..<start + Self.batchSize) { key, variants, lastUse in
                    if let made = copy(key, variants) { copies.append((lastUse, made)) }
                }
                return start + Self.batchSize < state.entries.slotCount
            }
            guard more else { break }
            start += Self.batchSize
            Self.yieldBetweenBatches()
        }
        copies.sort { $0.lastUse > $1.lastUse }
        return copies.map(\.copy)
    }
}
