import Foundation
import Observation
import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The state of one request's decoded value for a screen: what SwiftUI observes, from the first
/// frame to pull-to-refresh.
///
/// ```swift
/// let articles = CachedQuery([Article].self, for: request, in: transport)
/// // articles.status, articles.value, articles.error, articles.failure, articles.isFetching, articles.outcome
/// await articles.refresh()
/// ```
///
/// - **The first frame.** When memory holds an entry the request may use, the initialiser reads
///   it synchronously (`CachedTransport.cachedValue(_:for:decoder:)`): the query starts
///   ``QueryStatus/loaded`` with its value, and a view never shows a loading state for data already in
///   memory. An entry that gives no value (a status outside 200-299, bytes that do not decode)
///   starts it ``QueryStatus/failed`` with the `ValueDecodingError` and the memory answer's
///   ``outcome``, and nothing is fetched. Otherwise it starts ``QueryStatus/loading`` and fetches
///   at once.
/// - **Changes.** It follows the transport's changes for its URL, when the transport stores its
///   request, until it is released or stopped: another screen's refresh, a local write, an
///   optimistic update and its rollback show
///   here as soon as they are made; after an invalidation it fetches again. A value is decoded
///   once per stored entry, however many queries show it.
/// - **Refresh.** ``refresh()`` uses `CachedTransport.refresh(_:)`, so every other query on the
///   same data hears the change; it fits `.refreshable`.
/// - **Observation.** Its state changes on the main actor, and each real change is one observed
///   change: an answer that brings the value, the outcome and the end of the fetch notifies once,
///   and bytes equal to those shown notify nothing.
/// - **Failures.** Every answer sets ``outcome``, a failed one too, and ``failure`` tells the
///   server's refusal from data the app cannot read and from no answer at all.
/// - **Lifetime.** ``stop()``, or releasing the query, ends what it started: the fetches in flight
///   are cancelled (a fetch other callers share goes on for them), so is a wait for a value another
///   caller is decoding, and it stops following changes. ``refresh()`` starts it again with one
///   request.
///
/// A request the transport does not cache (another method, another scheme) is still loaded, and
/// its ``outcome`` says so (`passedThrough`, `notHTTP` for an answer of another scheme); such a
/// query never follows changes (``isFollowingChanges`` is false from the initialiser on), since
/// nothing stored could change for it. The initialiser asks the transport, which keys the request
/// as every call does: a `POST` to one of its query endpoints (`Configuration.network.queryEndpoints`) is
/// stored, and followed; a `GET` with its own conditions, `Range` or `no-store` is not.
@MainActor
public final class CachedQuery<Value: Decodable & Sendable>: Observable {
    /// Where a query stands with its value.
    public typealias Status = QueryStatus

    /// Everything observed, in one stored property, so that one transition is one observed
    /// change however many of its parts move.
    private var storedState: QueryState
    /// The value shown, changed with `storedState`.
    private var storedValue: Value?
    /// Its observers; see ``QueryObservation`` for why they register there.
    private let observation = QueryObservation()
    /// The state, read as an observer's access.
    private var state: QueryState {
        observation.access()
        return storedState
    }

    /// Where the query stands.
    public var status: Status { state.status }
    /// The last good value, kept while a fetch runs and after a failure.
    public var value: Value? {
        observation.access()
        return storedValue
    }
    /// Why the last answer failed: a `URLError`, or a `ValueDecodingError` for a status or body
    /// that gave no value; nil once an answer succeeds. ``failure`` sorts it for a screen.
    public var error: (any Error)? { state.error }
    /// Why the last answer failed, as a screen tells it apart: the server's refusal (its status),
    /// data the app cannot read, or no answer at all; nil once an answer succeeds.
    ///
    /// ```swift
    /// if articles.failure?.statusCode == 404 { Text("There are no articles here.") }
    /// ```
    public var failure: QueryFailure? { state.error.map(QueryFailure.init) }
    /// Whether a fetch the query started is in flight, the first one or a later one.
    public var isFetching: Bool { state.isFetching }
    /// How the transport made the last answer: set by every answer, a failed one too (a `500`, a
    /// body that does not decode, the network failing). Nil before the first answer, and after a
    /// failure the transport did not make (an error thrown by the app's own request adapter).
    public var outcome: CacheOutcome? { state.outcome }
    /// Whether the query follows the transport's changes for its URL: false once stopped, and,
    /// from the initialiser on, for a request the transport does not cache.
    public var isFollowingChanges: Bool { state.isFollowingChanges }

    /// The request the query loads.
    public let request: URLRequest
    /// The transport it loads through.
    public let transport: CachedTransport
    private let decoder: any ResponseDecoding
    private var tasks = QueryTasks()
    /// The bytes of the value shown.
    private var shownData: Data?
    /// True until the initialiser returns: no one can observe the query yet, so its first state is
    /// stored without telling the registrar.
    private var isInitialising = true
    /// The latest-begun fetch of the query's own whose answer was shown.
    private var latestFetchShown = 0
    /// What changed while work of the query's own was under way, looked at when it ends.
    private var missedChange: QueryState.MissedChange = .none
    /// The URL the transport stores the request's answers and announces their changes under;
    /// nil when it never stores them, and then the query follows no changes.
    private let followedURL: URL?

