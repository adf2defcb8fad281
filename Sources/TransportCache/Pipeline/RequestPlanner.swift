import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Decides what the transport does with a request: the one place a request is classified.
///
/// ``CachedTransport/data(for:)``, ``CachedTransport/refresh(_:)``, the decoded-value calls and
/// everything built on them (the OpenAPI adapter, `values` streams) ask it, and perform the
/// ``Plan`` it returns. Answering from memory is decided here with the ``FreshnessPolicy``, in one
/// locked lookup that also counts the request (two for a URL out of its normal form, counted once).
///
/// A class, so that the closure a hit's lookup runs captures one reference: as a struct, its
/// fields were copied, retained and released on every hit.
final class RequestPlanner: Sendable {
    let keyHeaders: KeyHeaders
    let policy: FreshnessPolicy
    let store: ResponseStore
    /// ``CachedTransport/Configuration/Freshness/staleIfError``.
    let answersStaleOnError: Bool

    /// ``CachedTransport/Configuration/Network/queryEndpoints``.
    let queryEndpoints: [Endpoint]
    /// ``CachedTransport/Configuration/Network/maximumQueryBodySize``.
    let maximumQueryBodySize: Int

    init(
        keyHeaders: KeyHeaders, policy: FreshnessPolicy, store: ResponseStore, answersStaleOnError: Bool,
        queryEndpoints: [Endpoint] = [], maximumQueryBodySize: Int = 0
    ) {
        self.keyHeaders = keyHeaders
        self.policy = policy
        self.store = store
        self.answersStaleOnError = answersStaleOnError
        self.queryEndpoints = queryEndpoints
        self.maximumQueryBodySize = maximumQueryBodySize
    }

    /// The plan for `request`, a request ``RequestPreparation/keyed(_:)`` made, of `account`;
    /// `refreshing` for ``CachedTransport/refresh(_:)``.
    /// - Throws: `URLError(.badURL)` for a request without a URL.
    /// - Parameter headers: the values of its keyed headers, when not set on it yet: they are put
    ///   in the key, and set on the request of a plan that goes to the network.
    func plan(
        _ request: URLRequest, account: AccountIdentity?, headers: KeyedHeaders? = nil, refreshing: Bool = false
    ) throws -> Plan {
        try plan(request, read: request.allHTTPHeaderFields, account: account, headers: headers, refreshing: refreshing)
    }

    /// The plan for `request` of no account, with no keyed headers, not refreshing: a plain
    /// transport's, made apart so that a hit pays nothing for what that transport never has.
    func plan(_ request: URLRequest) throws -> Plan {
        try plan(request, read: request.allHTTPHeaderFields, account: nil, headers: nil, refreshing: false)
    }

    /// ``plan(_:account:headers:refreshing:)`` of a request whose fields are `all`.
    @inline(__always)
    private func plan(
        _ request: URLRequest, read all: [String: String]?, account: AccountIdentity?, headers: KeyedHeaders?,
        refreshing: Bool
    ) throws -> Plan {
        // A request without fields (the most common hit) is planned with fields known empty, which
        // leaves nothing of them to release.
        guard let all, !all.isEmpty else {
            return try plan(
                request, fields: all, keyValues: [], directives: RequestDirectives(), account: account,
                headers: headers, refreshing: refreshing, prefetching: false)
        }
        return try plan(
            request, fields: RequestFields(all, keyHeaders: keyHeaders), account: account, headers: headers,
            refreshing: refreshing, prefetching: false)
    }

    /// The plan for `request`, whose fields `fields` were read already
    /// (``RequestPreparation/fields(of:accountName:)``); see ``plan(_:account:headers:refreshing:)``.
    @inline(__always)
    func plan(_ request: URLRequest, fields: RequestFields, account: AccountIdentity?, headers: KeyedHeaders?) throws
        -> Plan
    {
        try plan(request, fields: fields, account: account, headers: headers, refreshing: false, prefetching: false)
    }

