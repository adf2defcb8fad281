import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The only writer of a transport's stored answers: it stores fetched answers and `304` updates, drops
/// entries on invalidation and memory pressure, and announces each change after every lock is
/// released, in the order the store changed.
///
/// Every change it makes holds the in-flight lock (fetch completions call it with that lock held;
/// its own operations take it), so that an invalidation and a fetch's store never interleave and
/// the changes queue up in store order. ``publishQueuedChanges()`` delivers them once the caller
/// holds no lock.
final class Committer: Sendable {
    let store: ResponseStore
    let broadcaster: ChangeBroadcaster
    /// Reports what the transport does (``CachedTransport/events()``, and the platform's log).
    let reporter: TransportEvents
    let inFlight: Locked<FetchStateMachine>
    private let policy: FreshnessPolicy
    private let keyHeaders: KeyHeaders
    private let storableStatusCodes: Set<Int>
    /// The header override the transport reads responses through; nil when following HTTP.
    private let cacheOverride: CacheOverride?

    init(
        store: ResponseStore,
        broadcaster: ChangeBroadcaster,
        reporter: TransportEvents,
        inFlight: Locked<FetchStateMachine>,
        policy: FreshnessPolicy,
        keyHeaders: KeyHeaders,
        configuration: CachedTransport.Configuration
    ) {
        self.store = store
        self.broadcaster = broadcaster
        self.reporter = reporter
        self.inFlight = inFlight
        self.policy = policy
        self.keyHeaders = keyHeaders
        storableStatusCodes = configuration.storableStatusCodes
        cacheOverride = configuration.effectiveCacheOverride
    }

    // MARK: - Fetched answers

    typealias NotStoredReason = CacheOutcome.NotStoredReason

    /// `response` as the transport reads it: through the header override when it applies (a
    /// no-op on what already came through it, so the decision does not depend on the loader),
    /// or, when following HTTP, without the fields that describe only the connection.
    func prepared(_ response: URLResponse) -> URLResponse {
        guard let http = response as? HTTPURLResponse else { return response }
        guard let cacheOverride else { return HTTPResponseBuilder.withoutConnectionFields(http) }
        guard let url = http.url, cacheOverride.applies(to: url) else { return response }
        return cacheOverride.rewritten(http)
    }

    /// Stores a fetched answer (already ``prepared(_:)``) when it may be stored, and queues
    /// ``CacheChange/updated(_:)`` when its bytes changed. Call with the in-flight lock held.
    func commitFetched(_ data: Data, response: URLResponse, for fetch: Fetch) -> CacheOutcome.Storage {
        let storage = write(data, response: response, for: fetch)
        if let url = fetch.request.url { report(storage, of: url, bytes: data.count) }
        return storage
    }

    private func report(_ storage: CacheOutcome.Storage, of url: URL, bytes: Int) {
        switch storage {
        case .stored(let changedBytes): reporter.stored(url, bytes: bytes, changedBytes: changedBytes)
        case .notStored(let reason): reporter.notStored(url, reason)
        }
    }

    private func write(_ data: Data, response: URLResponse, for fetch: Fetch) -> CacheOutcome.Storage {
        // A fetch superseded in flight leaves the reason its key left (an invalidation) in place.
        if let superseded = fetch.supersededBecause { return .notStored(superseded) }
        let unstorable = reasonNotToStore(response)
        guard unstorable == nil, let entry = entry(data, response: response, for: fetch) else {
            // The key was asked for anew and answered: why it once left no longer explains a miss.
            store.forgetDeparture(of: fetch.key)
            return .notStored(unstorable ?? .variesOnEverything)
        }
        switch store.write(entry, for: fetch.key) {
        case .stored(let changedBytes, let evicted):
            store.record { $0.stores += 1 }
            if changedBytes, let url = URL(string: fetch.key.url) { broadcaster.enqueue(.updated(url)) }
            reporter.evicted(evicted)
            return .stored(changedBytes: changedBytes)
        case .tooLarge, .replacedEntryGone:
            return .notStored(.tooLarge)
        }
    }

    /// Takes a `304 Not Modified` for `validated`, the entry `fetch` asked the origin to confirm:
    /// the stored headers are updated (``NotModifiedMerge``), its `Vary` selects from now on, and
    /// its age restarts. Call with the in-flight lock held.
    /// - Returns: the stored body, the response for the fetch's callers (which carries the 304's
    ///   `Set-Cookie`, never stored) and what became of the entry, or nil when `validated` is no
    ///   longer stored.
    func commitNotModified(_ notModified: HTTPURLResponse, confirming validated: StoredResponse, for fetch: Fetch)
        -> (data: Data, response: URLResponse, storage: CacheOutcome.Storage)?
    {
        let confirmed = merge(notModified, confirming: validated, for: fetch)
        if let confirmed, let url = fetch.request.url {
            report(confirmed.storage, of: url, bytes: confirmed.data.count)
        }
        return confirmed
    }

