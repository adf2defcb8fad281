/// The keys each tag names (``CachedTransport/data(for:tags:)``), for
/// ``CachedTransport/invalidate(tag:)``.
///
/// A key is tagged when its request is made, before it is fetched, so an invalidation by tag also
/// stops a fetch of it in flight from storing. Keys that left the store stay named until the tag is
/// invalidated, or until the index holds more keys than its limit allows and forgets those the
/// store no longer holds and no fetch in flight is about to store.
struct TagIndex: Sendable {
    private var keysByTag: [String: Set<CacheKey>] = [:]
    private var count = 0

    /// Names `key` by each of `tags`. - Returns: whether the index should be pruned.
    mutating func tag(_ key: CacheKey, with tags: Set<String>, limit: Int) -> Bool {
        for tag in tags where keysByTag[tag, default: []].insert(key).inserted { count += 1 }
        return count > limit
    }

    /// The keys `tag` names, forgetting the tag.
    mutating func take(_ tag: String) -> Set<CacheKey> {
        let keys = keysByTag.removeValue(forKey: tag) ?? []
        count -= keys.count
        return keys
    }

    /// Every key some tag names.
    /// - Complexity: O(t) in the keys named, each counted once per tag.
    var keys: Set<CacheKey> {
        keysByTag.values.reduce(into: Set()) { $0.formUnion($1) }
    }

    /// Forgets every key for which `isHeld` is false.
    mutating func prune(keeping isHeld: (CacheKey) -> Bool) {
        count = 0
        for (tag, keys) in keysByTag {
            let kept = keys.filter(isHeld)
            keysByTag[tag] = kept.isEmpty ? nil : kept
            count += kept.count
        }
    }
}