    /// The plan for `request` (see ``plan(_:account:headers:refreshing:)``) made for
    /// ``CachedTransport/prefetch(_:priority:)``: it is not counted as a request, reads nothing (an
    /// entry it finds keeps its place and stays unread), and is answered from memory only by a
    /// fresh entry.
    func prefetchPlan(_ request: URLRequest, account: AccountIdentity?) throws -> Plan {
        try plan(request, account: account, refreshing: false, prefetching: true)
    }

    /// `request`, its keyed headers set, planned whole: a plan that is not a hit.
    private func plan(_ request: URLRequest, account: AccountIdentity?, refreshing: Bool, prefetching: Bool) throws
        -> Plan
    {
        try plan(
            request, fields: RequestFields(request.allHTTPHeaderFields, keyHeaders: keyHeaders), account: account,
            headers: nil, refreshing: refreshing, prefetching: prefetching)
    }

    /// The classification of a request whose fields were read (``RequestFields``).
    @inline(__always)
    private func plan(
        _ request: URLRequest, fields: RequestFields, account: AccountIdentity?, headers: KeyedHeaders?,
        refreshing: Bool, prefetching: Bool
    ) throws -> Plan {
        try plan(
            request, fields: fields.all, keyValues: fields.keyValues, directives: fields.directives, account: account,
            headers: headers, refreshing: refreshing, prefetching: prefetching)
    }

    /// The one classification both plans share; inlined into each, so that a hit's plan pays
    /// nothing for the prefetch's.
    ///
    /// A request whose keyed headers' values are given apart (`headers`) is keyed with them, and
    /// every plan but a memory answer is made for the request with them set
    /// (``KeyedHeaders/applied(to:)``): a hit never builds a request.
    @inline(__always)
    private func plan(
        _ request: URLRequest, fields: [String: String]?, keyValues: [String?], directives: RequestDirectives,
        account: AccountIdentity?, headers: KeyedHeaders?, refreshing: Bool, prefetching: Bool
    ) throws -> Plan {
        guard let url = request.url else {
            if !prefetching { store.record { $0.requests += 1 } }
            throw URLError(.badURL).carrying(CacheOutcome(source: .passedThrough(.notHTTP)))
        }
        let method = request.httpMethod ?? "GET"
        let reads = method == "GET" || method == "HEAD"
        // Only a `GET` or `HEAD` can be a hit; any other is planned whole, keyed headers set.
        if let headers, !reads {
            return try plan(
                headers.applied(to: request), account: account, refreshing: refreshing, prefetching: prefetching)
        }
        let cachePolicy = request.cachePolicy
        let (acceptance, reloadReason) = reading(cachePolicy, directives, refreshing: refreshing)
        // A request memory may answer looks for its key as its URL is written first: a stored
        // key's URL is a normal form, which normalised again is itself, so a URL that finds its key
        // is that key's, and a hit checks it no further. A URL that finds nothing is checked then:
        // a normal one is a miss of that key, any other is keyed by its normal form below.
        if reads, directives.bypass == nil, reloadReason == nil,
            let plan = fromMemoryOrFetched(
                request, url: url,
                key: CacheKey(
                    method: method, writtenURL: url, values: keyValues, account: account, keyHeaders: keyHeaders,
                    headers: headers),
                asWritten: true, fields: fields, headers: headers, acceptance: acceptance, cachePolicy: cachePolicy,
                prefetching: prefetching)
        {
            return plan
        }
        return try plan(
            request, url: url, method: method, fields: fields, keyValues: keyValues, directives: directives,
            cachePolicy: cachePolicy, acceptance: acceptance, reloadReason: reloadReason, reads: reads,
            account: account, headers: headers, refreshing: refreshing, prefetching: prefetching)
    }

