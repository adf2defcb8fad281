import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An answer the app writes into a transport itself: what a request will get, before or instead of
/// the origin's (``CachedTransport/store(_:)``, ``CachedTransport/optimisticUpdate(_:write:confirmed:)``).
public struct ProvisionalAnswer: Sendable {
    /// The request it answers: its method (`GET` or `HEAD`, or a query `POST`, see
    /// ``CachedTransport/Configuration/Network/queryEndpoints``), URL and identity headers make the key.
    public var request: URLRequest
    /// The body.
    public var data: Data
    /// The response; nil for `200 OK` with `Content-Type: application/json`.
    public var response: HTTPURLResponse?

    /// An answer of `data` (and `response`, or `200 OK` as JSON) to `request`.
    public init(for request: URLRequest, data: Data, response: HTTPURLResponse? = nil) {
        self.request = request
        self.data = data
        self.response = response
    }

    /// An answer of `value` encoded by `encoder` to `request`, for ``CachedTransport/value(_:for:decoder:)``
    /// and `values` callers.
    /// - Throws: the encoder's error.
    public init<Value: Encodable>(for request: URLRequest, value: Value, encoder: JSONEncoder = JSONEncoder()) throws {
        self.init(for: request, data: try encoder.encode(value))
    }
}

/// Why the transport refused an answer the app wrote. Nothing was written.
public enum LocalWriteError: Error, Sendable, Equatable {
    /// The request is not one the transport stores: another method than `GET` or `HEAD` (or a
    /// query `POST`), another scheme than `http` or `https`, or no URL; or an answer the transport
    /// would not store had the origin sent it: a status outside
    /// ``CachedTransport/Configuration/Storage/storableStatusCodes``, a `Set-Cookie`, or a `no-store` or
    /// `Vary: *` that the header override does not rewrite (it does by default).
    case notCacheable(URL?)
    /// The answer is larger than the largest entry the store takes
    /// (``CachedTransport/Configuration/Storage/maximumEntryShare`` of the capacity).
    case tooLarge(URL)
}

extension CachedTransport {
    /// Stores `answer` as if the origin had just sent it: requests for its key are answered with
    /// it from memory, watchers hear ``CacheChange/updated(_:)`` when its bytes differ from what
    /// was held, and `values` streams yield it. A fetch of the key already in flight no longer
    /// stores its (older) answer.
    ///
    /// ```swift
    /// try transport.store(ProvisionalAnswer(for: URLRequest(url: articlesURL), value: articles))
    /// ```
    ///
    /// - Throws: ``LocalWriteError``; ``AuthenticationError/Code/signedOut`` when the account it is
    ///   keyed for was signed out while it was written; the errors of keying its request (see
    ///   ``RequestAdapter``, ``Accounts``). Then nothing is written.
    public nonisolated func store(_ answer: ProvisionalAnswer) throws {
        // Read before the request is keyed: a sign-out of its account from then on refuses it.
        let signOuts = inFlight.withLock { $0.optimistic.signOuts }
        let entry = try entry(for: answer, keyed: try keyed(answer.request))
        if !committer.commitLocal([entry], signOuts: signOuts) { throw AuthenticationError(.signedOut) }
    }

