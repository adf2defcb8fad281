import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// A real HTTP/1.1 origin on 127.0.0.1 and a random port, for end-to-end tests, the demo and the
/// benchmarks.
///
/// GET and HEAD on any path answer `200` with the body
/// `path=<path> query=<query> version=<n> auth=<Authorization or -> hit=<n>` (followed by
/// ` cookie=<Cookie>` when the request sends one) and `Cache-Control: no-cache`. Query parameters
/// change the answer, and so do the same parameters in an `X-Origin-Query` request header (which
/// is not part of a cache key, so a test can make one URL fail):
/// - `delay=<ms>`: answer after that many milliseconds;
/// - `status=<code>`: answer with that status;
/// - `size=<bytes>`: a body of exactly that many bytes;
/// - `cc=<value>`: `Cache-Control: <value>` (`cc=none` sends none; `maxage0` stands for `max-age=0`);
/// - `cc2=<value>`: a second `Cache-Control` field line after the first;
/// - `pragma=no-cache`, `vary=<header or *>`, `setcookie=1`: those headers;
/// - `expires=<value>`: `Expires: <value>` (`past` stands for the epoch);
/// - `modifiedago=<seconds>`: `Last-Modified` that long ago, whatever the status (a `200`'s own
///   validator replaces it);
/// - `gate=1`: wait until the gate is open (see ``closeGate()``); `gate=<name>`: wait until the
///   gate of that name is open (see ``closeGate(_:)``);
/// - `drop=1`: promise a longer body than is sent, then close the connection;
/// - `reset=1`: reset the connection (TCP RST) without answering, after the gate and the delay;
/// - `fail=<n>`: answer the first n requests for this path and query with the fault `failwith=`
///   names, and later ones as the other parameters say;
/// - `failwith=<code>|reset|drop`: that fault: the status `<code>` (`503` when not given), or what
///   `reset=1` or `drop=1` does;
/// - `redirect=<path>`: `302` to that path (`redirectstatus=<code>` for another status);
/// - `basic=<user>:<password>`: `401` with `WWW-Authenticate: Basic realm="loopback"` unless the
///   request's `Authorization` carries those credentials;
/// - `loop=1`: `302` to the request's own path and query, for ever;
/// - `stable=1`: leave `hit=<n>` out of the body, so it changes only with the path's version;
/// - `kbps=<n>`: send the body of a `200` as a link of that many kilobits per second would;
/// - `validators=etag|last-modified|none`: send only that validator (both by default).
///
/// Every `200` to a GET or HEAD carries validators: `ETag` (a hash of the body) and
/// `Last-Modified` (a date that moves one day per version of the path). A request whose
/// `If-None-Match` names the current `ETag` (or `*`), or, without `If-None-Match`, whose
/// `If-Modified-Since` is not before `Last-Modified`, gets `304 Not Modified` with no body
/// (counted apart, see ``notModifiedAnswers(_:)``). A `Range: bytes=…` request (single range;
/// with `If-Range`, only while it names the current `ETag`) gets `206 Partial Content` with
/// `Content-Range`, or `416` when the range is outside the body.
///
/// Other methods bump the path's version, answer with the request body echoed and `X-Version`.
///
/// Bearer tokens: a request with `token=1` gets `401 Unauthorized` (with `WWW-Authenticate:
/// Bearer`) unless it carries `Authorization: Bearer <the current token>`. A `POST` to `/token`
/// issues a new token (`t1`, `t2` …), makes it the current one and answers it as its body; with
/// `bogus=1` it answers a token that is never accepted. ``expireToken()`` replaces the current
/// token as if it had expired. The first token is `t0`. A `/token` request with a `gate` issues
/// its token only while that gate is open, checked in the same step as the issuance: once
/// ``closeGate(_:)`` has returned, no token is issued until the gate opens, not even by a request
/// that passed it a moment before.
///
/// Tokens of several accounts, each its own current token, as an origin that tells its users
/// apart by their tokens: a request with `token=account` gets `401` unless it carries the current
/// token of the account the token was issued to, so two accounts can share one URL. An account's
/// first token is `<name>-t0` (see ``currentToken(of:)``); a `POST` to `/token?account=<name>`
/// issues its next one (`<name>-t1` …), with `gate` as above; ``expireToken(of:)`` expires it
/// and makes none. The single current token above is apart from these.
///
/// Refresh-token rotation, as OAuth 2.1 asks of a server whose clients cannot keep a secret: a
/// `POST` to `/token?rotate=1` with the form body `grant_type=refresh_token&refresh_token=<r>`
/// presents a refresh token. When `<r>` is live, the origin revokes it and answers
/// `{"access_token": …, "token_type": "Bearer", "refresh_token": …}` with a new access token,
/// which `token=1` requests accept beside the current token until ``expireToken()``, and a new
/// refresh token of the same grant; otherwise `400` with `{"error": "invalid_grant"}`. Of the other
/// parameters only `gate` applies. The body is read on arrival and the answer made after the gate,
/// with no await that a client's departure can interrupt: a refresh whose client went away is
/// still carried out, as a real server carries it out. ``signIn()`` makes a grant; ``refreshAnswers`` and ``overlappingRefreshes`` tell what the
/// endpoint saw.
public final class LoopbackOrigin: Sendable {
    /// `http://127.0.0.1:<port>`.
    public let baseURL: URL
    private let state: OriginState
    private let serviceGroup: ServiceGroup
    private let running: Task<Void, any Error>

