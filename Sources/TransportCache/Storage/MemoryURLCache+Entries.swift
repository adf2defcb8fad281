extension MemoryURLCache.State {
    /// Calls `body` with every stored response (each `Vary` variant) and the key it is stored
    /// under, from the most to the least recently used key.
    ///
    /// Walks over the whole store go through here, so that they do not depend on what the store
    /// keeps per key.
    func forEachStoredResponse(_ body: (CacheKey, StoredResponse) -> Void) {
        entries.forEachEntry { key, variants in
            for stored in variants.all { body(key, stored) }
        }
    }
}