    /// The rest of ``plan(_:fields:keyValues:directives:account:headers:refreshing:prefetching:)``,
    /// keyed by the URL's normal form: for a request memory may not answer (another method, its
    /// own conditions or `no-store`, a reload), or one whose URL as written found no key. `reads`:
    /// the method is `GET` or `HEAD`.
    @inline(__always)
    private func plan(
        _ request: URLRequest, url: URL, method: String, fields: [String: String]?, keyValues: [String?],
        directives: RequestDirectives, cachePolicy: URLRequest.CachePolicy, acceptance: FreshnessPolicy.Acceptance,
        reloadReason: Plan.FetchReason?, reads: Bool, account: AccountIdentity?, headers: KeyedHeaders?,
        refreshing: Bool, prefetching: Bool
    ) throws -> Plan {
        guard
            var key = CacheKey(
                method: method, url: url, values: keyValues, account: account, keyHeaders: keyHeaders,
                headers: headers)
        else {
            return send(headers?.applied(to: request) ?? request, url: url, because: .notHTTP, account: account)
        }
        if !reads {
            switch query(request, method: method, url: url, key: key) {
            case .keyed(let queryKey): key = queryKey
            case .tooLarge: return send(request, url: url, because: .queryBodyTooLarge, account: account)
            case .none: return send(request, url: url, because: .unsafeMethod, account: account)
            }
        }
        if let headers, directives.bypass != nil || reloadReason != nil {
            return try plan(
                headers.applied(to: request), account: account, refreshing: refreshing, prefetching: prefetching)
        }
        if let bypass = directives.bypass {
            if bypass == .requestConditions, !refreshing, !prefetching,
                let answer = conditionalAnswer(request, method: method, key: key, directives: directives)
            {
                return answer
            }
            return send(request, url: url, because: bypass, account: account)
        }
        if let reloadReason {
            if !prefetching { store.record { $0.requests += 1 } }
            return .fetch(
                FetchPlan(
                    request: request, key: key, fields: fields, reason: reloadReason, acceptance: acceptance,
                    isObserved: nil, settings: policy.settings(for: url)))
        }
        guard
            let plan = fromMemoryOrFetched(
                request, url: url, key: key, asWritten: false, fields: fields, headers: headers,
                acceptance: acceptance, cachePolicy: cachePolicy, prefetching: prefetching)
        else { preconditionFailure("a key in normal form is judged whatever the store holds") }
        return plan
    }

    /// The step of ``plan(_:fields:keyValues:directives:account:headers:refreshing:prefetching:)`` for a request that may
    /// be answered from memory, keyed as written or by its normal form: the entry `acceptance` lets it take, or else why it cannot be
    /// fetched, or its fetch (made for the request with its keyed headers set).
    /// - Parameter asWritten: `key` was made from the URL as written (``CacheKey/init(method:writtenURL:values:account:keyHeaders:headers:)``):
    ///   when nothing is stored for it and the URL is not normal, nothing is counted and the plan
    ///   is nil.
    @inline(__always)
    private func fromMemoryOrFetched(
        _ request: URLRequest, url: URL, key: CacheKey, asWritten: Bool, fields: [String: String]?,
        headers: KeyedHeaders?, acceptance: FreshnessPolicy.Acceptance, cachePolicy: URLRequest.CachePolicy,
        prefetching: Bool
    ) -> Plan? {
        var missReason: Plan.FetchReason? = .noEntry
        var isObserved = false
        // Switched on rather than bound with `if let`, which copied the answer (two retains and
        // two releases a hit).
        switch memoryAnswer(
            key: key, fields: fields, acceptance: acceptance, at: policy.lookupTime, isPlanning: !prefetching,
            touches: !prefetching, asWritten: asWritten, missReason: &missReason, isObserved: &isObserved)
        {
        case .some(let answer): return .memory(answer)
        case .none: break
        }
        guard let missReason else { return nil }
        if cachePolicy == .returnCacheDataDontLoad { return .unavailable }
        if case .httpRules(let cacheControl) = acceptance, cacheControl?.onlyIfCached == true {
            return .gatewayTimeout(url)
        }
        let sent = headers?.applied(to: request) ?? request
        return .fetch(
            FetchPlan(
                request: sent, key: key, fields: headers == nil ? fields : sent.allHTTPHeaderFields,
                reason: missReason, acceptance: acceptance, isObserved: isObserved, settings: policy.settings(for: url))
        )
    }

