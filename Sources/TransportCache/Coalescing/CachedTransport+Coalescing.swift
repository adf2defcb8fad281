import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The fetches in flight and the callers waiting on them.
///
/// Kept behind one lock rather than on the actor: a caller joins or leaves from its own executor,
/// and the answer resumes it straight onto that executor. Through the actor, each of ten thousand
/// coalesced callers hopped on twice (to join, and again when resumed inside the actor-isolated
/// wait), one at a time.
struct InFlight: Sendable {
    /// Fetches in flight by identifier.
    var fetches: [Int: Fetch] = [:]
    /// The fetch a new request for a key may join.
    var joinable: [CacheKey: Int] = [:]
    /// Callers attached to a fetch (each knows which: ``Waiter/fetchID``).
    var waiterCount = 0
    /// Requests that joined a fetch in flight, for ``CacheStatistics/coalescedJoins``: counted
    /// here, under the lock a join holds anyway, rather than under the store's lock too.
    var coalescedJoins = 0
    var lastIdentifier = 0

    mutating func makeIdentifier() -> Int {
        lastIdentifier += 1
        return lastIdentifier
    }

    /// Starts bookkeeping for a new fetch whose first waiter is `waiter`.
    /// - Returns: the fetch's identifier and the fetch.
    mutating func begin(_ waiter: Waiter, key: CacheKey, isReload: Bool) -> (id: Int, fetch: Fetch) {
        let started = begin(key: key, request: waiter.request, isReload: isReload, first: waiter)
        waiter.fetchID = started.id
        waiterCount += 1
        return started
    }

    /// Starts bookkeeping for a new fetch of `request`, with `first` as its first waiter or, for a
    /// background revalidation, none.
    mutating func begin(key: CacheKey, request: URLRequest, isReload: Bool, isBackground: Bool = false, first: Waiter?)
        -> (id: Int, fetch: Fetch)
    {
        if let older = joinable[key] {
            // A reload supersedes a fetch that started before it: that one still answers its
            // callers but must not overwrite the newer answer.
            fetches[older]?.storesResult = false
        }
        let fetchID = makeIdentifier()
        joinable[key] = fetchID
        let fetch = Fetch(key: key, request: request, isReload: isReload, isBackground: isBackground, first: first)
        fetches[fetchID] = fetch
        return (fetchID, fetch)
    }

    /// Adds `waiter` to the joinable fetch for `key`, if there is one it may join.
    mutating func join(_ waiter: Waiter, key: CacheKey, isReload: Bool) -> Bool {
        guard let fetchID = joinable[key], let fetch = fetches[fetchID], !isReload || fetch.isReload else {
            return false
        }
        fetch.add(waiter)
        waiter.fetchID = fetchID
        waiterCount += 1
        return true
    }

    /// Stops fetches in flight for the matching keys from writing into the store, and from being
    /// joined by later requests. Their callers still get their answers.
    mutating func detach(where predicate: (CacheKey) -> Bool) {
        for (key, fetchID) in joinable where predicate(key) {
            fetches[fetchID]?.storesResult = false
            joinable[key] = nil
        }
    }
}

extension CachedTransport {
    /// Answers `request` from the fetch in flight for `key`, or starts one. Runs on the caller's
    /// executor; it never hops onto the actor.
    ///
    /// - Parameter isReload: the caller wants an answer fetched after it asked: it never takes a
    ///   stored entry and joins only a fetch that was itself started as a reload.
    nonisolated(nonsending) func fetch(
        _ request: URLRequest,
        key: CacheKey,
        headers: [String: String]?,
        isReload: Bool
    ) async throws -> (Data, URLResponse) {
        let waiter = Waiter(request: request)
        return try await withTaskCancellationHandler {
            // Unsafe rather than checked: the checked kind allocates a guard object per caller, and
            // each waiter is resumed exactly once by construction (see `Waiter.continuation`).
            try await withUnsafeThrowingContinuation { continuation in
                enum Step { case joined, answered((Data, URLResponse)), cancelled, launch(Int, URLRequest) }
                // Set before the waiter is attached (under the lock below), so whoever detaches it
                // finds it.
                waiter.continuation = continuation
                let step = inFlight.withLock { state -> Step in
                    // Checked under the lock that `cancelWaiter` takes: a cancellation either
                    // happened before (and is seen here) or finds the waiter registered.
                    if Task.isCancelled { return .cancelled }
                    if state.join(waiter, key: key, isReload: isReload) {
                        state.coalescedJoins += 1
                        return .joined
                    }
                    // A fetch may have completed between the caller's lookup and now.
                    if !isReload,
                        let hit = store.answer(
                            for: key, headers: headers, at: hasMaximumAge ? now() : nil, counting: false),
                        !hit.revalidate
                    {
                        store.record { $0.memoryHits += 1 }
                        return .answered((hit.data, hit.response))
                    }
                    store.record { $0.networkFetches += 1 }
                    let started = state.begin(waiter, key: key, isReload: isReload)
                    return .launch(started.id, outgoingRequest(for: started.fetch))
                }
                switch step {
                case .joined: break
                case .answered(let hit): continuation.resume(returning: hit)
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .launch(let fetchID, let outgoing): launch(fetchID, outgoing)
                }
            }
        } onCancel: {
            cancelWaiter(waiter)
        }
    }

