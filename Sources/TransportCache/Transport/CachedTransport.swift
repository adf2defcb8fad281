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
/// (``Configuration/Storage/storableStatusCodes``). Every other method goes to the network and, when it
/// succeeds (2xx or 3xx), drops the stored entries of its URL and of the same-origin URLs in its
/// `Location` and `Content-Location` headers. Other schemes pass through to URLSession untouched.
///
/// ## The key
/// Method, URL with query (scheme and host lowercased, default port and fragment dropped), and the
/// values of `Authorization`, `Cookie`, `Accept`, `Accept-Language` and
/// ``Configuration/Identity/keyHeaders``, after the keyed adapters (``RequestAdapter/keyed(_:)``); with
/// ``Credentials``, the account of the current credential instead of its token. Requests with
/// different credentials never share an entry or a fetch. A stored response's `Vary` headers must
/// match too. Every call that takes a request keys it this way.
///
/// ## Policies
/// `useProtocolCachePolicy` and `returnCacheDataElseLoad` answer from memory when they can (within
/// ``Configuration/Freshness/maximumAge`` when set). `reloadIgnoringLocalCacheData` (and the other reload
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
    /// Classifies each request (``RequestPlanner``).
    let planner: RequestPlanner
    /// Writes the store and publishes its changes (``Committer``).
    let committer: Committer
    /// Where every request the transport sends waits for its host's room (``FetchQueue``), then
    /// goes to the network through its loader.
    nonisolated let queue: FetchQueue
    let configuration: Configuration
    /// ``Configuration/Freshness/usesConditionalRequests``, read on every fetch.
    let usesConditionalRequests: Bool
    /// ``Configuration/Network/retryPolicy``, read when a fetch's attempt ends.
    let retryPolicy: RetryPolicy?
    /// The fetches in flight and their callers. Every change to the store holds this lock too, so
    /// that a fetch's store and each step of a removal never interleave.
    ///
    /// The transport's locks, in the only order they nest (a lock is taken only while holding
    /// locks above it, never below; debug builds assert it, each lock carrying its ``LockRank``):
    /// 0. the one each invalidation holds throughout (``Committer/invalidate(_:endpoint:sparingPendingUpdates:)``),
    ///    so that they run one at a time; only invalidations wait for it;
    /// 1. this one, the in-flight lock, which guards the fetch graph: what is in flight, the
    ///    pending optimistic updates (``FetchStateMachine/optimistic``), the revalidation permits
    ///    and the polled endpoints;
    /// 2. a stream registry's (``StreamSubscribers``; its count change sets a flag in the store);
    /// 3. the store's entries (``ResponseStore/state``), its ``ResponseStore/index`` and its
    ///    ``ResponseStore/tags``, each taken alone, never one inside another;
    /// 4. a prepared load's own (``PreparedLoad``), taken under the in-flight lock when its
    ///    fetch's priority moves (and released before it passes the priority on); when it records
    ///    its queued load, a priority moved meanwhile is passed on under it (the queue's lock, a
    ///    leaf).
    ///
    /// The queues' locks (``DeliveryQueue``, ``SubscriberCount``, ``ReleaseQueue``, a
    /// ``ManualCacheClock``'s) are leaves: nothing is taken while one is held. So are the
    /// ``FetchQueue``'s and a network load's own: a fetch whose callers' priority moved tells its
    /// load under the in-flight lock (``Fetch/priority``), which only moves it in its line; a load
    /// that this gives a free place is started once the lock is released
    /// (``CachedTransport/changingFetches(_:)``), and a URLSession task's own priority is set on
    /// Apple platforms only, where its setter does not wait. ``Credentials``
    /// keep theirs (its state, then its ``KeyAccount``), never taken while one of the transport's
    /// is held. Under none of them is a task started, a continuation resumed, an event or change
    /// yielded, or the app's code called: a ``CacheClock`` is read, and an
    /// ``Endpoint/matching(_:)`` predicate asked, before a lock is taken, and what they say is
    /// passed in. Each step returns what to do (for the fetch graph, one ``FetchAction``), and its
    /// caller does it once the lock is released.
    let inFlight: Locked<FetchStateMachine>
    /// The one boundary every request crosses (``Configuration/Identity/requestAdapters``,
    /// ``Configuration/Identity/authenticate(with:)``): keyed by every call, decorated when it goes out;
    /// nil without adapters or credentials.
    nonisolated let preparation: RequestPreparation?
    /// Polls the endpoints streams watch (``Configuration/StayingCurrent/refreshIntervals``).
    nonisolated let poller: Poller
    #if canImport(Darwin)
    /// Trims the store on the system's memory pressure events, until the transport goes away.
    private let memoryPressureObserver: MemoryPressureObserver?
    /// Revalidates what is watched on the app's and the network's return.
    private let revalidationTriggers: RevalidationTriggers?
    #endif

    nonisolated var store: ResponseStore { planner.store }
    nonisolated var broadcaster: ChangeBroadcaster { committer.broadcaster }
    nonisolated var reporter: TransportEvents { committer.reporter }

    /// Makes a transport with its own URLSession and memory store.
    ///
    /// - Parameters:
    ///   - configuration: how it stores, keys and fetches.
    ///   - sessionConfiguration: the configuration of its URLSession (timeouts, extra headers,
    ///     connection limits, protocol classes), copied here. Whatever it says, the transport's
    ///     session keeps no `URLCache` and no cookie storage: the transport makes every caching
    ///     decision itself, and a cookie added by the session after the cache key was built would
    ///     let two identities share an entry. Nil, the default, is
    ///     `URLSessionConfiguration.ephemeral`, and then transports without a `sessionDelegate`
    ///     share one inner session per process (see ``CacheOverrideURLProtocol``), so a new
    ///     transport finds the connections earlier ones opened.
    ///   - sessionDelegate: the app's session delegate, asked about the transport's network tasks:
    ///     authentication challenges, redirects (follow, rewrite or refuse), task metrics, as
    ///     URLSession asks a session's delegate. A transport with a delegate has a network session
    ///     of its own, never shared with another transport. The session keeps the delegate until
    ///     the transport goes away, so the delegate must not keep the transport. See
    ///     <doc:SessionDelegate>.
    public init(
        configuration: Configuration = .init(), sessionConfiguration: URLSessionConfiguration? = nil,
        sessionDelegate: (any URLSessionDelegate)? = nil
    ) {
        let copied = sessionConfiguration?.copy() as? URLSessionConfiguration
        self.init(
            configuration: configuration,
            loader: URLSessionLoader(
                configuration: copied ?? .ephemeral,
                routesThroughProtocol: configuration.effectiveCacheOverride != nil,
                sessionDelegate: sessionDelegate,
                sharesInnerSession: copied == nil
            ),
            connectionsPerHost: (copied ?? .ephemeral).httpMaximumConnectionsPerHost)
    }

    /// Makes a transport that loads through `loader` (an in-process origin, for tests).
    /// - Parameter connectionsPerHost: what ``Configuration/Network/maximumFetchesPerHost`` is
    ///   when the configuration leaves it nil: the session's `httpMaximumConnectionsPerHost`.
    package init(configuration: Configuration, loader: any NetworkLoading, connectionsPerHost: Int = 6) {
        let keyHeaders = KeyHeaders(
            extra: configuration.identity.keyHeaders.union(configuration.identity.keyedHeaderNames))
        let policy = FreshnessPolicy(configuration)
        let store = ResponseStore(
            memoryCapacity: configuration.storage.memoryCapacity,
            maximumEntryShare: configuration.storage.maximumEntryShare,
            maximumVariants: configuration.storage.maximumVariants,
            prefetchShare: configuration.storage.prefetchShare
        )
        let inFlight = Locked(
            FetchStateMachine(revalidations: configuration.stayingCurrent.maximumConcurrentRevalidations),
            rank: .inFlight)
        let reporter = TransportEvents(bufferLimit: configuration.stayingCurrent.changeBufferLimit, store: store)
        loader.reportMetrics { url, metrics in reporter.networkMetrics(url, metrics) }
        let committer = Committer(
            store: store,
            broadcaster: ChangeBroadcaster(bufferLimit: configuration.stayingCurrent.changeBufferLimit),
            reporter: reporter,
            inFlight: inFlight,
            policy: policy,
            keyHeaders: keyHeaders,
            configuration: configuration
        )
        self.configuration = configuration
        queue = FetchQueue(
            loader: loader, limit: configuration.network.maximumFetchesPerHost ?? connectionsPerHost,
            sending: { [store] in store.record { $0.networkFetches += 1 } })
        preparation = RequestPreparation(configuration, keyHeaders: keyHeaders)
        retryPolicy = configuration.network.retryPolicy
        self.inFlight = inFlight
        poller = Poller(
            intervals: configuration.stayingCurrent.refreshIntervals, clock: configuration.clock, graph: inFlight)
        self.committer = committer
        usesConditionalRequests = configuration.freshness.usesConditionalRequests
        planner = RequestPlanner(
            keyHeaders: keyHeaders, policy: policy, store: store,
            answersStaleOnError: configuration.freshness.staleIfError,
            queryEndpoints: configuration.network.queryEndpoints,
            maximumQueryBodySize: configuration.network.maximumQueryBodySize)
        #if canImport(Darwin)
        // The handler holds the committer, not the transport: the observer, and with it the
        // handler, go away with the transport.
        memoryPressureObserver =
            configuration.storage.respondsToMemoryPressure
            ? MemoryPressureObserver { pressure in committer.remove(.pressure(pressure)) }
            : nil
        revalidationTriggers =
            configuration.stayingCurrent.revalidatesOnForeground || configuration.stayingCurrent.revalidatesOnReconnect
            ? RevalidationTriggers(
                onForeground: configuration.stayingCurrent.revalidatesOnForeground,
                onReconnect: configuration.stayingCurrent.revalidatesOnReconnect)
            : nil
        revalidationTriggers?.attach(to: self)
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
    /// ``Configuration/Freshness/usesConditionalRequests``).
    ///
    /// The request's own headers are honoured:
    /// - one that carries its own `If-None-Match`, `If-Modified-Since`, `If-Match`,
    ///   `If-Unmodified-Since`, `If-Range` or `Range`, or `Cache-Control: no-store`, goes to the
    ///   origin as sent, past the store and coalescing, and gets the origin's answer (`304`, `206`,
    ///   `412` …), which is not stored; except, when following HTTP caching (<doc:Revalidation>), a
    ///   `GET` or `HEAD` whose `If-None-Match`, `If-Modified-Since`, `Range` or `If-Range` a stored
    ///   entry of its own key may answer unvalidated: it gets a `304`, a `206`, a `416` or the
    ///   stored answer, made from that entry, and nothing is sent;
    /// - `Cache-Control: no-cache` or `max-age=0` (or `Pragma: no-cache` without `Cache-Control`)
    ///   revalidates: the stored entry is not used without asking the origin, and the answer is
    ///   stored, as for a reload policy.
    ///
    /// Every answer carries its ``CacheOutcome``: read it as `response.cacheOutcome`, or call
    /// ``response(for:)``.
    ///
    /// - Throws: the `URLError` of a failed fetch (reaching every caller of a shared fetch);
    ///   `URLError(.resourceUnavailable)` for `returnCacheDataDontLoad` without a stored entry;
    ///   `CancellationError` when the calling task is cancelled; `URLError(.badURL)` without a URL.
    ///   Each `URLError` carries the outcome of the attempt as `error.cacheOutcome`; a
    ///   `CancellationError`, Swift's own, carries none.
    public nonisolated(nonsending) func data(for request: URLRequest) async throws -> (Data, URLResponse) {
        // Without adapters or credentials the request is used as it is, not copied into a
        // ``KeyedRequest``: a retain and a release a hit need not pay.
        // Its fields are read once, for the account, the key and the directives together. The
        // preparation is called through the optional, not bound: a binding retained it for the call.
        guard let (fields, key) = try preparation?.keyedLazily(request) else {
            return try await answer(try planner.plan(request), to: request, headers: nil)
        }
        if let adapted = key.adapted { return try await answer(adapted, fields: fields, key: key) }
        let plan = try planner.plan(request, fields: fields, account: key.account, headers: key.headers)
        return try await answer(plan, to: request, headers: key.headers)
    }

    /// ``data(for:)`` of `request`, as a keyed adapter made it, whose fields are `fields`.
    @inline(never)
    private nonisolated(nonsending) func answer(_ request: URLRequest, fields: RequestFields, key: LazyKey)
        async throws -> (Data, URLResponse)
    {
        let plan = try planner.plan(request, fields: fields, account: key.account, headers: key.headers)
        return try await answer(plan, to: request, headers: key.headers)
    }

    /// Carries out `plan`, made for `request` as every call keys it, its keyed headers' values
    /// beside it.
    @inline(__always)
    private nonisolated(nonsending) func answer(_ plan: consuming Plan, to request: URLRequest, headers: KeyedHeaders?)
        async throws -> (Data, URLResponse)
    {
        // A hit returns without entering another async function, whose frame would come from the
        // task allocator: the path that must cost least runs as plain calls.
        if case .memory(let answer) = plan {
            if answer.isObserved { reporter.answered(request.url, answer.response) }
            return answered(answer, to: request, headers: headers)
        }
        return try await perform(consume plan, of: headers?.applied(to: request) ?? request)
    }

    /// `request` as every call that takes a request or makes a key sees it: the one boundary
    /// (``RequestPreparation/keyed(_:)``). Synchronous, so a read that cannot wait keys a
    /// request exactly as a fetch of it does.
    @inline(__always)
    nonisolated func keyed(_ request: URLRequest) throws -> KeyedRequest {
        guard let preparation else { return KeyedRequest(request: request, account: nil) }
        return try preparation.keyed(request)
    }

    /// Loads `request` as ``data(for:)`` does, and returns the answer with its ``CacheOutcome``:
    /// where it came from and why.
    ///
    /// ```swift
    /// let (data, response, outcome) = try await transport.response(for: request)
    /// if !outcome.isFromMemory { print("\(request.url!): \(outcome)") }
    /// ```
    ///
    /// - Throws: the errors of ``data(for:)``; `URLError(.badServerResponse)` when a request to
    ///   another scheme passed through and its answer is not HTTP.
    public nonisolated(nonsending) func response(for request: URLRequest) async throws -> (
        Data, HTTPURLResponse, CacheOutcome
    ) {
        let (data, response) = try await data(for: request)
        guard let http = response as? TransportHTTPURLResponse, let outcome = http.outcome else {
            throw URLError(.badServerResponse).carrying(CacheOutcome(source: .passedThrough(.notHTTP)))
        }
        return (data, http, outcome)
    }

    /// Loads `request` as ``data(for:)`` does, giving what it stores `tags`: names that
    /// ``invalidate(tag:)`` drops it by, whatever its URL. Tags stay in the app: nothing reaches the
    /// origin. A request whose answer is never stored is not tagged: another method, another
    /// scheme, or one sent as it is (its own conditions, `Range` or `Cache-Control: no-store`).
    /// A key is tagged before it is fetched, so ``invalidate(tag:)`` also stops a fetch of it in
    /// flight from storing.
    ///
    /// ```swift
    /// let (data, _) = try await transport.data(for: request, tags: ["articles", "user:42"])
    /// transport.invalidate(tag: "articles")
    /// ```
    public nonisolated(nonsending) func data(for request: URLRequest, tags: Set<String>) async throws -> (
        Data, URLResponse
    ) {
        let keyed = try keyed(request)
        let plan = try planner.plan(keyed.request, account: keyed.account)
        if !tags.isEmpty, let key = plan.storedKey, store.tag(key, with: tags) {
            // The fetches in flight are read first (the in-flight lock comes before the store's),
            // and only when the index needs pruning: a tagged hit takes no other lock.
            inFlight.withLock { machine in store.pruneTags(keeping: machine.keysInFlight.union([key])) }
        }
        return try await perform(plan, of: keyed.request)
    }

    /// Loads `url` with a plain GET request; see ``data(for:)``.
    public nonisolated(nonsending) func data(from url: URL) async throws -> (Data, URLResponse) {
        try await data(for: URLRequest(url: url))
    }

    /// Reloads `request` from the network ignoring what is stored, stores the answer and, when
    /// its bytes differ from what was held, announces ``CacheChange/updated(_:)``: the
    /// pull-to-refresh.
    ///
    /// Its answer is never older than the call: a refresh never shares a fetch that began before
    /// it was called, whether a caller's or a background revalidation, and such a fetch, when it
    /// ends after the refresh's own was sent, no longer stores its answer. Requests made after the
    /// refresh began share its fetch. Refreshes made while a refresh's fetch is in flight wait for
    /// the next fetch, sent when that one ends, and share it: any number of concurrent refreshes
    /// of one key reach the origin at most twice. A refresh cancelled while it waits leaves at once.
    public nonisolated(nonsending) func refresh(_ request: URLRequest) async throws -> (Data, URLResponse) {
        try await refresh(try keyed(request))
    }

    /// ``refresh(_:)`` of a request already keyed: an entry's own, refetched as it was keyed.
    nonisolated(nonsending) func refresh(_ keyed: KeyedRequest) async throws -> (Data, URLResponse) {
        try await perform(
            try planner.plan(keyed.request, account: keyed.account, refreshing: true), of: keyed.request)
    }

    /// Hands over a stored answer to `request` (whose keyed headers' values are `headers`, when
    /// not set on it), starting its background revalidation when it was answered within the
    /// stale-while-revalidate window.
    nonisolated func answered(_ answer: MemoryAnswer, to request: URLRequest, headers: KeyedHeaders? = nil) -> (
        Data, URLResponse
    ) {
        if case .staleWhileRevalidate = answer.reason {
            revalidateInBackground(answer, of: headers?.applied(to: request) ?? request)
        }
        return (answer.data, answer.response)
    }

    /// Carries out `plan` for `request`: the one place each kind of plan is performed, and its
    /// answer or failure reported to ``events()``.
    nonisolated(nonsending) func perform(_ plan: consuming Plan, of request: URLRequest) async throws -> (
        Data, URLResponse
    ) {
        // Whether anyone listens, when the plan already read it: ten thousand coalesced callers
        // then take no lock to find out that nobody does.
        let isObserved: Bool? =
            switch plan {
            case .memory(let memory): memory.isObserved
            case .conditional(let conditional): conditional.isObserved
            case .fetch(let fetchPlan): fetchPlan.isObserved
            default: nil
            }
        do {
            let answer: (Data, URLResponse)
            // Consumed: a fetch's plan goes on to the arrival, which lets go of it before the
            // caller suspends (see ``fetch(_:)``).
            switch consume plan {
            case .memory(let memory):
                answer = answered(memory, to: request)
            case .conditional(let conditional):
                answer = (conditional.data, conditional.response)
            case .fetch(let fetchPlan):
                answer = try await fetch(fetchPlan)
            case .send(let sendPlan):
                answer = try await send(sendPlan)
            case .unavailable:
                throw URLError(.resourceUnavailable).carrying(CacheOutcome(source: .cacheOnlyMiss))
            case .gatewayTimeout(let url):
                answer = (
                    Data(),
                    HTTPResponseBuilder.response(
                        url: url, statusCode: 504, headerFields: HeaderFields(),
                        outcome: CacheOutcome(source: .cacheOnlyMiss))
                )
            }
            if isObserved != false { reporter.answered(request.url, answer.1) }
            return answer
        } catch {
            if isObserved != false { reporter.failed(request.url, error) }
            throw error
        }
    }

    /// A new stream of what the transport does: each request answered or failed (with its
    /// ``CacheOutcome``), each fetch started and ended, each answer stored or not, entries evicted
    /// and invalidated, bodies decoded. See ``CacheEvent``.
    ///
    /// For logs and debug tools: it is bounded like ``changes()`` (at most
    /// ``Configuration/StayingCurrent/changeBufferLimit`` undelivered events, the oldest dropped), and the
    /// transport never waits for it. While no stream is registered, no event is made, and a hit
    /// pays one branch. A stream hears every request planned after it was registered (a request
    /// already in flight is reported from its next event on). It unregisters itself when its
    /// consumer stops or it is dropped.
    public nonisolated func events() -> CacheEvents {
        reporter.subscribe()
    }

    /// A new stream of every change to what the transport holds, in the order the changes
    /// happened: ``CacheChange/updated(_:)``, ``CacheChange/invalidated(urls:endpoint:)`` and
    /// ``CacheChange/cleared``.
    ///
    /// Each call returns its own stream, registered before it returns. A stream keeps at most
    /// ``Configuration/StayingCurrent/changeBufferLimit`` undelivered changes, dropping the oldest; the transport
    /// never waits for a subscriber. It unregisters itself when its consumer stops or it is
    /// dropped.
    public nonisolated func changes() -> AsyncStream<CacheChange> {
        broadcaster.subscribe(to: nil)
    }

    /// A new stream of the changes that concern `endpoint`: updates of its URLs, invalidations
    /// that dropped some of its URLs (naming only those), and clears. See ``changes()``.
    ///
    /// While it lives, the transport polls `endpoint` when ``Configuration/StayingCurrent/refreshIntervals`` gives
    /// it an interval.
    public nonisolated func changes(for endpoint: Endpoint) -> AsyncStream<CacheChange> {
        let endWatch = poller.watch(endpoint) { [weak self] interval in
            // Entries another fetch confirmed within the last half interval wait for the next tick.
            guard let self else { return }
            await revalidate(committer.heldEntries(of: [endpoint]), skippingConfirmedWithin: interval / 2)
        }
        return broadcaster.subscribe(to: endpoint, onTermination: endWatch)
    }

    /// The response header that marks an answer served from a stored entry because the network
    /// failed (``Configuration/Freshness/staleIfError``). Its value is the `URLError` code of the failure.
    ///
    /// An answer from within the stale-while-revalidate window carries it too, with the value
    /// ``revalidatingStaleValue``. Test either with `URLResponse.isStaleAnswer`, the first with
    /// `URLResponse.isRevalidatingAnswer`.
    public static let staleHeaderField = "X-TransportCache-Stale"

    /// The value of ``staleHeaderField`` on an answer served within the stale-while-revalidate
    /// window (``Configuration/Freshness/staleWhileRevalidate``) while the entry is revalidated in the
    /// background.
    public static let revalidatingStaleValue = "revalidating"

    /// Sends a request that is not cached: another method, a scheme other than http(s), or a GET
    /// or HEAD with its own conditions, range or `no-store`.
    ///
    /// A successful (2xx, 3xx) unsafe request to an http(s) URL invalidates what it may have
    /// changed (RFC 9111 section 4.4).
    private nonisolated(nonsending) func send(_ plan: SendPlan) async throws -> (Data, URLResponse) {
        store.record {
            $0.requests += 1
            if plan.reason == .requestConditions || plan.reason == .requestNoStore { $0.bypasses += 1 }
        }
        let sentAt = ContinuousClock.now
        let answer: (Data, URLResponse)
        do {
            answer = try await sendAuthenticated(plan)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            let outcome = CacheOutcome(source: .passedThrough(plan.reason), networkDuration: .now - sentAt)
            throw error.carrying(outcome)
        }
        let outcome = CacheOutcome(source: .passedThrough(plan.reason), networkDuration: .now - sentAt)
        if plan.reason == .unsafeMethod, let response = answer.1 as? HTTPURLResponse,
            (200..<400).contains(response.statusCode)
        {
            invalidateTargets(of: plan.url, response: response)
        }
        return (answer.0, HTTPResponseBuilder.answer(answer.1, outcome: outcome))
    }
}
