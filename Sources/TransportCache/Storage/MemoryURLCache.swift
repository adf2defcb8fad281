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
///
/// `@unchecked Sendable` is safe here: all mutable state is in ``state``, behind a lock; every other stored
/// property is an immutable `let` of a Sendable type (see the note inside the class).
final class MemoryURLCache: URLCache, @unchecked Sendable {
    // `@unchecked` because `URLCache` is an Objective-C-style class whose Sendable conformance the
    // compiler cannot re-check for a subclass; all mutable state of this class is in `state`,
    // behind a lock, and every other stored property is an immutable `let` of a Sendable type.

    struct State {
        var entries: LeastRecentlyUsed<CacheKey, StoredVariants>
        var statistics = CacheStatistics()

        mutating func syncGauges() {
            statistics.bytesHeld = entries.totalCost
            statistics.entries = entries.count
        }

        /// Whether `entry` is still one of the variants stored for `key`.
        func holds(_ entry: StoredResponse, for key: CacheKey) -> Bool {
            entries.peekValue(forKey: key)?.contains(entry) ?? false
        }
    }

    let state: Locked<State>
    let keyHeaders: KeyHeaders
    /// The share of the capacity one entry may take, 0...1.
    let maximumEntryShare: Double
    /// How many `Vary` variants one key keeps, at least one.
    let maximumVariants: Int
    let now: @Sendable () -> ContinuousClock.Instant

    init(
        memoryCapacity: Int,
        maximumEntryShare: Double,
        maximumVariants: Int = 4,
        keyHeaders: KeyHeaders,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        state = Locked(State(entries: LeastRecentlyUsed(capacity: memoryCapacity)))
        self.keyHeaders = keyHeaders
        self.maximumEntryShare = min(1, max(0, maximumEntryShare))
        self.maximumVariants = max(1, maximumVariants)
        self.now = now
        #if canImport(FoundationNetworking)
        // corelibs creates the folder it is given (or a default one under the user's cache
        // directory when given nil). The temporary directory already exists, so nothing new is
        // made; and no method that would touch it is left un-overridden.
        super.init(
            memoryCapacity: memoryCapacity, diskCapacity: 0, diskPath: FileManager.default.temporaryDirectory.path)
        #else
        super.init(memoryCapacity: memoryCapacity, diskCapacity: 0, directory: nil)
        #endif
    }

    // MARK: - The transport's interface

    /// A stored answer: fresh, or within its stale-while-revalidate window (`revalidate`), in which
    /// case its response is marked stale and the caller should start a background revalidation.
    struct Hit {
        let data: Data
        let response: URLResponse
        let revalidate: Bool
    }

    /// The stored answer for `key`, if one may be reused for a request with `headers`.
    ///
    /// - Parameters:
    ///   - instant: the current time, to skip entries past their maximum age (and stale window);
    ///     nil returns them too (`returnCacheDataDontLoad`, or no maximum age configured, so the
    ///     clock is not read).
    ///   - counting: count the lookup as a request, and as a hit when it hits.
    /// - Complexity: O(1): one hash lookup under the lock (plus a scan of the key's few variants
    ///   when the origin sent `Vary`).
    func answer(
        for key: CacheKey,
        headers: [String: String]?,
        at instant: ContinuousClock.Instant?,
        counting: Bool
    ) -> Hit? {
        state.withLock { state in
            if counting { state.statistics.requests += 1 }
            var found: StoredResponse?
            var revalidate = false
            _ = state.entries.value(forKey: key) { variants in
                guard let match = variants.match(headers) else { return false }
                if let instant, let expiresAt = match.expiresAt, instant >= expiresAt {
                    guard let staleUntil = match.staleUntil, instant < staleUntil else { return false }
                    revalidate = true
                }
                found = match
                return true
            }
            guard let found else { return nil }
            if counting { state.statistics.memoryHits += 1 }
            guard revalidate else { return Hit(data: found.data, response: found.response, revalidate: false) }
            state.statistics.staleWindowAnswers += 1
            return Hit(data: found.data, response: found.staleWindowAnswer(), revalidate: true)
        }
    }

