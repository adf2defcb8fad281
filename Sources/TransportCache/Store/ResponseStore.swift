/// The memory behind ``CachedTransport``: stored answers by key and variant, least recently used
/// evicted first within a byte budget, behind one lock. It knows no HTTP: the ``RequestPlanner``
/// judges what it finds, and the ``Committer`` alone writes into it: answers, and the charge of
/// a decoded value kept on its entry.
///
/// Beside the entries it keeps the index of their keys by URL (``URLIndex``) and the keys each tag
/// names (``TagIndex``), each under a lock of its own: the store's writers (the ``Committer``)
/// hold the transport's in-flight lock, so the key set changes one writer at a time, and the
/// indexes follow it without holding the lock every hit takes. Work that grows with what is
/// stored (finding an endpoint's keys, freeing dropped answers) happens outside that lock, and
/// work that must take it for many entries takes it in short holds
/// (``ResponseStore/inShortHolds(_:)``).
///
/// It replaces `URLCache` wholesale, because on Linux that cache keys by host and path only,
/// evicts first-in-first-out, crashes when one URL is stored twice before an eviction, and scans
/// a disk folder on every miss. Nothing here is ever read from or written to disk.
final class ResponseStore: Sendable {
    struct State {
        var entries: LeastRecentlyUsed<CacheKey, StoredVariants>
        var statistics = CacheStatistics()
        /// Why keys recently left.
        var departures = Departures()
        /// Callers that began waiting for another caller's decode, for tests to wait on.
        var decodeWaits = WatchedCount()
        /// Whether anyone listens to the transport's events: kept here, so that a hit reads it
        /// under the lock it takes anyway.
        var isObserved = false
        /// The partitions being signed out, each with how many sign-outs of it are under way:
        /// their entries leave a few at a time (``Committer/signOut(_:)``), and until the last has
        /// left, none of them is found. An account that signs in again meanwhile keys its
        /// requests as before, and must not be answered what it held before it signed out.
        var departing: [String: Int] = [:]

        /// Whether `key` belongs to a partition being signed out. One test of an empty table on
        /// a hit.
        @inline(__always)
        func isDeparting(_ key: CacheKey) -> Bool {
            guard !departing.isEmpty, let partition = key.partition else { return false }
            return departing[partition] != nil
        }

        mutating func syncGauges() {
            statistics.bytesHeld = entries.totalCost
            statistics.entries = entries.count
        }

        /// Whether `entry` is still one of the variants stored for `key`.
        func holds(_ entry: StoredResponse, for key: CacheKey) -> Bool {
            variants(holding: entry, for: key) != nil
        }

        /// The variants stored for `key`, when `entry` is still one of them.
        func variants(holding entry: StoredResponse, for key: CacheKey) -> StoredVariants? {
            guard let variants = entries.peekValue(forKey: key), variants.contains(entry) else { return nil }
            return variants
        }
    }

    let state: Locked<State>
    /// The keys held, by host and path. Changed only with the transport's in-flight lock held,
    /// where the entries change, so that it holds the same keys whenever that lock is free, but
    /// for those an invalidation under way took out and has not removed yet
    /// (``take(_:sparing:)``).
    let index = Locked(URLIndex(), rank: .store)
    /// The keys each tag names. Pruned, and read by ``CachedTransport/invalidate(tag:)``, with the
    /// in-flight lock held; a request tags with this lock alone.
    let tags = Locked(TagIndex(), rank: .store)
    /// The most one key's variants together may be charged: a share of the capacity.
    let maximumEntryCost: Int
    /// How many variants one key keeps, at least one.
    let maximumVariants: Int

    /// - Parameter prefetchShare: ``CachedTransport/Configuration/Storage/prefetchShare``; the
    ///   answers not read yet may always take at least the largest entry's room.
    init(memoryCapacity: Int, maximumEntryShare: Double, maximumVariants: Int, prefetchShare: Double = 1) {
        let capacity = max(0, memoryCapacity)
        maximumEntryCost = Int(Double(capacity) * min(1, max(0, maximumEntryShare)))
        let probationLimit = max(maximumEntryCost, Int(Double(capacity) * min(1, max(0, prefetchShare))))
        state = Locked(
            State(entries: LeastRecentlyUsed(capacity: capacity, probationLimit: probationLimit)), rank: .store)
        self.maximumVariants = max(1, maximumVariants)
    }

    /// What a lookup found for a request.
    enum Found {
        /// The variant the request selects.
        case entry(StoredResponse)
        /// Variants are stored for the key, none for the request's field values.
        case noMatchingVariant
        /// Nothing is stored for the key; it left recently for the reason given, if any.
        case absent(Departures.Reason?)
    }