    /// Starts one background revalidation of `key`, unless a fetch for it is already in flight
    /// (which will bring the entry up to date itself). Called after a stale-window answer.
    nonisolated func revalidateInBackground(_ request: URLRequest, key: CacheKey) {
        let launchable = inFlight.withLock { state -> (Int, URLRequest)? in
            guard state.joinable[key] == nil else { return nil }
            store.record {
                $0.networkFetches += 1
                $0.backgroundRevalidations += 1
            }
            let started = state.begin(key: key, request: request, isReload: true, isBackground: true, first: nil)
            return (started.id, outgoingRequest(for: started.fetch))
        }
        if let (fetchID, outgoing) = launchable { launch(fetchID, outgoing) }
    }

    /// The request `fetch` sends: its first caller's, made conditional on the stored entry when
    /// there is one with validators and ``Configuration/usesConditionalRequests`` is on. Call with
    /// the in-flight lock held.
    private nonisolated func outgoingRequest(for fetch: Fetch) -> URLRequest {
        guard configuration.usesConditionalRequests,
            let entry = store.storedResponse(for: fetch.key, headers: fetch.request.allHTTPHeaderFields),
            entry.hasValidators
        else {
            fetch.revalidating = nil
            return fetch.request
        }
        fetch.revalidating = entry
        store.record { $0.conditionalRequests += 1 }
        return ConditionalRequest.revalidating(fetch.request, against: entry)
    }

    /// Sends fetch `fetchID`'s request and completes the fetch with the answer, on whatever thread
    /// the loader has it: no task is woken in between.
    private nonisolated func launch(_ fetchID: Int, _ request: URLRequest) {
        let load = loader.start(request) { result in
            self.complete(fetchID, with: result)
        }
        let abandoned = inFlight.withLock { state in
            guard let fetch = state.fetches[fetchID] else { return true }
            fetch.load = load
            return false
        }
        // Every caller left before the load was recorded (or it has completed: then this does nothing).
        if abandoned { load.cancel() }
    }

