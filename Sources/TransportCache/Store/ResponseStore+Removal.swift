import Dispatch

extension ResponseStore {
    /// How many entries an operation over many entries handles between two looks at the clock,
    /// under the lock (``inShortHolds(_:)``) or freeing them (``ReleaseQueue``).
    static let stepSize = 16

    /// How long an operation over many entries holds the lock every hit takes before it lets a
    /// waiting hit in. Measured at 100,000 entries, where the store's tables no longer fit the
    /// caches, removing an entry costs 1 to 2 µs under the lock and copying one for a snapshot
    /// about 0.6 µs: a fixed count of 512 held the lock 150 µs to over a millisecond, depending on
    /// the operation and the machine. A limit in time holds whatever each entry costs.
    static let holdLimit: UInt64 = 50_000

    /// Runs `step` under the lock a hit takes, again and again until it returns false, letting a
    /// waiting hit in whenever one hold reaches ``holdLimit``. Each step should handle at most
    /// ``stepSize`` entries.
    func inShortHolds(_ step: (inout State) -> Bool) {
        var more = true
        var first = true
        while more {
            if !first { state.handOverToWaiters(forAtMost: Self.handOverLimit) }
            first = false
            state.withLock { state in
                let deadline = DispatchTime.now().uptimeNanoseconds + Self.holdLimit
                repeat { more = step(&state) } while more && DispatchTime.now().uptimeNanoseconds < deadline
            }
        }
    }

    /// How long an operation over many entries lets waiting hits go first between two holds,
    /// at most: a waiting hit is woken when a hold ends, and needs a processor to run on.
    static let handOverLimit: UInt64 = 500_000

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

    /// What one change took out of the store, noted under its lock by
    /// ``State/depart(_:because:into:)``.
    struct Removal {
        /// The keys no longer held, in the order they left.
        var keys: [CacheKey] = []
        /// The keys still held that lost variants for good.
        var thinned: [CacheKey] = []
        /// What left, to release once no lock is held.
        var released = Released()

        /// The keys that lost something, to announce: those that left, then those thinned.
        var departed: [CacheKey] { thinned.isEmpty ? keys : keys + thinned }
    }

    /// Takes the keys that left in `removal` out of the index. Call with the in-flight lock held,
    /// once the lock a hit takes is released: the index follows the entries one writer at a time.
    func unindex(_ removal: Removal) {
        guard !removal.keys.isEmpty else { return }
        index.withLock { $0.remove(removal.keys) }
    }