    private func merge(_ notModified: HTTPURLResponse, confirming validated: StoredResponse, for fetch: Fetch)
        -> (data: Data, response: URLResponse, storage: CacheOutcome.Storage)?
    {
        let merged = NotModifiedMerge.merge(
            validated.response, with: prepared(notModified) as? HTTPURLResponse ?? notModified)
        let answer = { (storage: CacheOutcome.Storage) in (validated.data, merged.answered, storage) }
        if let superseded = fetch.supersededBecause {
            // Superseded by a newer reload: the body is confirmed, but the store is not this
            // fetch's to change.
            guard store.state.withLock({ $0.holds(validated, for: fetch.key) }) else { return nil }
            store.record { $0.notModified += 1 }
            return answer(.notStored(superseded))
        }
        let unstorable = reasonNotToStore(merged.stored)
        guard unstorable == nil, let updated = entry(validated.data, response: merged.stored, for: fetch) else {
            // The origin now says the representation may not be stored (`no-store`) or varies on
            // everything: it answers this exchange, and no other request.
            let reason = unstorable ?? .variesOnEverything
            return store.remove(validated, for: fetch.key) ? answer(.notStored(reason)) : nil
        }
        switch store.write(updated, for: fetch.key, replacing: validated) {
        case .stored(_, let evicted):
            store.record { $0.notModified += 1 }
            reporter.evicted(evicted)
            return answer(.stored(changedBytes: false))
        case .replacedEntryGone:
            return nil
        case .tooLarge:
            _ = store.remove(validated, for: fetch.key)
            return answer(.notStored(.tooLarge))
        }
    }

    /// Why `response` must not be stored, or nil when it may be.
    private func reasonNotToStore(_ response: URLResponse) -> NotStoredReason? {
        guard let http = response as? HTTPURLResponse else { return .status(0) }
        // A partial answer is never the whole resource a later request wants, and a 304 has no
        // body of its own, whatever the storable statuses say.
        if http.statusCode == 206 { return .partialContent }
        if http.statusCode == 304 { return .status(304) }
        let storable =
            storableStatusCodes.contains(http.statusCode)
            // HTTP caching stores any final status that states its own freshness.
            || (policy.followsHTTPCaching && (200..<600).contains(http.statusCode)
                && FreshnessPolicy.hasExplicitFreshness(http))
        guard storable else { return .status(http.statusCode) }
        // A response that sets a cookie starts or changes a session: it belongs to the exchange
        // that received it, and a later request (perhaps after a sign-out, with the same key
        // headers) must not be handed that session, whatever the header override says.
        if NotModifiedMerge.unstoredFields.contains(where: { http.headerValue($0) != nil }) { return .setsCookie }
        // What the header override did not rewrite is taken at its word.
        if let cacheControl = http.headerValue("cache-control"), CacheControl(cacheControl).noStore {
            return .noStore
        }
        return nil
    }

    /// The entry for an answer `fetch` brought, or nil when its `Vary` is `*`. Its response
    /// carries the outcome of a fresh answer from memory, so that a hit hands it over as it is.
    private func entry(_ data: Data, response: URLResponse, for fetch: Fetch) -> StoredResponse? {
        let names = Vary.names(of: response)
        guard !names.contains("*"), let url = fetch.request.url else { return nil }
        let http = response as? HTTPURLResponse
        let stored =
            (response as? TransportHTTPURLResponse)?.outcome == .fresh
            ? response : HTTPResponseBuilder.answer(response, outcome: .fresh)
        return StoredResponse(
            key: fetch.key,
            data: data,
            response: stored,
            selector: Vary.selector(
                names: names, requestFields: fetch.request.allHTTPHeaderFields, keyHeaders: keyHeaders),
            request: fetch.request,
            cost: Self.cost(of: data, response: http, key: fetch.key),
            storedAt: policy.clock.now,
            lifetime: policy.lifetime(of: response, url: url, requestTime: fetch.requestTime),
            entityTag: http?.headerValue("etag"),
            lastModified: http?.headerValue("last-modified")
        )
    }

    /// The bytes an entry is charged against the budget: the body, the URL and header text, and a
    /// fixed allowance for the bookkeeping around them.
    static func cost(of data: Data, response: HTTPURLResponse?, key: CacheKey) -> Int {
        var cost = data.count + key.url.utf8.count + StoredResponse.fixedOverhead
        for value in key.identity { cost += value?.utf8.count ?? 0 }
        if let response {
            for field in HeaderFields(of: response).byLowercasedName.values {
                cost += field.name.utf8.count + field.value.utf8.count
            }
        }
        return cost
    }

    // MARK: - Dropping entries

    /// Drops every entry whose key satisfies `matches`, stops the fetches in flight for those keys
    /// from storing their answers (their callers still get them) and from being joined, and
    /// announces what `change` makes of the removed keys (nothing when it returns nil).
    func drop(where matches: (CacheKey) -> Bool, announcing change: ([CacheKey]) -> CacheChange?) {
        inFlight.withLock { machine in
            machine.detach(where: matches)
            let removed = store.removeAll(where: matches)
            reporter.invalidated(removed)
            if let change = change(removed) { broadcaster.enqueue(change) }
        }
        publishQueuedChanges()
    }

    /// Gives memory back for `pressure` (see ``CachedTransport/trim(for:)``). Fetches in flight
    /// are not touched: a trim is about memory, not freshness.
    func trim(for pressure: MemoryPressure) {
        inFlight.withLock { _ in
            let removed = store.trim(for: pressure)
            guard !removed.isEmpty else { return }
            reporter.evicted(removed)
            switch pressure {
            case .warning: broadcaster.enqueue(.invalidated(urls: Self.urls(of: removed.map(\.url)), endpoint: nil))
            case .critical: broadcaster.enqueue(.cleared)
            }
        }
        publishQueuedChanges()
    }

    /// Delivers the queued changes to the subscribers. Call with no lock held.
    func publishQueuedChanges() {
        broadcaster.deliverQueued()
    }

    /// Distinct URLs of normalised URL strings, in a stable order.
    static func urls(of normalized: some Sequence<String>) -> [URL] {
        Set(normalized).sorted().compactMap { URL(string: $0) }
    }
}