    /// With HTTP caching, the answer to a request's own `If-None-Match`, `If-Modified-Since` or
    /// `Range` from a stored entry of its own key that it may be answered with unvalidated (fresh,
    /// or stale within its `max-stale`); nil when it goes to the origin as sent. The key holds the
    /// request's identity (`Authorization`, `Cookie`, partition) and the entry is selected by its
    /// `Vary`: a condition is never judged against another identity's entry.
    private func conditionalAnswer(_ request: URLRequest, method: String, key: CacheKey, directives: RequestDirectives)
        -> Plan?
    {
        guard policy.followsHTTPCaching, request.cachePolicy == .useProtocolCachePolicy, !directives.revalidates,
            let conditions = RequestConditions(request.allHTTPHeaderFields, method: method, now: policy.clock.date)
        else { return nil }
        var missReason: Plan.FetchReason? = .noEntry
        var isObserved = false
        guard
            let answer = memoryAnswer(
                key: key, fields: request.allHTTPHeaderFields, acceptance: .httpRules(directives.cacheControl),
                at: policy.lookupTime, isPlanning: false, missReason: &missReason, isObserved: &isObserved),
            let response = answer.response as? HTTPURLResponse
        else { return nil }
        store.record { $0.requests += 1 }
        let conditional = conditions.answer(
            for: response, body: answer.data, receivedAt: policy.receivedDate(of: answer.entry))
        guard conditional != .whole else { return .memory(answer) }
        let (data, answered) = RequestConditions.response(conditional, from: response, body: answer.data)
        return .conditional(ConditionalAnswer(data: data, response: answered, isObserved: answer.isObserved))
    }

    /// How a request with `cachePolicy` and `directives` may be answered from memory, and why it
    /// must reload instead, if it must.
    @inline(__always)
    private func reading(
        _ cachePolicy: URLRequest.CachePolicy, _ directives: RequestDirectives, refreshing: Bool
    ) -> (acceptance: FreshnessPolicy.Acceptance, reloadReason: Plan.FetchReason?) {
        if refreshing { return (.transportRules, .refresh) }
        switch cachePolicy {
        case .useProtocolCachePolicy:
            // `only-if-cached` never reaches the network, whatever else the request asks (RFC 9111
            // section 5.2.1.7): its `max-age=0` or `no-cache` is for the policy to weigh instead.
            let onlyIfCached = policy.followsHTTPCaching && directives.cacheControl?.onlyIfCached == true
            return (
                policy.followsHTTPCaching ? .httpRules(directives.cacheControl) : .transportRules,
                directives.revalidates && !onlyIfCached ? .requestRevalidates : nil
            )
        case .returnCacheDataElseLoad:
            return (
                policy.followsHTTPCaching ? .anyAge : .transportRules,
                directives.revalidates ? .requestRevalidates : nil
            )
        case .returnCacheDataDontLoad:
            return (.anyAge, nil)
        default:
            return (.transportRules, .reloadPolicy)
        }
    }

    /// The fetch that revalidates, in the background, the entry that `answer`, from within its
    /// stale-while-revalidate window, gave `request`.
    func backgroundRevalidation(of answer: MemoryAnswer, for request: URLRequest) -> FetchPlan {
        let (key, _) = backgroundRevalidationArrival(of: answer)
        return FetchPlan(
            request: request, key: key, fields: request.allHTTPHeaderFields, reason: Self.backgroundReason,
            acceptance: .transportRules, isObserved: false, settings: policy.settings(for: request.url))
    }

