import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Synchronization
import Testing
@testable import TransportCache

/// Seeded random histories against the loopback origin: several tasks make random calls on one
/// transport at once (reads, values, cached values, prefetches left or raised, refreshes,
/// invalidations of a request, an endpoint, a tag and everything, stored answers, optimistic
/// updates that succeed and fail, sign-outs and sign-ins, token expiry, revalidations), and leave
/// some of them at random moments. Requests go out through a sending adapter and are refreshed by
/// an authenticator written as apps write them, both awaiting the app's own URLSession. Odd seeds
/// sign two accounts in at once (``Accounts``, each request naming its own); even seeds keep one
/// current credential whose partition is its account (``Credentials``), switched and signed out
/// (the credential cleared and the partition signed out, in either order) while the calls run.
///
/// The origin tells the accounts apart by their tokens alone, and every answer it makes names the
/// token it was sent with (`auth=Bearer <account>-t<n>`); every answer a call returns, and the
/// transport at rest, is checked against the promises the transport makes:
///
/// - every call ends, with an answer or an error (a history that does not end in its time fails
///   with its seed, its calls and what the transport still tracks, and ends the process when not
///   even that failure can be reported);
/// - no answer carries another account's data (with one current credential: the data of an
///   account that was current at some moment of the call, or of nobody while none was);
/// - no answer is one the origin made before an invalidation began, when that invalidation
///   returned before the call began (told by the origin's count of requests, which the bodies of
///   half the resources carry);
/// - nothing of an account signed out is answered until it signs in again;
/// - at rest, no fetch, waiter or pending optimistic update is left, the event log and the
///   watcher have ended and unregistered, and the memory held is within its budget.
///
/// The requests the transport counts as sent are printed beside those the origin received, not
/// compared: a load cancelled as it begins may never reach a real server.
///
/// The histories stop once ``timeBudget`` has passed. `TRANSPORTCACHE_LOOPBACK_HISTORY_SEED=<seed>`
/// repeats a run's choice of calls (the first history's seed; each next history takes the next
/// number); a failing history prints its seed and its calls.
@Suite("Random histories of every call against the loopback origin", .serialized)
struct LoopbackHistoryEndToEndTests {
    /// The histories stop once this much time has passed, so the test stays near half a minute on
    /// a loaded two-core machine.
    static let timeBudget: Duration = .seconds(20)
    /// How long one history may take: a tenth of a second is usual, a few seconds beside the other
    /// end-to-end tests.
    static let hangLimit: Duration = .seconds(60)

    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["TRANSPORTCACHE_LOOPBACK_HISTORY_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 1...UInt64.max / 2)
    }

    @Test(
        "seeded random histories against the loopback origin, through an app's authenticator and adapter, keep every promise at every answer and at rest"
    )
    func randomHistories() async throws {
        let first = Self.seed
        try await withOrigin { origin in
            // The app's own session, for its refreshes and its adapter.
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let clock = ContinuousClock()
            let deadline = clock.now + Self.timeBudget
            var seed = first
            var tally = HistoryTally()
            repeat {
                let history = await LoopbackHistory(seed: seed, origin: origin, session: session)
                let explanation: @Sendable () -> String = { history.hangReport }
                let outcome = await endingTheProcess(
                    unlessEndedWithin: Self.hangLimit + .seconds(30), explanation: explanation()
                ) {
                    await ending(within: Self.hangLimit, whenHung: explanation()) { await history.run() }
                }
                // A hang was reported, with the history's seed and calls: what follows would wait on
                // what is stuck.
                guard let violations = try outcome?.get() else { return }
                tally.add(history)
                if !violations.isEmpty {
                    Issue.record(
                        """
                        history with seed \(seed) (TRANSPORTCACHE_LOOPBACK_HISTORY_SEED=\(seed)) broke \
                        \(violations.count) promise(s):
                        \(violations.prefix(10).joined(separator: "\n"))
                        its calls:
                        \(history.log.suffix(400).joined(separator: "\n"))
                        """)
                    break
                }
                seed &+= 1
            } while clock.now < deadline
            print("loopback histories: seeds \(first)...\(seed), \(tally)")
            #expect(tally.histories > 0)
            // The histories did what they are for: accounts were refreshed, and answered.
            #expect(tally.refreshes > 0 && tally.answered > 0, "seed \(first): \(tally)")
        }
    }
}