    /// Shows `provisional` at once, everywhere, then runs `write` (usually the `POST` or `PUT` that
    /// makes the change), and settles:
    /// - when `write` returns, each key for which `confirmed` gives the origin's answer shows it;
    /// - every other key is refetched, the provisional answer visible until the origin's arrives
    ///   (or, if that refetch fails or brings an answer that is not stored, staying as the
    ///   answer): all of them when `confirmed` gives nil (the default) or throws, and a key whose
    ///   confirmed answer cannot be stored (too large, or not cacheable);
    /// - when `write` throws (a cancelled task included), each key rolls back to the exact bytes
    ///   it held before, or to nothing if it held nothing, and the error is rethrown; or to a
    ///   newer answer, when a fetch of the key that began before the update ended while it was
    ///   pending.
    ///
    /// Each change of what a key shows is announced. Two updates of one key apply in the order
    /// they were made: the newest pending one is visible, one that fails is taken out wherever it
    /// is, so the other stays visible. A fetch that began before the update never shows over it;
    /// one that ends while it is pending becomes what it rolls back to (its outcome's
    /// ``CacheOutcome/Storage/stored(changedBytes:)`` compares it with what the key held underneath
    /// the update, not with the provisional answer). An entry invalidated or evicted meanwhile is
    /// not brought back by a rollback; the invalidation a successful `POST`, `PUT`, `PATCH` or
    /// `DELETE` makes (RFC 9111 section 4.4), such as the write's own to the same URL, leaves the
    /// key to the update, which settles it. While the update is pending, reads of an entry within
    /// its stale-while-revalidate window start one background revalidation at most.
    ///
    /// ```swift
    /// let created = try await transport.optimisticUpdate(
    ///     [ProvisionalAnswer(for: listRequest, value: articles + [draft])],
    ///     write: { try await api.post(draft) })
    /// ```
    ///
    /// - Returns: what `write` returned.
    /// - Throws: ``LocalWriteError`` before anything is shown or written; what `write` threw, after
    ///   the rollback; once every key has settled, what `confirmed` threw, or the
    ///   ``LocalWriteError`` of the first confirmed answer that could not be stored (naming its URL).
    public nonisolated(nonsending) func optimisticUpdate<Output>(
        _ provisional: [ProvisionalAnswer],
        write: () async throws -> Output,
        confirmed: (Output) throws -> [ProvisionalAnswer]? = { _ in nil }
    ) async throws -> Output {
        // Read before anything is keyed: a sign-out of the update's account from then on leaves
        // nothing of it.
        let signOuts = inFlight.withLock { $0.optimistic.signOuts }
        // Every answer of the update, the confirmed ones too, is keyed for the account it began
        // with: a credential of another account set while the write runs never gets them.
        let account = try preparation?.currentAccount
        func entry(for answer: ProvisionalAnswer) throws -> StoredResponse {
            try self.entry(
                for: answer, keyed: try preparation?.keyed(answer.request, for: account) ?? keyed(answer.request))
        }
        // One provisional answer per key: the last given.
        var entries: [StoredResponse] = []
        for entry in try provisional.map(entry(for:)) {
            entries.removeAll { $0.key == entry.key }
            entries.append(entry)
        }
        let keys = entries.map(\.key)
        let update = inFlight.withLock { $0.optimistic.nextID() }
        committer.commitLocal(entries, update: update, signOuts: signOuts)
        let output: Output
        do {
            output = try await write()
        } catch {
            committer.endUpdate(update, keys: keys, confirmed: [:], failed: true, signOuts: signOuts)
            throw error
        }
        // Its partition was signed out meanwhile: nothing of it is confirmed or refetched (and
        // what a sign-out during the refetches leaves is refused where it would be written).
        if inFlight.withLock({ machine in keys.contains { machine.optimistic.wasSignedOut($0, since: signOuts) } }) {
            return output
        }
        var settlement = Settlement()
        do {
            for answer in try confirmed(output) ?? [] { settlement.take(Result { try entry(for: answer) }) }
        } catch {
            settlement.refusal = settlement.refusal ?? error
        }
        var kept: [CacheKey: StoredResponse] = [:]
        for entry in entries where settlement.byKey[entry.key] == nil {
            if await !refetch(entry) { kept[entry.key] = entry }
        }
        committer.endUpdate(
            update, keys: keys, confirmed: settlement.byKey, kept: kept, failed: false, signOuts: signOuts)
        let others = settlement.entries.filter { !keys.contains($0.key) }
        if !others.isEmpty { committer.commitLocal(others, signOuts: signOuts) }
        if let refusal = settlement.refusal { throw refusal }
        return output
    }

    /// Refetches the key of `provisional` while it still shows, so that the origin's answer
    /// becomes what its update ends on.
    /// - Returns: whether the key moved on: the answer was stored, or left unstored because the key
    ///   was invalidated or a newer answer came meanwhile. False when the refetch failed or its
    ///   answer was refused: the provisional answer then stays.
    private nonisolated(nonsending) func refetch(_ provisional: StoredResponse) async -> Bool {
        let keyed = KeyedRequest(
            request: provisional.request, account: provisional.key.account.map(AccountIdentity.init))
        guard let (_, response) = try? await refresh(keyed) else { return false }
        switch response.cacheOutcome?.storage {
        case .stored: return true
        case .notStored(let reason): return !reason.refusesAnswer
        case nil: return false
        }
    }

    /// What an optimistic update settles on once its write has returned: the confirmed answers by
    /// key, and the first reason one could not be taken.
    private struct Settlement {
        var byKey: [CacheKey: StoredResponse] = [:]
        /// The confirmed answers that could be stored, in the order given.
        var entries: [StoredResponse] = []
        var refusal: (any Error)?

        /// Takes the entry of a confirmed answer, or the reason it cannot be stored: then its key
        /// settles as if no answer had been given for it, and the first such reason is reported.
        mutating func take(_ made: Result<StoredResponse, any Error>) {
            switch made {
            case .success(let entry):
                byKey[entry.key] = entry
                entries.append(entry)
            case .failure(let error):
                refusal = refusal ?? error
            }
        }
    }

    /// The entry `answer` makes, its request keyed as `keyed` (as ``data(for:)`` keys it, so the
    /// entry is the one its reads find), checked before anything is written.
    private nonisolated func entry(for answer: ProvisionalAnswer, keyed: KeyedRequest) throws -> StoredResponse {
        let request = keyed.request
        guard let url = request.url, let key = planner.storedKey(of: request, account: keyed.account) else {
            throw LocalWriteError.notCacheable(request.url)
        }
        let response: URLResponse =
            answer.response
            ?? HTTPResponseBuilder.response(
                url: url, statusCode: 200, headerFields: HeaderFields(["Content-Type": "application/json"]),
                outcome: .fresh)
        let reading = planner.policy.clock.reading
        switch committer.storability(
            of: answer.data, response: committer.prepared(response), key: key, request: request,
            requestTime: reading.date, settings: planner.policy.settings(for: url), at: reading)
        {
        case .storable(let entry): return entry
        case .notStorable(.tooLarge): throw LocalWriteError.tooLarge(url)
        case .notStorable: throw LocalWriteError.notCacheable(url)
        }
    }
}