    /// What the first step of an arrival needs of ``backgroundRevalidation(of:for:)``'s plan,
    /// without making it: its key and how it shares.
    func backgroundRevalidationArrival(of answer: MemoryAnswer) -> (key: CacheKey, sharing: FetchPlan.Sharing) {
        (answer.entry.key, Self.backgroundReason.sharing)
    }

    /// Why a background revalidation fetches: its plan's reason, and its arrival's sharing.
    private static var backgroundReason: Plan.FetchReason { .backgroundRevalidation }

    /// The fetch that revalidates `entry` on request (``CachedTransport/revalidate(_:)``, a
    /// trigger, a poll): with the request that fetched it.
    func revalidation(of entry: StoredResponse) -> FetchPlan {
        FetchPlan(
            request: entry.request, key: entry.key, fields: entry.request.allHTTPHeaderFields,
            reason: .revalidation, acceptance: .transportRules, isObserved: false,
            settings: policy.settings(for: entry.request.url))
    }

    /// The key `request`, a request ``RequestPreparation/keyed(_:)`` made, of `account`, is
    /// stored under, or nil when such a request is never stored (another method than a query's,
    /// another scheme, no URL).
    func storedKey(of request: URLRequest, account: AccountIdentity?) -> CacheKey? {
        let method = request.httpMethod ?? "GET"
        guard let url = request.url,
            let key = CacheKey(
                method: method, url: url, fields: request.allHTTPHeaderFields, account: account, keyHeaders: keyHeaders)
        else { return nil }
        if method == "GET" || method == "HEAD" { return key }
        guard case .keyed(let queryKey) = query(request, method: method, url: url, key: key) else { return nil }
        return queryKey
    }

    private enum Query {
        /// A query `POST`, keyed by its body as well.
        case keyed(CacheKey)
        /// A `POST` to a query endpoint whose body cannot be keyed: a stream, or too large.
        case tooLarge
    }

    /// Whether `request` (not a `GET` or `HEAD`) is a query `POST`
    /// (``CachedTransport/Configuration/Network/queryEndpoints``), and its key then: `key` with the body
    /// itself beside the identity values, so that two queries share an answer only when their
    /// bodies are the same bytes.
    private func query(_ request: URLRequest, method: String, url: URL, key: CacheKey) -> Query? {
        guard method == "POST", !queryEndpoints.isEmpty, queryEndpoints.contains(where: { $0.matches(url) }) else {
            return nil
        }
        guard let body = request.httpBody ?? (request.httpBodyStream == nil ? Data() : nil),
            body.count <= maximumQueryBodySize
        else { return .tooLarge }
        return .keyed(
            CacheKey(method: method, url: key.url, identity: key.identity + ["body " + body.base64EncodedString()]))
    }

    /// The stored answer `plan` may take now instead of fetching: a fetch of its key may have
    /// completed between its plan and its joining. Only a fresh (or accepted) entry answers here.
    /// - Parameters:
    ///   - reads: false for a prefetch: the entry keeps its place and stays unread.
    ///   - now: the clock's reading, taken before the in-flight lock.
    func storedAnswer(for plan: FetchPlan, reads: Bool = true, at now: ContinuousClock.Instant) -> MemoryAnswer? {
        var missReason: Plan.FetchReason? = .noEntry
        var isObserved = false
        return memoryAnswer(
            key: plan.key, fields: plan.fields, acceptance: plan.acceptance, at: policy.lookupTime(at: now),
            isPlanning: false, touches: reads, missReason: &missReason, isObserved: &isObserved)
    }