    /// Delivers a fetch's result to its waiters and stores it when allowed.
    ///
    /// The store and its change announcement happen under the in-flight lock, which invalidation
    /// also holds, so a detached fetch never writes and changes are announced in the order they
    /// were made. Callers are resumed after the lock is released, in the order they joined.
    ///
    /// A `304` to a conditional fetch answers with the stored body (status 200) and updates the
    /// entry's headers and age; when the entry is gone (invalidated, evicted or replaced while
    /// the request was in flight) the fetch is sent again without conditions, so no caller ever
    /// gets the empty body of a 304.
    private nonisolated func complete(_ fetchID: Int, with result: Result<(Data, URLResponse), any Error>) {
        // The fetch's waiters, and for each the index of its answer in `results` (-1: not answered
        // here). Callers of one fetch nearly always share one answer, held once rather than once
        // per caller: ten thousand copies of one answer cost as much to release as to resume them.
        var waiters: [Waiter?] = []
        var answers: [Int] = []
        var results: [Result<(Data, URLResponse), any Error>] = []
        var relaunches: [(Int, URLRequest)] = []
        inFlight.withLock { state in
            // Gone when every caller left: the answer of a cancelled fetch is dropped.
            guard let fetch = state.fetches[fetchID] else { return }
            var result = result
            var stored = false
            if case .success(let (_, fetched)) = result, let validated = fetch.revalidating,
                let notModified = fetched as? HTTPURLResponse, notModified.statusCode == 304
            {
                fetch.revalidating = nil
                if let current = confirm(validated, for: fetch, with: notModified) {
                    result = .success((current.data, current.response))
                    stored = true
                } else if fetch.hasWaiters {
                    relaunches.append((fetchID, fetch.request))
                    return
                }
            }
            state.fetches[fetchID] = nil
            if state.joinable[fetch.key] == fetchID { state.joinable[fetch.key] = nil }
            waiters = fetch.takeWaiters()
            answers = Array(repeating: -1, count: waiters.count)
            for case let waiter? in waiters {
                waiter.fetchID = nil
                state.waiterCount -= 1
            }
            switch result {
            case .failure(let error):
                if fetch.isBackground { store.record { $0.failedBackgroundRevalidations += 1 } }
                results.append(.failure(error))
                for (position, waiter) in waiters.enumerated() {
                    guard let waiter else { continue }
                    if let stale = staleAnswer(for: fetch.key, request: waiter.request, after: error) {
                        results.append(.success(stale))
                        answers[position] = results.count - 1
                    } else {
                        answers[position] = 0
                    }
                }
            case .success(let (data, fetched)):
                let response = stored ? fetched : overridden(fetched)
                if !stored {
                    let kept = fetch.storesResult && storeIfAllowed(data, response: response, for: fetch)
                    if fetch.isBackground, fetch.storesResult, !kept {
                        store.record { $0.failedBackgroundRevalidations += 1 }
                    }
                }
                let vary =
                    (response as? HTTPURLResponse)?.headerValue("vary")
                    .map(MemoryURLCache.varyNames) ?? []
                let leaderHeaders = fetch.request.allHTTPHeaderFields
                results.append(.success((data, response)))
                for (position, waiter) in waiters.enumerated() {
                    guard let waiter else { continue }
                    if vary.isEmpty || vary.contains("*")
                        || Self.sameValues(of: vary, in: waiter.request.allHTTPHeaderFields, and: leaderHeaders)
                    {
                        answers[position] = 0
                    } else if !state.join(waiter, key: fetch.key, isReload: fetch.isReload) {
                        // Coalesced on the key, but the answer varies on a header this caller
                        // sent differently: it needs its own representation.
                        store.record { $0.networkFetches += 1 }
                        let started = state.begin(waiter, key: fetch.key, isReload: fetch.isReload)
                        relaunches.append((started.id, outgoingRequest(for: started.fetch)))
                    }
                }
            }
        }
        for position in waiters.indices {
            guard let waiter = waiters[position], answers[position] >= 0 else { continue }
            // Let go of it first: the caller, once resumed, then frees it on its own thread.
            waiters[position] = nil
            waiter.resume(with: results[answers[position]])
        }
        for (fetchID, request) in relaunches { launch(fetchID, request) }
    }

    /// Takes a `304 Not Modified` for `validated`, the entry `fetch` asked about.
    /// - Returns: the entry to answer with (updated in the store when the fetch may write), or nil
    ///   when it is no longer stored.
    private nonisolated func confirm(_ validated: StoredResponse, for fetch: Fetch, with notModified: HTTPURLResponse)
        -> StoredResponse?
    {
        guard fetch.storesResult, let url = fetch.request.url else {
            // Superseded by a newer reload: the body is confirmed, but the store is not this
            // fetch's to change.
            guard store.state.withLock({ $0.holds(validated, for: fetch.key) }) else { return nil }
            store.record { $0.notModified += 1 }
            return validated
        }
        let rewritten = (overridden(notModified) as? HTTPURLResponse) ?? notModified
        return store.revalidate(validated, for: fetch.key, with: rewritten) { response in
            lifetime(of: response, url: url, requestTime: fetch.requestTime)
        }
    }

    /// How long an answer to `url` stays fresh once stored: the configured maximum age and
    /// stale window, or what HTTP caching gives the response.
    private nonisolated func lifetime(of response: URLResponse, url: URL, requestTime: Date) -> EntryLifetime {
        let maximumAge = configuration.maximumAge(for: url)
        let staleWindow = configuration.staleWindow(for: url)
        guard conformsToHTTPCaching, let http = response as? HTTPURLResponse else {
            return .configured(maximumAge: maximumAge, staleWindow: staleWindow)
        }
        return .http(
            of: http, requestTime: requestTime, responseTime: Date(), maximumAge: maximumAge, staleWindow: staleWindow)
    }