    /// Makes a query of `request` decoded as `type`, starting from memory when it can.
    ///
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - request: the request; its cache policy applies to the first answer.
    ///   - transport: the transport to load through.
    ///   - decoder: the decoder; queries with equal decoder settings share decoded values (see
    ///     `CachedTransport.value(_:for:decoder:)`).
    public init(
        _ type: Value.Type = Value.self,
        for request: URLRequest,
        in transport: CachedTransport,
        decoder: any ResponseDecoding = defaultQueryDecoder
    ) {
        self.request = request
        self.transport = transport
        self.decoder = decoder
        followedURL = transport.storedURL(of: request)
        storedState = QueryState()
        start()
        isInitialising = false
    }

    deinit {
        // Left at once, from whatever thread releases the query: no task outlives it.
        if let membership = tasks.stop() { ChangeHub.leave(membership) }
    }

    /// Starts following changes and, when nothing is shown, fetching: what the initialiser does,
    /// for a query that was stopped. Does nothing for a query that follows already.
    public func start() {
        guard !tasks.isStarted else { return }
        if !startFromMemory() { startFetch(refreshing: false) }
    }

    /// Starts following changes, for a request the transport stores, and shows what memory holds:
    /// its value, the failure of an entry that gives none, or else a fetch begun, which the caller
    /// starts.
    /// - Returns: whether memory gave the answer.
    private func startFromMemory() -> Bool {
        tasks.begin()
        var next = storedState
        if let url = followedURL {
            // Subscribed before memory is read, so no change after the read is missed.
            follow(url)
            next.isFollowingChanges = true
        }
        let answer: (value: Value, data: Data, outcome: CacheOutcome)?
        do {
            answer = try transport.cachedValue(Value.self, for: request, decoder: decoder)
        } catch let error as ValueDecodingError {
            // An entry that gives no value (a status outside 200-299, bytes that do not decode)
            // is memory's answer, with its outcome: a fetch would read it again and fail the same
            // way, after a loading state shown for data already in memory.
            next.take(error)
            show(next)
            return true
        } catch {
            // Not about the stored bytes (the app's request adapter threw, a partition that cannot
            // be read): memory gave no answer, so it is fetched as a miss is, and the fetch's
            // failure shows what the transport says of it.
            answer = nil
        }
        guard let answer else {
            next.beginFetch()
            show(next)
            return false
        }
        let replacesValue = next.take(answer.data, outcome: answer.outcome, shown: &shownData, isFetched: true)
        show(next, value: replacesValue ? answer.value : nil)
        return true
    }

    /// Stops following changes and cancels the work the query started; the value shown stays.
    /// A query stopped before its first answer is ``QueryStatus/idle``.
    public func stop() {
        guard tasks.isStarted else { return }
        if let membership = tasks.stop() { ChangeHub.leave(membership) }
        missedChange = .none
        var next = storedState
        next.isFetching = false
        next.isFollowingChanges = false
        if next.status == .loading { next.status = .idle }
        show(next)
    }

    /// Reloads the request from the origin with `CachedTransport.refresh(_:)` and returns when
    /// its answer is shown: every other query and screen on the same data hears the change too.
    ///
    /// ```swift
    /// List(articles.value ?? []) { ArticleRow(article: $0) }
    ///     .refreshable { await articles.refresh() }
    /// ```
    ///
    /// A failure is shown as ``QueryStatus/failed`` with its ``error``, the last good value kept. A
    /// stopped query is started first, from memory when it can, and sends one request: the
    /// refresh's.
    public func refresh() async {
        if !tasks.isStarted, !startFromMemory() {
            // Shown as a fetch begun already: the refresh is that fetch, not a second one.
            await startFetch(refreshing: true).value
            return
        }
        await fetch(refreshing: true).value
    }

    /// Stores `next`, and `value` when there is one, when they show something else than the
    /// current state: one observed change.
    private func show(_ next: QueryState, value: Value? = nil) {
        guard !next.isSame(as: storedState) else { return }
        guard !isInitialising else {
            storedState = next
            if let value { storedValue = value }
            return
        }
        observation.withMutation {
            storedState = next
            if let value { storedValue = value }
        }
    }

    /// Returns once the fetches the query has in flight now, and its waits for a value another
    /// caller is decoding, have ended and their answers are shown; at once when none is. For a
    /// test, or a `.task` that must wait for the first answer.
    ///
    /// ```swift
    /// let query = CachedQuery([Article].self, for: request, in: transport)
    /// await query.waitForFetches()
    /// ```
    public func waitForFetches() async {
        for task in tasks.workTasks { await task.value }
    }