    /// The stored entry a request with `fields` may be answered with after its fetch for `key`
    /// failed with `error`, marked stale: after a connectivity failure, when ``answersStaleOnError``
    /// or (following HTTP) the entry's own `stale-if-error` allows it. Its outcome is `outcome`
    /// from memory, stale after `error`.
    func answerAfterFailure(
        of key: CacheKey, fields: [String: String]?, error: any Error, outcome: CacheOutcome,
        at now: ContinuousClock.Instant
    ) -> (Data, URLResponse)? {
        guard let error = error as? URLError, Self.connectivityErrors.contains(error.code) else { return nil }
        return staleAnswer(of: key, fields: fields, code: error.code, outcome: outcome, at: now)
    }

    /// The stored entry a request with `fields` may be answered with, marked stale, in place of
    /// `response`, the origin's answer to its fetch for `key`: following HTTP, when that is a
    /// server error (`500`, `502`, `503`, `504`: RFC 5861 section 4) and ``answersStaleOnError``
    /// or the entry's own `stale-if-error` allows it. Its outcome reads as a stale answer after
    /// `URLError.badServerResponse`.
    func answerAfterServerError(
        of key: CacheKey, fields: [String: String]?, response: URLResponse, outcome: CacheOutcome,
        at now: ContinuousClock.Instant
    ) -> (Data, URLResponse)? {
        guard policy.followsHTTPCaching, let status = (response as? HTTPURLResponse)?.statusCode,
            [500, 502, 503, 504].contains(status)
        else { return nil }
        return staleAnswer(of: key, fields: fields, code: .badServerResponse, outcome: outcome, at: now)
    }

    private func staleAnswer(
        of key: CacheKey, fields: [String: String]?, code: URLError.Code, outcome: CacheOutcome,
        at now: ContinuousClock.Instant
    ) -> (Data, URLResponse)? {
        guard let stored = store.peek(key, selectedBy: fields),
            policy.mayAnswerAfterFailure(stored, whenConfigured: answersStaleOnError, at: now)
        else { return nil }
        store.record { $0.staleAnswers += 1 }
        var outcome = outcome
        outcome.source = .memory(.staleAfterFailure(code))
        outcome.storage = nil
        let response = HTTPResponseBuilder.stale(stored.response, value: String(code.rawValue), outcome: outcome)
        return (stored.data, response)
    }

    /// The connectivity failures after which a stored entry may answer.
    static let connectivityErrors: Set<URLError.Code> = [
        .notConnectedToInternet, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed,
        .timedOut, .networkConnectionLost,
    ]

    /// The entry of `key` that a request with `fields` may be answered with, judged by the policy
    /// in the store's lookup at `time` (``FreshnessPolicy/lookupTime``), read before. When `isPlanning`, the lookup counts the request, and a stale-window
    /// entry answers; otherwise (a recheck before a fetch starts) only a fresh or accepted one does.
    /// Without an answer, `missReason` says why the request must be fetched. Unless `touches`, the
    /// entry found keeps its place and is not counted as read (a prefetch's look). When
    /// `asWritten` (a key made from the URL as written), nothing is stored for the key and the URL
    /// is not normal, nothing is counted and `missReason` is nil: the request is looked up by its
    /// normal form.
    private func memoryAnswer(
        key: CacheKey,
        fields: [String: String]?,
        acceptance: FreshnessPolicy.Acceptance,
        at time: Duration?,
        isPlanning: Bool,
        touches: Bool = true,
        asWritten: Bool = false,
        missReason: inout Plan.FetchReason?,
        isObserved: inout Bool
    ) -> MemoryAnswer? {
        let found = store.lookup(key, selectedBy: fields, isObserved: &isObserved, touches: touches) {
            found, statistics, isObserved -> MemoryAnswer? in
            // Nothing under the URL as written: a normal URL's key is the one looked up, and it
            // is a miss; any other is looked up again by its normal form.
            if asWritten, case .absent = found, !URLNormalization.isNormalized(key.url, httpOnly: true) {
                missReason = nil
                return nil
            }
            if isPlanning { statistics.requests += 1 }
            // The entry is judged where the switch binds it: bound to a variable declared before,
            // it was copied (a retain and a release a hit).
            switch found {
            case .entry(let entry):
                return judged(
                    entry, acceptance: acceptance, at: time, isPlanning: isPlanning, touches: touches,
                    statistics: &statistics, isObserved: isObserved, missReason: &missReason)
            case .noMatchingVariant:
                missReason = .noMatchingVariant
            case .absent(let departure):
                switch departure {
                case .invalidated: missReason = .invalidated
                case .evicted: missReason = .evicted
                case nil: missReason = .noEntry
                }
            }
            return nil
        }
        // Read only where entries keep an age: a hit of a transport whose entries never go stale
        // does not look at its answer again.
        guard time != nil, case .some(let answer) = found, let age = policy.age(of: answer.entry, at: time) else {
            return found
        }
        // RFC 9111 section 5.1: an answer from a cache says how old it is.
        return MemoryAnswer(
            entry: answer.entry,
            response: HTTPResponseBuilder.response(
                answer.response, setting: "Age", to: String(max(0, age.components.seconds)),
                outcome: CacheOutcome(source: .memory(answer.reason))),
            reason: answer.reason, isObserved: answer.isObserved)
    }

