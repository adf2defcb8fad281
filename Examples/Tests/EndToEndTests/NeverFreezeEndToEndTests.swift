import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Synchronization
import Testing
import TransportCache

/// The app's code that the transport runs in tasks of its own, an authenticator's refresh and a
/// sending adapter, written as apps write it: awaiting their own URLSession's async API.
///
/// On Linux, cancelling a task that awaits that API just as its response completes deadlocks:
/// the cancellation waits for the session's queue while holding the task's lock, and the queue,
/// completing the response, waits for that lock (and at some moments the session's own task
/// bookkeeping traps instead, ending the process). So the transport must never cancel such a task.
/// This run makes every moment at which a transport might (a credential replaced, a partition
/// signed out, every caller of a refresh or of a fetch leaving) happen many times over, at random
/// points around those awaits, and asks that every call ends and the process still answers: once
/// with one current credential (`Credentials`), once with several accounts signed in at once
/// (`Accounts`), each request naming one.
///
/// A deadlock blocks a thread of the concurrency pool for good, and may block the app's session,
/// so a failure here can leave later tests of the same process stuck: the run is bounded by
/// ``ending(within:whenHung:sourceLocation:_:)``, and behind it by
/// ``endingTheProcess(unlessEndedWithin:explanation:isolation:_:)``, which ends the process when
/// not even a failure can be reported. The seed is printed with every failure;
/// `TRANSPORTCACHE_NEVER_FREEZE_SEED=<seed>` repeats a run's choices.
@Suite("The app's own URLSession awaits in refreshes and adapters never freeze the process")
struct NeverFreezeEndToEndTests {
    static let rounds = 500
    /// The rounds stop early once this much time has passed, so the test stays well under a
    /// minute on a loaded two-core machine.
    static let timeBudget: Duration = .seconds(20)
    static let hangLimit: Duration = .seconds(60)

    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["TRANSPORTCACHE_NEVER_FREEZE_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 1...UInt64.max)
    }

