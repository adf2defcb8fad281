import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheQueries
import TransportCacheTesting

/// Seeded random histories: many tasks make random calls on one transport at once (reads, values,
/// prefetches, refreshes, invalidations of every kind, writes, optimistic updates that succeed and
/// fail, screens' queries, sign-outs and sign-ins, token expiry, revalidations, a clock that moves) against an origin
/// in memory that delays, fails, answers `304` and `401`, and rotates tokens, while a watcher keeps
/// the resources polled on that clock and a log reads every event. Odd seeds sign two
/// accounts in at once (`Accounts`, each request naming its own); even seeds keep one current
/// credential whose partition is its account (`Credentials`), switched and signed out while the
/// calls run. Every answer, and the transport at rest, is checked against the promises the
/// transport makes:
///
/// - every call ends, with an answer or an error (a history that does not end in its time ends
///   the process with its seed, its calls and every thread's stack);
/// - no answer carries another account's data (with one current credential: the data of an
///   account that was current at some moment of the call, or of nobody while none was);
/// - no answer is older than an invalidation that returned before its call began;
/// - nothing of an account signed out is answered until it signs in again;
/// - at rest, no fetch, waiter or pending optimistic update is left, nothing is polled or waits on
///   the clock, the event log and the watcher have ended and unregistered, the requests the
///   statistics count as sent are those the origin received, the store's index holds exactly the
///   keys the store holds, and the memory held is within its budget.
///
/// `HISTORY_SECONDS` sets how long the histories run (8 seconds by default), `HISTORY_SEED` the
/// first seed; a failing history prints the seed that repeats its choice of calls.
@Suite("Random histories of every call", .serialized)
struct HistoryCheckerTests {
    @Test("seeded random histories from many tasks keep every promise, at every answer and at rest")
    func randomHistories() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seconds = environment["HISTORY_SECONDS"].flatMap(Double.init) ?? 8
        var seed = environment["HISTORY_SEED"].flatMap { UInt64($0) } ?? 0x6869_7374_6F72_79
        let first = seed
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(seconds)
        var histories = 0
        var calls = 0
        var queries = 0
        var fetches = 0
        var notModified = 0
        var revalidations = 0
        repeat {
            let history = History(seed: seed)
            let violations = await history.run()
            calls += history.callCount
            queries += history.queriesShown
            histories += 1
            let statistics = history.transport.statistics
            notModified += statistics.notModified
            revalidations += statistics.revalidations
            fetches += statistics.networkFetches
            if !violations.isEmpty {
                Issue.record(
                    """
                    history with seed \(seed) (HISTORY_SEED=\(seed)) broke \(violations.count) promise(s):
                    \(violations.prefix(10).joined(separator: "\n"))
                    its calls:
                    \(history.log.suffix(400).joined(separator: "\n"))
                    """)
                break
            }
            seed &+= 1
        } while clock.now < deadline
        print(
            "random histories: \(histories) histories, \(calls) calls (\(fetches) fetches, \(notModified) answered 304, \(revalidations) revalidations and polls, "
                + "\(queries) queries that showed a value), seeds \(first)...\(seed)")
        #expect(histories > 0)
    }
}

/// The body every answer carries: whose it is, of which resource, and when it was made (a number
/// the origin and the local writes draw from one counter).
private struct Body: Codable, Sendable {
    let account: String
    let resource: Int
    let made: Int
}

/// One history: its origin, transport, accounts and the calls its tasks make.
private final class History: Sendable {
    static let accounts = ["me", "you"]
    static let resources = 6
    static let tasks = 6
    static let callsPerTask = 30
    static let base = "https://api.example.com"

    let seed: UInt64
    let clock = TestClock()
    let authenticator: TokenAuthenticator
    /// Odd seeds: several accounts signed in at once, each request naming its own (`Accounts`).
    /// Even seeds: one current credential whose partition is its account (`Credentials`), which
    /// the histories switch and sign out.
    let accounts: Accounts<TokenAuthenticator>?
    let credentials: Credentials<TokenAuthenticator>?
    /// Held around a switch of the current credential and around a local write made while one
    /// credential is current, so that a write's body names the account it is keyed for.
    let switching = Locked(())
    let origin: ScriptedOrigin
    let transport: CachedTransport
    /// What the checker knows, and what the origin holds.
    let state = Locked(Shared())