    private init(baseURL: URL, state: OriginState, serviceGroup: ServiceGroup, running: Task<Void, any Error>) {
        self.baseURL = baseURL
        self.state = state
        self.serviceGroup = serviceGroup
        self.running = running
    }

    /// Starts an origin on 127.0.0.1 and a port the system picks.
    public static func start() async throws -> LoopbackOrigin {
        let state = OriginState()
        var logger = Logger(label: "LoopbackOrigin")
        logger.logLevel = .error
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let application = Application(
            responder: CallbackResponder<OriginContext> { request, context in
                try await OriginResponder.respond(to: request, context: context, state: state)
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger
        )
        let serviceGroup = ServiceGroup(
            configuration: .init(services: [application], gracefulShutdownSignals: [], logger: logger)
        )
        let running = Task { try await serviceGroup.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            running.cancel()
            throw URLError(.cannotConnectToHost)
        }
        return LoopbackOrigin(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!,
            state: state,
            serviceGroup: serviceGroup,
            running: running
        )
    }

    /// Stops the server and waits until it has stopped.
    public func stop() async {
        await state.openEveryGate()
        await serviceGroup.triggerGracefulShutdown()
        _ = await running.result
    }

    /// `baseURL` with `pathAndQuery` (such as `/items?page=1`) appended.
    public func url(_ pathAndQuery: String) -> URL {
        URL(string: baseURL.absoluteString + pathAndQuery)!
    }

    /// Requests that arrived for exactly this path and query (`/items?page=1`).
    public func hits(_ pathAndQuery: String) async -> Int { await state.hits(pathAndQuery) }

    /// Requests that arrived for this path, whatever their query.
    public func hits(path: String) async -> Int { await state.pathHits(path) }

    /// `304 Not Modified` answers sent for exactly this path and query.
    public func notModifiedAnswers(_ pathAndQuery: String) async -> Int { await state.notModifiedAnswers(pathAndQuery) }

    /// `304 Not Modified` answers sent in all.
    public var totalNotModifiedAnswers: Int { get async { await state.totalNotModified } }

    /// The value of request header `name` on the latest request for exactly this path and query.
    public func lastRequestHeader(_ name: String, for pathAndQuery: String) async -> String? {
        await state.lastRequestHeader(name, for: pathAndQuery)
    }

    /// Body bytes sent in all (a `304` or a `HEAD` sends none).
    public var bodyBytesSent: Int { get async { await state.bodyBytesSent } }

    /// Requests that arrived in all.
    public var totalHits: Int { get async { await state.totalHits } }

    /// The most requests answered at once since the start or ``resetMaximumConcurrentRequests()``.
    /// A request counts from its arrival until its answer's head is ready (or it ends without
    /// one), so never for longer than its client waits for it.
    public var maximumConcurrentRequests: Int { get async { await state.maximumConcurrentRequests } }

    /// Starts ``maximumConcurrentRequests`` again from the requests being answered now.
    public func resetMaximumConcurrentRequests() async { await state.resetMaximumConcurrentRequests() }

    /// The path's version: how many non-GET requests it has received, plus the bumps of
    /// ``bumpVersion(of:)``.
    public func version(of path: String) async -> Int { await state.version(of: path) }

    /// Changes the path's data on the server's side, as another client would.
    /// - Returns: the new version.
    @discardableResult
    public func bumpVersion(of path: String) async -> Int { await state.bumpVersion(of: path) }

    /// The token requests with `token=1` must carry.
    public var currentToken: String { get async { await state.currentToken } }

    /// Replaces the current token with one no client has been given, as an expired token is.
    public func expireToken() async { await state.expireToken() }

    /// The token `account`'s requests with `token=account` must carry; `<account>-t0` until its
    /// first is issued or expired.
    public func currentToken(of account: String) async -> String { await state.currentToken(of: account) }

    /// Replaces `account`'s current token with one no client has been given, as an expired token
    /// is; other accounts' tokens are not touched.
    public func expireToken(of account: String) async { await state.expireToken(of: account) }

    /// Requests that arrived carrying a header named `name` (any case), whatever their path.
    public func requests(carrying name: String) async -> Int { await state.requests(carrying: name) }

    /// From now on, requests with `gate=1` wait until ``openGate()``.
    public func closeGate() async { await state.closeGate(OriginState.defaultGate) }

    /// Lets every waiting request through, and later ones at once.
    public func openGate() async { await state.openGate(OriginState.defaultGate) }

    /// From now on, requests with `gate=<name>` wait until ``openGate(_:)`` of that name; other
    /// gates are not touched, so a test can hold two kinds of request and release them apart.
    public func closeGate(_ name: String) async { await state.closeGate(name) }

    /// Lets every request waiting at gate `name` through, and later ones at once.
    public func openGate(_ name: String) async { await state.openGate(name) }

    /// Suspends until at least `count` requests wait at the closed gate `name`.
    public func waitUntilHeld(atGate name: String, count: Int = 1) async {
        await state.waitUntilHeld(atGate: name, count: count)
    }

    /// A new grant of the rotating `/token`, as a sign-in makes: an access token, accepted until
    /// ``expireToken()``, and the grant's first refresh token.
    public func signIn() async -> (accessToken: String, refreshToken: String) { await state.signIn() }

    /// What the rotating `/token` answered, in the order it answered.
    public var refreshAnswers: [RefreshAnswer] { get async { await state.refreshAnswers } }

    /// Refresh requests of the rotating `/token` that arrived while another of the same grant was
    /// still unanswered: a client that lets two refreshes of one account overlap presents a
    /// refresh token the first one is about to revoke.
    public var overlappingRefreshes: Int { get async { await state.overlappingRefreshes } }

    /// Suspends until the rotating `/token` has answered at least `count` refresh requests.
    public func waitForRefreshAnswers(count: Int) async { await state.waitForRefreshAnswers(count: count) }

    /// Suspends until at least `count` requests for `pathAndQuery` have arrived.
    public func waitForHits(_ pathAndQuery: String, count: Int) async {
        await state.waitForHits(pathAndQuery, count: count)
    }

    /// Suspends until at least `count` requests for `path`, whatever their query, have arrived.
    public func waitForHits(path: String, count: Int) async {
        await state.waitForPathHits(path, count: count)
    }
}

/// One answer of the rotating `/token`: the refresh token presented, and the tokens issued for it
/// (nil when it was refused).
public struct RefreshAnswer: Sendable, Equatable, CustomStringConvertible {
    /// The refresh token the request presented.
    public let presented: String
    /// The new access token; nil when the refresh was refused.
    public let accessToken: String?
    /// The new refresh token, of the presented one's grant; nil when the refresh was refused.
    public let refreshToken: String?