/// What the histories of a run did.
private struct HistoryTally: CustomStringConvertible {
    var histories = 0
    var calls = 0
    var answered = 0
    var ends: [String: Int] = [:]
    var fetches = 0
    var notModified = 0
    var revalidations = 0
    var refreshes = 0
    var originRequests = 0

    mutating func add(_ history: LoopbackHistory) {
        let counts = history.counts
        histories += 1
        calls += counts.calls
        answered += counts.answered
        ends.merge(counts.ends, uniquingKeysWith: +)
        let statistics = history.transport.statistics
        fetches += statistics.networkFetches
        notModified += statistics.notModified
        revalidations += statistics.revalidations
        refreshes += history.tokens.refreshes
        originRequests += counts.originRequests
    }

    var description: String {
        let others = ends.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return """
            \(histories) histories, \(calls) calls: \(answered) answered with an account's data; other ends [\(others)]; \
            \(fetches) fetches (the origin received \(originRequests) requests for the resources), \(notModified) \
            answered 304, \(revalidations) revalidations, \(refreshes) refreshes
            """
    }
}

/// A body an answer carries: whose data it is, of which resource, and, for an answer the origin
/// made of a resource whose body counts its requests, how many requests for it the origin had
/// received then.
private struct AnsweredBody {
    /// The account whose data it is; nil for nobody's (a write made while nobody was signed in).
    var owner: String?
    /// A local write that names no account, which may be anyone's.
    var anyone = false
    var resource: Int
    var hit: Int?
    var isLocal = false

    /// Reads an origin's answer (`path=/r/<n> query=… version=… auth=Bearer <account>-t<n>[ hit=<n>]`)
    /// or a local write's (`local account=<account, - or *> path=/r/<n> made=<n>`).
    init?(_ text: String) {
        let words = text.split(separator: " ").map(String.init)
        func value(_ name: String) -> String? {
            words.first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) }
        }
        guard let path = value("path"), path.hasPrefix("/r/"), let resource = Int(path.dropFirst(3)) else {
            return nil
        }
        self.resource = resource
        if words.first == "local" {
            guard let account = value("account") else { return nil }
            isLocal = true
            anyone = account == "*"
            owner = account == "-" || account == "*" ? nil : account
        } else if let index = words.firstIndex(of: "auth=Bearer"), index + 1 < words.count {
            // `<account>-t<n>`, `<account>-stale`: the account is all before the first dash.
            owner = words[index + 1].split(separator: "-").first.map(String.init)
            hit = value("hit").flatMap(Int.init)
        } else if words.contains("auth=-") {
            owner = nil
            hit = value("hit").flatMap(Int.init)
        } else {
            return nil
        }
    }
}

/// One history: its transport, accounts and the calls its tasks make, against the loopback origin.
private final class LoopbackHistory: Sendable {
    static let accounts = ["me", "you"]
    static let resources = 6
    /// The resources below this number answer bodies without the origin's count of requests: the
    /// same body, and entity tag, until a write or another token changes it, so revalidations of
    /// them are answered `304`. The bodies of the others tell when the origin made them.
    static let stableResources = 3
    static let memoryCapacity = 64 * 1024

    let seed: UInt64
    let tasks: Int
    let callsPerTask: Int
    let origin: LoopbackOrigin
    let tokens: SessionTokens
    /// Odd seeds: several accounts signed in at once, each request naming its own (``Accounts``).
    /// Even seeds: one current credential whose partition is its account (``Credentials``), which
    /// the history switches and signs out.
    let accounts: Accounts<SessionTokens>?
    let credentials: Credentials<SessionTokens>?
    /// Held around a switch of the current credential and around a local write made while one
    /// credential is current, so that a write's body names the account it is keyed for.
    let switching = Mutex(())
    let transport: CachedTransport
    let state = Mutex(Shared())

