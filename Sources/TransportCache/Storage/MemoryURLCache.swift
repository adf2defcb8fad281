import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif


/// The memory-only `URLCache` behind ``CachedTransport``.
///
/// It replaces the platform cache's storage wholesale, because on Linux that storage keys by host
/// and path only, evicts first-in-first-out, crashes when one URL is stored twice before an
/// eviction, and scans a disk folder on every miss. Here:
/// - the key is the full ``CacheKey`` (method, URL with query, identity headers) plus the
///   response's `Vary` headers;
/// - eviction is least-recently-used within a byte budget (bodies plus a per-entry overhead);
/// - storing a key again replaces its entry;
/// - nothing is read from or written to disk, ever.
///
/// Reads and writes are guarded by one lock, so the transport's hit path reads it without
/// hopping onto the actor. The `URLCache` overrides keep the class usable wherever a `URLCache` is
/// expected and apply the same key rules.
final class MemoryURLCache: URLCache, @unchecked Sendable {
    // `@unchecked` because `URLCache` is an Objective-C-style class whose Sendable conformance the
    // compiler cannot re-check for a subclass; all mutable state of this class is in `state`,
    // behind a lock, and every other stored property is an immutable `let` of a Sendable type.

    struct State {
        var entries: LeastRecentlyUsed<CacheKey, StoredResponse>
        var statistics = CacheStatistics()

        mutating func syncGauges() {
            statistics.bytesHeld = entries.totalCost
            statistics.entries = entries.count
        }
    }

    let state: Locked<State>
    let keyHeaders: KeyHeaders
    /// The share of the capacity one entry may take, 0...1.
    let maximumEntryShare: Double
    let now: @Sendable () -> ContinuousClock.Instant

    init(
        memoryCapacity: Int,
        maximumEntryShare: Double,
        keyHeaders: KeyHeaders,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        state = Locked(State(entries: LeastRecentlyUsed(capacity: memoryCapacity)))
        self.keyHeaders = keyHeaders
        self.maximumEntryShare = min(1, max(0, maximumEntryShare))
        self.now = now
        #if canImport(FoundationNetworking)
        // corelibs creates the folder it is given (or a default one under the user's cache
        // directory when given nil). The temporary directory already exists, so nothing new is
        // made; and no method that would touch it is left un-overridden.
        super.init(memoryCapacity: memoryCapacity, diskCapacity: 0, diskPath: FileManager.default.temporaryDirectory.path)
        #else
        super.init(memoryCapacity: memoryCapacity, diskCapacity: 0, directory: nil)
        #endif
    }

    // MARK: - The transport's interface

    /// The stored answer for `key`, if one may be reused for a request with `headers`.
    ///
    /// - Parameters:
    ///   - instant: the current time, to skip entries past their maximum age; nil returns them too
    ///     (`returnCacheDataDontLoad`, or no maximum age configured, so the clock is not read).
    ///   - counting: count the lookup as a request, and as a hit when it hits.
    /// - Complexity: O(1): one hash lookup under the lock.
    func answer(
        for key: CacheKey,
        headers: [String: String]?,
        at instant: ContinuousClock.Instant?,
        counting: Bool
    ) -> (Data, URLResponse)? {
        state.withLock { state in
            if counting { state.statistics.requests += 1 }
            let found = state.entries.value(forKey: key) { stored in
                if !stored.vary.isEmpty, !stored.matchesVary(of: headers) { return false }
                if let instant, let expiresAt = stored.expiresAt, instant >= expiresAt { return false }
                return true
            }
            guard let found else { return nil }
            if counting { state.statistics.memoryHits += 1 }
            return (found.data, found.response)
        }
    }

    /// The stored entry for `key` whatever its age or `Vary`, without touching its recency.
    func storedResponse(for key: CacheKey) -> StoredResponse? {
        state.withLock { $0.entries.peekValue(forKey: key) }
    }

    enum StoreOutcome: Equatable {
        /// Stored; `changedBytes` is false when the same body was already held for the key.
        case stored(changedBytes: Bool)
        /// Larger than the largest entry allowed: not stored, counted.
        case tooLarge
    }

    /// Stores `data` and `response` for `key`.
    ///
    /// - Parameters:
    ///   - requestHeaders: the headers of the request that fetched it, for the `Vary` check.
    ///   - maximumAge: after this long, `returnCacheDataElseLoad` no longer returns the entry.
    @discardableResult
    func store(
        _ data: Data,
        response: URLResponse,
        for key: CacheKey,
        requestHeaders: [String: String]?,
        maximumAge: Duration?
    ) -> StoreOutcome {
        let cost = StoredResponse.cost(of: data, response: response, key: key)
        let storedAt = now()
        let entry = StoredResponse(
            data: data,
            response: response,
            vary: varyHeaders(of: response, requestHeaders: requestHeaders),
            storedAt: storedAt,
            expiresAt: maximumAge.map { storedAt.advanced(by: $0) }
        )
        return state.withLock { state in
            let limit = Int(Double(state.entries.capacity) * maximumEntryShare)
            guard cost <= limit else {
                state.statistics.rejectedTooLarge += 1
                return .tooLarge
            }
            let previous = state.entries.peekValue(forKey: key)
            let sameBytes = previous?.data == data
            var total = cost
            if sameBytes, let previous {
                // The same bytes decode to the same values: the new entry keeps them.
                let carried = previous.decoded.keptValues
                let carriedCost = carried.cost
                if total + carriedCost <= state.entries.capacity {
                    entry.decoded = carried
                    total += carriedCost
                }
            }
            let (_, evicted) = state.entries.setValue(entry, forKey: key, cost: total)
            state.statistics.stores += 1
            state.statistics.evictions += evicted
            state.syncGauges()
            return .stored(changedBytes: !sameBytes)
        }
    }