    // MARK: - Fetches

    /// Shows that a fetch of the query's own begins, and starts it.
    @discardableResult
    private func fetch(refreshing: Bool, policy: URLRequest.CachePolicy? = nil) -> Task<Void, Never> {
        var next = storedState
        next.beginFetch()
        show(next)
        return startFetch(refreshing: refreshing, policy: policy)
    }

    /// Starts a fetch of the query's own, whose answer is shown when it ends, unless the query was
    /// stopped or released meanwhile.
    @discardableResult
    private func startFetch(refreshing: Bool, policy: URLRequest.CachePolicy? = nil) -> Task<Void, Never> {
        var sent = request
        if let policy { sent.cachePolicy = policy }
        let (request, transport, decoder) = (sent, transport, decoder)
        return startWork(isFetch: true) {
            try await QueryAnswer<Value>.load(request, refreshing: refreshing, from: transport, decoder: decoder)
        }
    }

    /// Runs `load` as work of the query's own: a fetch, shown by ``isFetching`` and answered with
    /// its outcome, or a wait for a value another caller decodes, shown only by its value. Changes
    /// heard meanwhile are caught up with when the last such work ends.
    @discardableResult
    private func startWork(
        isFetch: Bool, _ load: @escaping @Sendable () async throws -> QueryAnswer<Value>
    ) -> Task<Void, Never> {
        let generation = tasks.generation
        let id = tasks.reserveID()
        let task = Task { [weak self] in
            let result: Result<QueryAnswer<Value>, any Error>
            do {
                result = .success(try await load())
            } catch {
                result = .failure(error)
            }
            self?.finish(result, id: id, generation: generation, isFetch: isFetch)
        }
        tasks.keep(task, as: id, isFetch: isFetch)
        return task
    }

    private func finish(_ result: Result<QueryAnswer<Value>, any Error>, id: Int, generation: Int, isFetch: Bool) {
        guard generation == tasks.generation, tasks.remove(id) else { return }
        var next = storedState
        next.isFetching = tasks.fetchCount > 0
        var value: Value?
        switch result {
        case .success where !isFetch && id < latestFetchShown:
            // A wait begun before a fetch whose answer is shown already: its value is older.
            break
        case .success(let answer):
            if isFetch { latestFetchShown = max(latestFetchShown, id) }
            if next.take(answer.data, outcome: answer.outcome, shown: &shownData, isFetched: isFetch) {
                value = answer.value
            }
        case .failure(let error):
            next.take(error)
        }
        show(next, value: value)
        if tasks.workCount == 0 { catchUp() }
    }

    // MARK: - Changes

    private func follow(_ url: URL) {
        let generation = tasks.generation
        tasks.follow(
            ChangeHub.join(transport, url: url) { [weak self] change in
                guard let self, generation == self.tasks.generation, self.storedState.isFollowingChanges else { return }
                self.heard(change)
            })
    }

    private func heard(_ change: CacheChange) {
        let missed: QueryState.MissedChange =
            switch change {
            case .updated: .updated
            case .invalidated, .cleared: .invalidated
            }
        // Work of the query's own is under way: its answer is shown first, then what changed.
        missedChange = max(missedChange, missed)
        if tasks.workCount == 0 { catchUp() }
    }

    /// Shows what changed while nothing of the query's own was under way: an update from memory
    /// (at once, or once another caller has decoded it), an invalidation by fetching again.
    private func catchUp() {
        let missed = missedChange
        missedChange = .none
        switch missed {
        case .none:
            return
        case .invalidated:
            fetch(refreshing: false, policy: .returnCacheDataElseLoad)
        case .updated:
            var reading = request
            reading.cachePolicy = .returnCacheDataElseLoad
            do {
                switch try transport.lookUpCachedValue(Value.self, for: reading, decoder: decoder) {
                case .value(let value, let data, let outcome):
                    var next = storedState
                    let replacesValue = next.take(data, outcome: outcome, shown: &shownData, isFetched: false)
                    show(next, value: replacesValue ? value : nil)
                case .decodingElsewhere(let outcome, let wait):
                    // Often the refresh that made the change: its decode is waited for, with no
                    // fetch to show.
                    startWork(isFetch: false) {
                        do {
                            let (value, data) = try await wait()
                            return QueryAnswer(value: value, data: data, outcome: outcome)
                        } catch {
                            throw FailedAnswer(error: error, outcome: outcome)
                        }
                    }
                case .none:
                    fetch(refreshing: false, policy: .returnCacheDataElseLoad)
                }
            } catch {
                // The entry gives no value. The failure shown already (often the query's own
                // answer, whose change is heard after it) is nothing new; another is fetched as a
                // miss is, and the fetch shows it with the outcome the transport gives it.
                if !storedState.isShowing(error) { fetch(refreshing: false, policy: .returnCacheDataElseLoad) }
            }
        }
    }
}
