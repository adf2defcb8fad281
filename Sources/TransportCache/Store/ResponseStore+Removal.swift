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

    /// Keys an invalidation in steps took out of the index (``take(_:sparing:)``), to remove
    /// with ``removeTaken(_:within:afterEach:)``.
    struct TakenKeys: Sendable {
        let index: URLIndex.Taken
        let spared: Set<CacheKey>
        /// Keys named one by one (a request's, a tag's, a sign-out's), still in the index: each
        /// leaves it with its entry, in the step that removes it, rather than all at once under
        /// the in-flight lock, and they are listed with no lock held.
        let named: Set<CacheKey>
        /// ``URLIndex/insertions`` and ``URLIndex/generation`` when they were taken.
        let insertions: UInt64
        let generation: Int
    }

    /// The keys `selection` names, but `spared`, to remove in steps, leaving them held: the first
    /// step of an invalidation in steps. A host or a path prefix leaves the index in one step,
    /// whatever it holds; keys named one by one stay in it until their step removes them
    /// (``TakenKeys/named``). Call with the in-flight lock held.
    func take(_ selection: KeySelection, sparing spared: Set<CacheKey>) -> TakenKeys {
        // Spared keys are few (those with updates pending): the held ones stay in the index.
        let keptHeld = spared.filter { key in
            selection.selects(key) && state.withLock { $0.entries.peekValue(forKey: key) != nil }
        }
        return index.withLock { index in
            let taken: URLIndex.Taken
            switch selection {
            case .keys(let keys):
                let doomed = spared.isEmpty ? keys : keys.subtracting(spared)
                return TakenKeys(
                    index: URLIndex.Taken(), spared: spared, named: doomed, insertions: index.insertions,
                    generation: index.generation)
            case .tag:
                // Read into keys before (``keys(taggedWith:)``).
                taken = URLIndex.Taken()
            case .urls(let urls):
                taken = URLIndex.Taken(listed: urls.flatMap { index.removeURL($0) })
            case .endpoint(let endpoint):
                taken = index.take(endpoint)
            }
            for key in keptHeld { index.insert(key) }
            return TakenKeys(
                index: taken, spared: spared, named: [], insertions: index.insertions, generation: index.generation)
        }
    }

    /// Removes the keys `taken` holds, a few at a time: each step under `outer` (the in-flight
    /// lock) and the lock a hit takes, for at most ``holdLimit``, and those waiting for either
    /// are let in between steps, so that a join, a fetch's completion and a hit wait for one step
    /// at most, never for the whole removal. Their keys are listed first, under no lock. A key
    /// written again meanwhile is removed with what it holds then, and leaves the index again.
    /// `afterEach` runs at the end of each step, still under `outer`, with the keys it removed.
    /// Call with no lock held.
    /// - Returns: what left, and how many of the keys the index still counts.
    func removeTaken<Outer>(
        _ taken: TakenKeys, within outer: Locked<Outer>, afterEach: (inout Outer, ArraySlice<CacheKey>) -> Void
    ) -> (removal: Removal, uncounted: Int) {
        var removal = Removal()
        var (keys, uncounted) = taken.index.list()
        keys.append(contentsOf: taken.named)
        if !taken.spared.isEmpty { keys.removeAll { taken.spared.contains($0) } }
        guard !keys.isEmpty else { return (removal, uncounted) }
        // Room for every key made before any lock: grown under it, a step that doubles the
        // arrays would copy all they hold (megabytes, at a hundred thousand keys) while a join or
        // a fetch's completion waits (see ``removeEverything(because:)`` for the allocator).
        var values: [StoredVariants] = []
        values.reserveCapacity(keys.count)
        removal.keys.reserveCapacity(keys.count)
        var start = 0
        while start < keys.count {
            if start > 0 {
                outer.handOverToWaiters(forAtMost: Self.handOverLimit)
                state.handOverToWaiters(forAtMost: Self.handOverLimit)
            }
            outer.withLock { outer in
                let first = removal.keys.count
                state.withLock { state in
                    let deadline = DispatchTime.now().uptimeNanoseconds + Self.holdLimit
                    repeat {
                        for key in keys[start..<min(start + Self.stepSize, keys.count)] {
                            guard let value = state.entries.removeValue(forKey: key) else { continue }
                            values.append(value)
                            state.depart(.key(key), because: .invalidated, into: &removal)
                        }
                        start += Self.stepSize
                    } while start < keys.count && DispatchTime.now().uptimeNanoseconds < deadline
                }
                // A key added to the index since the take may be one just removed.
                index.withLock { index in
                    if !taken.named.isEmpty || index.insertions != taken.insertions {
                        index.remove(removal.keys[first...])
                    }
                }
                afterEach(&outer, removal.keys[first...])
            }
        }
        removal.released.append(values, count: values.count)
        return (removal, uncounted)
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
        let index = index.withLock { $0.takeAll() }
        return (EmptiedStore(entries: entries, index: index), removal)
    }

    /// Calls `copy` with each held key and its variants, under the lock a hit takes but in short
    /// holds (``inShortHolds(_:)``), and returns what it made, most recently used first. With the
    /// in-flight lock held, no key comes or goes between two holds, and hits meanwhile only change
    /// the order, which each step reads as it is. Without it, an entry's slot never moves, so a
    /// key held throughout is read once, but one stored or removed meanwhile may or may not be:
    /// for callers that want only what was held before (a sign-out whose writers are cut off, a
    /// predicate's keys, which may miss those stored after its call).
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
            _ = index.takeAll()
            return false
        }
        return true
    }
}