    @Test(
        "tokens expire, accounts switch and sign out, callers leave at random moments around the app's URLSession awaits: every call ends, and the process still answers",
        arguments: [false, true])
    func everyCallEnds(severalAccounts: Bool) async throws {
        let seed = Self.seed
        try await withOrigin { origin in
            // The app's own session, for its refreshes and its adapter: a session of their own, so
            // that a deadlock blocks no other test's.
            let session = URLSession(configuration: .ephemeral)
            // Its refreshes pass the origin's gate `token`, which some rounds close to hold one.
            let tokens = SessionTokens(session: session, tokenURL: origin.url("/token?gate=token"))
            // Refreshes are the point here: no limit may turn them into tooManyRefreshes.
            let limit = RefreshLimit(maximumRefreshes: 1_000_000, window: .seconds(1))
            // One current credential of `Credentials`, or every account signed in at once
            // (`Accounts`), each request naming one.
            let identity: FreezeRun.Identity
            var configuration = CachedTransport.Configuration()
            if severalAccounts {
                let accounts = Accounts(tokens, limit: limit)
                configuration.identity.authenticate(with: accounts)
                identity = .accounts(accounts)
            } else {
                let credentials = Credentials(
                    tokens, credential: OriginAccount(name: "alice", token: "stale"), limit: limit,
                    partition: { $0.name })
                configuration.identity.authenticate(with: credentials)
                identity = .credentials(credentials)
            }
            configuration.identity.requestAdapters = [Self.nonceAdapter(session: session, url: origin.url("/nonce"))]
            let sessionConfiguration = URLSessionConfiguration.ephemeral
            sessionConfiguration.httpMaximumConnectionsPerHost = 32
            let transport = CachedTransport(configuration: configuration, sessionConfiguration: sessionConfiguration)
            let run = FreezeRun(origin: origin, transport: transport, identity: identity, tokens: tokens, seed: seed)

            let explanation: @Sendable () -> String = {
                """
                a call, a refresh or an adapter is stuck, most likely a task cancelled while it \
                awaited URLSession's async API, which deadlocks; that thread and the app's session may \
                stay blocked, so later tests in this process may hang as well (seed \(seed), \
                \(severalAccounts ? "several accounts" : "one credential"); \(run.report))
                """
            }
            let outcome = await endingTheProcess(
                unlessEndedWithin: Self.hangLimit + .seconds(30), explanation: explanation()
            ) {
                await ending(within: Self.hangLimit, whenHung: explanation()) { await run.run() }
            }
            // A hang was reported: what follows would wait on what is stuck.
            guard let tally = try outcome?.get() else { return }
            print("never freeze, \(severalAccounts ? "several accounts" : "one credential"): seed \(seed), \(tally)")
            #expect(tally.unexpected.isEmpty, "seed \(seed): \(tally.unexpected.prefix(5))")
            // The run did what it is for: refreshes ran and callers left.
            #expect(tokens.refreshes > 0, "seed \(seed)")
            #expect(tally.cancelled > 0 && tally.answered > 0, "seed \(seed): \(tally)")

            // The process is not wedged: the transport and the app's session still answer.
            let after = await endingTheProcess(unlessEndedWithin: .seconds(60), explanation: explanation()) {
                await ending(within: .seconds(30), whenHung: explanation()) { () -> [CallEnd] in
                    let signedIn = OriginAccount(name: "alice", token: await origin.currentToken)
                    var after = URLRequest(url: origin.url("/after?token=1"))
                    switch identity {
                    case .credentials(let credentials): credentials.credential = signedIn
                    case .accounts(let accounts):
                        try? accounts.setCredential(signedIn, for: "alice")
                        after.account = "alice"
                    }
                    let viaTransport = await CallEnd { [after] in try await transport.data(for: after) }
                    let viaSession = await CallEnd { try await session.data(from: origin.url("/nonce?after=1")) }
                    return [viaTransport, viaSession]
                }
            }
            let ends = try #require(try after?.get())
            #expect(ends[0].answer?.contains("auth=Bearer ") == true, "seed \(seed): \(ends[0])")
            #expect(ends[1].answer != nil, "seed \(seed): \(ends[1])")
            session.finishTasksAndInvalidate()
        }
    }

    /// A sending adapter as an app writes one to sign its requests: a nonce from the origin,
    /// awaited with the app's session's async API, on every request that goes out.
    static func nonceAdapter(session: URLSession, url: URL) -> RequestAdapter {
        RequestAdapter { request in
            let (nonce, _) = try await session.data(from: url)
            var request = request
            request.setValue(String(nonce.text.suffix(12)), forHTTPHeaderField: "X-Nonce")
            return request
        }
    }
}

/// How the calls of a run ended.
struct FreezeTally: Sendable, CustomStringConvertible {
    var rounds = 0
    var calls = 0
    var answered = 0
    var cancelled = 0
    var authentication: [AuthenticationError.Code: Int] = [:]
    var network = 0
    var unexpected: [String] = []

    mutating func count(_ end: CallEnd) {
        calls += 1
        switch end {
        case .answered: answered += 1
        case .cancelled: cancelled += 1
        case .authentication(let code): authentication[code, default: 0] += 1
        case .urlError: network += 1
        case .unexpected(let description): unexpected.append(description)
        }
    }

    var description: String {
        let failures = authentication.map { "\($0.key) \($0.value)" }.sorted().joined(separator: ", ")
        return """
            \(rounds) rounds, \(calls) calls: \(answered) answered, \(cancelled) cancelled, \
            authentication errors [\(failures)], \(network) network errors, \(unexpected.count) unexpected
            """
    }
}

/// One seeded run: rounds of callers, and of the app's moves among them.
final class FreezeRun: Sendable {
    /// What the app does during a round, after its pause.
    enum Move: CustomStringConvertible {
        case cancelOne(Int)
        case cancelEvery
        case expireToken
        case switchAccount(String, validToken: Bool)
        case signOut(String, firstSigningOutThePartition: Bool)