    /// `response` as the header override presents it, when the override applies to its URL. The
    /// transport's own fetches already come through ``CacheOverrideURLProtocol``; applying the
    /// same rule here (a no-op on an already rewritten response) keeps the store's decision
    /// independent of the loader.
    ///
    /// When the transport follows HTTP caching there is no override, and the fields the
    /// response's `Connection` names are dropped: they describe that connection only, and a
    /// cache must not store or pass them on (RFC 9110 section 7.6.1, RFC 9111 section 3.1).
    private nonisolated func overridden(_ response: URLResponse) -> URLResponse {
        guard let http = response as? HTTPURLResponse else { return response }
        if conformsToHTTPCaching {
            guard let connection = http.value(forHTTPHeaderField: "Connection") else { return response }
            let listed = Set(
                connection.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
            guard let url = http.url else { return response }
            let fields = StoredResponse.headerFields(of: http).filter {
                !listed.contains($0.key.lowercased()) && $0.key.lowercased() != "connection"
            }
            return HTTPURLResponse(url: url, statusCode: http.statusCode, httpVersion: "HTTP/1.1", headerFields: fields)
                ?? response
        }
        guard let override = configuration.effectiveCacheOverride, let url = http.url, override.applies(to: url) else {
            return response
        }
        return override.rewritten(http)
    }

    private nonisolated static func sameValues(
        of names: [String], in headers: [String: String]?, and other: [String: String]?
    ) -> Bool {
        names.allSatisfy { StoredResponse.value(named: $0, in: headers) == StoredResponse.value(named: $0, in: other) }
    }

    /// Stores a fetched answer when its status, headers and size allow.
    /// - Returns: whether it was stored.
    @discardableResult
    private nonisolated func storeIfAllowed(_ data: Data, response: URLResponse, for fetch: Fetch) -> Bool {
        guard let http = response as? HTTPURLResponse,
            configuration.storableStatusCodes.contains(http.statusCode)
                // HTTP caching stores any final status that states its own freshness.
                || (conformsToHTTPCaching && (200..<600).contains(http.statusCode) && http.statusCode != 304
                    && EntryLifetime.hasExplicitFreshness(http)),
            // A partial answer is never the whole resource a later request wants.
            http.statusCode != 206,
            let url = fetch.request.url
        else { return false }
        // What the header override did not rewrite is taken at its word.
        if let vary = http.headerValue("vary"), MemoryURLCache.varyNames(vary).contains("*") {
            return false
        }
        // A response that sets a cookie starts or changes a session: it belongs to the exchange
        // that received it, and a later request (perhaps after a sign-out, with the same key
        // headers) must not be handed that session. It is never stored, whatever the header
        // override says.
        if http.headerValue("set-cookie") != nil { return false }
        if let cacheControl = http.headerValue("cache-control"),
            ASCII.lowercasedElements(cacheControl).contains("no-store")
        {
            return false
        }
        let outcome = store.store(
            data,
            response: response,
            for: fetch.key,
            requestHeaders: fetch.request.allHTTPHeaderFields,
            lifetime: lifetime(of: response, url: url, requestTime: fetch.requestTime)
        )
        if outcome == .stored(changedBytes: true), let normalized = URL(string: fetch.key.url) {
            broadcaster.publish(.updated(normalized))
        }
        return outcome != .tooLarge
    }

    /// The stored entry for `key`, marked stale, when stale-if-error is on and `error` is a
    /// connectivity failure.
    private nonisolated func staleAnswer(for key: CacheKey, request: URLRequest, after error: any Error) -> (
        Data, URLResponse
    )? {
        guard configuration.staleIfError,
            let error = error as? URLError, Self.connectivityErrors.contains(error.code),
            let stored = store.storedResponse(for: key, headers: request.allHTTPHeaderFields),
            !stored.mustRevalidate
        else { return nil }
        store.record { $0.staleAnswers += 1 }
        return (stored.data, StoredResponse.marked(stored.response, value: String(error.code.rawValue)))
    }

    private static let connectivityErrors: Set<URLError.Code> = [
        .notConnectedToInternet, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed,
        .timedOut, .networkConnectionLost,
    ]

    /// Releases a cancelled caller at once; cancels the fetch when it was the last one waiting.
    private nonisolated func cancelWaiter(_ waiter: Waiter) {
        let (detached, load) = inFlight.withLock { state -> (Bool, (any NetworkLoad)?) in
            guard let fetchID = waiter.fetchID, let fetch = state.fetches[fetchID], fetch.remove(waiter)
            else { return (false, nil) }
            waiter.fetchID = nil
            state.waiterCount -= 1
            // A background revalidation runs on without callers: it brings the entry up to date.
            guard !fetch.hasWaiters, !fetch.isBackground else { return (true, nil) }
            state.fetches[fetchID] = nil
            if state.joinable[fetch.key] == fetchID { state.joinable[fetch.key] = nil }
            return (true, fetch.load)
        }
        if detached { waiter.resume(with: .failure(CancellationError())) }
        load?.cancel()
    }
}

extension CachedTransport {
    /// What the transport still tracks on behalf of callers: fetches in flight, keys a request
    /// may join a fetch on, and suspended callers. All zero whenever no request is in progress;
    /// tests read it to prove that no caller or continuation is left behind.
    nonisolated var pendingWork: (fetches: Int, joinable: Int, waiters: Int) {
        inFlight.withLock { ($0.fetches.count, $0.joinable.count, $0.waiterCount) }
    }
}