    struct Shared {
        /// The logical time: each call's beginning and end is a tick.
        var tick = 0
        /// The number of the latest local write.
        var made = 0
        /// Per account and resource: the requests for the resource the origin had received before
        /// the latest invalidation that covered it began, and the ticks when it began and returned.
        var invalidations: [String: (hits: Int, began: Int, returned: Int)] = [:]
        /// Per account: the ticks each sign-out and sign-in began and returned (nil while it runs).
        var signOuts: [String: [(began: Int, returned: Int?)]] = [:]
        var signIns: [String: [(began: Int, returned: Int?)]] = [:]
        /// With one current credential: each switch of it (nil for a sign-out), when it began and
        /// returned; the first is the credential the history starts with.
        var switches: [(began: Int, returned: Int, account: String?)] = [(0, 0, LoopbackHistory.accounts[0])]
        var violations: [String] = []
        var log: [String] = []
        /// Per task, the call it is making, for a history that does not end.
        var running: [Int: String] = [:]
        var counts = Counts()

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
    }

    struct Counts {
        var calls = 0
        /// Calls answered with a body of an account (or of nobody), which the checks read.
        var answered = 0
        /// The other ends: errors by kind, and statuses other than 2xx.
        var ends: [String: Int] = [:]
        var originRequests = 0
    }

    init(seed: UInt64, origin: LoopbackOrigin, session: URLSession) async {
        self.seed = seed
        self.origin = origin
        var random = SplitMix64(seed: seed)
        tasks = 4 + Int(random.next() % 3)
        callsPerTask = 20 + Int(random.next() % 11)
        tokens = SessionTokens(session: session, tokenURLOf: { origin.url("/token?account=\($0)") })
        // Refreshes are part of every history: no limit may turn them into tooManyRefreshes.
        let limit = RefreshLimit(maximumRefreshes: 1_000_000, window: .seconds(1))
        var current: [String: OriginAccount] = [:]
        for name in Self.accounts {
            current[name] = OriginAccount(name: name, token: await origin.currentToken(of: name))
        }
        if seed % 2 == 1 {
            let accounts = Accounts(tokens, limit: limit)
            for name in Self.accounts { try? accounts.setCredential(current[name], for: name) }
            self.accounts = accounts
            credentials = nil
        } else {
            accounts = nil
            credentials = Credentials(tokens, credential: current[Self.accounts[0]], limit: limit) { $0.name }
        }
        var configuration = CachedTransport.Configuration()
        if let accounts { configuration.identity.authenticate(with: accounts) }
        if let credentials { configuration.identity.authenticate(with: credentials) }
        configuration.identity.requestAdapters = [
            NeverFreezeEndToEndTests.nonceAdapter(session: session, url: origin.url("/nonce"))
        ]
        configuration.storage.memoryCapacity = Self.memoryCapacity
        // A history lasts a fraction of a second: its revalidations skip nothing it stored.
        configuration.stayingCurrent.minimumRevalidationInterval = .zero
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.httpMaximumConnectionsPerHost = 32
        transport = CachedTransport(configuration: configuration, sessionConfiguration: sessionConfiguration)
    }

    var log: [String] { state.withLock { $0.log } }
    var counts: Counts { state.withLock { $0.counts } }

    /// The seed, what the transport still tracks and the last calls, for a history that did not end.
    var hangReport: String {
        let work = transport.pendingWork
        let running = state.withLock { $0.running }.sorted { $0.key < $1.key }.map { "task \($0.key): \($0.value)" }
        return """
            history with seed \(seed) (TRANSPORTCACHE_LOOPBACK_HISTORY_SEED=\(seed)) did not end; the transport \
            tracks \(work.fetches) fetches and \(work.waiters) waiters, \(tokens.refreshes) refreshes started; \
            tasks not ended: [\(running.joined(separator: "; "))]. Its last calls:
            \(log.suffix(80).joined(separator: "\n"))
            """
    }

    /// The path and query of `resource`, which the origin answers only with the current token of
    /// the account the token was issued to.
    static func pathAndQuery(_ resource: Int) -> String {
        "/r/\(resource)?token=account" + (resource < stableResources ? "&stable=1" : "")
    }

