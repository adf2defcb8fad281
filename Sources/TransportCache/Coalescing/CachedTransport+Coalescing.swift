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
    /// Which fetch each waiting caller is attached to, for cancellation.
    var waiterLocations: [Int: Int] = [:]
    var lastIdentifier = 0

    mutating func makeIdentifier() -> Int {
        lastIdentifier += 1
        return lastIdentifier
    }

    /// Starts bookkeeping for a new fetch whose first waiter is `waiter`.
    /// - Returns: the fetch's identifier and the request to send.
    mutating func begin(_ waiter: Waiter, key: CacheKey, isReload: Bool) -> (id: Int, request: URLRequest) {
        if let older = joinable[key] {
            // A reload supersedes a fetch that started before it: that one still answers its
            // callers but must not overwrite the newer answer.
            fetches[older]?.storesResult = false
        }
        let fetchID = makeIdentifier()
        joinable[key] = fetchID
        waiterLocations[waiter.id] = fetchID
        fetches[fetchID] = Fetch(key: key, request: waiter.request, isReload: isReload, first: waiter)
        return (fetchID, waiter.request)
    }

    /// Adds `waiter` to the joinable fetch for `key`, if there is one it may join.
    mutating func join(_ waiter: Waiter, key: CacheKey, isReload: Bool) -> Bool {
        guard let fetchID = joinable[key], let fetch = fetches[fetchID], !isReload || fetch.isReload else { return false }
        fetch.add(waiter)
        waiterLocations[waiter.id] = fetchID
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
        let waiterID = inFlight.withLock { $0.makeIdentifier() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                enum Step { case joined, answered((Data, URLResponse)), cancelled, launch(Int, URLRequest) }
                let waiter = Waiter(id: waiterID, request: request, continuation: continuation)
                let step = inFlight.withLock { state -> Step in
                    // Checked under the lock that `cancelWaiter` takes: a cancellation either
                    // happened before (and is seen here) or finds the waiter registered.
                    if Task.isCancelled { return .cancelled }
                    if state.join(waiter, key: key, isReload: isReload) {
                        store.record { $0.coalescedJoins += 1 }
                        return .joined
                    }
                    // A fetch may have completed between the caller's lookup and now.
                    if !isReload, let hit = store.answer(for: key, headers: headers, at: hasMaximumAge ? now() : nil, counting: false) {
                        store.record { $0.memoryHits += 1 }
                        return .answered(hit)
                    }
                    store.record { $0.networkFetches += 1 }
                    let started = state.begin(waiter, key: key, isReload: isReload)
                    return .launch(started.id, started.request)
                }
                switch step {
                case .joined: break
                case .answered(let hit): continuation.resume(returning: hit)
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .launch(let fetchID, let outgoing): launch(fetchID, outgoing)
                }
            }
        } onCancel: {
            cancelWaiter(waiterID)
        }
    }

    /// Sends fetch `fetchID`'s request and completes the fetch with the answer.
    private nonisolated func launch(_ fetchID: Int, _ request: URLRequest) {
        let loader = self.loader
        let task = Task {
            let result: Result<(Data, URLResponse), any Error>
            do {
                result = .success(try await loader.load(request))
            } catch {
                result = .failure(error)
            }
            self.complete(fetchID, with: result)
        }
        let abandoned = inFlight.withLock { state in
            guard let fetch = state.fetches[fetchID] else { return true }
            fetch.task = task
            return false
        }
        // Every caller left before the task was recorded.
        if abandoned { task.cancel() }
    }

    /// Delivers a fetch's result to its waiters and stores it when allowed.
    ///
    /// The store and its change announcement happen under the in-flight lock, which invalidation
    /// also holds, so a detached fetch never writes and changes are announced in the order they
    /// were made. Callers are resumed after the lock is released, in the order they joined.
    private nonisolated func complete(_ fetchID: Int, with result: Result<(Data, URLResponse), any Error>) {
        var answers: [(Waiter, Result<(Data, URLResponse), any Error>)] = []
        var relaunches: [(Int, URLRequest)] = []
        inFlight.withLock { state in
            // Gone when every caller left: the answer of a cancelled fetch is dropped.
            guard let fetch = state.fetches.removeValue(forKey: fetchID) else { return }
            if state.joinable[fetch.key] == fetchID { state.joinable[fetch.key] = nil }
            let waiters = fetch.waiters
            for waiter in waiters { state.waiterLocations[waiter.id] = nil }
            answers.reserveCapacity(waiters.count)
            switch result {
            case .failure(let error):
                for waiter in waiters {
                    if let stale = staleAnswer(for: fetch.key, request: waiter.request, after: error) {
                        answers.append((waiter, .success(stale)))
                    } else {
                        answers.append((waiter, .failure(error)))
                    }
                }
            case .success(let (data, fetched)):
                let response = overridden(fetched)
                if fetch.storesResult { storeIfAllowed(data, response: response, for: fetch) }
                let vary = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Vary")
                    .map(MemoryURLCache.varyNames) ?? []
                let leaderHeaders = fetch.request.allHTTPHeaderFields
                for waiter in waiters {
                    if vary.isEmpty || vary.contains("*")
                        || Self.sameValues(of: vary, in: waiter.request.allHTTPHeaderFields, and: leaderHeaders) {
                        answers.append((waiter, .success((data, response))))
                    } else if !state.join(waiter, key: fetch.key, isReload: fetch.isReload) {
                        // Coalesced on the key, but the answer varies on a header this caller
                        // sent differently: it needs its own representation.
                        store.record { $0.networkFetches += 1 }
                        let started = state.begin(waiter, key: fetch.key, isReload: fetch.isReload)
                        relaunches.append((started.id, started.request))
                    }
                }
            }
        }
        for (waiter, answer) in answers { waiter.continuation.resume(with: answer) }
        for (fetchID, request) in relaunches { launch(fetchID, request) }
    }

    /// `response` as the header override presents it, when the override applies to its URL. The
    /// transport's own fetches already come through ``CacheOverrideURLProtocol``; applying the
    /// same rule here (a no-op on an already rewritten response) keeps the store's decision
    /// independent of the loader.
    private nonisolated func overridden(_ response: URLResponse) -> URLResponse {
        guard let override = configuration.cacheOverride, let http = response as? HTTPURLResponse,
              let url = http.url, override.applies(to: url)
        else { return response }
        return override.rewritten(http)
    }

    private nonisolated static func sameValues(of names: [String], in headers: [String: String]?, and other: [String: String]?) -> Bool {
        names.allSatisfy { StoredResponse.value(named: $0, in: headers) == StoredResponse.value(named: $0, in: other) }
    }

    private nonisolated func storeIfAllowed(_ data: Data, response: URLResponse, for fetch: Fetch) {
        guard let http = response as? HTTPURLResponse,
              configuration.storableStatusCodes.contains(http.statusCode),
              let url = fetch.request.url
        else { return }
        // What the header override did not rewrite is taken at its word.
        if let vary = http.value(forHTTPHeaderField: "Vary"), MemoryURLCache.varyNames(vary).contains("*") {
            return
        }
        // A response that sets a cookie starts or changes a session: it belongs to the exchange
        // that received it, and a later request (perhaps after a sign-out, with the same key
        // headers) must not be handed that session. It is never stored, whatever the header
        // override says.
        if http.value(forHTTPHeaderField: "Set-Cookie") != nil { return }
        if let cacheControl = http.value(forHTTPHeaderField: "Cache-Control"),
           cacheControl.lowercased().split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "no-store" }) {
            return
        }
        let outcome = store.store(
            data,
            response: response,
            for: fetch.key,
            requestHeaders: fetch.request.allHTTPHeaderFields,
            maximumAge: configuration.maximumAge(for: url)
        )
        if outcome == .stored(changedBytes: true), let normalized = URL(string: fetch.key.url) {
            broadcaster.publish(.updated(normalized))
        }
    }

    /// The stored entry for `key`, marked stale, when stale-if-error is on and `error` is a
    /// connectivity failure.
    private nonisolated func staleAnswer(for key: CacheKey, request: URLRequest, after error: any Error) -> (Data, URLResponse)? {
        guard configuration.staleIfError,
              let error = error as? URLError, Self.connectivityErrors.contains(error.code),
              let stored = store.storedResponse(for: key),
              stored.matchesVary(of: request.allHTTPHeaderFields),
              let http = stored.response as? HTTPURLResponse, let url = http.url
        else { return nil }
        var fields = http.allHeaderFields.reduce(into: [String: String]()) { fields, field in
            fields[String(describing: field.key)] = String(describing: field.value)
        }
        fields[Self.staleHeaderField] = String(error.code.rawValue)
        guard let marked = HTTPURLResponse(url: url, statusCode: http.statusCode, httpVersion: "HTTP/1.1", headerFields: fields) else {
            return nil
        }
        store.record { $0.staleAnswers += 1 }
        return (stored.data, marked)
    }

    private static let connectivityErrors: Set<URLError.Code> = [
        .notConnectedToInternet, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed,
        .timedOut, .networkConnectionLost,
    ]

    /// Releases a cancelled caller at once; cancels the fetch when it was the last one waiting.
    private nonisolated func cancelWaiter(_ waiterID: Int) {
        let (waiter, task) = inFlight.withLock { state -> (Waiter?, Task<Void, Never>?) in
            guard let fetchID = state.waiterLocations.removeValue(forKey: waiterID),
                  let fetch = state.fetches[fetchID], let waiter = fetch.remove(waiterID)
            else { return (nil, nil) }
            guard !fetch.hasWaiters else { return (waiter, nil) }
            state.fetches[fetchID] = nil
            if state.joinable[fetch.key] == fetchID { state.joinable[fetch.key] = nil }
            return (waiter, fetch.task)
        }
        waiter?.continuation.resume(throwing: CancellationError())
        task?.cancel()
    }
}

extension CachedTransport {
    /// What the transport still tracks on behalf of callers: fetches in flight, keys a request
    /// may join a fetch on, and suspended callers. All zero whenever no request is in progress;
    /// tests read it to prove that no caller or continuation is left behind.
    nonisolated var pendingWork: (fetches: Int, joinable: Int, waiters: Int) {
        inFlight.withLock { ($0.fetches.count, $0.joinable.count, $0.waiterLocations.count) }
    }
}
