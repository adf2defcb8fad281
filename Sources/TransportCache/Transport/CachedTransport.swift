import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An app's transport layer: URLSession behind a memory cache that answers repeated GETs from
/// memory, shares one fetch among identical concurrent requests, and keeps the same semantics on
/// Linux and Apple platforms.
///
/// ```swift
/// let transport = CachedTransport()
/// let (data, response) = try await transport.data(from: url)   // network, then stored
/// let (again, _) = try await transport.data(from: url)         // memory
/// ```
///
/// ## What is cached
/// `GET` and `HEAD` requests to `http` and `https` URLs whose answer has a storable status
/// (``Configuration/storableStatusCodes``). Every other method goes to the network and, when it
/// succeeds (2xx or 3xx), drops the stored entries of its URL and of the same-origin URLs in its
/// `Location` and `Content-Location` headers. Other schemes pass through to URLSession untouched.
///
/// ## The key
/// Method, URL with query (scheme and host lowercased, default port and fragment dropped), and the
/// values of `Authorization`, `Cookie`, `Accept`, `Accept-Language` and
/// ``Configuration/keyHeaders``. Requests with different credentials never share an entry or a
/// fetch. A stored response's `Vary` headers must match too.
///
/// ## Policies
/// `useProtocolCachePolicy` and `returnCacheDataElseLoad` answer from memory when they can (within
/// ``Configuration/maximumAge`` when set). `reloadIgnoringLocalCacheData` (and the other reload
/// policies) always fetch and store. `returnCacheDataDontLoad` answers from memory, whatever the
/// entry's age, or throws `URLError(.resourceUnavailable)`.
///
/// ## Errors
/// Network errors arrive as the `URLError` URLSession gave, except that a connection closed or
/// reset in the middle of an answer is `URLError(.networkConnectionLost)` on every platform
/// (swift-corelibs-foundation reports it as `.unknown`; the original is the underlying error). A
/// caller whose task is cancelled gets `CancellationError`. A request without a URL throws
/// `URLError(.badURL)`.
///
/// A response that carries `Set-Cookie` reaches its callers but is never stored.
public actor CachedTransport {
    let store: MemoryURLCache
    let loader: any NetworkLoading
    let configuration: Configuration
    let keyHeaders: KeyHeaders
    let now: @Sendable () -> ContinuousClock.Instant
    let broadcaster: ChangeBroadcaster
    /// Read on every hit; kept apart so a hit does not copy the whole configuration.
    let hasMaximumAge: Bool
    /// ``Configuration/conformsToHTTPCaching``, read on every request.
    let conformsToHTTPCaching: Bool

    /// The fetches in flight and their callers. Invalidation holds this lock too, so that it
    /// and a fetch's store never interleave.
    let inFlight: Locked<InFlight>
    #if canImport(Darwin)
    /// Trims the store on the system's memory pressure events, until the transport goes away.
    private let memoryPressureObserver: MemoryPressureObserver?
    #endif

    /// Makes a transport with its own URLSession and memory store.
    public init(configuration: Configuration = .init()) {
        self.init(
            configuration: configuration,
            loader: URLSessionLoader(
                configuration: configuration.sessionConfiguration,
                cacheOverride: configuration.effectiveCacheOverride,
                sharesInnerSession: configuration.hasDefaultSessionConfiguration
            ))
    }

    init(
        configuration: Configuration,
        loader: any NetworkLoading,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        let keyHeaders = KeyHeaders(extra: configuration.keyHeaders)
        self.configuration = configuration
        hasMaximumAge = configuration.hasMaximumAge
        conformsToHTTPCaching = configuration.conformsToHTTPCaching
        self.keyHeaders = keyHeaders
        self.loader = loader
        self.now = now
        let broadcaster = ChangeBroadcaster(bufferLimit: configuration.changeBufferLimit)
        let store = MemoryURLCache(
            memoryCapacity: configuration.memoryCapacity,
            maximumEntryShare: configuration.maximumEntryShare,
            maximumVariants: configuration.maximumVariants,
            keyHeaders: keyHeaders,
            now: now
        )
        let inFlight = Locked(InFlight())
        self.broadcaster = broadcaster
        self.store = store
        self.inFlight = inFlight
        #if canImport(Darwin)
        // The handler holds the parts a trim touches, not the transport: the observer, and with
        // it the handler, go away with the transport.
        memoryPressureObserver =
            configuration.respondsToMemoryPressure
            ? MemoryPressureObserver { pressure in
                CachedTransport.trim(for: pressure, store: store, inFlight: inFlight, broadcaster: broadcaster)
            }
            : nil
        #endif
    }

    /// What the transport has done so far: requests, hits, fetches, coalesced joins, stores,
    /// evictions, invalidations and the bytes held.
    public nonisolated var statistics: CacheStatistics {
        var statistics = store.statistics
        statistics.coalescedJoins = inFlight.withLock { $0.coalescedJoins }
        statistics.subscribers = broadcaster.count
        return statistics
    }

    /// Loads `request`, from memory when its policy allows and an entry is stored, otherwise from
    /// the network, sharing the fetch with identical requests already in flight.
    ///
    /// A hit runs on the caller's executor with one locked lookup and no actor hop. When the
    /// network is used for a key that still holds an entry, the request is conditional (see
    /// ``Configuration/usesConditionalRequests``).
    ///
    /// The request's own headers are honoured:
    /// - one that carries its own `If-None-Match`, `If-Modified-Since`, `If-Match`,
    ///   `If-Unmodified-Since`, `If-Range` or `Range`, or `Cache-Control: no-store`, goes to the
    ///   origin as sent, past the store and coalescing, and gets the origin's answer (`304`, `206`,
    ///   `412` …), which is not stored;
    /// - `Cache-Control: no-cache` or `max-age=0` (or `Pragma: no-cache` without `Cache-Control`)
    ///   revalidates: the stored entry is not used without asking the origin, and the answer is
    ///   stored, as for a reload policy.
    ///
    /// - Throws: the `URLError` of a failed fetch (reaching every caller of a shared fetch);
    ///   `URLError(.resourceUnavailable)` for `returnCacheDataDontLoad` without a stored entry;
    ///   `CancellationError` when the calling task is cancelled; `URLError(.badURL)` without a URL.
    public nonisolated(nonsending) func data(for request: URLRequest) async throws -> (Data, URLResponse) {
        switch try route(request) {
        case .answer(let data, let response):
            return (data, response)
        case .fetch(let key, let headers, let isReload):
            return try await fetch(request, key: key, headers: headers, isReload: isReload)
        case .send(let url, let bypassing):
            return try await send(request, url: url, bypassing: bypassing)
        case .followHTTPCaching(let key, let headers, let directives):
            return try await httpCachingData(for: request, key: key, headers: headers, directives: directives)
        }
    }

    /// What ``data(for:)`` does with a request.
    enum Route {
        /// Answered from memory.
        case answer(Data, URLResponse)
        /// Through ``fetch(_:key:headers:isReload:)``: coalesced, stored.
        case fetch(CacheKey, headers: [String: String]?, isReload: Bool)
        /// Through ``send(_:url:bypassing:)``: neither stored nor coalesced.
        case send(URL, bypassing: Bool)
        /// Through ``httpCachingData(for:key:headers:directives:)``: RFC 9111's rules.
        case followHTTPCaching(CacheKey, headers: [String: String]?, directives: RequestDirectives)
    }

    /// Decides what ``data(for:)`` does with `request`, answering a hit on the spot.
    ///
    /// Synchronous, so that a hit, the path that must cost least, runs as plain calls: in an
    /// async function the same code allocated part of its frame from the task allocator.
    nonisolated func route(_ request: URLRequest) throws -> Route {
        guard let url = request.url else {
            store.record { $0.requests += 1 }
            throw URLError(.badURL)
        }
        let method = request.httpMethod ?? "GET"
        guard method == "GET" || method == "HEAD" else { return .send(url, bypassing: false) }
        let headers = request.allHTTPHeaderFields
        guard let key = CacheKey(method: method, url: url, headers: headers, keyHeaders: keyHeaders) else {
            return .send(url, bypassing: false)
        }
        let directives = RequestDirectives(headers)
        if directives.bypassesStore { return .send(url, bypassing: true) }
        switch request.cachePolicy {
        case .useProtocolCachePolicy where conformsToHTTPCaching && !directives.revalidates:
            return .followHTTPCaching(key, headers: headers, directives: directives)
        case .useProtocolCachePolicy, .returnCacheDataElseLoad:
            if directives.revalidates {
                store.record { $0.requests += 1 }
                return .fetch(key, headers: headers, isReload: true)
            }
            let instant = hasMaximumAge ? now() : nil
            if let hit = store.answer(for: key, headers: headers, at: instant, counting: true) {
                if hit.revalidate { revalidateInBackground(request, key: key) }
                return .answer(hit.data, hit.response)
            }
            return .fetch(key, headers: headers, isReload: false)
        case .returnCacheDataDontLoad:
            if let hit = store.answer(for: key, headers: headers, at: nil, counting: true) {
                return .answer(hit.data, hit.response)
            }
            throw URLError(.resourceUnavailable)
        default:
            store.record { $0.requests += 1 }
            return .fetch(key, headers: headers, isReload: true)
        }
    }

    /// ``data(for:)`` for a `useProtocolCachePolicy` request when the transport follows HTTP
    /// caching (``Configuration/conformsToHTTPCaching``).
    private nonisolated(nonsending) func httpCachingData(
        for request: URLRequest,
        key: CacheKey,
        headers: [String: String]?,
        directives: RequestDirectives
    ) async throws -> (Data, URLResponse) {
        if let hit = store.httpAnswer(for: key, headers: headers, at: now(), request: directives.cacheControl) {
            var response = hit.entry.response
            if let age = hit.age {
                response = StoredResponse.with(response, field: "Age", value: String(max(0, age.components.seconds)))
            }
            if hit.revalidate {
                response = StoredResponse.marked(response, value: Self.revalidatingStaleValue)
                revalidateInBackground(request, key: key)
            }
            return (hit.entry.data, response)
        }
        if directives.cacheControl?.onlyIfCached == true, let url = request.url {
            // RFC 9111 section 5.2.1.7: nothing usable is stored, and the network must not be used.
            return (Data(), HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: [:])!)
        }
        // The store had nothing this request may use; the fetch must not take what it refused.
        return try await fetch(request, key: key, headers: headers, isReload: true)
    }

    /// Loads `url` with a plain GET request; see ``data(for:)``.
    public nonisolated(nonsending) func data(from url: URL) async throws -> (Data, URLResponse) {
        try await data(for: URLRequest(url: url))
    }

    /// Reloads `request` from the network ignoring what is stored, stores the answer and, when
    /// its bytes differ from what was held, announces ``CacheChange/updated(_:)``: the
    /// pull-to-refresh.
    ///
    /// Concurrent refreshes of one key share one fetch. A refresh never joins a fetch that
    /// started before it unless that fetch was itself a refresh started after the key's latest
    /// invalidation, so its answer is never older than the call.
    public nonisolated(nonsending) func refresh(_ request: URLRequest) async throws -> (Data, URLResponse) {
        var reload = request
        reload.cachePolicy = .reloadIgnoringLocalCacheData
        return try await data(for: reload)
    }

    /// A new stream of every change to what the transport holds, in the order the changes
    /// happened: ``CacheChange/updated(_:)``, ``CacheChange/invalidated(urls:endpoint:)`` and
    /// ``CacheChange/cleared``.
    ///
    /// Each call returns its own stream, registered before it returns. A stream keeps at most
    /// ``Configuration/changeBufferLimit`` undelivered changes, dropping the oldest; the transport
    /// never waits for a subscriber. It unregisters itself when its consumer stops or it is
    /// dropped.
    public nonisolated func changes() -> AsyncStream<CacheChange> {
        broadcaster.subscribe(to: nil)
    }

    /// A new stream of the changes that concern `endpoint`: updates of its URLs, invalidations
    /// that dropped some of its URLs (naming only those), and clears. See ``changes()``.
    public nonisolated func changes(for endpoint: Endpoint) -> AsyncStream<CacheChange> {
        broadcaster.subscribe(to: endpoint)
    }

    /// The response header that marks an answer served from a stored entry because the network
    /// failed (``Configuration/staleIfError``). Its value is the `URLError` code of the failure.
    ///
    /// An answer from within the stale-while-revalidate window carries it too, with the value
    /// ``revalidatingStaleValue``. Test either with `URLResponse.isStaleAnswer`, the first with
    /// `URLResponse.isRevalidatingAnswer`.
    public static let staleHeaderField = "X-TransportCache-Stale"

    /// The value of ``staleHeaderField`` on an answer served within the stale-while-revalidate
    /// window (``Configuration/staleWhileRevalidate``) while the entry is revalidated in the
    /// background.
    public static let revalidatingStaleValue = "revalidating"

    /// Sends a request that is not cached: another method, a scheme other than http(s), or a GET
    /// or HEAD with its own conditions or range (`bypassing`).
    ///
    /// A successful (2xx, 3xx) unsafe request to an http(s) URL invalidates what it may have
    /// changed (RFC 9111 section 4.4).
    nonisolated(nonsending) func send(_ request: URLRequest, url: URL, bypassing: Bool = false) async throws -> (
        Data, URLResponse
    ) {
        store.record {
            $0.requests += 1
            $0.networkFetches += 1
            if bypassing { $0.bypasses += 1 }
        }
        let answer: (Data, URLResponse)
        do {
            answer = try await loader.load(request)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
        if !bypassing, let response = answer.1 as? HTTPURLResponse, (200..<400).contains(response.statusCode),
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https"
        {
            await invalidateTargets(of: url, response: response)
        }
        return answer
    }
}