    /// Hands `judge` what `key` holds for a request with `requestFields`, with the counters to
    /// update; a variant it accepts becomes the most recently used, unless `touches` is false (a
    /// prefetch's look, which reads nothing).
    /// - Parameter isObserved: set to whether anyone listens to the transport's events, read
    ///   under the same lock.
    /// - Returns: the verdict on the accepted variant (which carries the variant when the judge
    ///   needs it).
    /// - Complexity: O(1): one hash lookup under the lock, plus a scan of the key's few variants
    ///   when its responses select on request fields. Inlined into the hit path, so that the
    ///   judge runs without a call or a closure context of its own.
    @inline(__always)
    func lookup<Verdict>(
        _ key: CacheKey,
        selectedBy requestFields: [String: String]?,
        isObserved: inout Bool,
        touches: Bool = true,
        judge: (Found, inout CacheStatistics, _ isObserved: Bool) -> Verdict?
    ) -> Verdict? {
        state.withLock { state in
            isObserved = state.isObserved
            if state.isDeparting(key) {
                _ = judge(.absent(nil), &state.statistics, state.isObserved)
                return nil
            }
            guard let (position, variants) = state.entries.find(key) else {
                _ = judge(.absent(state.departures.reason(for: key)), &state.statistics, state.isObserved)
                return nil
            }
            guard let (place, selected) = variants.selection(by: requestFields) else {
                _ = judge(.noMatchingVariant, &state.statistics, state.isObserved)
                return nil
            }
            // The judge reads the entry and counts; it changes nothing the place was found in.
            guard let verdict = judge(.entry(selected), &state.statistics, state.isObserved) else { return nil }
            if touches {
                variants.markUsed(at: place)
                state.entries.markUsed(at: position)
            }
            return verdict
        }
    }

    /// The variant of `key` a request with `requestFields` selects, whatever its age, without
    /// touching recency.
    func peek(_ key: CacheKey, selectedBy requestFields: [String: String]?) -> StoredResponse? {
        state.withLock { state in
            state.isDeparting(key) ? nil : state.entries.peekValue(forKey: key)?.selected(by: requestFields)
        }
    }

    enum WriteResult: Equatable {
        /// Stored; `changedBytes` is false when the same body was already held for the variant.
        /// `evicted`: the keys that lost something to make room, to report as evicted: the other
        /// keys evicted, then this key when variants of it were dropped.
        case stored(changedBytes: Bool, evicted: [CacheKey])
        /// The entry to replace is no longer held (invalidated, evicted or replaced meanwhile).
        case replacedEntryGone
    }

    /// Whether `bytes` fit within what one key's variants and their decoded values may be charged
    /// together (``maximumEntryCost``): the one judgement of an entry's size, which storing an
    /// answer, keeping variants beside it and charging a decoded value all ask, and the charge
    /// they judge is ``StoredResponse/totalCost``, summed over a key's variants by
    /// ``StoredVariants/totalCost``.
    func fits(_ bytes: Int) -> Bool {
        bytes <= maximumEntryCost
    }

    /// Stores `entry` for `key`, replacing `replacing` when given (a revalidated entry), else the
    /// variant with the same selector.
    ///
    /// The key keeps its other variants that select on the same fields, most recently used first,
    /// while they fit within ``maximumVariants`` and ``maximumEntryCost``; least recently used ones
    /// are dropped first, as evictions. Variants that select on other fields are replaced: the
    /// origin changed how it selects representations. An entry with the same bytes as the one it
    /// replaces keeps its decoded values. Making room evicts least recently used keys; what leaves
    /// goes through ``State/depart(_:because:into:)``.
    /// - Parameter unread: no screen's caller waited for it (a prefetch's answer, or a background
    ///   revalidation's): a key that held nothing, or only answers not read yet, holds it on
    ///   probation (``LeastRecentlyUsed``) until a screen reads it.
    /// Call with the in-flight lock held.
    func write(
        _ entry: StoredResponse, for key: CacheKey, replacing: StoredResponse? = nil, unread: Bool = false
    ) -> WriteResult {
        var removal = Removal()
        var isNew = false
        let result = state.withLock { state -> WriteResult in
            // Whether it fits was decided before (``Committer/storability(of:response:key:request:requestTime:settings:at:)``).
            assert(fits(entry.cost))
            let held = state.entries.peekValue(forKey: key)
            isNew = held == nil
            let existing = held?.all ?? []
            if let replacing, !existing.contains(where: { $0 === replacing }) { return .replacedEntryGone }
            let previous = replacing ?? existing.first { $0.selector == entry.selector }
            let names = entry.selector.names
            let sameBytes = previous?.data == entry.data
            if sameBytes, let previous {
                let carried = previous.decoded.keptValues
                if fits(entry.cost + carried.cost) { entry.decoded = carried }
            }
            var variants = [entry]
            var cost = entry.totalCost
            var dropped = 0
            var full = false
            for variant in existing
            where variant !== previous && variant.selector != entry.selector && variant.selector.names == names {
                // Most recently used first: once one does not fit, it and every older one go.
                full = full || variants.count == maximumVariants || !fits(cost + variant.totalCost)
                if full {
                    dropped += 1
                } else {
                    variants.append(variant)
                    cost += variant.totalCost
                }
            }
            let kept = StoredVariants(variants)
            let onProbation = unread && (isNew || state.entries.isOnProbation(key))
            let (replaced, evicted) = state.entries.setValue(
                kept, forKey: key, cost: kept.totalCost, onProbation: onProbation)
            state.departures.forget(key)
            for (evictedKey, _) in evicted { state.depart(.key(evictedKey), because: .evicted, into: &removal) }
            state.depart(.variants(dropped, of: key), because: .evicted, into: &removal)
            state.syncGauges()
            if let replaced { removal.released.append(replaced) }
            removal.released.append(evicted, count: evicted.count)
            return .stored(changedBytes: !sameBytes, evicted: removal.departed)
        }
        if case .stored = result {
            // One hold for the key stored and the keys that left.
            index.withLock { index in
                if isNew { index.insert(key) }
                index.remove(removal.keys)
            }
        }
        removal.released.release()
        return result
    }