    struct Shared: Sendable {
        /// The counter the origin's answers and the local writes number what they make with.
        var made = 0
        /// The logical time: each call's beginning and end is a tick.
        var tick = 0
        /// The entity tag of the answer the origin gave last, per account and resource: a
        /// request that presents it is answered `304`.
        var entityTags: [String: String] = [:]
        /// The tokens the origin accepts, and the newest token issued per account.
        var accepted: Set<String> = []
        var issued: [String: Int] = [:]
        /// Per account and resource: the count `made` had when the latest invalidation that
        /// covered it began, and the ticks when it began and returned.
        var invalidations: [String: (made: Int, began: Int, returned: Int)] = [:]
        /// The numbers of local writes, and the tick each write's call returned (absent while
        /// it runs): a write racing an invalidation may land after it.
        var localWrites: Set<Int> = []
        var localReturned: [Int: Int] = [:]
        /// Per account: the ticks each sign-out and sign-in began and returned (nil while it runs).
        var signOuts: [String: [(began: Int, returned: Int?)]] = [:]
        var signIns: [String: [(began: Int, returned: Int?)]] = [:]
        /// With one current credential: each switch of it (nil for a sign-out), when it began and
        /// returned; the first is the credential the history starts with.
        var switches: [(began: Int, returned: Int, account: String?)] = [(0, 0, History.accounts[0])]

        /// The accounts that may have been current at some moment from tick `began` to `ended`:
        /// the one of the last switch that returned before `began`, and those of the switches
        /// that began before `ended` and after it.
        func accountsCurrent(from began: Int, to ended: Int) -> Set<String?> {
            let stable = switches.last { $0.returned < began } ?? switches[0]
            var current: Set<String?> = [stable.account]
            for change in switches where change.began < ended && change.returned > stable.returned {
                current.insert(change.account)
            }
            return current
        }
        var violations: [String] = []
        var log: [String] = []
        var calls = 0
        /// How many screens' queries showed a value.
        var queriesShown = 0
    }

    init(seed: UInt64) {
        self.seed = seed
        let state = self.state
        let failures = Locked(SeededGenerator(seed: seed ^ 0x6F72_6967_696E))
        authenticator = TokenAuthenticator { token, _ in
            // Rotation: only the newest token issued may be refreshed; the one it gives replaces it.
            let account = TokenAuthenticator.account(of: token)
            return try state.withLock { state in
                let number = Int(token.dropFirst(account.count + 1)) ?? 0
                guard state.issued[account] == number else { throw URLError(.userAuthenticationRequired) }
                state.accepted.remove("Bearer \(token)")
                state.issued[account] = number + 1
                state.accepted.insert("Bearer \(account)-\(number + 1)")
                return "\(account)-\(number + 1)"
            }
        }
        if seed % 2 == 1 {
            accounts = Accounts(authenticator)
            credentials = nil
        } else {
            accounts = nil
            credentials = Credentials(
                authenticator, credential: "\(Self.accounts[0])-1",
                partition: { TokenAuthenticator.account(of: $0) })
        }
        origin = ScriptedOrigin { request, _ in
            let roll = failures.withLock { Int.random(in: 0..<100, using: &$0) }
            let delay: Duration? = roll < 30 ? .microseconds(roll * 50) : nil
            if roll >= 95 { return .failure(.networkConnectionLost, delay: delay) }
            let path = request.url!.path
            let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
            return state.withLock { state -> ScriptedOrigin.Reply in
                guard state.accepted.contains(auth) else { return .init(status: 401, text: "refused", delay: delay) }
                let account = TokenAuthenticator.account(of: String(auth.dropFirst("Bearer ".count)))
                if request.httpMethod == "POST" {
                    let resource = Int(path.split(separator: "/").last ?? "") ?? -1
                    state.entityTags["\(account) r\(resource)"] = nil
                    return .init(status: 200, text: "written", delay: delay)
                }
                let resource = Int(path.split(separator: "/").last ?? "") ?? -1
                // The answer it gave this account last is still current unless a write changed it.
                let served = "\(account) r\(resource)"
                if let tag = state.entityTags[served], request.value(forHTTPHeaderField: "If-None-Match") == tag {
                    return .init(status: 304, headers: ["ETag": tag], delay: delay)
                }
                state.made += 1
                state.entityTags[served] = "\"\(state.made)\""
                let body = try! JSONEncoder().encode(Body(account: account, resource: resource, made: state.made))
                return .init(
                    headers: ["Cache-Control": "no-cache", "ETag": "\"\(state.made)\""], body: body, delay: delay)
            }
        }
        transport = makeTransport(loader: origin, clock: clock) { [accounts, credentials] configuration in
            if let accounts { configuration.identity.authenticate(with: accounts) }
            if let credentials { configuration.identity.authenticate(with: credentials) }
            configuration.storage.memoryCapacity = 64 * 1024
            // While a history's watcher runs, the resources are polled each time the clock moves
            // on by 5 seconds: revalidations of every account's entries beside the calls.
            configuration.stayingCurrent.refreshIntervals = [EndpointSetting(.pathPrefix("/r/"), .seconds(5))]
        }
        state.withLock { state in
            for account in Self.accounts {
                state.issued[account] = 1
                state.accepted.insert("Bearer \(account)-1")
            }
        }
        for account in Self.accounts { try! accounts?.setCredential("\(account)-1", for: account) }
    }