    /// `presented -> access/refresh`, or `presented -> refused`.
    public var description: String {
        guard let accessToken, let refreshToken else { return "\(presented) -> refused" }
        return "\(presented) -> \(accessToken)/\(refreshToken)"
    }
}

/// Runs `body` with a fresh origin, and stops the origin afterwards whatever happens. `body` runs
/// on the caller's actor (the main actor for a test of main-actor state).
public func withOrigin(
    isolation: isolated (any Actor)? = #isolation, _ body: (LoopbackOrigin) async throws -> Void
) async throws {
    let origin = try await LoopbackOrigin.start()
    do {
        try await body(origin)
    } catch {
        await origin.stop()
        throw error
    }
    await origin.stop()
}

actor OriginState {
    private var hitsByKey: [String: Int] = [:]
    private var hitsByPath: [String: Int] = [:]
    private(set) var totalHits = 0
    private var notModifiedByKey: [String: Int] = [:]
    private(set) var totalNotModified = 0
    private(set) var bodyBytesSent = 0
    private var concurrentRequests = 0
    private(set) var maximumConcurrentRequests = 0
    private var lastHeaders: [String: [String: String]] = [:]
    /// Per lowercased header name, the requests that carried it.
    private var requestsByHeader: [String: Int] = [:]
    private var versions: [String: Int] = [:]
    private(set) var currentToken = "t0"
    private var tokensMade = 0
    /// Per account of `token=account`, its current token and how many it has been given.
    private var accountTokens: [String: (current: String, made: Int)] = [:]
    static let defaultGate = "1"
    private var closedGates: Set<String> = []
    private var gateWaiters: [(gate: String, continuation: CheckedContinuation<Void, Never>)] = [] {
        didSet {
            let held = heldWatchers.filter { watcher in
                gateWaiters.count(where: { $0.gate == watcher.gate }) >= watcher.count
            }
            heldWatchers.removeAll { watcher in gateWaiters.count(where: { $0.gate == watcher.gate }) >= watcher.count }
            for watcher in held { watcher.continuation.resume() }
        }
    }
    private var heldWatchers: [(gate: String, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    /// Access tokens the rotating `/token` issued, accepted beside the current one until
    /// ``expireToken()``.
    private var rotatedAccessTokens: Set<String> = []
    /// The grant of every refresh token ever issued, live or revoked.
    private var grantOfRefreshToken: [String: Int] = [:]
    private var liveRefreshTokens: Set<String> = []
    private var grantsMade = 0
    private var refreshTokensMade = 0
    /// Per grant, the refresh requests that arrived and are not answered yet.
    private var unansweredRefreshes: [Int: Int] = [:]
    private(set) var overlappingRefreshes = 0
    private(set) var refreshAnswers: [RefreshAnswer] = [] {
        didSet {
            let ready = refreshAnswerWaiters.filter { $0.count <= refreshAnswers.count }
            refreshAnswerWaiters.removeAll { $0.count <= refreshAnswers.count }
            for waiter in ready { waiter.continuation.resume() }
        }
    }
    private var refreshAnswerWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var hitWaiters: [(key: String, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var pathHitWaiters: [(path: String, count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    func recordHit(key: String, path: String) -> Int {
        hitsByKey[key, default: 0] += 1
        hitsByPath[path, default: 0] += 1
        totalHits += 1
        let count = hitsByKey[key]!
        let ready = hitWaiters.filter { $0.key == key && $0.count <= count }
        hitWaiters.removeAll { $0.key == key && $0.count <= count }
        for waiter in ready { waiter.continuation.resume() }
        let pathCount = hitsByPath[path]!
        let pathReady = pathHitWaiters.filter { $0.path == path && $0.count <= pathCount }
        pathHitWaiters.removeAll { $0.path == path && $0.count <= pathCount }
        for waiter in pathReady { waiter.continuation.resume() }
        return count
    }

    func requestStarted() {
        concurrentRequests += 1
        maximumConcurrentRequests = max(maximumConcurrentRequests, concurrentRequests)
    }

    func requestEnded() { concurrentRequests -= 1 }

    func resetMaximumConcurrentRequests() { maximumConcurrentRequests = concurrentRequests }

    func recordHeaders(_ headers: HTTPFields, key: String) {
        var fields: [String: String] = [:]
        for field in headers { fields[field.name.canonicalName] = field.value }
        lastHeaders[key] = fields
        for name in fields.keys { requestsByHeader[name, default: 0] += 1 }
    }

    func requests(carrying name: String) -> Int { requestsByHeader[name.lowercased()] ?? 0 }

    func lastRequestHeader(_ name: String, for key: String) -> String? {
        lastHeaders[key]?[name.lowercased()]
    }

    func recordNotModified(key: String) {
        notModifiedByKey[key, default: 0] += 1
        totalNotModified += 1
    }

    func notModifiedAnswers(_ key: String) -> Int { notModifiedByKey[key] ?? 0 }

    func recordBodyBytes(_ count: Int) { bodyBytesSent += count }

    func hits(_ key: String) -> Int { hitsByKey[key] ?? 0 }
    func pathHits(_ path: String) -> Int { hitsByPath[path] ?? 0 }
    func version(of path: String) -> Int { versions[path] ?? 0 }

    func bumpVersion(of path: String) -> Int {
        versions[path, default: 0] += 1
        return versions[path]!
    }

    /// A new token, now the current one.
    func issueToken() -> String {
        tokensMade += 1
        currentToken = "t\(tokensMade)"
        return currentToken
    }

    func expireToken() {
        tokensMade += 1
        currentToken = "expired-\(tokensMade)"
        rotatedAccessTokens.removeAll()
    }

    func currentToken(of account: String) -> String { accountTokens[account]?.current ?? "\(account)-t0" }

    /// `account`'s next token, now its current one.
    func issueToken(for account: String) -> String {
        let made = (accountTokens[account]?.made ?? 0) + 1
        accountTokens[account] = ("\(account)-t\(made)", made)
        return "\(account)-t\(made)"
    }

    /// Counts no token made, unlike ``expireToken()``: an account's tokens are numbered by the
    /// ones it was given.
    func expireToken(of account: String) {
        let made = accountTokens[account]?.made ?? 0
        accountTokens[account] = ("\(account)-expired-\(made)", made)
    }

    /// Whether `authorization` carries the current token of the account it was issued to.
    func acceptsAccountToken(_ authorization: String?) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
        let token = authorization.dropFirst("Bearer ".count)
        // `<name>-t<n>`: the name is all before the last dash.
        guard let dash = token.lastIndex(of: "-") else { return false }
        return currentToken(of: String(token[..<dash])) == token
    }

    /// Whether `authorization` carries a token `token=1` requests accept.
    func accepts(_ authorization: String?) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
        let token = String(authorization.dropFirst("Bearer ".count))
        return token == currentToken || rotatedAccessTokens.contains(token)
    }

    func signIn() -> (accessToken: String, refreshToken: String) {
        grantsMade += 1
        return (issueRotatedAccessToken(), issueRefreshToken(in: grantsMade))
    }

    private func issueRotatedAccessToken() -> String {
        tokensMade += 1
        let token = "t\(tokensMade)"
        rotatedAccessTokens.insert(token)
        return token
    }

    private func issueRefreshToken(in grant: Int) -> String {
        refreshTokensMade += 1
        let token = "r\(refreshTokensMade)"
        grantOfRefreshToken[token] = grant
        liveRefreshTokens.insert(token)
        return token
    }

    /// A refresh request presenting `presented` arrived: counted as an overlap when another of
    /// its grant is still unanswered.
    func refreshArrived(presenting presented: String) {
        guard let grant = grantOfRefreshToken[presented] else { return }
        if unansweredRefreshes[grant, default: 0] > 0 { overlappingRefreshes += 1 }
        unansweredRefreshes[grant, default: 0] += 1
    }

    /// Answers a refresh request presenting `presented`: new tokens of its grant, the presented
    /// one revoked, when it is live; a refusal otherwise.
    func rotate(presented: String) -> RefreshAnswer {
        let grant = grantOfRefreshToken[presented]
        if let grant { unansweredRefreshes[grant, default: 1] -= 1 }
        guard let grant, liveRefreshTokens.remove(presented) != nil else {
            let answer = RefreshAnswer(presented: presented, accessToken: nil, refreshToken: nil)
            refreshAnswers.append(answer)
            return answer
        }
        let answer = RefreshAnswer(
            presented: presented, accessToken: issueRotatedAccessToken(), refreshToken: issueRefreshToken(in: grant))
        refreshAnswers.append(answer)
        return answer
    }

    func waitForRefreshAnswers(count: Int) async {
        guard refreshAnswers.count < count else { return }
        await withCheckedContinuation { refreshAnswerWaiters.append((count, $0)) }
    }

    func closeGate(_ name: String) { closedGates.insert(name) }

    func openGate(_ name: String) {
        closedGates.remove(name)
        let waiters = gateWaiters.filter { $0.gate == name }
        gateWaiters.removeAll { $0.gate == name }
        for waiter in waiters { waiter.continuation.resume() }
    }

    func openEveryGate() {
        for name in closedGates.union(gateWaiters.map(\.gate)) { openGate(name) }
    }

    func passGate(_ name: String) async {
        guard closedGates.contains(name) else { return }
        await withCheckedContinuation { gateWaiters.append((name, $0)) }
    }

    /// Returns once `gate` (if any) is open, in the same step of this actor as the caller's
    /// next one: what follows cannot happen while the gate is closed.
    private func stayBehind(_ gate: String?) async {
        guard let gate else { return }
        while closedGates.contains(gate) { await passGate(gate) }
    }

    /// A new token, now the current one (`account`'s, when given), issued once `gate` is open.
    func issueToken(behind gate: String?, for account: String?) async -> String {
        await stayBehind(gate)
        return account.map(issueToken(for:)) ?? issueToken()
    }

    /// ``rotate(presented:)`` once `gate` is open.
    func rotate(presented: String, behind gate: String?) async -> RefreshAnswer {
        await stayBehind(gate)
        return rotate(presented: presented)
    }

    func waitUntilHeld(atGate gate: String, count: Int) async {
        guard gateWaiters.count(where: { $0.gate == gate }) < count else { return }
        await withCheckedContinuation { heldWatchers.append((gate, count, $0)) }
    }

    func waitForHits(_ key: String, count: Int) async {
        guard (hitsByKey[key] ?? 0) < count else { return }
        await withCheckedContinuation { hitWaiters.append((key, count, $0)) }
    }

    func waitForPathHits(_ path: String, count: Int) async {
        guard (hitsByPath[path] ?? 0) < count else { return }
        await withCheckedContinuation { pathHitWaiters.append((path, count, $0)) }
    }
}

/// The request context: the basic one plus the connection, which the `reset` answer needs.
struct OriginContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

enum OriginResponder {
    static func respond(to request: Request, context: OriginContext, state: OriginState) async throws -> Response {
        await state.requestStarted()
        do {
            let response = try await answer(request, context: context, state: state)
            await state.requestEnded()
            return response
        } catch {
            await state.requestEnded()
            throw error
        }
    }

    /// The `401` of a Basic challenge, unless `headers` carry `credentials` (`user:password`).
    static func basicRefusal(_ credentials: String, _ headers: HTTPFields) -> Response? {
        let expected = "Basic " + Data(credentials.utf8).base64EncodedString()
        guard headers[.authorization] != expected else { return nil }
        var fields = HTTPFields()
        fields[.wwwAuthenticate] = "Basic realm=\"loopback\""
        fields[.cacheControl] = "no-store"
        return Response(status: .unauthorized, headers: fields, body: .init(byteBuffer: ByteBuffer(string: "refused")))
    }

    static func answer(_ request: Request, context: OriginContext, state: OriginState) async throws -> Response {
        var request = request
        let path = request.uri.path
        let query = request.uri.query
        let key = query.map { "\(path)?\($0)" } ?? path
        let parameters = request.uri.queryParameters
        let extra =
            request.headers[.init("X-Origin-Query")!]
            .flatMap { URLComponents(string: "?" + $0)?.queryItems } ?? []
        func parameter(_ name: String) -> String? {
            if let item = extra.last(where: { $0.name == name }) { return item.value ?? "" }
            return parameters[Substring(name)].map(String.init)
        }

        await state.recordHeaders(request.headers, key: key)
        let hit = await state.recordHit(key: key, path: path)
        var fault: String?
        if let failing = parameter("fail").flatMap(Int.init), hit <= failing { fault = parameter("failwith") ?? "503" }
        // A rotating refresh is read and counted on arrival, before the gate its client may leave
        // at; from there to its answer nothing waits on the client, so it is carried out whatever
        // the client does meanwhile.
        var presented: String?
        if path == "/token", request.method == .post, parameter("rotate") == "1" {
            let form = try await request.collectBody(upTo: 64 * 1024)
            let token =
                URLComponents(string: "?" + String(buffer: form))?.queryItems?
                .last { $0.name == "refresh_token" }?.value ?? ""
            await state.refreshArrived(presenting: token)
            presented = token
        }
        if let gate = parameter("gate") { await state.passGate(gate) }
        if let presented {
            return await rotationAnswer(presenting: presented, behind: parameter("gate"), state: state)
        }
        if let delay = parameter("delay").flatMap(Int.init), delay > 0 {
            try await Task.sleep(for: .milliseconds(delay))
        }
        if parameter("reset") == "1" || fault == "reset" {
            // SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            try? await (context.channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0))
                .get()
            try? await context.channel.close()
            throw CancellationError()
        }
        let status = HTTPResponse.Status(
            code: fault.flatMap(Int.init) ?? parameter("status").flatMap(Int.init) ?? 200)
        if let answer = await tokenAnswer(request, path: path, status: status, parameter: parameter, state: state) {
            return answer
        }

        guard request.method == .get || request.method == .head else {
            let body = try await request.collectBody(upTo: 64 * 1024 * 1024)
            let version = await state.bumpVersion(of: path)
            var headers = HTTPFields()
            headers[.init("X-Version")!] = String(version)
            return Response(status: status, headers: headers, body: .init(byteBuffer: body))
        }

        var headers = HTTPFields()
        switch parameter("cc") {
        case nil: headers[.cacheControl] = "no-cache"
        case "none": break
        case "maxage0": headers[.cacheControl] = "max-age=0"
        case let value?: headers[.cacheControl] = value
        }
        if let second = parameter("cc2") { headers.append(.init(name: .cacheControl, value: second)) }
        if parameter("pragma") == "no-cache" { headers[.init("Pragma")!] = "no-cache" }
        switch parameter("expires") {
        case nil: break
        case "past": headers[.expires] = "Thu, 01 Jan 1970 00:00:00 GMT"
        case let value?: headers[.expires] = value
        }
        if let vary = parameter("vary") { headers[.vary] = vary }
        if let age = parameter("modifiedago").flatMap(TimeInterval.init) {
            headers[.lastModified] = Validators.format(Date(timeIntervalSinceNow: -age))
        }
        if parameter("setcookie") == "1" { headers[.setCookie] = "session=\(hit)" }
        if let credentials = parameter("basic"), let refusal = basicRefusal(credentials, request.headers) {
            return refusal
        }
        if parameter("loop") == "1" {
            headers[.location] = key
            return Response(status: .found, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "loop")))
        }
        if let location = parameter("redirect") {
            headers[.location] = location
            let status = parameter("redirectstatus").flatMap(Int.init).map { HTTPResponse.Status(code: $0) } ?? .found
            return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "redirect")))
        }
        if parameter("drop") == "1" || fault == "drop" {
            let partial = ByteBuffer(repeating: UInt8(ascii: "d"), count: 1_000)
            headers[.contentLength] = "100000"
            return Response(
                status: status, headers: headers,
                body: ResponseBody(contentLength: 100_000) { writer in
                    try await writer.write(partial)
                    throw CancellationError()
                })
        }
        let body: ByteBuffer
        let version = await state.version(of: path)
        if let size = parameter("size").flatMap(Int.init) {
            body = ByteBuffer(repeating: UInt8(ascii: "x"), count: max(0, size))
        } else {
            let auth = request.headers[.authorization] ?? "-"
            let cookie = request.headers[.cookie].map { " cookie=\($0)" } ?? ""
            let hitText = parameter("stable") == "1" ? "" : " hit=\(hit)"
            body = ByteBuffer(
                string: "path=\(path) query=\(query ?? "") version=\(version) auth=\(auth)\(hitText)\(cookie)")
        }
        guard status == .ok else {
            await state.recordBodyBytes(body.readableBytes)
            return Response(status: status, headers: headers, body: .init(byteBuffer: body))
        }
        let validators = Validators(body: body, version: version, which: parameter("validators"))
        validators.add(to: &headers)
        if validators.notModified(request.headers) {
            await state.recordNotModified(key: key)
            return Response(status: .notModified, headers: headers)
        }
        if let range = request.headers[.range], validators.rangeApplies(request.headers) {
            guard let bounds = Validators.bounds(of: range, length: body.readableBytes) else {
                headers[.contentRange] = "bytes */\(body.readableBytes)"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            }
            headers[.contentRange] = "bytes \(bounds.lowerBound)-\(bounds.upperBound - 1)/\(body.readableBytes)"
            let part = body.getSlice(at: body.readerIndex + bounds.lowerBound, length: bounds.count) ?? ByteBuffer()
            await state.recordBodyBytes(part.readableBytes)
            return Response(status: .partialContent, headers: headers, body: .init(byteBuffer: part))
        }
        if request.method != .head { await state.recordBodyBytes(body.readableBytes) }
        if let rate = parameter("kbps").flatMap(Int.init), rate > 0, request.method != .head {
            // A slow link: the body in 16 KB chunks, each after the time it takes at that rate.
            let chunk = 16 * 1024
            let pause = Duration.microseconds(Int64(chunk) * 8 * 1_000 / Int64(rate))
            return Response(
                status: status, headers: headers,
                body: ResponseBody(contentLength: body.readableBytes) { writer in
                    var remaining = body
                    while let part = remaining.readSlice(length: min(chunk, remaining.readableBytes)),
                        part.readableBytes > 0
                    {
                        try await Task.sleep(for: pause)
                        try await writer.write(part)
                    }
                    try await writer.finish(nil)
                })
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
}

extension OriginResponder {
    /// The answer of `/token`, or a `401` to a `token=1` or `token=account` request without the
    /// current token; nil for any other request.
    static func tokenAnswer(
        _ request: Request, path: String, status: HTTPResponse.Status, parameter: (String) -> String?,
        state: OriginState
    ) async -> Response? {
        if path == "/token", request.method == .post {
            guard status == .ok else { return Response(status: status) }
            let token =
                parameter("bogus") == "1"
                ? "bogus" : await state.issueToken(behind: parameter("gate"), for: parameter("account"))
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: token)))
        }
        let authorization = request.headers[.authorization]
        switch parameter("token") {
        case "1": if await state.accepts(authorization) { return nil }
        case "account": if await state.acceptsAccountToken(authorization) { return nil }
        default: return nil
        }
        var headers = HTTPFields()
        headers[.wwwAuthenticate] = "Bearer"
        return Response(status: .unauthorized, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "refused")))
    }
}