    /// Takes the variant `entry` out of `key`, keeping the others, as an invalidation. Call with
    /// the in-flight lock held.
    /// - Returns: what left, to announce and release once no lock is held; nothing when `entry`
    ///   was not held.
    func remove(_ entry: StoredResponse, for key: CacheKey) -> Removal {
        var removal = Removal()
        state.withLock { state in
            guard let variants = state.variants(holding: entry, for: key) else { return }
            if variants.all.count == 1 {
                state.entries.removeValue(forKey: key).map { removal.released.append($0) }
                state.depart(.key(key), because: .invalidated, into: &removal)
            } else {
                let others = StoredVariants(variants.all.filter { $0 !== entry })
                let (replaced, evicted) = state.entries.setValue(others, forKey: key, cost: others.totalCost)
                // Charged less than before, nothing else makes room.
                assert(evicted.isEmpty)
                replaced.map { removal.released.append($0) }
                state.depart(.variants(1, of: key), because: .invalidated, into: &removal)
            }
        }
        unindex(removal)
        return removal
    }

    /// Names `key` by each of `tags`; see ``TagIndex``.
    /// - Returns: whether the index holds more keys than it keeps without pruning.
    func tag(_ key: CacheKey, with tags: Set<String>) -> Bool {
        let held = state.withLock { $0.entries.count }
        // Room for every held key to carry a few tags before keys that left are forgotten.
        return self.tags.withLock { $0.tag(key, with: tags, limit: 4 * held + 1_024) }
    }

    /// Forgets the tagged keys that are neither held nor in `pending` (keys about to be stored:
    /// fetches in flight, a request being tagged). Call with the in-flight lock held: then no
    /// key is stored meanwhile.
    func pruneTags(keeping pending: Set<CacheKey>) {
        let named = self.tags.withLock { Array($0.keys) }
        // Asked in short holds, so that a hit never waits for the whole index, and without the
        // tags' lock, which a tagged hit takes.
        var dropped = Set<CacheKey>()
        var start = 0
        inShortHolds { state in
            for key in named[start..<min(start + Self.stepSize, named.count)]
            where state.entries.peekValue(forKey: key) == nil && !pending.contains(key) {
                dropped.insert(key)
            }
            start += Self.stepSize
            return start < named.count
        }
        guard !dropped.isEmpty else { return }
        // A key tagged meanwhile by a hit is held, so it was not dropped.
        self.tags.withLock { index in index.prune { !dropped.contains($0) } }
    }

    /// Forgets every tagged key that `matches` selects (a signed-out account's), held or not.
    /// - Complexity: O(t) in the tagged keys, under the tags' lock alone.
    func untag(where matches: (CacheKey) -> Bool) {
        tags.withLock { index in index.prune { !matches($0) } }
    }

    /// The keys `tag` names, forgetting the tag. Call with the in-flight lock held.
    func keys(taggedWith tag: String) -> Set<CacheKey> {
        tags.withLock { $0.take(tag) }
    }

    /// Forgets why `key` left: a fetch of it completed without storing an answer, so a later
    /// miss is no longer the departure's doing.
    func forgetDeparture(of key: CacheKey) {
        state.withLock { $0.departures.forget(key) }
    }

    /// Updates the counters the transport keeps beside the store's own.
    func record(_ update: (inout CacheStatistics) -> Void) {
        state.withLock { update(&$0.statistics) }
    }

    var statistics: CacheStatistics {
        state.withLock { $0.statistics }
    }
}