    /// What HTTP caching lets a request reuse: an entry that is fresh, or stale within what the
    /// request (`max-stale`) or its stale-while-revalidate window allows, and within the
    /// request's `max-age` and `min-fresh`. Counts the lookup as a request, and as a hit when it
    /// hits.
    /// - Returns: the entry, its current age, and whether it is a stale-window answer (the caller
    ///   should revalidate it in the background).
    func httpAnswer(
        for key: CacheKey,
        headers: [String: String]?,
        at instant: ContinuousClock.Instant,
        request: CacheControl?
    ) -> (entry: StoredResponse, age: Duration?, revalidate: Bool)? {
        state.withLock { state in
            state.statistics.requests += 1
            var found: StoredResponse?
            var revalidate = false
            _ = state.entries.value(forKey: key) { variants in
                guard let match = variants.match(headers) else { return false }
                let age = match.currentAge(at: instant) ?? .zero
                if let maxAge = request?.maxAge {
                    guard let seconds = maxAge.seconds, age <= .seconds(seconds) else { return false }
                }
                if let minFresh = request?.minFresh, let expiresAt = match.expiresAt {
                    guard let seconds = minFresh.seconds, expiresAt - instant >= .seconds(seconds) else { return false }
                }
                if let expiresAt = match.expiresAt, instant >= expiresAt {
                    guard !match.mustRevalidate else { return false }
                    let staleness = instant - expiresAt
                    if request?.acceptsAnyStaleness == true {
                        // Any staleness is acceptable to this request.
                    } else if let maxStale = request?.maxStale?.seconds, staleness <= .seconds(maxStale) {
                        // Within the staleness this request accepts.
                    } else if let staleUntil = match.staleUntil, instant < staleUntil {
                        revalidate = true
                    } else {
                        return false
                    }
                }
                found = match
                return true
            }
            guard let found else { return nil }
            state.statistics.memoryHits += 1
            if revalidate { state.statistics.staleWindowAnswers += 1 }
            return (found, found.currentAge(at: instant), revalidate)
        }
    }

    /// The stored variant of `key` a request with `headers` may reuse, whatever its age, without
    /// touching recency.
    func storedResponse(for key: CacheKey, headers: [String: String]?) -> StoredResponse? {
        state.withLock { $0.entries.peekValue(forKey: key)?.peek(headers) }
    }

    enum StoreOutcome: Equatable {
        /// Stored; `changedBytes` is false when the same body was already held for the key and
        /// variant.
        case stored(changedBytes: Bool)
        /// Larger than the largest entry allowed: not stored, counted.
        case tooLarge
    }

    /// Stores `data` and `response` for `key`, as the variant selected by the request's values of
    /// the headers the response names in `Vary`.
    ///
    /// The variant with the same values is replaced; the others are kept, most recently used
    /// first, up to ``maximumVariants``, unless the response names other `Vary` headers than they
    /// did (then they are dropped: the origin changed how it selects representations).
    ///
    /// - Parameters:
    ///   - requestHeaders: the headers of the request that fetched it, for the `Vary` check.
    ///   - lifetime: how long the entry stays fresh, and how it may be used once stale.
    @discardableResult
    func store(
        _ data: Data,
        response: URLResponse,
        for key: CacheKey,
        requestHeaders: [String: String]?,
        lifetime: EntryLifetime
    ) -> StoreOutcome {
        let cost = StoredResponse.cost(of: data, response: response, key: key)
        let entry = StoredResponse(
            data: data,
            response: response,
            vary: varyHeaders(of: response, requestHeaders: requestHeaders),
            cost: cost,
            storedAt: now(),
            lifetime: lifetime
        )
        return state.withLock { state in
            let limit = Int(Double(state.entries.capacity) * maximumEntryShare)
            guard cost <= limit else {
                state.statistics.rejectedTooLarge += 1
                return .tooLarge
            }
            var previous: StoredResponse?
            var kept: [StoredResponse] = []
            let names = entry.vary.map(\.name)
            for variant in state.entries.peekValue(forKey: key)?.all ?? [] {
                if variant.vary == entry.vary {
                    previous = variant
                } else if variant.vary.map(\.name) == names {
                    kept.append(variant)
                }
            }
            let sameBytes = previous?.data == data
            if sameBytes, let previous {
                // The same bytes decode to the same values: the new entry keeps them.
                let carried = previous.decoded.keptValues
                if cost + carried.cost <= state.entries.capacity { entry.decoded = carried }
            }
            let variants = StoredVariants([entry] + kept.prefix(maximumVariants - 1))
            let (_, evicted) = state.entries.setValue(variants, forKey: key, cost: variants.totalCost)
            state.statistics.stores += 1
            state.statistics.evictions += evicted
            state.syncGauges()
            return .stored(changedBytes: !sameBytes)
        }
    }