        var description: String {
            switch self {
            case .cancelOne(let index): "cancelling caller \(index)"
            case .cancelEvery: "cancelling every caller"
            case .expireToken: "expiring the token"
            case .switchAccount(let name, _): "switching to \(name)"
            case .signOut(_, let partitionFirst):
                partitionFirst
                    ? "signing the partition out, then the credential" : "clearing the credential, then the partition"
            }
        }
    }

    private struct Progress {
        var rounds = 0
        var started = 0
        var ended = 0
        var step = "starting"
    }

    static let accounts = ["alice", "bob", "carol"]

    /// Who the requests are sent as.
    enum Identity: Sendable {
        /// The one current credential: switching accounts replaces it.
        case credentials(Credentials<SessionTokens>)
        /// Every account signed in at once, each request naming one: switching accounts replaces
        /// the credential of the one named.
        case accounts(Accounts<SessionTokens>)
    }

    let origin: LoopbackOrigin
    let transport: CachedTransport
    let identity: Identity
    let tokens: SessionTokens
    let seed: UInt64
    private let progress = Mutex(Progress())

    /// How far the run got, for a hang's report: the round and step a hang stopped it at, and how
    /// many of the calls never ended.
    var report: String {
        let progress = progress.withLock { $0 }
        return """
            round \(progress.rounds), \(progress.step); \(progress.started - progress.ended) of \(progress.started) \
            calls not ended
            """
    }

    init(origin: LoopbackOrigin, transport: CachedTransport, identity: Identity, tokens: SessionTokens, seed: UInt64) {
        self.origin = origin
        self.transport = transport
        self.identity = identity
        self.tokens = tokens
        self.seed = seed
    }

    private func step(_ step: String) { progress.withLock { $0.step = step } }

    /// Runs up to ``NeverFreezeEndToEndTests/rounds`` rounds within its time budget.
    func run() async -> FreezeTally {
        var random = SplitMix64(seed: seed)
        var tally = FreezeTally()
        let clock = ContinuousClock()
        let deadline = clock.now + NeverFreezeEndToEndTests.timeBudget
        while tally.rounds < NeverFreezeEndToEndTests.rounds, clock.now < deadline {
            await round(random: &random, into: &tally)
            tally.rounds += 1
        }
        return tally
    }

    /// Callers of a few URLs of the round's own, shared (so that some join one fetch and one
    /// refresh), and the app's moves among them, each after a random pause; then every caller's end.
    ///
    /// In half the rounds a refresh is held at the origin's gate `token` first, and one move that
    /// ends a refresh's wait (another account, a sign-out, every caller leaving) follows the gate's
    /// opening by at most half a millisecond: about when the refresh's response completes, which a
    /// move at a random time in the round would seldom meet.
    private func round(random: inout SplitMix64, into tally: inout FreezeTally) async {
        progress.withLock { $0.rounds += 1 }
        // Signed out: the next round signs in again, with a token a refresh must replace.
        switch identity {
        case .credentials(let credentials):
            if credentials.credential == nil {
                credentials.credential = OriginAccount(name: Self.pick(Self.accounts, &random), token: "stale")
            }
        case .accounts(let accounts):
            for name in Self.accounts where accounts.credential(for: name) == nil {
                try? accounts.setCredential(OriginAccount(name: name, token: "stale"), for: name)
            }
        }
        let holdsRefresh = random.next() % 2 == 0
        if holdsRefresh {
            // A refresh no caller waits for any more may still run; let it end first, so that the
            // refresh held is most often this round's own.
            step("waiting for the app's refreshes to end")
            await tokens.waitUntilIdle()
            // From here the origin issues no token until the gate opens, and every token issued
            // so far is refused: the credential is refused, and a refresh must reach the gate.
            await origin.closeGate("token")
            await origin.expireToken()
        }
        let transport = transport
        // URLs of this round only, so that every call goes out (an answer stored in an earlier
        // round would be served without one) and waits on the adapter and the credential.
        let round = progress.withLock { $0.rounds }
        let urls = (0..<(4 + Int(random.next() % 5))).map { _ in
            origin.url("/item/\(random.next() % 6)?token=1&round=\(round)")
        }
        progress.withLock { $0.started += urls.count }
        let callers = urls.map { url in
            var request = URLRequest(url: url)
            if case .accounts = identity { request.account = Self.pick(Self.accounts, &random) }
            return Task { [request] in
                let end = await CallEnd { try await transport.data(for: request) }
                self.progress.withLock { $0.ended += 1 }
                return end
            }
        }
        if holdsRefresh {
            step("waiting for a refresh to reach the origin")
            await origin.waitUntilHeld(atGate: "token")
            let move = Self.heldRefreshMove(callers: callers.count, &random)
            await origin.openGate("token")
            await Self.shortPause(&random)
            await make(move, callers: callers)
        }
        for _ in 0..<(2 + Int(random.next() % 4)) {
            let move = Self.move(callers: callers.count, &random)
            await Self.pause(&random)
            await make(move, callers: callers)
        }
        step("waiting for the callers")
        for caller in callers { tally.count(await caller.value) }
    }