    /// Removes the held keys `selection` names, except `spared`, finding them through the index,
    /// and counts them as invalidated. Call with the in-flight lock held.
    /// - Complexity: O(k) in the keys removed (reading each key's host and path segments for
    ///   ``KeySelection/keys``), plus O(s) per URL or prefix segment named; for a predicate
    ///   endpoint, O(n) in the keys held, each asked outside the lock a hit takes. The lock a hit
    ///   takes is held in short holds (``inShortHolds(_:)``).
    func removeKeys(_ selection: KeySelection, sparing spared: Set<CacheKey>) -> Removal {
        switch selection {
        case .keys(let keys):
            let removal = removeHeld(spared.isEmpty ? keys : keys.subtracting(spared), because: .invalidated)
            unindex(removal)
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

    /// Removes those of `keys` that are held, in short holds of the lock a hit takes, leaving the
    /// index to the caller.
    func removeHeld(_ keys: some Collection<CacheKey>, because reason: Departures.Reason) -> Removal {
        var removal = Removal()
        guard !keys.isEmpty else { return removal }
        let keys = Array(keys)
        var values: [StoredVariants] = []
        values.reserveCapacity(keys.count)
        removal.keys.reserveCapacity(keys.count)
        var start = 0
        inShortHolds { state in
            for key in keys[start..<min(start + Self.stepSize, keys.count)] {
                guard let value = state.entries.removeValue(forKey: key) else { continue }
                values.append(value)
                state.depart(.key(key), because: reason, into: &removal)
            }
            start += Self.stepSize
            return start < keys.count
        }
        removal.released.append(values, count: values.count)
        return removal
    }

    /// Takes every entry out at once, counting them as `reason` says, and empties the index.
    /// Call with the in-flight lock held.
    /// - Returns: what the store and its index held, to read and release once no lock is held,
    ///   and the removal that accounts for it, whose keys are left to the caller to name (naming
    ///   every key costs a key each).
    /// - Complexity: O(1) under the lock a hit takes, plus a short hold to read the most recently
    ///   used keys, whose departures (at most ``Departures/limit``) are recorded outside it.
    func removeEverything(because reason: Departures.Reason) -> (emptied: EmptiedStore, removal: Removal) {
        // Only the latest departures are remembered: the most recently used keys, recorded last,
        // as the ones most likely to be asked for again. Departures change only with the in-flight
        // lock held, so the copy recorded here is the store's own plus these keys.
        // Room made before the lock: on Linux, an allocation this large can first merge every
        // small block freed since the last such one, holding the allocator's lock for
        // milliseconds, and hits allocate too.
        var recent: [CacheKey] = []
        recent.reserveCapacity(Departures.limit)
        var departures = state.withLock { state in
            state.entries.appendKeys(mostRecentlyUsedFirst: Departures.limit, to: &recent)
            return state.departures
        }
        for key in recent.reversed() { departures.record(key, reason) }
        var removal = Removal()
        // The departures replaced, and what the caller adds: the emptied store.
        removal.released.reserveCapacity(2)
        let entries = state.withLock { state in
            let emptied = state.entries.removeAll()
            let recorded = departures
            // The recorded copy is the only reference: the store's next departure changes it in place.
            departures = Departures()
            state.depart(.everything(count: emptied.count, departures: recorded), because: reason, into: &removal)
            return emptied
        }
        let index = index.withLock { index in
            var emptiedIndex = URLIndex()
            swap(&index, &emptiedIndex)
            return emptiedIndex
        }
        return (EmptiedStore(entries: entries, index: index), removal)
    }

    /// Calls `copy` with each held key and its variants, under the lock a hit takes but in short
    /// holds (``inShortHolds(_:)``), and returns what it made, most recently used first. Call with
    /// the in-flight lock held: then no key comes or goes between two holds, and hits meanwhile
    /// only change the order, which each step reads as it is.
    /// - Complexity: O(n) in the keys held, in short holds of the lock.
    func copyHeld<Copy>(_ copy: (CacheKey, StoredVariants) -> Copy?) -> [Copy] {
        var copies: [(lastUse: UInt64, copy: Copy)] = []
        // Grown here, not by a copy of everything so far in the middle of a hold.
        copies.reserveCapacity(state.withLock { $0.entries.count })
        var start = 0
        inShortHolds { state in
            state.entries.forEachEntry(inSlots: start..<start + Self.stepSize) { key, variants, lastUse in
                if let made = copy(key, variants) { copies.append((lastUse, made)) }
            }
            start += Self.stepSize
            return start < state.entries.slotCount
        }
        copies.sort { $0.lastUse > $1.lastUse }
        return copies.map(\.copy)
    }

    /// Calls `copy` with each of `keys` that is held and its variants, in short holds of the lock
    /// a hit takes, and returns what it made, most recently used first. Keys that left meanwhile
    /// are skipped.
    /// - Complexity: O(k) in the keys, whatever else is held.
    func copyHeld<Copy>(_ keys: [CacheKey], _ copy: (CacheKey, StoredVariants) -> Copy?) -> [Copy] {
        var copies: [(lastUse: UInt64, copy: Copy)] = []
        copies.reserveCapacity(keys.count)
        var start = 0
        inShortHolds { state in
            for key in keys[start..<min(start + Self.stepSize, keys.count)] {
                if let (variants, lastUse) = state.entries.peekEntry(forKey: key), let made = copy(key, variants) {
                    copies.append((lastUse, made))
                }
            }
            start += Self.stepSize
            return start < keys.count
        }
        copies.sort { $0.lastUse > $1.lastUse }
        return copies.map(\.copy)
    }
}

/// Everything a store held, taken out at once by ``ResponseStore/removeEverything(because:)``: its
/// entries and the index that found them.
struct EmptiedStore: ReleasableInSteps {
    private(set) var entries: LeastRecentlyUsed<CacheKey, StoredVariants>
    private(set) var index: URLIndex

    init(entries: LeastRecentlyUsed<CacheKey, StoredVariants>, index: URLIndex) {
        self.entries = entries
        self.index = index
    }

    /// How many entries it holds.
    var count: Int { entries.count }

    /// Lets go of the `limit` least recently used entries and of their places in the index, which
    /// holds no other keys; freed whole, a large index alone takes milliseconds.
    mutating func releaseSome(_ limit: Int) -> Bool {
        let removed = entries.removeLeastRecentlyUsed(atMost: limit)
        index.remove(removed.lazy.map(\.key))
        guard entries.count > 0 else {
            index = URLIndex()
            return false
        }
        return true
    }
}