    /// Takes a `304 Not Modified` for `entry`: the stored body stays, its headers are updated from
    /// `notModified` (RFC 9111 section 4.3.4) and its age restarts.
    ///
    /// - Returns: the updated entry, or nil when `entry` is no longer stored for `key` (it was
    ///   invalidated, evicted or replaced while the request was in flight).
    /// - Parameter lifetime: the lifetime of the updated entry, from its updated response.
    func revalidate(
        _ entry: StoredResponse,
        for key: CacheKey,
        with notModified: HTTPURLResponse,
        lifetime: (URLResponse) -> EntryLifetime
    ) -> StoredResponse? {
        let response = Self.updated(entry.response, from: notModified)
        let updated = StoredResponse(
            data: entry.data,
            response: response,
            vary: entry.vary,
            cost: StoredResponse.cost(of: entry.data, response: response, key: key),
            storedAt: now(),
            lifetime: lifetime(response)
        )
        return state.withLock { state in
            guard let variants = state.entries.peekValue(forKey: key) else { return nil }
            let before = variants.totalCost
            updated.decoded = entry.decoded.keptValues
            guard variants.replace(entry, with: updated) else { return nil }
            _ = variants.match(nil)
            if let evicted = state.entries.addCost(variants.totalCost - before, forKey: key) {
                state.statistics.evictions += evicted
            } else {
                state.entries.removeValue(forKey: key)
                state.statistics.evictions += 1
            }
            state.statistics.notModified += 1
            state.syncGauges()
            return updated
        }
    }

    /// Header fields a `304` must not change in the stored response: they describe the stored
    /// message itself, or only the connection (RFC 9111 sections 3.1 and 3.2).
    static let headersKeptOn304: Set<String> = [
        "content-length", "content-encoding", "content-range", "transfer-encoding", "connection",
        "keep-alive", "te", "trailer", "upgrade", "proxy-connection", "proxy-authenticate",
        "proxy-authorization",
    ]

    /// `stored` with every header field of `notModified` added or replaced, except
    /// ``headersKeptOn304``, and the stored status.
    static func updated(_ stored: URLResponse, from notModified: HTTPURLResponse) -> URLResponse {
        guard let http = stored as? HTTPURLResponse, let url = http.url else { return stored }
        var fields = StoredResponse.headerFields(of: http)
        for (name, value) in StoredResponse.headerFields(of: notModified)
        where !headersKeptOn304.contains(name.lowercased()) {
            for existing in fields.keys where existing.caseInsensitiveCompare(name) == .orderedSame {
                fields[existing] = nil
            }
            fields[name] = value
        }
        return HTTPURLResponse(url: url, statusCode: http.statusCode, httpVersion: "HTTP/1.1", headerFields: fields)
            ?? stored
    }

    /// Removes the entry for `key`, every variant of it.
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
    private func varyHeaders(of response: URLResponse, requestHeaders: [String: String]?) -> [StoredResponse.VaryHeader]
    {
        guard let vary = (response as? HTTPURLResponse)?.headerValue("vary") else { return [] }
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
        return CacheKey(
            method: request.httpMethod ?? "GET", url: url, headers: request.allHTTPHeaderFields, keyHeaders: keyHeaders)
    }

    override func cachedResponse(for request: URLRequest) -> CachedURLResponse? {
        guard let key = key(for: request),
            let hit = answer(for: key, headers: request.allHTTPHeaderFields, at: nil, counting: false)
        else { return nil }
        return CachedURLResponse(
            response: hit.response, data: hit.data, userInfo: nil, storagePolicy: .allowedInMemoryOnly)
    }

    override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) {
        guard cachedResponse.storagePolicy != .notAllowed, let key = key(for: request) else { return }
        store(
            cachedResponse.data, response: cachedResponse.response, for: key,
            requestHeaders: request.allHTTPHeaderFields, lifetime: EntryLifetime())
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
            let removed = state.entries.removeAll { _, variants in variants.all.contains { $0.storedAt > threshold } }
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