    /// Removes the entry for `key`.
    /// - Returns: whether an entry was removed.
    @discardableResult
    func remove(_ key: CacheKey) -> Bool {
        state.withLock { state in
            let removed = state.entries.removeValue(forKey: key) != nil
            if removed { state.statistics.invalidations += 1 }
            state.syncGauges()
            return removed
        }
    }

    /// Removes every entry whose key satisfies `predicate`.
    /// - Returns: the removed keys.
    /// - Complexity: O(n) in the number of entries.
    func removeAll(where predicate: @Sendable (CacheKey) -> Bool) -> [CacheKey] {
        state.withLock { state in
            let removed = state.entries.removeAll { key, _ in predicate(key) }
            state.statistics.invalidations += removed.count
            state.syncGauges()
            return removed
        }
    }

    /// Updates the counters the transport keeps beside the store's own.
    func record(_ update: (inout CacheStatistics) -> Void) {
        state.withLock { update(&$0.statistics) }
    }

    var statistics: CacheStatistics {
        state.withLock { $0.statistics }
    }

    /// The `Vary` headers of `response` that are not already part of the key, with the values the
    /// fetching request carried. `Vary: *` is the caller's concern (it never reaches here).
    private func varyHeaders(of response: URLResponse, requestHeaders: [String: String]?) -> [StoredResponse.VaryHeader] {
        guard let vary = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Vary") else { return [] }
        return Self.varyNames(vary)
            .filter { !keyHeaders.names.contains($0) }
            .map { StoredResponse.VaryHeader(name: $0, value: StoredResponse.value(named: $0, in: requestHeaders)) }
    }

    /// The lowercased field names of a `Vary` value.
    static func varyNames(_ value: String) -> [String] {
        value.split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }

    // MARK: - URLCache

    private func key(for request: URLRequest) -> CacheKey? {
        guard let url = request.url else { return nil }
        return CacheKey(method: request.httpMethod ?? "GET", url: url, headers: request.allHTTPHeaderFields, keyHeaders: keyHeaders)
    }

    override func cachedResponse(for request: URLRequest) -> CachedURLResponse? {
        guard let key = key(for: request),
              let (data, response) = answer(for: key, headers: request.allHTTPHeaderFields, at: nil, counting: false)
        else { return nil }
        return CachedURLResponse(response: response, data: data, userInfo: nil, storagePolicy: .allowedInMemoryOnly)
    }

    override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) {
        guard cachedResponse.storagePolicy != .notAllowed, let key = key(for: request) else { return }
        store(cachedResponse.data, response: cachedResponse.response, for: key, requestHeaders: request.allHTTPHeaderFields, maximumAge: nil)
    }

    override func removeCachedResponse(for request: URLRequest) {
        guard let key = key(for: request) else { return }
        remove(key)
    }

    override func removeAllCachedResponses() {
        state.withLock { state in
            state.statistics.invalidations += state.entries.count
            state.entries.removeAll()
            state.syncGauges()
        }
    }

    override func removeCachedResponses(since date: Date) {
        let elapsed = Duration.seconds(max(0, Date().timeIntervalSince(date)))
        let threshold = now().advanced(by: .zero - elapsed)
        state.withLock { state in
            let removed = state.entries.removeAll { _, stored in stored.storedAt > threshold }
            state.statistics.invalidations += removed.count
            state.syncGauges()
        }
    }

    override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for dataTask: URLSessionDataTask) {
        guard let request = dataTask.currentRequest else { return }
        storeCachedResponse(cachedResponse, for: request)
    }

    override func getCachedResponse(
        for dataTask: URLSessionDataTask,
        completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void
    ) {
        completionHandler(dataTask.currentRequest.flatMap { cachedResponse(for: $0) })
    }

    override func removeCachedResponse(for dataTask: URLSessionDataTask) {
        guard let request = dataTask.currentRequest else { return }
        removeCachedResponse(for: request)
    }

    override var memoryCapacity: Int {
        get { state.withLock { $0.entries.capacity } }
        set {
            state.withLock { state in
                state.statistics.evictions += state.entries.setCapacity(newValue)
                state.syncGauges()
            }
        }
    }

    override var diskCapacity: Int {
        get { 0 }
        set {}
    }

    override var currentMemoryUsage: Int { state.withLock { $0.entries.totalCost } }

    override var currentDiskUsage: Int { 0 }
}
