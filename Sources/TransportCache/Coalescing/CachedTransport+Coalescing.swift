import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Answers `request` from the fetch in flight for `key`, or starts one.
    ///
    /// - Parameter isReload: the caller wants an answer fetched after it asked: it never takes a
    ///   stored entry and joins only a fetch that was itself started as a reload.
    func fetch(
        _ request: URLRequest,
        key: CacheKey,
        headers: [String: String]?,
        isReload: Bool
    ) async throws -> (Data, URLResponse) {
        // A fetch may have completed between the caller's lookup and this hop onto the actor.
        if !isReload, let hit = store.answer(
            for: key,
            headers: headers,
            at: hasMaximumAge ? now() : nil,
            counting: false
        ) {
            store.record { $0.memoryHits += 1 }
            return hit
        }
        let waiterID = makeIdentifier()
        return try await withTaskCancellationHandler(
            operation: {
                try await withCheckedThrowingContinuation(isolation: self) { continuation in
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    enqueue(Waiter(id: waiterID, request: request, continuation: continuation), key: key, isReload: isReload)
                }
            },
            onCancel: {
                Task { await self.cancelWaiter(waiterID) }
            },
            isolation: self
        )
    }

    func makeIdentifier() -> Int {
        lastIdentifier += 1
        return lastIdentifier
    }

    private func enqueue(_ waiter: Waiter, key: CacheKey, isReload: Bool) {
        if let fetchID = joinableFetches[key], let fetch = fetches[fetchID], !isReload || fetch.isReload {
            fetch.add(waiter)
            waiterLocations[waiter.id] = fetchID
            store.record { $0.coalescedJoins += 1 }
            return
        }
        if let older = joinableFetches[key] {
            // A reload supersedes a fetch that started before it: that one still answers its
            // callers but must not overwrite the newer answer.
            fetches[older]?.storesResult = false
        }
        let fetchID = makeIdentifier()
        let outgoing = waiter.request
        joinableFetches[key] = fetchID
        waiterLocations[waiter.id] = fetchID
        let fetch = Fetch(key: key, request: outgoing, isReload: isReload, first: waiter)
        fetches[fetchID] = fetch
        store.record { $0.networkFetches += 1 }
        let loader = self.loader
        fetch.task = Task {
            let result: Result<(Data, URLResponse), any Error>
            do {
                result = .success(try await loader.load(outgoing))
            } catch {
                result = .failure(error)
            }
            self.complete(fetchID, with: result)
        }
    }

    /// Delivers a fetch's result to its waiters and stores it when allowed.
    private func complete(_ fetchID: Int, with result: Result<(Data, URLResponse), any Error>) {
        // Gone when every caller left: the answer of a cancelled fetch is dropped.
        guard let fetch = fetches.removeValue(forKey: fetchID) else { return }
        if joinableFetches[fetch.key] == fetchID { joinableFetches[fetch.key] = nil }
        let waiters = fetch.waiters
        for waiter in waiters { waiterLocations[waiter.id] = nil }
        switch result {
        case .failure(let error):
            for waiter in waiters {
                if let stale = staleAnswer(for: fetch.key, request: waiter.request, after: error) {
                    waiter.continuation.resume(returning: stale)
                } else {
                    waiter.continuation.resume(throwing: error)
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
                    waiter.continuation.resume(returning: (data, response))
                } else {
                    // Coalesced on the key, but the answer varies on a header this caller sent
                    // differently: it needs its own representation.
                    enqueue(waiter, key: fetch.key, isReload: fetch.isReload)
                }
            }
        }
    }

    /// `response` as the header override presents it, when the override applies to its URL. The
    /// transport's own fetches already come through ``CacheOverrideURLProtocol``; applying the
    /// same rule here (a no-op on an already rewritten response) keeps the store's decision
    /// independent of the loader.
    private func overridden(_ response: URLResponse) -> URLResponse {
        guard let override = configuration.cacheOverride, let http = response as? HTTPURLResponse,
              let url = http.url, override.applies(to: url)
        else { return response }
        return override.rewritten(http)
    }

    private static func sameValues(of names: [String], in headers: [String: String]?, and other: [String: String]?) -> Bool {
        names.allSatisfy { StoredResponse.value(named: $0, in: headers) == StoredResponse.value(named: $0, in: other) }
    }

    private func storeIfAllowed(_ data: Data, response: URLResponse, for fetch: Fetch) {
        guard let http = response as? HTTPURLResponse,
              configuration.storableStatusCodes.contains(http.statusCode),
              let url = fetch.request.url
        else { return }
        // What the header override did not rewrite is taken at its word.
        if let vary = http.value(forHTTPHeaderField: "Vary"), MemoryURLCache.varyNames(vary).contains("*") {
            return
        }
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
    private func staleAnswer(for key: CacheKey, request: URLRequest, after error: any Error) -> (Data, URLResponse)? {
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
    private func cancelWaiter(_ waiterID: Int) {
        guard let fetchID = waiterLocations.removeValue(forKey: waiterID), let fetch = fetches[fetchID],
              let waiter = fetch.remove(waiterID)
        else { return }
        waiter.continuation.resume(throwing: CancellationError())
        guard !fetch.hasWaiters else { return }
        fetches[fetchID] = nil
        if joinableFetches[fetch.key] == fetchID { joinableFetches[fetch.key] = nil }
        fetch.task?.cancel()
    }

    /// Stops fetches in flight for the matching keys from writing into the store, and from being
    /// joined by later requests. Their callers still get their answers.
    func detachFetches(where predicate: (CacheKey) -> Bool) {
        for (key, fetchID) in joinableFetches where predicate(key) {
            fetches[fetchID]?.storesResult = false
            joinableFetches[key] = nil
        }
    }
}