    /// Runs the history: every task's calls, then the checks at rest. Returns what it broke.
    func run() async -> [String] {
        let hitsBefore = await resourceHits()
        // A log reading every event while the calls run; cancelled once they end, it must end too
        // and unregister.
        let events = transport.events()
        let listener = Task {
            var seen = 0
            for await _ in events { seen += 1 }
            return seen
        }
        // A screen watching the resources while the calls run.
        let changes = transport.changes(for: .pathPrefix("/r/"))
        let watcher = Task { for await _ in changes {} }
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask { await Self.$task.withValue(task) { await self.calls(of: task) } }
            }
        }
        watcher.cancel()
        await watcher.value
        listener.cancel()
        let seen = await listener.value
        // A history whose every call failed before it was planned has nothing to report.
        let planned = transport.statistics.requests
        if seen == 0, planned > 0 { violation("an events() listener saw no event of \(planned) requests") }
        if transport.store.state.withLock({ $0.isObserved }) {
            violation("an events() listener whose task was cancelled is still registered")
        }
        // A refresh no caller waits for any more runs on: it ends before the history does.
        await tokens.waitUntilIdle()
        await checkAtRest()
        let hitsAfter = await resourceHits()
        state.withLock { $0.counts.originRequests = hitsAfter - hitsBefore }
        return state.withLock { $0.violations }
    }

    /// The requests the origin has received for the resources, whatever their account.
    private func resourceHits() async -> Int {
        var hits = 0
        for resource in 0..<Self.resources { hits += await origin.hits(path: "/r/\(resource)") }
        return hits
    }

    private func violation(_ text: String) {
        state.withLock { $0.violations.append(text) }
    }

    /// The number of the task whose calls are running, which the log names.
    @TaskLocal static var task = 0

    private func tick(_ note: String) -> Int {
        state.withLock { state in
            state.tick += 1
            state.log.append("\(state.tick) [task \(Self.task)] \(note)")
            return state.tick
        }
    }

    private func request(_ resource: Int, of account: String, method: String = "GET") -> URLRequest {
        var request = EndToEndTests.request(origin.url(Self.pathAndQuery(resource)), method: method)
        if accounts != nil { request.account = account }
        return request
    }

    /// One task's calls, chosen by the history's seed and the task's number.
    private func calls(of task: Int) async {
        var random = SplitMix64(seed: seed &+ UInt64(task + 1) &* 0x9E37_79B9)
        for _ in 0..<callsPerTask {
            let account = Self.accounts[Int(random.next() % UInt64(Self.accounts.count))]
            let resource = Int(random.next() % UInt64(Self.resources))
            let choice = Int(random.next() % 100)
            state.withLock { state in
                state.counts.calls += 1
                state.running[task] = "call \(state.counts.calls), from tick \(state.tick + 1)"
            }
            await call(choice, account: account, resource: resource, random: &random)
        }
        state.withLock { $0.running[task] = nil }
    }

    private func call(_ choice: Int, account: String, resource: Int, random: inout SplitMix64) async {
        let request = request(resource, of: account)
        let transport = transport
        switch choice {
        case 0..<26:
            let began = tick("data \(account) r\(resource)")
            let result = await caller(&random) { try await transport.data(for: request, tags: ["t\(resource)"]) }
            check(result, account: account, resource: resource, began: began, call: "data")
        case 26..<34:
            let began = tick("value \(account) r\(resource)")
            let result = await caller(&random) { () -> String? in
                try await transport.value(String.self, for: request, decoder: BodyTextDecoder())
            }
            check(result, account: account, resource: resource, began: began, call: "value")
        case 34..<38:
            let began = tick("cachedValue \(account) r\(resource)")
            let result = Result {
                try transport.cachedValue(String.self, for: request, decoder: BodyTextDecoder())?.value
            }
            check(result, account: account, resource: resource, began: began, call: "cachedValue")
        case 38..<43:
            _ = tick("prefetch \(account) r\(resource)")
            if let prefetch = try? transport.prefetch(request, priority: .low) {
                switch random.next() % 3 {
                case 0: prefetch.cancel()
                case 1: prefetch.priority = .high
                default: break
                }
            }
        case 43..<48:
            let began = tick("refresh \(account) r\(resource)")
            let result = await caller(&random) { try await transport.refresh(request) }
            check(result, account: account, resource: resource, began: began, call: "refresh")
        case 48..<53:
            await invalidating("invalidate request \(account) r\(resource)", [(account, resource)], ofCurrent: resource)
            {
                transport.invalidate(request)
            }
        case 53..<56:
            await invalidating("invalidate endpoint r\(resource)", Self.accounts.map { ($0, resource) }) {
                transport.invalidate(.pathPrefix("/r/\(resource)"))
            }
        case 56..<58:
            // Every data call tags its key, but a value call does not: only exercised.
            _ = tick("invalidate tag t\(resource)")
            _ = transport.invalidate(tag: "t\(resource)")
        case 58..<59:
            await invalidating(
                "invalidateAll", Self.accounts.flatMap { account in (0..<Self.resources).map { (account, $0) } }
            ) {
                transport.invalidateAll()
            }
        case 59..<65:
            let made = localWrite()
            // With one current credential, the write is keyed for the account current now: held
            // against a switch, it names that account.
            switching.withLock { _ in
                let owner = credentials == nil ? account : (state.withLock { $0.switches.last!.account } ?? "-")
                _ = tick("store \(owner) r\(resource) made \(made)")
                let data = Data(Self.localBody(owner, resource: resource, made: made).utf8)
                do {
                    try transport.store(ProvisionalAnswer(for: request, data: data))
                } catch {
                    noteEnd("store", error)
                }
            }
            wrote(made)
        case 65..<73:
            let fails = random.next() % 2 == 0
            let made = localWrite()
            _ = tick("optimisticUpdate \(account) r\(resource) made \(made) fails \(fails)")
            // With one current credential, the account it is keyed for is the one current when it
            // begins, which a switch may change meanwhile: its body names none ("*").
            let owner = credentials == nil ? account : "*"
            let data = Data(Self.localBody(owner, resource: resource, made: made).utf8)
            var write = self.request(resource, of: account, method: "POST")
            write.httpBody = data
            let post = write
            let result = await caller(&random) {
                try await transport.optimisticUpdate(
                    [ProvisionalAnswer(for: request, data: data)],
                    write: {
                        if fails { throw URLError(.badServerResponse) }
                        return try await transport.data(for: post)
                    })
            }
            if case .failure(let error) = result { noteEnd("optimisticUpdate", error) }
            wrote(made)
        case 73..<81 where credentials != nil:
            await switchCredential(to: choice < 75 ? nil : account, validToken: random.next() % 2 == 0)
        case 73..<75:
            let partitionFirst = random.next() % 2 == 0
            let began = tick("sign out \(account)\(partitionFirst ? ", the partition first" : "")")
            let index = state.withLock { state in
                state.signOuts[account, default: []].append((began, nil))
                return state.signOuts[account]!.count - 1
            }
            if partitionFirst {
                transport.signOut(partition: account)
                try? accounts?.setCredential(nil, for: account)
            } else {
                try? accounts?.setCredential(nil, for: account)
                transport.signOut(partition: account)
            }
            let returned = tick("signed out \(account)")
            state.withLock { $0.signOuts[account]![index].returned = returned }
        case 75..<81:
            let valid = random.next() % 2 == 0
            let began = tick("sign in \(account)\(valid ? "" : " with a stale token")")
            let index = state.withLock { state in
                state.signIns[account, default: []].append((began, nil))
                return state.signIns[account]!.count - 1
            }
            let token = valid ? await origin.currentToken(of: account) : "\(account)-stale"
            try? accounts?.setCredential(OriginAccount(name: account, token: token), for: account)
            let returned = tick("signed in \(account)")
            state.withLock { $0.signIns[account]![index].returned = returned }
        case 81..<88:
            _ = tick("token of \(account) expires")
            await origin.expireToken(of: account)
        case 88..<91:
            _ = tick("revalidateAll")
            _ = await caller(&random) { await transport.revalidateAll() }
        default:
            // A caller that leaves at a random moment, whatever the seed says of the others.
            let began = tick("data \(account) r\(resource), left")
            let result = await caller(&random, leaves: true) { try await transport.data(for: request) }
            check(result, account: account, resource: resource, began: began, call: "data left")
        }
    }

    /// The body of local write `made` of `resource`, naming `owner` ("-" for nobody, "*" for any
    /// account).
    static func localBody(_ owner: String, resource: Int, made: Int) -> String {
        "local account=\(owner) path=/r/\(resource) made=\(made)"
    }

    /// Runs `body` as a caller does: to its end, or, one time in five (always when `leaves`),
    /// leaving it after a random pause: nothing, a few yields, or up to three milliseconds, so
    /// that callers leave before, during and after the app's awaits and the origin's answers.
    private func caller<T: Sendable>(
        _ random: inout SplitMix64, leaves: Bool = false, _ body: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error> {
        let leaving = random.next() % 5 == 0 || leaves
        let pause = random.next()
        let task = Task { try await body() }
        guard leaving else { return await task.result }
        switch pause % 3 {
        case 0: break
        case 1: for _ in 0..<(pause / 3 % 8) { await Task.yield() }
        default: try? await Task.sleep(for: .microseconds(pause / 3 % 3_000))
        }
        task.cancel()
        _ = tick("left")
        return await task.result
    }

    /// Makes `account`'s token the current credential (the origin's current one, or a stale one a
    /// refresh must replace), or signs the current account out (nil): the credential cleared and
    /// its partition signed out, in an order the seed picks.
    private func switchCredential(to account: String?, validToken: Bool) async {
        guard let credentials else { return }
        var token: String?
        if let account { token = validToken ? await origin.currentToken(of: account) : "\(account)-stale" }
        switching.withLock { _ in
            let note = account.map { "switch to \($0)\(validToken ? "" : " with a stale token")" }
            let began = tick(note ?? "sign out the current account\(validToken ? ", the partition first" : "")")
            let signedOut = state.withLock { state -> String? in
                state.switches.append((began, .max, account))
                return account == nil ? state.switches[state.switches.count - 2].account : nil
            }
            var credential: OriginAccount?
            if let account, let token { credential = OriginAccount(name: account, token: token) }
            if let signedOut, validToken { transport.signOut(partition: signedOut) }
            credentials.credential = credential
            if let signedOut, !validToken { transport.signOut(partition: signedOut) }
            let returned = tick("switched")
            state.withLock { $0.switches[$0.switches.count - 1].returned = returned }
        }
    }

    /// A number for a local write.
    private func localWrite() -> Int {
        state.withLock { state in
            state.made += 1
            return state.made
        }
    }

    /// The call that made local write `made` returned.
    private func wrote(_ made: Int) {
        _ = tick("returned: write made \(made)")
    }

    /// Runs an invalidation of `covered` (account and resource pairs), noting the requests the
    /// origin had received for each resource before it began, and when it returned. With one
    /// current credential and `ofCurrent`, a request's invalidation covers the account current
    /// while it ran, when only one was.
    private func invalidating(
        _ note: String, _ covered: [(String, Int)], ofCurrent resource: Int? = nil, _ invalidate: () -> Void
    ) async {
        var hits: [Int: Int] = [:]
        for resource in Set(covered.map(\.1)) { hits[resource] = await origin.hits(Self.pathAndQuery(resource)) }
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
                    state.invalidations[key] = (hits[resource] ?? 0, began, returned)
                }
            }
        }
    }

    /// Counts and logs a call that ended with `error`.
    private func noteEnd(_ call: String, _ error: any Error) {
        let kind: String
        switch error {
        case is CancellationError: kind = "cancelled"
        case let error as AuthenticationError: kind = "authentication \(error.code)"
        case let error as URLError: kind = "URL error \(error.code.rawValue)"
        default: kind = "\(type(of: error))"
        }
        state.withLock {
            $0.counts.ends["\(call): \(kind)", default: 0] += 1
            $0.tick += 1
            $0.log.append("\($0.tick) [task \(Self.task)] \(call) ended: \(kind)")
        }
    }

    /// Checks an answer of `data(for:)` or `refresh(_:)`: a `2xx` must carry a body (a refusal the
    /// transport passes on, a `401` past its refreshes, is the origin's own answer).
    private func check(
        _ result: Result<(Data, URLResponse), any Error>, account: String, resource: Int, began: Int, call: String
    ) {
        switch result {
        case .success(let (data, response)):
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            guard (200..<300).contains(status) else {
                state.withLock {
                    $0.counts.ends["\(call): status \(status)", default: 0] += 1
                    $0.tick += 1
                    $0.log.append("\($0.tick) [task \(Self.task)] \(call) \(account) r\(resource) answered \(status)")
                }
                return
            }
            check(.success(data.text), account: account, resource: resource, began: began, call: call)
        case .failure(let error):
            noteEnd(call, error)
        }
    }

    private func check(
        _ result: Result<String?, any Error>, account: String, resource: Int, began: Int, call: String
    ) {
        let text: String
        switch result {
        case .success(let answer?): text = answer
        case .success(nil):
            _ = tick("\(call) \(account) r\(resource): nothing stored")
            return
        case .failure(let error):
            noteEnd(call, error)
            return
        }
        let ended = tick("answered \(call) \(account) r\(resource): \(text)")
        guard let body = AnsweredBody(text) else {
            violation(
                "\(call) of \(account) r\(resource) (began at \(began)) answered \"\(text)\", no body of a resource")
            return
        }
        state.withLock { state in
            state.counts.answered += 1
            // Whose data it may be: the account it names, or with one current credential, any
            // account current while the call ran (none after a sign-out).
            let owners: Set<String?> =
                credentials == nil ? [account] : state.accountsCurrent(from: began, to: ended)
            if body.resource != resource || (!body.anyone && !owners.contains(body.owner)) {
                state.violations.append(
                    "\(call) of r\(resource) for \(owners.map { $0 ?? "nobody" }.sorted()) (ticks \(began)-\(ended)) "
                        + "answered \"\(text)\"")
            }
            // An answer the origin made before an invalidation of its account's entry began, when
            // that invalidation returned before the call began.
            if let hit = body.hit, let owner = body.owner,
                let invalidation = state.invalidations["\(owner) r\(resource)"],
                invalidation.returned < began, hit <= invalidation.hits
            {
                state.violations.append(
                    "\(call) of \(owner) r\(resource) (ticks \(began)-\(ended)) answered \"\(text)\", made before an "
                        + "invalidation that returned at \(invalidation.returned) began (the origin had received "
                        + "\(invalidation.hits) requests then)")
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
                        "\(call) of \(account) r\(resource) (ticks \(began)-\(ended)) answered \"\(text)\" after its "
                            + "account signed out (ticks \(out.began)-\(returned))")
                }
            }
        }
    }

    /// Waits for the work the history started in the background (prefetches, a refetch after a
    /// write, background revalidations), then checks that nothing is left.
    private func checkAtRest() async {
        var settled = false
        for _ in 0..<2_000 {
            let work = transport.pendingWork
            if work.fetches == 0 && work.joinable == 0 && work.waiters == 0 && transport.pendingUpdateKeys == 0 {
                settled = true
                break
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        if !settled {
            let left = transport.pendingWork
            violation(
                "at rest, \(left.fetches) fetches, \(left.joinable) joinable keys, \(left.waiters) waiters and "
                    + "optimistic updates of \(transport.pendingUpdateKeys) keys were left after 10 seconds")
        }
        // The watcher's subscription ends with its task.
        for _ in 0..<400 where transport.statistics.subscribers > 0 {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let subscribers = transport.statistics.subscribers
        if subscribers > 0 { violation("at rest, \(subscribers) subscribers were left after their tasks ended") }
        let bytesHeld = transport.statistics.bytesHeld
        if bytesHeld > Self.memoryCapacity {
            violation("at rest, \(bytesHeld) bytes were held, over the budget of \(Self.memoryCapacity)")
        }
    }
}