    var log: [String] { state.withLock { $0.log } }
    var callCount: Int { state.withLock { $0.calls } }
    var queriesShown: Int { state.withLock { $0.queriesShown } }

    /// How long a history may take: a few hundred milliseconds is usual, under a sanitizer too.
    /// It measures the transport when the histories run in a process of their own, as
    /// `scripts/test` and `scripts/soak` run them: beside the whole suite under a sanitizer, whose
    /// longest tests keep every core busy for tens of seconds, a history may barely run for that
    /// long.
    static let limit: TimeInterval = 60

    /// Runs the history: every task's calls, then the checks at rest. Returns what it broke.
    ///
    /// A history that does not end within ``limit`` ends the process, printing its seed, its
    /// calls, what the transport still tracks and every thread's stack: its watchdog waits on a
    /// thread of its own, since a hang may hold every thread of the concurrency pool.
    func run() async -> [String] {
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Thread { [self] in
            guard ended.wait(timeout: .now() + Self.limit) == .timedOut else { return }
            let work = transport.pendingWork
            print(
                """
                history with seed \(seed) (HISTORY_SEED=\(seed)) did not end within \(Self.limit) seconds; \
                the transport tracks \(work.fetches) fetches and \(work.waiters) waiters. Its last calls:
                \(log.suffix(80).joined(separator: "\n"))
                """)
            // The runtime's backtracer prints every thread's stack as the process ends.
            fatalError("history with seed \(seed) did not end within \(Self.limit) seconds")
        }
        watchdog.start()
        // A log reading every event while the calls run; cancelled once they end, it must end too
        // and unregister.
        let events = transport.events()
        let listener = Task {
            var seen = 0
            for await _ in events { seen += 1 }
            return seen
        }
        // A screen watching the resources, which keeps them polled while the calls run.
        let changes = transport.changes(for: .pathPrefix("/r/"))
        let watcher = Task { for await _ in changes {} }
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<Self.tasks {
                group.addTask { await self.calls(of: task) }
            }
        }
        watcher.cancel()
        await watcher.value
        listener.cancel()
        let seen = await listener.value
        ended.signal()
        // A history whose every call failed before it was planned (its accounts signed out) has
        // nothing to report.
        let planned = transport.statistics.requests
        if seen == 0, planned > 0 { violation("an events() listener saw no event of \(planned) requests") }
        if transport.store.state.withLock({ $0.isObserved }) {
            violation("an events() listener whose task was cancelled is still registered")
        }
        // The last watcher gone, nothing is polled any more, and nothing waits on the clock.
        for _ in 0..<400 where transport.poller.polledEndpoints > 0 || clock.sleepers > 0 {
            try? await Task.sleep(for: .milliseconds(5))
        }
        if transport.poller.polledEndpoints > 0 {
            violation(
                "at rest, \(transport.poller.polledEndpoints) endpoints were still polled after their watcher ended")
        }
        if clock.sleepers > 0 { violation("at rest, \(clock.sleepers) waits on the clock were left") }
        await checkAtRest()
        return state.withLock { $0.violations }
    }

    private func violation(_ text: String) {
        state.withLock { $0.violations.append(text) }
    }

    private func tick(_ note: String) -> Int {
        state.withLock { state in
            state.tick += 1
            state.log.append("\(state.tick) \(note)")
            return state.tick
        }
    }

    private func request(_ resource: Int, of account: String, method: String = "GET") -> URLRequest {
        var request = TransportCacheTests.request("\(Self.base)/r/\(resource)", method: method)
        if accounts != nil { request.account = account }
        return request
    }

    /// One task's calls, chosen by the history's seed and the task's number.
    private func calls(of task: Int) async {
        var generator = SeededGenerator(seed: seed &+ UInt64(task) &* 0x9E37_79B9)
        for _ in 0..<Self.callsPerTask {
            let account = Self.accounts.randomElement(using: &generator)!
            let resource = Int.random(in: 0..<Self.resources, using: &generator)
            let choice = Int.random(in: 0..<100, using: &generator)
            state.withLock { $0.calls += 1 }
            await call(choice, account: account, resource: resource, generator: &generator)
        }
    }

    private func call(_ choice: Int, account: String, resource: Int, generator: inout SeededGenerator) async {
        let request = request(resource, of: account)
        switch choice {
        case 0..<30:
            let began = tick("data \(account) r\(resource)")
            let answer = try? await transport.data(for: request, tags: ["t\(resource)"])
            check(answer, account: account, resource: resource, began: began, call: "data")
        case 30..<40:
            let began = tick("value \(account) r\(resource)")
            let body = try? await transport.value(Body.self, for: request)
            check(body, account: account, resource: resource, began: began, call: "value")
        case 40..<45:
            let began = tick("cachedValue \(account) r\(resource)")
            let body = try? transport.cachedValue(Body.self, for: request)?.value
            check(body, account: account, resource: resource, began: began, call: "cachedValue")
        case 45..<50:
            _ = tick("prefetch \(account) r\(resource)")
            if let prefetch = try? transport.prefetch(request, priority: .low) {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: prefetch.cancel()
                case 1: prefetch.priority = .high
                default: break
                }
            }
        case 50..<55:
            let began = tick("refresh \(account) r\(resource)")
            let answer = try? await transport.refresh(request)
            check(answer, account: account, resource: resource, began: began, call: "refresh")
        case 55..<60:
            invalidating("invalidate request \(account) r\(resource)", [(account, resource)], ofCurrent: resource) {
                transport.invalidate(request)
            }
        case 60..<63:
            invalidating(
                "invalidate endpoint r\(resource)", Self.accounts.map { ($0, resource) }
            ) {
                transport.invalidate(.pathPrefix("/r/\(resource)"))
            }
        case 63..<65:
            // Every data call tags its key, but a value call does not: only exercised.
            _ = tick("invalidate tag t\(resource)")
            _ = transport.invalidate(tag: "t\(resource)")
        case 65..<66:
            invalidating(
                "invalidateAll",
                Self.accounts.flatMap { account in (0..<Self.resources).map { (account, $0) } }
            ) {
                transport.invalidateAll()
            }
        case 66..<72:
            let made = localWrite()
            // With one current credential, the write is keyed for the account current now: held
            // against a switch, it names that account.
            switching.withLock { _ in
                let owner = credentials == nil ? account : (state.withLock { $0.switches.last!.account } ?? "-")
                _ = tick("store \(owner) r\(resource) made \(made)")
                let data = try! JSONEncoder().encode(Body(account: owner, resource: resource, made: made))
                try? transport.store(ProvisionalAnswer(for: request, data: data))
            }
            wrote(made)
        case 72..<80:
            let fails = Bool.random(using: &generator)
            let made = localWrite()
            _ = tick("optimisticUpdate \(account) r\(resource) made \(made) fails \(fails)")
            // With one current credential, the account it is keyed for is the one current when it
            // begins, which a switch may change meanwhile: its body names none ("*").
            let owner = credentials == nil ? account : "*"
            let data = try! JSONEncoder().encode(Body(account: owner, resource: resource, made: made))
            let post = self.request(resource, of: account, method: "POST")
            _ = try? await transport.optimisticUpdate(
                [ProvisionalAnswer(for: request, data: data)],
                write: {
                    if fails { throw URLError(.badServerResponse) }
                    return try await self.transport.data(for: post)
                })
            wrote(made)
        case 80..<86 where credentials != nil:
            switchCredential(to: choice < 83 ? nil : account)
        case 80..<83:
            let began = tick("sign out \(account)")
            let index = state.withLock { state in
                state.signOuts[account, default: []].append((began, nil))
                return state.signOuts[account]!.count - 1
            }
            try? accounts?.setCredential(nil, for: account)
            transport.signOut(partition: account)
            let returned = tick("signed out \(account)")
            state.withLock { $0.signOuts[account]![index].returned = returned }
        case 83..<86:
            let began = tick("sign in \(account)")
            let (token, index) = state.withLock { state -> (String, Int) in
                state.signIns[account, default: []].append((began, nil))
                let number = (state.issued[account] ?? 0) + 1
                state.issued[account] = number
                state.accepted.insert("Bearer \(account)-\(number)")
                return ("\(account)-\(number)", state.signIns[account]!.count - 1)
            }
            try? accounts?.setCredential(token, for: account)
            let returned = tick("signed in \(account)")
            state.withLock { $0.signIns[account]![index].returned = returned }
        case 86..<90:
            _ = tick("token of \(account) expires")
            state.withLock { state in
                if let number = state.issued[account] { state.accepted.remove("Bearer \(account)-\(number)") }
            }
        case 90..<93:
            _ = tick("revalidateAll")
            _ = await transport.revalidateAll()
        case 93..<96:
            let refreshing = Bool.random(using: &generator)
            let call = refreshing ? "query and refresh" : "query"
            let began = tick("\(call) \(account) r\(resource)")
            let body = await query(request, refreshing: refreshing)
            if body != nil { state.withLock { $0.queriesShown += 1 } }
            check(body, account: account, resource: resource, began: began, call: call)
        default:
            _ = tick("clock +\(choice - 93) s")
            clock.advance(by: .seconds(choice - 93))
        }
    }

    /// A screen's query of `request`: its first answer (from memory, or its fetch's), then, when
    /// `refreshing`, a pull-to-refresh's; then it is stopped, as a screen that goes away. Returns
    /// the value it showed last, which changes it followed meanwhile may have brought.
    @MainActor
    private func query(_ request: URLRequest, refreshing: Bool) async -> Body? {
        let query = CachedQuery(Body.self, for: request, in: transport)
        await query.waitForFetches()
        if refreshing { await query.refresh() }
        let shown = query.value
        query.stop()
        return shown
    }

    /// Makes `account`'s new token the current credential, or signs the current account out (nil).
    private func switchCredential(to account: String?) {
        guard let credentials else { return }
        switching.withLock { _ in
            let began = tick(account.map { "switch to \($0)" } ?? "sign out the current account")
            let (token, signedOut) = state.withLock { state -> (String?, String?) in
                state.switches.append((began, .max, account))
                guard let account else { return (nil, state.switches[state.switches.count - 2].account) }
                let number = (state.issued[account] ?? 0) + 1
                state.issued[account] = number
                state.accepted.insert("Bearer \(account)-\(number)")
                return ("\(account)-\(number)", nil)
            }
            credentials.credential = token
            if let signedOut { transport.signOut(partition: signedOut) }
            let returned = tick("switched")
            state.withLock { $0.switches[$0.switches.count - 1].returned = returned }
        }
    }

    /// A number for a local write, from the counter the origin numbers its answers with.
    private func localWrite() -> Int {
        state.withLock { state in
            state.made += 1
            state.localWrites.insert(state.made)
            return state.made
        }
    }

    /// The call that made local write `made` returned.
    private func wrote(_ made: Int) {
        let returned = tick("returned: write made \(made)")
        state.withLock { $0.localReturned[made] = returned }
    }

    /// Runs an invalidation of `covered` (account and resource pairs), noting what the counter
    /// read before it began and when it returned.
    /// With one current credential and `ofCurrent`, a request's invalidation covers the account
    /// current while it ran, when only one was.
    private func invalidating(
        _ note: String, _ covered: [(String, Int)], ofCurrent resource: Int? = nil, _ invalidate: () -> Void
    ) {
        let made = state.withLock { $0.made }
        let began = tick(note)
        invalidate()
        let returned = tick("returned: \(note)")
        state.withLock { state in
            var covered = covered
            if credentials != nil, let resource {
                let current = state.accountsCurrent(from: began, to: returned)
                covered = current.count == 1 ? current.compactMap { $0 }.map { ($0, resource) } : []
            }
            for (account, resource) in covered {
                let key = "\(account) r\(resource)"
                if (state.invalidations[key]?.returned ?? 0) < returned {
                    state.invalidations[key] = (made, began, returned)
                }
            }
        }
    }

    /// Checks an answer of `data(for:)` or `refresh(_:)`: a `2xx` must carry a body (a refusal the
    /// transport passes on, a `401` past its refreshes, is the origin's own answer).
    private func check(_ answer: (Data, URLResponse)?, account: String, resource: Int, began: Int, call: String) {
        guard let (data, response) = answer, let status = (response as? HTTPURLResponse)?.statusCode,
            (200..<300).contains(status)
        else { return }
        guard let body = try? JSONDecoder().decode(Body.self, from: data) else {
            violation("\(call) of \(account) r\(resource) (began at \(began)) answered bytes that are no body")
            return
        }
        check(body, account: account, resource: resource, began: began, call: call)
    }

    private func check(_ body: Body?, account: String, resource: Int, began: Int, call: String) {
        guard let body else { return }
        let ended = tick(
            "answered \(call) \(account) r\(resource): \(body.account) r\(body.resource) made \(body.made)")
        state.withLock { state in
            // Whose data it may be: the account it names, or with one current credential, any
            // account current while the call ran (none after a sign-out). "*" names none.
            let owners: Set<String?> =
                credentials == nil ? [account] : state.accountsCurrent(from: began, to: ended)
            // "-" is a write made while nobody was signed in: keyed in no account, as requests
            // are then.
            let owner = body.account == "-" ? nil : body.account
            if body.resource != resource || (body.account != "*" && !owners.contains(owner)) {
                state.violations.append(
                    "\(call) of r\(resource) for \(owners.map { $0 ?? "nobody" }.sorted()) (ticks \(began)-\(ended)) "
                        + "answered \(body.account) r\(body.resource)")
            }
            let key = "\(body.account) r\(resource)"
            // A local write whose call had not returned when the invalidation began may land after it.
            let landedBefore =
                !state.localWrites.contains(body.made)
                || (state.localReturned[body.made] ?? .max) < (state.invalidations[key]?.began ?? 0)
            if let invalidation = state.invalidations[key], invalidation.returned < began,
                body.made <= invalidation.made, landedBefore
            {
                state.violations.append(
                    "\(call) of \(body.account) r\(resource) (ticks \(began)-\(ended)) answered what was made at "
                        + "\(body.made), before an invalidation that returned at \(invalidation.returned) began "
                        + "(made then: \(invalidation.made))")
            }
            // Signed out for certain: a sign-out returned before the call began, and no sign-in can
            // have taken effect after it (each ended before it began, or began after the answer).
            for out in state.signOuts[account] ?? [] {
                guard let returned = out.returned, returned < began else { continue }
                let signedInSince = (state.signIns[account] ?? []).contains { signIn in
                    signIn.began < ended && (signIn.returned ?? .max) > out.began
                }
                if !signedInSince {
                    state.violations.append(
                        "\(call) of \(account) r\(resource) (ticks \(began)-\(ended)) was answered after its account "
                            + "signed out (ticks \(out.began)-\(returned))")
                }
            }
        }
    }

    /// Waits for the work the history started in the background (prefetches, background
    /// revalidations), then checks that nothing is left.
    private func checkAtRest() async {
        var settled = false
        for _ in 0..<2_000 {
            let work = transport.pendingWork
            if work.fetches == 0 && work.joinable == 0 && work.waiters == 0 {
                settled = true
                break
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        if !settled {
            let left = transport.pendingWork
            violation(
                "at rest, \(left.fetches) fetches, \(left.joinable) joinable keys and \(left.waiters) waiters were left after 10 seconds"
            )
        }
        // Every request the origin was sent is one the transport counts as sent, and no other. A
        // load cancelled as it began is over for the transport before the origin's task for it
        // has run: wait until the origin has delivered as many answers as requests were counted.
        let sent = transport.statistics.networkFetches
        for _ in 0..<400 where origin.deliveredAnswers < sent {
            try? await Task.sleep(for: .milliseconds(5))
        }
        if sent != origin.callCount {
            violation("at rest, the statistics count \(sent) requests sent, the origin \(origin.callCount)")
        }
        let pending = transport.pendingUpdateKeys
        if pending > 0 { violation("at rest, optimistic updates of \(pending) keys were left pending") }
        // The index an invalidation finds keys by holds exactly the keys the store holds.
        let (indexed, indexCount) = transport.store.index.withLock { (Set($0.keys), $0.count) }
        var held = Set<CacheKey>()
        transport.store.state.withLock { state in state.entries.forEachEntry { key, _ in held.insert(key) } }
        if indexed != held || indexCount != held.count {
            violation(
                "at rest, the index holds \(indexed.count) keys and counts \(indexCount), the store \(held.count)")
        }
        let statistics = transport.statistics
        if statistics.bytesHeld > 64 * 1024 {
            violation("at rest, \(statistics.bytesHeld) bytes were held, over the budget of \(64 * 1024)")
        }
    }
}