extension OriginResponder {
    /// The rotating `/token`'s answer to a refresh presenting `presented`, once `gate` is open:
    /// made in one step of the state, so that it is issued even when the client has gone.
    static func rotationAnswer(presenting presented: String, behind gate: String?, state: OriginState) async
        -> Response
    {
        let answer = await state.rotate(presented: presented, behind: gate)
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        guard let accessToken = answer.accessToken, let refreshToken = answer.refreshToken else {
            return Response(
                status: .badRequest, headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_grant"}"#)))
        }
        let body = #"{"access_token":"\#(accessToken)","token_type":"Bearer","refresh_token":"\#(refreshToken)"}"#
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

/// The validators of one answer, and the conditions and ranges evaluated against them
/// (RFC 9110 sections 13 and 14).
struct Validators {
    let entityTag: String?
    let lastModified: Date?

    init(body: ByteBuffer, version: Int, which: String?) {
        // FNV-1a over the body: equal bodies, equal tags.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body.readableBytesView {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        entityTag = which == nil || which == "etag" ? "\"\(String(hash, radix: 16))\"" : nil
        lastModified =
            which == nil || which == "last-modified"
            ? Date(timeIntervalSince1970: 1_700_000_000 + Double(version) * 86_400) : nil
    }

    func add(to headers: inout HTTPFields) {
        if let entityTag { headers[.eTag] = entityTag }
        if let lastModified { headers[.lastModified] = Self.format(lastModified) }
    }

    /// Whether a GET or HEAD with these request headers gets `304 Not Modified`.
    func notModified(_ request: HTTPFields) -> Bool {
        if let condition = request[.ifNoneMatch] {
            guard let entityTag else { return false }
            return condition.split(separator: ",").contains { candidate in
                let tag = candidate.trimmingCharacters(in: .whitespaces)
                return tag == "*" || tag == entityTag || tag == "W/" + entityTag
            }
        }
        if let condition = request[.ifModifiedSince], let lastModified, let since = Self.parse(condition) {
            return lastModified <= since
        }
        return false
    }

    /// Whether a `Range` applies: always, or with `If-Range` only while it names the current tag.
    func rangeApplies(_ request: HTTPFields) -> Bool {
        guard let condition = request[.ifRange] else { return true }
        return condition == entityTag
    }

    /// The byte offsets a single `bytes=` range selects in a body of `length` bytes, or nil when
    /// it selects none.
    static func bounds(of range: String, length: Int) -> Range<Int>? {
        guard range.hasPrefix("bytes="), !range.contains(",") else { return nil }
        let spec = range.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        guard spec.count == 2 else { return nil }
        let first = Int(spec[0].trimmingCharacters(in: .whitespaces))
        let last = Int(spec[1].trimmingCharacters(in: .whitespaces))
        switch (first, last) {
        case let (start?, end?) where start <= end && start < length: return start..<min(end + 1, length)
        case let (start?, nil) where start < length: return start..<length
        case let (nil, suffix?) where suffix > 0 && length > 0: return max(0, length - suffix)..<length
        default: return nil
        }
    }

    static func format(_ date: Date) -> String {
        formatter().string(from: date)
    }

    static func parse(_ value: String) -> Date? {
        formatter().date(from: value)
    }

    private static func formatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }
}
