import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The only writer of a transport's stored answers: it stores fetched answers, `304` updates and
/// answers the app writes, charges decoded values, drops entries on invalidation and memory
/// pressure, reports every eviction, and announces each change after every lock is released, in
/// the order the store changed.
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
    /// The optimistic updates pending, by key. Read and written with the in-flight lock held.
    let optimistic = Locked(OptimisticLayers())

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
        storableStatusCodes = configuration.storage.storableStatusCodes
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
        switch optimistic.withLock({ $0.offerBase(entry, for: fetch.key, order: fetch.order) }) {
        case .notUnderUpdate:
            break
        case .taken(let previous):
            // Optimistic updates of the key are pending: this answer is what they roll back to,
            // and the newest provisional answer stays visible. Its bytes are compared with what
            // the key held underneath them.
            store.record { $0.stores += 1 }
            return .stored(changedBytes: previous?.data != entry.data)
        case .olderThanBase:
            return .notStored(.supersededInFlight)
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
        let cacheControl = CacheControl(http.headerValue("cache-control"))
        let storable =
            policy.followsHTTPCaching
            ? storableStatusCodes.contains(http.statusCode) && !cacheControl.mustUnderstand
                || FreshnessPolicy.httpAllowsStoring(http, cacheControl: cacheControl)
            : storableStatusCodes.contains(http.statusCode)
        guard storable else { return .status(http.statusCode) }
        // A response that sets a cookie starts or changes a session: it belongs to the exchange
        // that received it, and a later request (perhaps after a sign-out, with the same key
        // headers) must not be handed that session, whatever the header override says.
        if NotModifiedMerge.unstoredFields.contains(where: { http.headerValue($0) != nil }) { return .setsCookie }
        // What the header override did not rewrite is taken at its word. Following HTTP,
        // `must-understand` on a status it understands overrides `no-store` (RFC 9111 5.2.2.3).
        if cacheControl.noStore, !(policy.followsHTTPCaching && cacheControl.mustUnderstand) { return .noStore }
        return nil
    }

    /// The entry for an answer `fetch` brought, or nil when its `Vary` is `*`. Its response
    /// carries the outcome of a fresh answer from memory, so that a hit hands it over as it is.
    private func entry(_ data: Data, response: URLResponse, for fetch: Fetch) -> StoredResponse? {
        entry(data, response: response, key: fetch.key, request: fetch.request, requestTime: fetch.requestTime)
    }

    /// The entry for `data` and `response` as the answer to `request`, stored under `key`,
    /// asked for at `requestTime`; nil when its `Vary` is `*`.
    func entry(_ data: Data, response: URLResponse, key: CacheKey, request: URLRequest, requestTime: Date)
        -> StoredResponse?
    {
        let names = Vary.names(of: response)
        guard !names.contains("*"), let url = request.url else { return nil }
        let http = response as? HTTPURLResponse
        let stored =
            (response as? TransportHTTPURLResponse)?.outcome == .fresh
            ? response : HTTPResponseBuilder.answer(response, outcome: .fresh)
        return StoredResponse(
            key: key,
            data: data,
            response: stored,
            selector: Vary.selector(names: names, requestFields: request.allHTTPHeaderFields, keyHeaders: keyHeaders),
            request: request,
            cost: Self.cost(of: data, response: http, key: key),
            storedAt: policy.clock.now,
            lifetime: policy.lifetime(of: response, url: url, requestTime: requestTime),
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

    // MARK: - Answers the app writes

    /// Stores each of `answers` (made by ``entry(_:response:key:request:requestTime:)``) as if a
    /// fetch had brought it now, as update `update`'s provisional answers when given. A fetch of
    /// the key in flight no longer stores its (older) answer; under an update, it puts its answer
    /// under it instead (what the update rolls back to). While updates of a key are pending, an
    /// answer written without one becomes their base. Announces changed bytes.
    /// - Parameter signOuts: what ``OptimisticLayers/signOuts`` was when the update that gives
    ///   these answers began: an answer of a partition signed out since is not written.
    func commitLocal(_ answers: [StoredResponse], update: Int? = nil, signOuts: Int? = nil) {
        inFlight.withLock { machine in
            var answers = answers
            if let signOuts {
                answers.removeAll { entry in optimistic.withLock { $0.wasSignedOut(entry.key, since: signOuts) } }
            }
            let keys = Set(answers.map(\.key))
            if update == nil {
                machine.detach(where: { keys.contains($0) }, because: .supersededInFlight)
            } else {
                machine.placeUnderUpdate(keys)
            }
            for entry in answers {
                if let update {
                    optimistic.withLock {
                        $0.push(
                            entry, id: update, for: entry.key,
                            held: store.peek(entry.key, selectedBy: entry.request.allHTTPHeaderFields))
                    }
                } else if optimistic.withLock({
                    $0.setBase(entry, for: entry.key, newerThan: machine.newestFetchOrder)
                }) {
                    store.record { $0.stores += 1 }
                    continue
                }
                show(entry, replacing: nil)
            }
        }
        publishQueuedChanges()
    }

    /// Ends optimistic update `update` of `keys`: with the origin's answers in `confirmed` (by
    /// key), keeping the provisional answers in `kept` (their refetch brought nothing storable),
    /// or taken out (failed, or refetched). What each key shows is written and announced when it
    /// changes; a failed update's rollback writes nothing when the entry it showed is no longer
    /// stored (evicted or invalidated meanwhile). Once a key has no update left, the fetches of it
    /// in flight that are older than what it ended on store nothing.
    func endUpdate(
        _ update: Int, keys: [CacheKey], confirmed: [CacheKey: StoredResponse],
        kept: [CacheKey: StoredResponse] = [:], failed: Bool, signOuts: Int
    ) {
        inFlight.withLock { machine in
            for key in keys {
                let ending = optimistic.withLock {
                    $0.end(
                        update, for: key, settled: confirmed[key] ?? kept[key], newestOrder: machine.newestFetchOrder)
                }
                guard let ending else {
                    // Invalidated meanwhile: the origin's own answer is still worth storing, a
                    // provisional one is not. Signed out meanwhile: nothing of it is.
                    if let answer = confirmed[key], !optimistic.withLock({ $0.wasSignedOut(key, since: signOuts) }) {
                        show(answer, replacing: nil)
                    }
                    continue
                }
                if let order = ending.endedOn { machine.updatesEnded(for: key, on: order) }
                show(ending, of: key, rollingBack: failed)
            }
        }
        publishQueuedChanges()
    }

    /// Writes what `key` shows after an update ended, when it changed. Call with the in-flight
    /// lock held.
    private func show(_ ending: OptimisticLayers.Ending, of key: CacheKey, rollingBack: Bool) {
        let (before, after) = (ending.before, ending.after)
        guard before !== after else { return }
        let held = before.map { entry in store.state.withLock { $0.holds(entry, for: key) } } ?? false
        if rollingBack && !held { return }
        if let after {
            show(after, replacing: held ? before : nil)
        } else if let before, held, store.remove(before, for: key), let url = URL(string: key.url) {
            reporter.invalidated([key])
            broadcaster.enqueue(.invalidated(urls: [url], endpoint: nil))
        }
    }

    /// Makes `entry` the one its key shows, replacing `replacing` when given, and announces
    /// changed bytes. Call with the in-flight lock held.
    private func show(_ entry: StoredResponse, replacing: StoredResponse?) {
        guard case .stored(let changedBytes, let evicted) = store.write(entry, for: entry.key, replacing: replacing),
            let url = URL(string: entry.key.url)
        else { return }
        store.record { $0.stores += 1 }
        reporter.stored(url, bytes: entry.data.count, changedBytes: changedBytes)
        reporter.evicted(evicted)
        if changedBytes { broadcaster.enqueue(.updated(url)) }
    }

    // MARK: - Decoded values

    /// Ends a decode of `entry`'s body (see ``ResponseStore/finishDecode(_:on:for:with:limit:)``):
    /// a value kept is charged against the budget, and the entries evicted for it are reported
    /// like every other eviction.
    /// - Returns: the callers that waited for this decode, to be resumed with no lock held.
    func finishDecode(
        _ valueKey: DecodedValueKey, on entry: StoredResponse, for key: CacheKey,
        with result: Result<AnyDecodedValue, any Error>, limit: Int
    ) -> [CheckedContinuation<DecodeOutcome, Never>] {
        inFlight.withLock { _ in
            let finished = store.finishDecode(valueKey, on: entry, for: key, with: result, limit: limit)
            reporter.evicted(finished.evicted)
            return finished.waiters
        }
    }

    /// The largest entry the store takes.
    var maximumEntryCost: Int { store.maximumEntryCost }

    // MARK: - Dropping entries

    /// Drops every entry `selection` names, stops the fetches in flight for those keys from
    /// storing their answers (their callers still get them) and from being joined, and announces
    /// what `change` makes of the removed keys (nothing when it returns nil). The entries are found
    /// through the store's indexes, and their answers released after every lock.
    /// - Parameter sparingPendingUpdates: leave the keys with optimistic updates pending as they
    ///   are (the invalidation a successful unsafe request makes, perhaps the update's own write:
    ///   the update settles those keys itself).
    /// - Returns: the keys removed.
    @discardableResult
    func drop(
        _ selection: ResponseStore.KeySelection, sparingPendingUpdates: Bool = false,
        announcing change: ([CacheKey]) -> CacheChange?
    ) -> [CacheKey] {
        let (removed, released) = inFlight.withLock { machine -> ([CacheKey], Released) in
            var selection = selection
            if case .tag(let tag) = selection {
                let keys = store.keys(taggedWith: tag)
                guard !keys.isEmpty else { return ([], Released()) }
                selection = .keys(keys)
            }
            let spared = sparingPendingUpdates ? optimistic.withLock { $0.pendingKeys } : []
            func matches(_ key: CacheKey) -> Bool { selection.selects(key) && !spared.contains(key) }
            machine.detach(where: matches)
            let removal = store.removeKeys(selection, sparing: spared)
            // What an invalidation dropped, no rollback brings back.
            optimistic.withLock { $0.forget(where: matches) }
            reporter.invalidated(removal.keys)
            // Naming every URL dropped costs a URL each: only when someone listens.
            if broadcaster.count > 0, let change = change(removal.keys) { broadcaster.enqueue(change) }
            return (removal.keys, removal.released)
        }
        released.release()
        publishQueuedChanges()
        return removed
    }

    /// Drops every entry, stops every fetch in flight from storing its answer and from being
    /// joined, and announces ``CacheChange/cleared``. The entries are taken out at once and
    /// released after every lock (a slice at a time on ``ReleaseQueue`` when there are many).
    func dropAll() {
        let released = inFlight.withLock { machine -> Released in
            machine.detach(where: { _ in true })
            let emptied = store.removeEverything(because: .invalidated)
            optimistic.withLock { $0.forget(where: { _ in true }) }
            if reporter.isListening {
                var keys: [CacheKey] = []
                emptied.entries.forEachEntry { key, _ in keys.append(key) }
                reporter.invalidated(keys)
            }
            broadcaster.enqueue(.cleared)
            var released = Released()
            let count = emptied.count
            // Moved, so that the last reference is the one the release queue lets go of.
            released.append(consume emptied, count: count)
            return released
        }
        released.release()
        publishQueuedChanges()
    }

    /// Drops everything of `partition`: its entries (with their decoded values), the tags naming
    /// them, its pending optimistic updates, and its fetches in flight, which neither store nor
    /// answer; announces the URLs dropped like an invalidation.
    /// - Returns: the callers of those fetches, to fail, and their loads, to cancel, once every
    ///   lock is released.
    /// - Complexity: O(n) in the keys held, read a batch at a time under the lock a hit takes.
    func dropPartition(_ partition: String) -> (waiters: [Waiter], loads: [any NetworkLoad]) {
        func belongs(_ key: CacheKey) -> Bool { key.partition == partition }
        let (abandoned, released) = inFlight.withLock {
            machine -> ((waiters: [Waiter], loads: [any NetworkLoad]), Released) in
            let abandoned = machine.abandon(where: belongs)
            let held = store.copyHeld { key, _ in belongs(key) ? key : nil }
            let removal = store.removeKeys(.keys(Set(held)), sparing: [])
            for key in removal.keys { store.forgetDeparture(of: key) }
            store.pruneTags(keeping: machine.keysInFlight)
            optimistic.withLock { layers in
                layers.forget(where: belongs)
                layers.signOut(partition)
            }
            reporter.invalidated(removal.keys)
            if broadcaster.count > 0, !removal.keys.isEmpty {
                broadcaster.enqueue(.invalidated(urls: Self.urls(of: removal.keys.map(\.url)), endpoint: nil))
            }
            return (abandoned, removal.released)
        }
        released.release()
        publishQueuedChanges()
        return abandoned
    }

    /// Gives memory back for `pressure` (see ``CachedTransport/trim(for:)``). Fetches in flight
    /// are not touched: a trim is about memory, not freshness.
    func trim(for pressure: MemoryPressure) {
        let released = inFlight.withLock { _ -> Released in
            let removal = store.trim(for: pressure)
            guard !removal.keys.isEmpty else { return removal.released }
            reporter.evicted(removal.keys)
            switch pressure {
            case .warning:
                broadcaster.enqueue(.invalidated(urls: Self.urls(of: removal.keys.map(\.url)), endpoint: nil))
            case .critical: broadcaster.enqueue(.cleared)
            }
            return removal.released
        }
        // Memory the system wants back at once is freed at once, whatever a hit waits meanwhile.
        released.release(atOnce: pressure == .critical)
        publishQueuedChanges()
    }

    /// Every held variant, most recently used first, read a few entries at a time.
    func heldEntries() -> [StoredResponse] {
        inFlight.withLock { _ in store.copyHeld { _, variants in variants.all } }.flatMap { $0 }
    }

    /// Every held variant whose URL one of `endpoints` matches, most recently used first: the keys
    /// of a URL, a host or a path prefix are found through the store's index, as an invalidation
    /// of those endpoints finds them; a predicate is asked about every key, outside every lock.
    func heldEntries(of endpoints: [Endpoint]) -> [StoredResponse] {
        var predicates: [Endpoint] = []
        var keys = Set<CacheKey>()
        let everyKey = store.index.withLock { index -> [CacheKey] in
            for endpoint in endpoints {
                if let found = index.keys(endpoint) { keys.formUnion(found) } else { predicates.append(endpoint) }
            }
            return predicates.isEmpty ? [] : index.keys
        }
        for key in everyKey where predicates.contains(where: { $0.matches(normalizedURL: key.url) }) {
            keys.insert(key)
        }
        return store.copyHeld(Array(keys)) { _, variants in variants.all }.flatMap { $0 }
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