    /// The answer `entry`, found for a key by ``memoryAnswer(key:fields:acceptance:at:isPlanning:touches:asWritten:missReason:isObserved:)``,
    /// gives, counted in `statistics`; nil when it is too stale (`missReason` then says so).
    /// Called under the store's lock.
    @inline(__always)
    private func judged(
        _ entry: StoredResponse, acceptance: FreshnessPolicy.Acceptance, at time: Duration?, isPlanning: Bool,
        touches: Bool, statistics: inout CacheStatistics, isObserved: Bool, missReason: inout Plan.FetchReason?
    ) -> MemoryAnswer? {
        let reason: Plan.MemoryReason
        switch policy.verdict(for: entry, acceptance: acceptance, at: time) {
        case .fresh: reason = .fresh
        case .staleAccepted: reason = .staleAccepted
        case .staleWhileRevalidate where isPlanning: reason = .staleWhileRevalidate
        case .staleWhileRevalidate, .stale:
            missReason = .expired
            return nil
        }
        guard touches else {
            return MemoryAnswer(entry: entry, response: entry.response, reason: reason, isObserved: isObserved)
        }
        statistics.memoryHits += 1
        entry.hits += 1
        return MemoryAnswer(
            entry: entry, response: response(for: reason, from: entry, statistics: &statistics), reason: reason,
            isObserved: isObserved)
    }

    /// The response a memory answer for `reason` hands over: the entry's own, or its copy marked
    /// for that reason, made once per entry. Call under the store's lock, which guards the copies
    /// kept on the entry.
    @inline(__always)
    private func response(
        for reason: Plan.MemoryReason, from entry: StoredResponse, statistics: inout CacheStatistics
    ) -> URLResponse {
        switch reason {
        case .fresh:
            return entry.response
        case .staleWhileRevalidate:
            statistics.staleWindowAnswers += 1
            if let marked = entry.staleWindowResponse { return marked }
            let marked = HTTPResponseBuilder.stale(
                entry.response, value: CachedTransport.revalidatingStaleValue,
                outcome: CacheOutcome(source: .memory(reason)))
            entry.staleWindowResponse = marked
            return marked
        case .staleAccepted, .staleAfterFailure:
            if let marked = entry.staleAcceptedResponse { return marked }
            let marked = HTTPResponseBuilder.answer(entry.response, outcome: CacheOutcome(source: .memory(reason)))
            entry.staleAcceptedResponse = marked
            return marked
        }
    }

    private func send(
        _ request: URLRequest, url: URL, because reason: Plan.SendReason, account: AccountIdentity?
    ) -> Plan {
        .send(SendPlan(request: request, url: url, reason: reason, account: account?.marker))
    }
}
