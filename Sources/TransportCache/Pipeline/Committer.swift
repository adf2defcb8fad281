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
/// its own operations take it), so that a fetch's store and each step of a removal never
/// interleave and the changes queue up in store order; an invalidation, which runs in steps, is
/// announced once, after its last (``invalidate(_:endpoint:sparingPendingUpdates:)``).
/// ``publishQueuedChanges()`` delivers them once the caller holds no lock.
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
    /// Held through each invalidation, so that they run one at a time: an invalidation takes its
    /// keys out of the store's index before it removes them in steps, and one that began meanwhile
    /// would not find them. Only invalidations wait for it; it comes before the in-flight lock.
    let invalidations = Locked((), rank: .invalidation)

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

    /// `response` as the transport reads it: through the header override when it applies, or,
    /// when following HTTP, without the fields that describe only the connection. The one place
    /// the override is applied to what the transport stores: each fetched answer (304s included)
    /// once as it arrives, from any loader, and each answer the app writes.
    func prepared(_ response: URLResponse) -> URLResponse {
        guard let http = response as? HTTPURLResponse else { return response }
        guard let cacheOverride else { return HTTPResponseBuilder.withoutConnectionFields(http) }
        guard let url = http.url, cacheOverride.applies(to: url) else { return response }
        return cacheOverride.rewritten(http)
    }

    /// Stores a fetched answer (already ``prepared(_:)``) when it may be stored, and queues
    /// ``CacheChange/updated(_:)`` when its bytes changed, received at `reading`. Call with the
    /// in-flight lock held.
    func commitFetched(
        _ data: Data, response: URLResponse, for fetch: Fetch, at reading: ClockReading,
        in machine: inout FetchStateMachine
    ) -> CacheOutcome.Storage {
        let storage = write(data, response: response, for: fetch, at: reading, in: &machine)
        if let url = fetch.request.url { report(storage, of: url, bytes: data.count) }
        return storage
    }

    private func report(_ storage: CacheOutcome.Storage, of url: URL, bytes: Int) {
        switch storage {
        case .stored(let changedBytes): reporter.stored(url, bytes: bytes, changedBytes: changedBytes)
        case .notStored(let reason): reporter.notStored(url, reason)
        }
    }

    private func write(
        _ data: Data, response: URLResponse, for fetch: Fetch, at reading: ClockReading,
        in machine: inout FetchStateMachine
    ) -> CacheOutcome.Storage {
        // A fetch superseded in flight leaves the reason its key left (an invalidation) in place.
        if let superseded = fetch.supersededBecause { return .notStored(superseded) }
        let entry: StoredResponse
        switch storability(of: data, response: response, for: fetch, at: reading) {
        case .storable(let storable): entry = storable
        case .notStorable(let reason):
            // The key was asked for anew and answered: why it once left no longer explains a miss.
            store.forgetDeparture(of: fetch.key)
            return .notStored(reason)
        }
        switch machine.optimistic.offerBase(entry, for: fetch.key, order: fetch.order) {
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
        switch store.write(entry, for: fetch.key, unread: !fetch.hasReader) {
        case .stored(let changedBytes, let evicted):
            store.record { $0.stores += 1 }
            if changedBytes, let url = URL(string: fetch.key.url) { broadcaster.enqueue(.updated(url)) }
            reporter.evicted(evicted)
            return .stored(changedBytes: changedBytes)
        case .replacedEntryGone:
            // Not asked for: a fetched answer replaces no particular entry.
            return .notStored(.supersededInFlight)
        }
    }

    /// Takes a `304 Not Modified` for `validated`, the entry `fetch` asked the origin to confirm:
    /// the stored headers are updated (``NotModifiedMerge``), its `Vary` selects from now on, and
    /// its age restarts. Call with the in-flight lock held.
    /// - Returns: the stored body, the response for the fetch's callers (which carries the 304's
    ///   `Set-Cookie`, never stored) and what became of the entry, or nil when `validated` is no
    ///   longer stored.
    func commitNotModified(
        _ notModified: HTTPURLResponse, confirming validated: StoredResponse, for fetch: Fetch,
        at reading: ClockReading, in machine: inout FetchStateMachine
    ) -> (data: Data, response: URLResponse, storage: CacheOutcome.Storage)? {
        let confirmed = merge(notModified, confirming: validated, for: fetch, at: reading, in: &machine)
        if let confirmed, let url = fetch.request.url {
            report(confirmed.storage, of: url, bytes: confirmed.data.count)
        }
        return confirmed
    }

    private func merge(
        _ notModified: HTTPURLResponse, confirming validated: StoredResponse, for fetch: Fetch,
        at reading: ClockReading, in machine: inout FetchStateMachine
    ) -> (data: Data, response: URLResponse, storage: CacheOutcome.Storage)? {
        let merged = NotModifiedMerge.merge(validated.response, with: notModified)
        let answer = { (storage: CacheOutcome.Storage) in (validated.data, merged.answered, storage) }
        if let superseded = fetch.supersededBecause {
            // Superseded by a newer reload: the body is confirmed, but the store is not this
            // fetch's to change.
            guard store.state.withLock({ $0.holds(validated, for: fetch.key) }) else { return nil }
            store.record { $0.notModified += 1 }
            return answer(.notStored(superseded))
        }
        let updated: StoredResponse
        switch storability(of: validated.data, response: merged.stored, for: fetch, at: reading) {
        case .storable(let storable): updated = storable
        case .notStorable(let reason):
            // The origin now says the representation may not be stored (`no-store`), varies on
            // everything, or its headers outgrew the entry: it answers this exchange, and no other
            // request.
            guard !remove(.variant(validated, of: fetch.key), in: &machine).keys.isEmpty else { return nil }
            // The key was asked for anew and answered: why it left no longer explains a miss.
            store.forgetDeparture(of: fetch.key)
            return answer(.notStored(reason))
        }
        switch store.write(updated, for: fetch.key, replacing: validated, unread: !fetch.hasReader) {
        case .stored(_, let evicted):
            store.record { $0.notModified += 1 }
            reporter.evicted(evicted)
            return answer(.stored(changedBytes: false))
        case .replacedEntryGone:
            return nil
        }
    }

    /// Whether an answer may be stored, and if so the entry it makes.
    enum Storability {
        case storable(StoredResponse)
        case notStorable(NotStoredReason)
    }

    /// Whether `data` and `response` (already ``prepared(_:)``), the answer to `request` keyed
    /// `key`, may be stored, and the entry they make when they may: the one decision every writer
    /// asks (fetched answers, `304` merges, answers the app writes, optimistic confirmations).
    ///
    /// Not stored: what is not HTTP, a `206` or a `304`, a status outside the storable ones (or,
    /// following HTTP, one HTTP does not let a cache store), a `Set-Cookie`, a `no-store` the
    /// override left, a `Vary: *`, and an entry larger than the largest the store takes.
    ///
    /// The entry lives as long as `settings` (its URL's, read with no lock held) and HTTP say for
    /// an answer to a request sent at `requestTime` and received at `reading`.
    func storability(
        of data: Data, response: URLResponse, key: CacheKey, request: URLRequest, requestTime: Date,
        settings: FreshnessPolicy.Settings, at reading: ClockReading
    ) -> Storability {
        if let reason = reasonNotToStore(response) { return .notStorable(reason) }
        guard
            let entry = entry(
                data, response: response, key: key, request: request, requestTime: requestTime, settings: settings,
                at: reading)
        else { return .notStorable(.variesOnEverything) }
        guard store.fits(entry.cost) else { return .notStorable(.tooLarge) }
        return .storable(entry)
    }

    /// ``storability(of:response:key:request:requestTime:settings:at:)`` of what `fetch` brought;
    /// an answer too large to keep, which its callers still get, is counted in
    /// ``CacheStatistics/rejectedTooLarge``.
    private func storability(of data: Data, response: URLResponse, for fetch: Fetch, at reading: ClockReading)
        -> Storability
    {
        let verdict = storability(
            of: data, response: response, key: fetch.key, request: fetch.request, requestTime: fetch.requestTime,
            settings: fetch.settings, at: reading)
        if case .notStorable(.tooLarge) = verdict { store.record { $0.rejectedTooLarge += 1 } }
        return verdict
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

    /// The entry for `data` and `response` as the answer to `request`, stored under `key`,
    /// asked for at `requestTime`; nil when its `Vary` is `*`. Its response carries the outcome of
    /// a fresh answer from memory, so that a hit hands it over as it is.
    private func entry(
        _ data: Data, response: URLResponse, key: CacheKey, request: URLRequest, requestTime: Date,
        settings: FreshnessPolicy.Settings, at reading: ClockReading
    ) -> StoredResponse? {
        let names = Vary.names(of: response)
        guard !names.contains("*"), request.url != nil else { return nil }
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
            storedAt: reading.now,
            lifetime: policy.lifetime(
                of: response, settings: settings, requestTime: requestTime, responseTime: reading.date),
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

    /// Stores each of `answers` (made by ``storability(of:response:key:request:requestTime:settings:at:)``) as if a
    /// fetch had brought it now, as update `update`'s provisional answers when given. A fetch of
    /// the key in flight no longer stores its (older) answer; under an update, it puts its answer
    /// under it instead (what the update rolls back to). While updates of a key are pending, an
    /// answer written without one becomes their base. Announces changed bytes.
    /// - Parameter signOuts: what ``OptimisticLayers/signOuts`` was when the write that gives
    ///   these answers began: an answer of a partition signed out since is not written.
    /// - Returns: false when an answer was not written because its partition was signed out.
    @discardableResult
    func commitLocal(_ answers: [StoredResponse], update: Int? = nil, signOuts: Int? = nil) -> Bool {
        let allWritten = inFlight.withLock { machine in
            var answers = answers
            let given = answers.count
            if let signOuts {
                answers.removeAll { entry in machine.optimistic.wasSignedOut(entry.key, since: signOuts) }
            }
            let keys = Set(answers.map(\.key))
            if update == nil {
                machine.detach(where: { keys.contains($0) }, because: .supersededInFlight)
            } else {
                machine.placeUnderUpdate(keys)
            }
            for entry in answers {
                if let update {
                    machine.optimistic.push(
                        entry, id: update, for: entry.key,
                        held: store.peek(entry.key, selectedBy: entry.request.allHTTPHeaderFields))
                } else if machine.optimistic.setBase(entry, for: entry.key, newerThan: machine.newestFetchOrder) {
                    store.record { $0.stores += 1 }
                    continue
                }
                show(entry, replacing: nil)
            }
            return answers.count == given
        }
        publishQueuedChanges()
        return allWritten
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
                let ending = machine.optimistic.end(
                    update, for: key, settled: confirmed[key] ?? kept[key], newestOrder: machine.newestFetchOrder)
                guard let ending else {
                    // Invalidated meanwhile: the origin's own answer is still worth storing, a
                    // provisional one is not. Signed out meanwhile: nothing of it is.
                    if let answer = confirmed[key], !machine.optimistic.wasSignedOut(key, since: signOuts) {
                        show(answer, replacing: nil)
                    }
                    continue
                }
                if let order = ending.endedOn { machine.updatesEnded(for: key, on: order) }
                show(ending, of: key, rollingBack: failed, in: &machine)
            }
        }
        publishQueuedChanges()
    }

    /// Writes what `key` shows after an update ended, when it changed. Call with the in-flight
    /// lock held.
    private func show(
        _ ending: OptimisticLayers.Ending, of key: CacheKey, rollingBack: Bool, in machine: inout FetchStateMachine
    ) {
        let (before, after) = (ending.before, ending.after)
        guard before !== after else { return }
        let held = before.map { entry in store.state.withLock { $0.holds(entry, for: key) } } ?? false
        if rollingBack && !held { return }
        if let after {
            show(after, replacing: held ? before : nil)
        } else if let before, held {
            remove(.variant(before, of: key), in: &machine)
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
        let waiters = inFlight.withLock { _ in
            let finished = store.finishDecode(valueKey, on: entry, for: key, with: result, limit: limit)
            reporter.evicted(finished.evicted)
            return finished.waiters
        }
        reporter.deliverQueued()
        return waiters
    }

    // MARK: - Removing entries

    /// What leaves the store on purpose, and why. Evictions to make room are the store's own,
    /// where it charges an entry: an answer written (``ResponseStore/write(_:for:replacing:unread:)``)
    /// or a decoded value kept (``ResponseStore/finishDecode(_:on:for:with:limit:)``); every other
    /// removal is one of these. Whichever it is, what leaves is kept account of in one place
    /// (``ResponseStore/State/depart(_:because:into:)``).
    /// An invalidation (``invalidate(_:endpoint:sparingPendingUpdates:)``) is removed in steps
    /// instead.
    enum Removing {
        /// Every key (``CachedTransport/invalidateAll()``).
        case everything
        /// What memory pressure gives back.
        case pressure(MemoryPressure)
        /// One variant of `key`: a provisional answer taken back, or an entry the origin now says
        /// may not be stored.
        case variant(StoredResponse, of: CacheKey)
    }

    /// What a removal leaves to do once every lock is released.
    struct Departure {
        /// The keys removed, none of which is held any more (for ``Removing/variant(_:of:)``: the
        /// key whose variant went). After ``Removing/everything``, only while an event stream
        /// listens: naming every key costs a key each.
        var keys: [CacheKey] = []
        /// Their answers, to release.
        var released = Released()
        /// What abandoning a signed-out partition's fetches leaves to do: fail their callers and
        /// cancel their loads (``FetchStateMachine/abandon(where:)``).
        var abandoned = FetchAction.none
    }

    /// Removes what `removing` names, releases it after every lock, and publishes what it
    /// announced (see ``remove(_:in:)``).
    @discardableResult
    func remove(_ removing: Removing) -> Departure {
        var departure = inFlight.withLock { machine in remove(removing, in: &machine) }
        let released = departure.released
        departure.released = Released()
        // Memory the system wants back at once is freed at once, whatever a hit waits meanwhile.
        if case .pressure(.critical) = removing { released.release(atOnce: true) } else { released.release() }
        publishQueuedChanges()
        return departure
    }

    /// Invalidates the keys `selection` names: a request's, an endpoint's, a tag's, or an unsafe
    /// request's targets (`endpoint` names the endpoint invalidated, for the announcement). With
    /// `sparingPendingUpdates`, the keys with optimistic updates pending stay as they are: the
    /// update settles them itself. Releases what left after every lock, and publishes what it
    /// announced.
    ///
    /// It runs in steps, so that however many keys it drops, a join, a fetch's completion and a
    /// hit wait for one short step at most:
    /// 1. under the in-flight lock, the fetches in flight of those keys stop storing and being
    ///    joined, what their pending updates would roll back to is forgotten, and the keys of a
    ///    host or a path prefix leave the store's index at once (keys named one by one leave it
    ///    with their entries, in the next step);
    /// 2. their entries are removed a few at a time (``ResponseStore/removeTaken(_:within:afterEach:)``),
    ///    and the updates of a key that began before its step forget what they would roll back
    ///    to; a fetch that begins meanwhile is sent after the invalidation began, and what it
    ///    stores stays unless a later step removes it;
    /// 3. under the in-flight lock, what left is reported and announced (see ``remove(_:in:)``):
    ///    once, after what fetches stored between the steps, so a key stored again meanwhile may
    ///    be announced updated before it is announced invalidated, and a screen refetches it.
    ///
    /// Invalidations run one at a time.
    @discardableResult
    func invalidate(
        _ selection: ResponseStore.KeySelection, endpoint: Endpoint? = nil, sparingPendingUpdates: Bool = false
    ) -> Departure {
        let selection = askingPredicate(selection)
        return released(
            invalidations.withLock { _ -> Departure in
                let begun = inFlight.withLock { machine in
                    beginInvalidation(selection, sparingPendingUpdates: sparingPendingUpdates, in: &machine)
                }
                guard let taken = begun else { return Departure() }
                return removeInSteps(taken, endpoint: endpoint, forgettingDepartures: false)
            })
    }

    /// Removes everything of `partition`, signed out, as an invalidation removes what it drops
    /// (``invalidate(_:endpoint:sparingPendingUpdates:)``), so that a join, a fetch's completion
    /// and a hit wait for one short step at most however much the account held:
    /// 0. from the call on, until its last entry has left, none of its entries is found by a
    ///    lookup: the account may sign in again meanwhile, and key its requests as before;
    /// 1. under the in-flight lock, its fetches in flight are taken out with their callers (to
    ///    fail, and their loads to cancel, once every lock is released), and its pending
    ///    optimistic updates forget what they would roll back to and never commit. This step
    ///    does not wait for an invalidation under way: from the call on, nothing the account
    ///    sent before is stored or answered;
    /// 2. the tags no longer name its keys, under the tags' lock alone: a tag given from then on
    ///    belongs to a request made after the sign-out;
    /// 3. once the invalidations before it have ended, its keys are read a batch at a time under
    ///    the store's lock alone, and removed in the steps of an invalidation, which forget why
    ///    they left: a later miss of the account tells nothing of it; what left is reported and
    ///    announced.
    @discardableResult
    func signOut(_ partition: String) -> Departure {
        func belongs(_ key: CacheKey) -> Bool { key.partition == partition }
        // Until its last entry has left, none is found: an account that signs in again meanwhile
        // keys its requests as before (``ResponseStore/State/departing``).
        store.state.withLock { $0.departing[partition, default: 0] += 1 }
        defer {
            store.state.withLock { state in
                state.departing[partition]! -= 1
                if state.departing[partition] == 0 { state.departing[partition] = nil }
            }
        }
        let abandoned = inFlight.withLock { machine in
            let abandoned = machine.abandon(where: belongs)
            machine.optimistic.forget(where: belongs)
            machine.optimistic.signOut(partition)
            return abandoned
        }
        store.untag(where: belongs)
        var departure = released(
            invalidations.withLock { _ -> Departure in
                let keys = Set(store.copyHeld { key, _ in belongs(key) ? key : nil })
                let begun = inFlight.withLock { machine in
                    beginInvalidation(.keys(keys), sparingPendingUpdates: false, in: &machine)
                }
                return begun.map { removeInSteps($0, endpoint: nil, forgettingDepartures: true) } ?? Departure()
            })
        departure.abandoned = abandoned
        return departure
    }

    /// The steps of an invalidation after the first (``invalidate(_:endpoint:sparingPendingUpdates:)``),
    /// for the keys `taken`: removed a few at a time, then reported and announced (with
    /// `endpoint`, when one was invalidated). For a sign-out, `forgettingDepartures`: a later miss
    /// tells nothing of why the account's keys left. Call with the invalidations' lock held.
    private func removeInSteps(_ taken: ResponseStore.TakenKeys, endpoint: Endpoint?, forgettingDepartures: Bool)
        -> Departure
    {
        // An update that began on a key before its step removed it would roll back to what the
        // step dropped: forgotten with it.
        let (removal, uncounted) = store.removeTaken(taken, within: inFlight) { machine, removed in
            if forgettingDepartures { for key in removed { store.forgetDeparture(of: key) } }
            machine.optimistic.forget(removed)
        }
        var departure = Departure()
        (departure.keys, departure.released) = (removal.keys, removal.released)
        inFlight.withLock { _ in
            store.index.withLock { $0.forgetTaken(uncounted, generation: taken.generation) }
            reporter.invalidated(departure.keys)
            announce(departure.keys, cleared: false, endpoint: endpoint)
        }
        return departure
    }

    /// `departure` with its answers released, once every lock is, and what it announced published.
    private func released(_ departure: Departure) -> Departure {
        var departure = departure
        let released = departure.released
        departure.released = Released()
        released.release()
        publishQueuedChanges()
        return departure
    }

    /// `selection`, an endpoint made from a predicate made the keys it matches: the predicate, the
    /// app's code, is asked with no lock held, about every key in flight or under a pending update
    /// when it is called, then every key held (``heldKeys(matchingAny:)``). Any other selection as
    /// it is: the store's index finds its keys.
    /// - Complexity: O(n) in those keys for a predicate.
    private func askingPredicate(_ selection: ResponseStore.KeySelection) -> ResponseStore.KeySelection {
        guard case .endpoint(let endpoint) = selection, case .predicate = endpoint.selection else { return selection }
        // Read first: a fetch in flight now that stores while the held keys are read is found.
        let pending = inFlight.withLock { $0.keysInFlight.union($0.optimistic.pendingKeys) }
        var matched = pending.filter { endpoint.matches(normalizedURL: $0.url) }
        matched.formUnion(heldKeys(matchingAny: [endpoint]))
        return .keys(matched)
    }

    /// The held keys whose URL one of `predicates` matches: every key, read a batch at a time under
    /// the lock a hit takes (``ResponseStore/copyHeld(_:)``), then the predicates, the app's code,
    /// asked with no lock held. A key stored meanwhile may be missed: it was stored after the call.
    /// - Complexity: O(n) in the keys held, in short holds of the lock.
    private func heldKeys(matchingAny predicates: [Endpoint]) -> [CacheKey] {
        guard !predicates.isEmpty else { return [] }
        return store.copyHeld { key, _ in key }.filter { key in
            predicates.contains { $0.matches(normalizedURL: key.url) }
        }
    }

    /// An invalidation's first step (``invalidate(_:endpoint:sparingPendingUpdates:)``), under the
    /// in-flight lock.
    /// - Returns: the keys taken out of the index; nil when a tag names nothing.
    private func beginInvalidation(
        _ selection: ResponseStore.KeySelection, sparingPendingUpdates: Bool, in machine: inout FetchStateMachine
    ) -> ResponseStore.TakenKeys? {
        var selection = selection
        if case .tag(let tag) = selection {
            let keys = store.keys(taggedWith: tag)
            guard !keys.isEmpty else { return nil }
            selection = .keys(keys)
        }
        let spared = sparingPendingUpdates ? machine.optimistic.pendingKeys : []
        func matches(_ key: CacheKey) -> Bool { selection.selects(key) && !spared.contains(key) }
        machine.detach(where: matches)
        // What an invalidation drops, no rollback brings back: the updates pending now forget
        // what they would roll back to, and so do those that begin before a step removes their
        // key (``invalidate(_:endpoint:sparingPendingUpdates:)``).
        machine.optimistic.forget(where: matches)
        return store.take(selection, sparing: spared)
    }

    /// Queues the announcement of what left: everything, or the URLs of `keys`.
    private func announce(_ keys: [CacheKey], cleared: Bool, endpoint: Endpoint?) {
        if cleared {
            broadcaster.enqueue(.cleared)
        } else if broadcaster.count > 0, !keys.isEmpty {
            // Naming every URL removed costs a URL each: only when someone listens.
            broadcaster.enqueueInvalidation(of: keys, endpoint: endpoint)
        }
    }

    /// The path by which entries leave on purpose, but for an invalidation and a sign-out, which
    /// run in steps (``invalidate(_:endpoint:sparingPendingUpdates:)``, ``signOut(_:)``) and keep
    /// their departure the same way: takes them out of the store (what it costs is what it
    /// removes, except a trim, which reads every key a batch at a time under the lock a hit
    /// takes), where they leave as every departure does
    /// (``ResponseStore/State/depart(_:because:into:)``), and keeps the transport's side of their
    /// departure:
    /// - fetches in flight of those keys no longer store or are joined (everything); a trim
    ///   leaves them, since it is about memory;
    /// - what pending optimistic updates would roll back to is forgotten;
    /// - the transport's events report them (invalidated or, for a trim, evicted);
    /// - exactly what left is announced, once the caller publishes: the URLs removed
    ///   (``CacheChange/invalidated(urls:endpoint:)``), or ``CacheChange/cleared`` when everything
    ///   went; nothing when nothing was removed.
    ///
    /// Call with the in-flight lock held; release the departure's answers and publish the queued
    /// changes once it is released.
    @discardableResult
    func remove(_ removing: Removing, in machine: inout FetchStateMachine) -> Departure {
        var departure = Departure()
        var cleared = false
        switch removing {
        case .everything:
            machine.detach(where: { _ in true })
            let (emptied, removal) = store.removeEverything(because: .invalidated)
            departure.released = removal.released
            machine.optimistic.forget(where: { _ in true })
            cleared = emptied.count > 0
            // Naming every key costs a key each: only when someone listens.
            if reporter.isListening { emptied.entries.forEachEntry { key, _ in departure.keys.append(key) } }
            let count = emptied.count
            // Moved, so that the last reference is the one the release queue lets go of.
            departure.released.append(consume emptied, count: count)
        case .pressure(let pressure):
            let removal = store.trim(for: pressure)
            cleared = pressure == .critical && !removal.keys.isEmpty
            (departure.keys, departure.released) = (removal.keys, removal.released)
            reporter.evicted(departure.keys)
        case .variant(let entry, let key):
            let removal = store.remove(entry, for: key)
            (departure.keys, departure.released) = (removal.departed, removal.released)
        }
        if case .pressure = removing {} else { reporter.invalidated(departure.keys) }
        announce(departure.keys, cleared: cleared, endpoint: nil)
        return departure
    }

    /// Every held variant, most recently used first, read a few entries at a time.
    func heldEntries() -> [StoredResponse] {
        inFlight.withLock { _ in store.copyHeld { _, variants in variants.all } }.flatMap { $0 }
    }

    /// Every held variant whose URL one of `endpoints` matches, most recently used first: the keys
    /// of a URL, a host or a path prefix are found through the store's index, as an invalidation
    /// of those endpoints finds them; a predicate is asked about every key held
    /// (``heldKeys(matchingAny:)``), outside every lock.
    func heldEntries(of endpoints: [Endpoint]) -> [StoredResponse] {
        var predicates: [Endpoint] = []
        var keys = Set<CacheKey>()
        store.index.withLock { index in
            for endpoint in endpoints {
                if let found = index.keys(endpoint) { keys.formUnion(found) } else { predicates.append(endpoint) }
            }
        }
        keys.formUnion(heldKeys(matchingAny: predicates))
        return store.copyHeld(Array(keys)) { _, variants in variants.all }.flatMap { $0 }
    }

    /// Delivers the queued events and changes to their subscribers. Call with no lock held.
    func publishQueuedChanges() {
        reporter.deliverQueued()
        broadcaster.deliverQueued()
    }

    /// How many keys an announcement names by itself where it is delivered; one of more is named
    /// on a thread of its own (``DeliveryQueue``): about a hundred microseconds of URLs.
    static let namedAtOnce = 64

    /// The distinct URLs of `keys`, in a stable order: what an announcement of them names. Made
    /// with no lock held (``ChangeBroadcaster``, ``TransportEvents``).
    /// - Complexity: O(n log n) in the keys.
    static func urls(of keys: [CacheKey]) -> [URL] {
        #if DEBUG
        assert(!LockRank.isHoldingAny, "an announcement names its URLs with none of the transport's locks held")
        #endif
        return Set(keys.lazy.map(\.url)).sorted().compactMap { URL(string: $0) }
    }
}