    private func make(_ move: Move, callers: [Task<CallEnd, Never>]) async {
        step(move.description)
        switch move {
        case .cancelOne(let index):
            callers[index].cancel()
        case .cancelEvery:
            // Every caller of a refresh or of a fetch leaves at once.
            for caller in callers { caller.cancel() }
        case .expireToken:
            await origin.expireToken()
        case .switchAccount(let name, let validToken):
            let account = OriginAccount(name: name, token: validToken ? await origin.currentToken : "stale")
            switch identity {
            case .credentials(let credentials): credentials.credential = account
            case .accounts(let accounts): try? accounts.setCredential(account, for: name)
            }
        case .signOut(let named, let partitionFirst):
            let name: String
            let clear: () -> Void
            switch identity {
            case .credentials(let credentials):
                guard let current = credentials.credential?.name else { return }
                (name, clear) = (current, { credentials.credential = nil })
            case .accounts(let accounts):
                (name, clear) = (named, { try? accounts.setCredential(nil, for: named) })
            }
            if partitionFirst {
                transport.signOut(partition: name)
                clear()
            } else {
                clear()
                transport.signOut(partition: name)
            }
        }
    }

    private static func move(callers: Int, _ random: inout SplitMix64) -> Move {
        switch random.next() % 100 {
        case 0..<35: .cancelOne(Int(random.next() % UInt64(callers)))
        case 35..<45: .cancelEvery
        case 45..<65: .expireToken
        case 65..<85: .switchAccount(pick(accounts, &random), validToken: random.next() % 3 == 0)
        default: .signOut(pick(accounts, &random), firstSigningOutThePartition: random.next() % 2 == 0)
        }
    }

    /// A move that ends the wait for a refresh under way.
    private static func heldRefreshMove(callers: Int, _ random: inout SplitMix64) -> Move {
        switch random.next() % 3 {
        case 0: .cancelEvery
        case 1: .switchAccount(pick(accounts, &random), validToken: false)
        default: .signOut(pick(accounts, &random), firstSigningOutThePartition: random.next() % 2 == 0)
        }
    }

    /// Nothing, a few yields, or up to three milliseconds: a loopback response completes within
    /// that span, so the moves land before, during and after the app's awaits end.
    private static func pause(_ random: inout SplitMix64) async {
        switch random.next() % 3 {
        case 0: break
        case 1: for _ in 0..<(random.next() % 8) { await Task.yield() }
        default: try? await Task.sleep(for: .microseconds(random.next() % 3_000))
        }
    }

    /// Nothing, a few yields, or up to half a millisecond: from a gate's opening to the end of
    /// the response it held.
    private static func shortPause(_ random: inout SplitMix64) async {
        switch random.next() % 3 {
        case 0: break
        case 1: for _ in 0..<(random.next() % 16) { await Task.yield() }
        default: try? await Task.sleep(for: .microseconds(random.next() % 500))
        }
    }

    private static func pick(_ names: [String], _ random: inout SplitMix64) -> String {
        names[Int(random.next() % UInt64(names.count))]
    }
}
