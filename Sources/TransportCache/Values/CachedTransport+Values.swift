import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// The decoder used when a call names none: a `JSONDecoder` with default settings, made once
    /// so that such calls do not make one each.
    @usableFromInline
    static let defaultDecoder = JSONDecoder()

    /// Loads `request` through the cache like ``data(for:)`` and returns its body decoded as
    /// `type`, decoding each stored entry at most once per type and decoder.
    ///
    /// ```swift
    /// let articles = try await transport.value([Article].self, for: request)
    /// ```
    ///
    /// - The first call for an entry decodes its body and keeps the value with the entry; later
    ///   calls get that value without decoding. Concurrent callers share the fetch and the decode.
    /// - A decoded value is dropped with its entry: on invalidation, on eviction, and when a
    ///   refresh or reload brings different bytes. A refresh that brings the same bytes keeps it.
    /// - Each type and each set of decoder settings has its own decoded value: decoders with equal
    ///   settings share it, so `decoder: JSONDecoder()` on every call decodes once. A decoder whose
    ///   settings cannot be compared (a `.custom` strategy, a non-empty `userInfo`) has values of
    ///   its own instance (see ``ResponseDecoding``).
    /// - An entry keeps at most ``Configuration/Storage/maximumDecodedValuesPerEntry`` values, dropping
    ///   its least recently used one beyond that.
    /// - A decoded value is charged against ``Configuration/Storage/memoryCapacity`` the byte count of the
    ///   body it came from plus 64 bytes, an estimate: a Swift value decoded from JSON usually
    ///   takes no more than its text. When that charge does not fit, the value is returned but not
    ///   kept. ``trim(for:)`` drops every kept value.
    /// - Decoding runs off the caller's actor, so a view model on the main actor never decodes a
    ///   large body on the main thread; a value already decoded is returned on the caller's
    ///   executor with one locked lookup.
    /// - Answers that are not stored (other methods, other schemes, statuses that are not
    ///   storable, entries too large) are decoded for each call.
    /// - A caller that joined another caller's decode waits for it (it is not interrupted by
    ///   cancellation; decodes take milliseconds).
    ///
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - request: the request, with the same key, policy and coalescing rules as ``data(for:)``.
    ///   - decoder: the decoder. Default: a `JSONDecoder` with default settings, which shares
    ///     values with any other `JSONDecoder` with default settings.
    /// - Throws: ``ValueDecodingError`` when the status is outside 200-299 or the body does not
    ///   decode (not kept: the next call decodes again, and the stored bytes stay usable); the
    ///   errors of ``data(for:)`` otherwise.
    public nonisolated(nonsending) func value<Value: Decodable & Sendable>(
        _ type: Value.Type = Value.self,
        for request: URLRequest,
        decoder: any ResponseDecoding = CachedTransport.defaultDecoder
    ) async throws -> Value {
        try await decodedValue(type, for: request, decoder: decoder).value
    }

    /// Loads `url` with a plain GET request and decodes its body; see ``value(_:for:decoder:)``.
    public nonisolated(nonsending) func value<Value: Decodable & Sendable>(
        _ type: Value.Type = Value.self,
        from url: URL,
        decoder: any ResponseDecoding = CachedTransport.defaultDecoder
    ) async throws -> Value {
        try await decodedValue(type, for: URLRequest(url: url), decoder: decoder).value
    }

    /// The current value of `request` decoded as `type`, then a new value each time the bytes
    /// stored for its URL change: what a screen or a view model subscribes to.
    ///
    /// ```swift
    /// for try await articles in transport.values([Article].self, for: request) {
    ///     self.articles = articles
    /// }
    /// ```
    ///
    /// - The first element is the current value, from memory or fetched (see
    ///   ``value(_:for:decoder:)``).
    /// - After each ``CacheChange/updated(_:)`` for the request's URL (a refresh or reload that
    ///   brought different bytes, from any screen), the new value, decoded once however many
    ///   streams watch it.
    /// - After an invalidation of that URL, or ``invalidateAll()``, the stream fetches again
    ///   (one coalesced fetch for all its watchers) and yields the new value if the bytes
    ///   changed: a screen that is showing the data keeps it current.
    /// - Bytes equal to the last yielded ones are never yielded again.
    /// - A failure of the first value (network, status, decoding) ends the stream with that
    ///   error: there is nothing to show. A later failure is skipped: the screen keeps its last
    ///   value and the stream keeps listening, so the next change tries again. A stream that
    ///   ended on a passing network failure would leave a live screen frozen.
    /// - The stream keeps only the newest undelivered value: a consumer that is slower than the
    ///   changes gets the latest value, never a backlog.
    /// - It stops when its consumer stops iterating or its task is cancelled, and then releases
    ///   its subscription.
    ///
    /// Reloads after the first value use the `returnCacheDataElseLoad` policy whatever the
    /// request's own policy, so that a reload policy does not refetch on every change.
    ///
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - request: the request whose URL is watched.
    ///   - decoder: the decoder; see ``value(_:for:decoder:)``.
    public nonisolated func values<Value: Decodable & Sendable>(
        _ type: Value.Type = Value.self,
        for request: URLRequest,
        decoder: any ResponseDecoding = CachedTransport.defaultDecoder
    ) -> AsyncThrowingStream<Value, any Error> {
        // Watched under the URL every call keys it by (a keyed adapter may rewrite it).
        let url: URL
        do {
            guard let keyed = try keyed(request).request.url else { throw URLError(.badURL) }
            url = keyed
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
        // Registered before the first value is loaded, so no change after this call is missed.
        let changes = changes(for: .url(url))
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Value.self, bufferingPolicy: .bufferingNewest(1))
        let reload = {
            var reload = request
            reload.cachePolicy = .returnCacheDataElseLoad
            return reload
        }()
        // A task of its own: changes must be heard while the consumer is busy between elements.
        // It ends when the stream does, and cancelling it ends the loop over `changes`.
        let watcher = Task {
            var last: Data
            do {
                let first = try await self.decodedValue(type, for: request, decoder: decoder)
                last = first.data
                continuation.yield(first.value)
            } catch {
                continuation.finish(throwing: error)
                return
            }
            for await _ in changes {
                guard let next = try? await self.decodedValue(type, for: reload, decoder: decoder) else { continue }
                if next.data != last {
                    last = next.data
                    continuation.yield(next.value)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in watcher.cancel() }
        return stream
    }

    /// The value of `request` decoded as `type` when memory holds an entry the request may use,
    /// at once and without suspending; nil when the request would have to wait for the network.
    ///
    /// For what must be shown in the first frame, such as a view model's initial state: a screen
    /// made with this value never shows a loading state for data already in memory.
    ///
    /// ```swift
    /// let shown = try transport.cachedValue([Article].self, for: request)?.value
    /// ```
    ///
    /// - The request is planned as ``value(_:for:decoder:)`` plans it: it counts as a request,
    ///   a hit when memory answers, and an entry within its stale-while-revalidate window answers
    ///   and starts its background revalidation. Nothing is fetched.
    /// - The value is the one ``value(_:for:decoder:)`` shares: decoded already, or decoded here,
    ///   on the caller's thread, and kept with the entry for every later caller. Nil while another
    ///   caller decodes the entry: ``value(_:for:decoder:)`` waits for that decode.
    ///
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - request: the request, with the same key and policy rules as ``data(for:)``.
    ///   - decoder: the decoder; see ``value(_:for:decoder:)``.
    /// - Returns: the value, the bytes it was decoded from and the answer's ``CacheOutcome``; nil
    ///   when memory holds no entry that the request may use, or another caller is decoding it.
    /// - Throws: ``ValueDecodingError`` when the stored status is outside 200-299 or the body does
    ///   not decode; `URLError(.badURL)` for a request without a URL; the errors of keying the
    ///   request as every call does: a keyed adapter's, and an ``AuthenticationError`` when its
    ///   account cannot be read (``AuthenticationError/Code/partitionUnavailable``, and with
    ///   ``Accounts`` ``AuthenticationError/Code/noAccount``, ``AuthenticationError/Code/invalidAccount``,
    ///   ``AuthenticationError/Code/noCredential`` or ``AuthenticationError/Code/signedOut``).
    /// - Complexity: one locked lookup when the value is decoded already.
    public nonisolated func cachedValue<Value: Decodable & Sendable>(
        _ type: Value.Type = Value.self,
        for request: URLRequest,
        decoder: any ResponseDecoding = CachedTransport.defaultDecoder
    ) throws -> (value: Value, data: Data, outcome: CacheOutcome)? {
        guard
            case .value(let value, let data, let outcome) = try lookUpCachedValue(type, for: request, decoder: decoder)
        else { return nil }
        return (value, data, outcome)
    }

    /// The URL under which answers to `request` are stored and their changes announced, keyed as
    /// every call keys it (a keyed adapter may rewrite it); nil when its answers are never stored:
    /// another scheme or method (a `POST` to a query endpoint is stored), a query body too large to
    /// key, its own conditions, `Range` or `no-store`, or a request that cannot be keyed.
    package nonisolated func storedURL(of request: URLRequest) -> URL? {
        guard let keyed = try? keyed(request), planner.storedKey(of: keyed.request, account: keyed.account) != nil,
            RequestDirectives(keyed.request.allHTTPHeaderFields).bypass == nil
        else { return nil }
        return keyed.request.url
    }

    /// What ``cachedValue(_:for:decoder:)`` finds, telling an entry another caller is decoding
    /// from no entry the request may use: the former can be waited for without a fetch.
    ///
    /// The ``ValueDecodingError`` of an entry that gives no value carries the memory answer's
    /// outcome (`cacheOutcome`), the one its value would have carried: that failure is the answer,
    /// and a caller shows it as one, without fetching.
    package nonisolated func lookUpCachedValue<Value: Decodable & Sendable>(
        _ type: Value.Type,
        for request: URLRequest,
        decoder: any ResponseDecoding
    ) throws -> CachedValueLookup<Value> {
        let keyed = try keyed(request)
        let request = keyed.request
        guard case .memory(let answer) = try planner.plan(request, account: keyed.account), let url = request.url
        else { return .none }
        if answer.isObserved { reporter.answered(url, answer.response) }
        _ = answered(answer, to: request)
        let outcome = answer.response.cacheOutcome ?? CacheOutcome(source: .memory(answer.reason))
        let entry = answer.entry
        let valueKey = DecodedValueKey(type, decoder: decoder)
        switch store.claimDecode(valueKey, on: entry) {
        case .decoded(let decoded):
            return .value(
                unsafeDowncast(decoded, to: DecodedValue<Value>.self).value, data: entry.data, outcome: outcome)
        case .claimed:
            let result = Result {
                try decodeHere(type, from: entry.data, response: entry.response, url: url, decoder: decoder)
            }
            finishClaimedDecode(result, of: entry, key: entry.key, valueKey: valueKey, decoder: decoder)
            return .value(try result.mapError { $0.carrying(outcome) }.get(), data: entry.data, outcome: outcome)
        case .busy:
            return .decodingElsewhere(outcome: outcome) {
                try await self.sharedDecode(
                    type, of: entry, key: entry.key, valueKey: valueKey, url: url, decoder: decoder)
            }
        }
    }

    /// The value and the bytes it was decoded from: through the same plan as ``data(for:)``, with
    /// the decode shared through the stored entry whenever the answer is what is stored.
    nonisolated(nonsending) func decodedValue<Value: Decodable & Sendable>(
        _ type: Value.Type,
        for request: URLRequest,
        decoder: any ResponseDecoding
    ) async throws -> (value: Value, data: Data) {
        let keyed = try keyed(request)
        let request = keyed.request
        let plan = try planner.plan(request, account: keyed.account)
        // Present: the plan throws for a request without a URL.
        guard let url = request.url else { throw URLError(.badURL) }
        let valueKey = DecodedValueKey(type, decoder: decoder)
        switch plan {
        case .memory(let answer):
            if answer.isObserved { reporter.answered(url, answer.response) }
            _ = answered(answer, to: request)
            return try await sharedDecode(
                type, of: answer.entry, key: answer.entry.key, valueKey: valueKey, url: url, decoder: decoder)
        case .fetch(let fetchPlan):
            let (data, response) = try await perform(plan, of: request)
            if let entry = store.peek(fetchPlan.key, selectedBy: fetchPlan.fields), entry.data == data {
                return try await sharedDecode(
                    type, of: entry, key: fetchPlan.key, valueKey: valueKey, url: url, decoder: decoder)
            }
            return (try await decode(type, from: data, response: response, url: url, decoder: decoder), data)
        case .conditional, .send, .unavailable, .gatewayTimeout:
            let (data, response) = try await perform(plan, of: request)
            return (try await decode(type, from: data, response: response, url: url, decoder: decoder), data)
        }
    }

    /// The value of `entry` for `valueKey`: decoded already, decoded by another caller now, or
    /// decoded here and kept with the entry.
    private nonisolated(nonsending) func sharedDecode<Value: Decodable & Sendable>(
        _ type: Value.Type,
        of entry: StoredResponse,
        key: CacheKey,
        valueKey: DecodedValueKey,
        url: URL,
        decoder: any ResponseDecoding
    ) async throws -> (value: Value, data: Data) {
        while true {
            switch store.claimDecode(valueKey, on: entry) {
            case .decoded(let decoded):
                return (unsafeDowncast(decoded, to: DecodedValue<Value>.self).value, entry.data)
            case .claimed:
                let result: Result<Value, any Error>
                do {
                    result = .success(
                        try await decode(type, from: entry.data, response: entry.response, url: url, decoder: decoder))
                } catch {
                    result = .failure(error)
                }
                finishClaimedDecode(result, of: entry, key: key, valueKey: valueKey, decoder: decoder)
                return (try result.get(), entry.data)
            case .busy:
                let outcome = await withCheckedContinuation { continuation in
                    let registered = store.waitForDecode(valueKey, on: entry, waiter: continuation)
                    for watcher in registered.watchers { watcher.resume() }
                    if let immediate = registered.immediate { continuation.resume(returning: immediate) }
                }
                switch outcome {
                case .decoded(let decoded):
                    return (unsafeDowncast(decoded, to: DecodedValue<Value>.self).value, entry.data)
                case .failed(let error):
                    throw error
                case .retry:
                    continue
                }
            }
        }
    }

    /// Keeps the result of a decode that ``ResponseStore/claimDecode(_:on:)`` granted with its
    /// entry and hands it to the callers that waited for it.
    private nonisolated func finishClaimedDecode<Value: Sendable>(
        _ result: Result<Value, any Error>,
        of entry: StoredResponse,
        key: CacheKey,
        valueKey: DecodedValueKey,
        decoder: any ResponseDecoding
    ) {
        let retained = valueKey.settings.isInstance ? decoder : nil
        let decoded = result.map { DecodedValue($0, data: entry.data, retaining: retained) as AnyDecodedValue }
        let waiters = committer.finishDecode(
            valueKey, on: entry, for: key, with: decoded,
            limit: configuration.storage.maximumDecodedValuesPerEntry
        )
        let outcome: DecodeOutcome =
            switch decoded {
            case .success(let value): .decoded(value)
            case .failure(let error): .failed(error)
            }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// Decodes `data` as `type`, off the caller's actor, counting the decode.
    @concurrent
    private nonisolated func decode<Value: Decodable & Sendable>(
        _ type: Value.Type,
        from data: Data,
        response: URLResponse,
        url: URL,
        decoder: any ResponseDecoding
    ) async throws -> Value {
        try decodeHere(type, from: data, response: response, url: url, decoder: decoder)
    }

    /// Decodes `data` as `type` on the caller's thread, counting the decode.
    private nonisolated func decodeHere<Value: Decodable & Sendable>(
        _ type: Value.Type,
        from data: Data,
        response: URLResponse,
        url: URL,
        decoder: any ResponseDecoding
    ) throws -> Value {
        let status = (response as? HTTPURLResponse)?.statusCode
        if let status, !(200..<300).contains(status) {
            throw ValueDecodingError(.unacceptableStatus, type: type, url: url, statusCode: status)
        }
        store.record { $0.decodes += 1 }
        do {
            let value = try decoder.decode(type, from: data)
            reporter.decoded(url, type: type)
            return value
        } catch {
            throw ValueDecodingError(.decodingFailed, type: type, url: url, statusCode: status, underlyingError: error)
        }
    }
}

/// What memory holds for a request, as ``CachedTransport/lookUpCachedValue(_:for:decoder:)``
/// finds it.
package enum CachedValueLookup<Value: Sendable>: Sendable {
    /// The value, decoded already or decoded by the lookup.
    case value(Value, data: Data, outcome: CacheOutcome)
    /// The entry the request may use, which another caller is decoding now: `wait` returns that
    /// decode's value or throws its error (and decodes the entry itself when that decode failed
    /// before the wait began).
    case decodingElsewhere(outcome: CacheOutcome, wait: @Sendable () async throws -> (value: Value, data: Data))
    /// No entry the request may use.
    case none
}
