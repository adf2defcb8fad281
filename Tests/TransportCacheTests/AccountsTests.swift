import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Several accounts signed in at once", .timeLimit(.minutes(1)))
struct AccountsTests {
    let base = "https://api.example.com"

    /// The header that names a request's account: the transport's to read, never the origin's.
    static let accountHeader = "X-Cache-Account"

    /// "me" signed in with `me-1` and "you" with `you-1`, refreshed by `authenticator`.
    static func signedIn(_ authenticator: TokenAuthenticator = TokenAuthenticator()) throws
        -> Accounts<TokenAuthenticator>
    {
        let accounts = Accounts(authenticator)
        try accounts.setCredential("me-1", for: "me")
        try accounts.setCredential("you-1", for: "you")
        return accounts
    }

    /// The token after `token` of the same account: `me-1` gives `me-2`.
    static func renewed(_ token: String) -> String {
        let account = TokenAuthenticator.account(of: token)
        let number = Int(token.dropFirst(account.count + 1)) ?? 0
        return "\(account)-\(number + 1)"
    }

    /// A transport over `origin` with `accounts`; queries go to `/search`, and every entry is
    /// due for revalidation whenever asked, so that a revalidation shows what it sends.
    func transport(
        _ origin: ScriptedOrigin, accounts: Accounts<TokenAuthenticator>, clock: TestClock = TestClock(),
        _ configure: (inout CachedTransport.Configuration) -> Void = { _ in }
    ) -> CachedTransport {
        makeTransport(loader: origin, clock: clock) { configuration in
            configuration.identity.authenticate(with: accounts)
            configuration.network.queryEndpoints = [.pathPrefix("/search")]
            configuration.stayingCurrent.minimumRevalidationInterval = .zero
            configure(&configuration)
        }
    }

    /// An origin that answers `200` with the path, the `Authorization` it was sent and its call
    /// number, or `401` for a credential outside `accepted`; `503` to the first call of a path in
    /// `unavailableOnce`. A closed gate holds the calls `holding` selects.
    func origin(
        accepting accepted: Locked<Set<String>>, unavailableOnce: Set<String> = [], gated: Bool = false,
        holding: @escaping @Sendable (URLRequest) -> Bool = { _ in true }
    ) -> ScriptedOrigin {
        let unavailable = Locked(unavailableOnce)
        return ScriptedOrigin(
            gated: gated,
            respond: { request, call in
                let path = request.url!.path
                if unavailable.withLock({ $0.remove(path) != nil }) { return .init(status: 503, text: "later") }
                let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
                guard accepted.withLock({ $0.contains(auth) }) else { return .init(status: 401, text: "refused") }
                return .init(text: "\(path) auth=\(auth) call=\(call)")
            },
            holding: holding)
    }

    /// A request of `path` (a GET unless `method` says otherwise) that names `account`, or none.
    func request(_ path: String, of account: String?, method: String = "GET") -> URLRequest {
        var request = TransportCacheTests.request("\(base)\(path)", method: method)
        request.account = account
        return request
    }

    /// The code of the ``AuthenticationError`` `body` throws; nil when it returns or throws
    /// another error.
    func failure<Value>(_ body: () async throws -> Value) async -> AuthenticationError.Code? {
        (await thrownError(body) as? AuthenticationError)?.code
    }

    /// The partitions of the entries stored for `path`, sorted.
    func partitions(of path: String, in transport: CachedTransport) -> [String?] {
        transport.snapshot().entries.filter { $0.url.path == path }.map(\.partition).sorted { ($0 ?? "") < ($1 ?? "") }
    }

    /// The `Authorization` of each call the origin received for `path`, in the order they arrived.
    func credentials(sentTo path: String, by origin: ScriptedOrigin) -> [String?] {
        origin.calls.filter { $0.url!.path == path }.map { $0.value(forHTTPHeaderField: "Authorization") }
    }

    // MARK: - Every call keeps its account

    /// Every call a screen of `account` makes, each checked to answer with `account`'s own token.
    func everyCall(of account: String, in transport: CachedTransport) async throws {
        let token = "auth=Bearer \(account)-1"
        #expect(try await transport.data(for: request("/feed", of: account), tags: [account]).0.text.contains(token))
        let article = request("/article", of: account)
        #expect(try await transport.value(String.self, for: article, decoder: TextDecoder()).contains(token))
        #expect(
            try transport.cachedValue(String.self, for: article, decoder: TextDecoder())?.value.contains(token) == true)
        #expect(try await transport.refresh(request("/feed", of: account)).0.text.contains(token))
        #expect(try await transport.data(for: request("/feed", of: account)).0.text.contains(token))

        try transport.store(ProvisionalAnswer(for: request("/stored", of: account), data: Data("\(account)'s".utf8)))
        #expect(try await transport.data(for: request("/stored", of: account)).0.text == "\(account)'s")

        // The provisional answer shows in this account's key while the write runs; the refetch
        // that settles it goes out with this account's token.
        let profile = request("/profile", of: account)
        let shown = try await transport.optimisticUpdate(
            [ProvisionalAnswer(for: profile, data: Data("\(account)'s profile".utf8))],
            write: { try await transport.data(for: profile).0.text })
        #expect(shown == "\(account)'s profile")
        #expect(try await transport.data(for: profile).0.text.contains(token))

        let prefetch = try transport.prefetch(request("/row", of: account))
        let prefetched = await prefetch.outcome
        #expect(prefetched.isLoaded || prefetched.isAlreadyStored)
        let (row, _, outcome) = try await transport.response(for: request("/row", of: account))
        #expect(row.text.contains(token))
        #expect(outcome.isFromMemory)

        transport.invalidate(request("/feed", of: account))
        #expect(!transport.snapshot().entries.contains { $0.url.path == "/feed" && $0.partition == account })
        #expect(try await transport.data(for: request("/feed", of: account)).0.text.contains(token))

        // Revalidates both accounts' articles (not the feeds, which the other account may have just
        // invalidated): each goes out with its own account's token.
        let summary = await transport.revalidate(.pathPrefix("/article"))
        #expect(summary.failed == 0)
        #expect(try await transport.data(for: article).0.text.contains(token))

        var query = request("/search", of: account, method: "POST")
        query.httpBody = Data("q=1".utf8)
        #expect(try await transport.data(for: query).0.text.contains(token))
    }

    @Test("two accounts making every call at once each get their own account's answers, under keys of their own")
    func everyCallKeepsItsAccount() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let transport = transport(origin, accounts: try Self.signedIn())
        for _ in 0..<3 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for account in ["me", "you"] {
                    group.addTask { try await everyCall(of: account, in: transport) }
                }
                try await group.waitForAll()
            }
        }
        for path in ["/feed", "/article", "/stored", "/profile", "/row", "/search"] {
            #expect(partitions(of: path, in: transport) == ["me", "you"], "\(path)")
        }
        #expect(Set(transport.snapshot().entries.map(\.partition)) == ["me", "you"])
        // One account's invalidation leaves the other's entry.
        transport.invalidate(request("/feed", of: "me"))
        #expect(partitions(of: "/feed", in: transport) == ["you"])
        #expect(
            origin.calls.allSatisfy {
                ["Bearer me-1", "Bearer you-1"].contains($0.value(forHTTPHeaderField: "Authorization"))
            })
        #expect(origin.calls.allSatisfy { $0.value(forHTTPHeaderField: Self.accountHeader) == nil })
    }

    // MARK: - One refresh per account

    @Test(
        "a burst of refusals of one account refreshes it once; meanwhile the other account's requests, and its own refresh, go on at once"
    )
    func eachAccountRefreshesOnItsOwn() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-2", "Bearer you-1"])
        let origin = origin(accepting: accepted, gated: true, holding: { $0.url!.path.hasPrefix("/mine") })
        let refreshing = Gate()
        let refreshes = Locked<[String: Int]>([:])
        let authenticator = TokenAuthenticator { token, _ in
            let account = TokenAuthenticator.account(of: token)
            refreshes.withLock { $0[account, default: 0] += 1 }
            if account == "me" { try await refreshing.wait() }
            return Self.renewed(token)
        }
        let accounts = try Self.signedIn(authenticator)
        // Ten places per host, all taken by me's requests: while they wait for me's refresh they
        // must not keep you's out.
        let transport = transport(origin, accounts: accounts) { $0.network.maximumFetchesPerHost = 10 }
        let mine = (0..<10).map { index in
            Task { try await transport.data(for: request("/mine/\(index)", of: "me")).0.text }
        }
        // All ten are refused at once.
        await origin.waitForCalls(10)
        origin.openGate()
        await refreshing.waitForArrivals(1)

        // Me's refresh is held: you's requests go out and are answered all the same.
        for index in 0..<5 {
            let answer = try await transport.data(for: request("/yours/\(index)", of: "you")).0.text
            #expect(answer.contains("auth=Bearer you-1"))
        }
        // You's token refused now: you refreshes on its own, not behind me's refresh.
        accepted.withLock { $0 = ["Bearer me-2", "Bearer you-2"] }
        #expect(
            try await transport.data(for: request("/yours/renewed", of: "you")).0.text.contains("auth=Bearer you-2"))
        #expect(accounts.credential(for: "you") == "you-2")
        #expect(accounts.credential(for: "me") == "me-1")

        refreshing.open()
        for caller in mine { #expect(try await caller.value.contains("auth=Bearer me-2")) }
        #expect(refreshes.withLock { $0 } == ["me": 1, "you": 1])
        #expect(accounts.credential(for: "me") == "me-2")
        // Each of me's requests was sent twice: refused, then resent once with the new token.
        let resent = origin.calls.filter { $0.url!.path.hasPrefix("/mine") }.map {
            $0.value(forHTTPHeaderField: "Authorization")
        }
        #expect(resent == Array(repeating: "Bearer me-1", count: 10) + Array(repeating: "Bearer me-2", count: 10))
    }

    @Test(
        "a refresh of one account that fails fails that account's waiting requests with refreshFailed, and no other's")
    func failedRefreshFailsOnlyItsAccount() async throws {
        let origin = origin(
            accepting: Locked(["Bearer you-1"]), gated: true, holding: { $0.url!.path.hasPrefix("/mine") })
        let refreshing = Gate()
        let authenticator = TokenAuthenticator(heldAt: refreshing) { _, _ in throw URLError(.userAuthenticationRequired)
        }
        let accounts = try Self.signedIn(authenticator)
        let transport = transport(origin, accounts: accounts) { $0.network.maximumFetchesPerHost = 10 }
        _ = try await transport.data(for: request("/feed", of: "you"))
        let mine = (0..<5).map { index in
            Task { try await transport.data(for: request("/mine/\(index)", of: "me")) }
        }
        await origin.waitForCalls(6)
        origin.openGate()
        await refreshing.waitForArrivals(1)
        let yours = try await transport.data(for: request("/yours", of: "you")).0.text
        #expect(yours.contains("auth=Bearer you-1"))

        refreshing.open()
        for caller in mine { #expect(await failure { try await caller.value } == .refreshFailed) }
        #expect(try await transport.data(for: request("/yours/after", of: "you")).0.text.contains("auth=Bearer you-1"))
        #expect(authenticator.refreshes == 1)
        #expect(accounts.credential(for: "me") == "me-1")
        #expect(accounts.credential(for: "you") == "you-1")
        // You's entries stay, and are still read from memory.
        _ = try await transport.data(for: request("/feed", of: "you"))
        #expect(origin.callCount(for: "\(base)/feed") == 1)
        #expect(!transport.snapshot().entries.contains { $0.partition == "me" })
    }

    // MARK: - Renewals

    @Test("a renewed token keeps its account's entries, whether refreshed or set by the app")
    func renewalKeepsEntries() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1", "Bearer you-1"])
        let origin = origin(accepting: accepted)
        let authenticator = TokenAuthenticator { token, _ in Self.renewed(token) }
        let accounts = try Self.signedIn(authenticator)
        let transport = transport(origin, accounts: accounts)
        let kept = try await transport.data(for: request("/feed", of: "me")).0
        _ = try await transport.data(for: request("/feed", of: "you"))

        accepted.withLock { $0 = ["Bearer me-2", "Bearer you-1"] }
        #expect(try await transport.data(for: request("/other", of: "me")).0.text.contains("auth=Bearer me-2"))
        #expect(authenticator.refreshes == 1)
        #expect(try await transport.data(for: request("/feed", of: "me")).0 == kept)

        try accounts.setCredential("me-7", for: "me")
        #expect(try await transport.data(for: request("/feed", of: "me")).0 == kept)
        #expect(try await transport.data(for: request("/feed", of: "you")).0.text.contains("auth=Bearer you-1"))
        #expect(origin.callCount(for: "\(base)/feed") == 2)
        #expect(partitions(of: "/feed", in: transport) == ["me", "you"])
    }

    @Test(
        "a revalidation goes out with its account's current credential: the app's new one, or the one its refusal refreshed"
    )
    func revalidationCarriesTheCurrentCredential() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1", "Bearer me-2", "Bearer you-1"])
        let origin = origin(accepting: accepted)
        let authenticator = TokenAuthenticator { token, _ in Self.renewed(token) }
        let accounts = try Self.signedIn(authenticator)
        let transport = transport(origin, accounts: accounts)
        _ = try await transport.data(for: request("/feed", of: "me"))
        _ = try await transport.data(for: request("/feed", of: "you"))

        try accounts.setCredential("me-2", for: "me")
        var summary = await transport.revalidateAll()
        #expect(summary.revalidated == 2 && summary.failed == 0)
        #expect(
            credentials(sentTo: "/feed", by: origin).dropFirst(2).sorted { ($0 ?? "") < ($1 ?? "") } == [
                "Bearer me-2", "Bearer you-1",
            ])
        #expect(try await transport.data(for: request("/feed", of: "me")).0.text.contains("auth=Bearer me-2"))
        #expect(try await transport.data(for: request("/feed", of: "you")).0.text.contains("auth=Bearer you-1"))

        // Me's token is refused now: its revalidation is refused, me refreshes, and it is resent
        // with me's new token; you's goes out with you's.
        accepted.withLock { $0 = ["Bearer me-3", "Bearer you-1"] }
        summary = await transport.revalidate(.pathPrefix("/feed"))
        #expect(summary.revalidated == 2 && summary.failed == 0)
        #expect(authenticator.refreshes == 1)
        #expect(accounts.credential(for: "me") == "me-3")
        let sent = credentials(sentTo: "/feed", by: origin).dropFirst(4)
        #expect(sent.sorted { ($0 ?? "") < ($1 ?? "") } == ["Bearer me-2", "Bearer me-3", "Bearer you-1"])
        #expect(try await transport.data(for: request("/feed", of: "me")).0.text.contains("auth=Bearer me-3"))
        #expect(try await transport.data(for: request("/feed", of: "you")).0.text.contains("auth=Bearer you-1"))
        #expect(origin.callCount(for: "\(base)/feed") == 7)
        #expect(origin.calls.allSatisfy { $0.value(forHTTPHeaderField: Self.accountHeader) == nil })
    }

    @Test("a retry goes out with its account's current credential, set while it waited")
    func retryCarriesTheCurrentCredential() async throws {
        let origin = origin(
            accepting: Locked(["Bearer me-1", "Bearer me-2", "Bearer you-1"]), unavailableOnce: ["/flaky"])
        let clock = TestClock()
        let accounts = try Self.signedIn()
        let transport = transport(origin, accounts: accounts, clock: clock) { configuration in
            configuration.network.retryPolicy = RetryPolicy(
                maximumAttempts: 2, initialDelay: .seconds(1), maximumDelay: .seconds(1))
        }
        let flaky = Task { try await transport.data(for: request("/flaky", of: "me")).0.text }
        await clock.waitForSleepers(1)
        try accounts.setCredential("me-2", for: "me")
        clock.advance(by: .seconds(10))
        #expect(try await flaky.value.contains("auth=Bearer me-2"))
        #expect(credentials(sentTo: "/flaky", by: origin) == ["Bearer me-1", "Bearer me-2"])
        #expect(origin.calls.allSatisfy { $0.value(forHTTPHeaderField: Self.accountHeader) == nil })
    }

    // MARK: - Sign-out

    @Test("signing one account out leaves nothing of it, and the other account's entries and requests go on")
    func signOutLeavesNothingOfTheAccount() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer me-5", "Bearer you-1"]))
        let accounts = try Self.signedIn()
        let transport = transport(origin, accounts: accounts)
        for account in ["me", "you"] {
            _ = try await transport.data(for: request("/feed", of: account), tags: [account])
            _ = try await transport.data(for: request("/profile", of: account))
        }
        // An optimistic update of me's, pending, and a fetch of each account held at the origin.
        let written = Gate()
        let update = Task {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: request("/profile", of: "me"), data: Data("provisional".utf8))],
                write: { try await written.wait() })
        }
        await written.waitForArrivals(1)
        origin.closeGate()
        let heldMine = Task { try await transport.data(for: request("/held", of: "me")) }
        let heldYours = Task { try await transport.data(for: request("/held", of: "you")).0.text }
        await origin.waitForCalls(6)

        transport.signOut(partition: "me")
        #expect(await failure { try await heldMine.value } == .signedOut)
        #expect(Set(transport.snapshot().entries.map(\.partition)) == ["you"])
        #expect(accounts.signedInAccounts == ["you"])
        #expect(accounts.credential(for: "me") == nil)

        written.open()
        try await update.value
        origin.openGate()
        #expect(try await heldYours.value.contains("auth=Bearer you-1"))
        // Nothing of me comes back: neither the provisional answer, nor the held fetch's.
        #expect(Set(transport.snapshot().entries.map(\.partition)) == ["you"])
        #expect(transport.snapshot().entries.map(\.url.path).sorted() == ["/feed", "/held", "/profile"])
        #expect(transport.invalidate(tag: "me") == 0)

        // Me's requests and writes fail from now on, and send nothing.
        #expect(await failure { try await transport.data(for: request("/feed", of: "me")) } == .signedOut)
        #expect(
            await failure { try transport.store(ProvisionalAnswer(for: request("/feed", of: "me"), data: Data())) }
                == .signedOut)
        let refused = await failure {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: request("/profile", of: "me"), data: Data("again".utf8))], write: {})
        }
        #expect(refused == .signedOut)
        #expect(origin.callCount == 6)

        // You's entries are still read from memory.
        #expect(try await transport.data(for: request("/feed", of: "you")).0.text.contains("auth=Bearer you-1"))
        #expect(origin.callCount == 6)
        #expect(transport.invalidate(tag: "you") == 1)

        // Signed in again, me starts from nothing.
        try accounts.setCredential("me-5", for: "me")
        #expect(try await transport.data(for: request("/feed", of: "me")).0.text.contains("auth=Bearer me-5"))
        #expect(origin.callCount == 7)
    }

    @Test(
        "a caller waiting for its account's refresh fails with signedOut when the account signs out, whichever of setCredential(nil) and signOut(partition:) comes first",
        arguments: [true, false])
    func signOutWhileWaitingForTheRefresh(credentialFirst: Bool) async throws {
        let origin = origin(accepting: Locked(["Bearer you-1"]))
        let refreshing = Gate()
        let authenticator = TokenAuthenticator(heldAt: refreshing) { token, _ in Self.renewed(token) }
        let accounts = try Self.signedIn(authenticator)
        let transport = transport(origin, accounts: accounts)
        _ = try await transport.data(for: request("/feed", of: "you"))
        let rounds = 30
        for round in 1...rounds {
            try accounts.setCredential("me-1", for: "me")
            // A cached GET and a POST the cache passes through: both wait for me's refresh.
            let fetching = Task { try await transport.data(for: request("/waiting/\(round)", of: "me")) }
            var post = request("/send/\(round)", of: "me", method: "POST")
            post.httpBody = Data("\(round)".utf8)
            let sending = Task { [post] in try await transport.data(for: post) }
            await refreshing.waitForArrivals(round)
            if credentialFirst {
                try accounts.setCredential(nil, for: "me")
                transport.signOut(partition: "me")
            } else {
                transport.signOut(partition: "me")
                try accounts.setCredential(nil, for: "me")
            }
            // Both fail at once, while the refresh is still held.
            #expect(await failure { try await fetching.value } == .signedOut, "round \(round)")
            #expect(await failure { try await sending.value } == .signedOut, "round \(round)")
        }
        #expect(authenticator.refreshes == rounds)
        #expect(refreshing.cancelled == 0)
        refreshing.open()
        #expect(accounts.signedInAccounts == ["you"])
        #expect(accounts.credential(for: "me") == nil)
        #expect(Set(transport.snapshot().entries.map(\.partition)) == ["you"])
        #expect(await failure { try await transport.data(for: request("/feed", of: "me")) } == .signedOut)
        _ = try await transport.data(for: request("/feed", of: "you"))
        #expect(origin.callCount(for: "\(base)/feed") == 1)
    }

    /// Runs `rounds` rounds of a write of "me" racing me's sign-out on `transport`: `write` makes
    /// round `round`'s write, and passes `start` (shared with the sign-out's task) where the race
    /// begins. - Returns: how many rounds left something of "me" stored after both had ended.
    func racesLeavingEntries(
        _ rounds: Int, on transport: CachedTransport, signingIn accounts: Accounts<TokenAuthenticator>,
        write: @escaping @Sendable (_ round: Int, _ start: Gate) async throws -> Void
    ) async throws -> Int {
        var leftBehind = 0
        for round in 0..<rounds {
            try accounts.setCredential("me-1", for: "me")
            // Both start together, on two threads.
            let start = Gate()
            let writing = Task { try await write(round, start) }
            let signingOut = Task {
                try await start.wait()
                transport.signOut(partition: "me")
            }
            await start.waitForArrivals(2)
            start.open()
            try await writing.value
            try await signingOut.value
            if transport.snapshot().entries.contains(where: { $0.partition == "me" }) {
                leftBehind += 1
                transport.signOut(partition: "me")
            }
        }
        return leftBehind
    }

    @Test("a store(_:) for an account racing its sign-out never commits after it")
    func storeRacingSignOut() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let accounts = try Self.signedIn()
        let transport = transport(origin, accounts: accounts)
        _ = try await transport.data(for: request("/feed", of: "you"))
        // Many rounds, so that some sign-outs fall between the store's keying and its commit.
        let leftBehind = try await racesLeavingEntries(1000, on: transport, signingIn: accounts) { round, start in
            let answer = ProvisionalAnswer(for: request("/stored/\(round)", of: "me"), data: Data("mine".utf8))
            try await start.wait()
            try? transport.store(answer)
        }
        #expect(leftBehind == 0)
        #expect(partitions(of: "/feed", in: transport) == ["you"])
    }

    @Test(
        "an optimistic update of an account racing its sign-out never commits after it: neither its provisional answers nor its confirmed ones",
        arguments: [false, true])
    func updateRacingSignOut(atConfirmation: Bool) async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let accounts = try Self.signedIn()
        let transport = transport(origin, accounts: accounts)
        _ = try await transport.data(for: request("/feed", of: "you"))
        // Many rounds, so that some sign-outs fall between an update's keying and its commit:
        // either the update begins as the sign-out runs, or its write returns then and its
        // confirmed answers commit.
        let leftBehind = try await racesLeavingEntries(500, on: transport, signingIn: accounts) { round, start in
            let profile = request("/profile/\(round)", of: "me")
            if !atConfirmation { try await start.wait() }
            _ = try? await transport.optimisticUpdate(
                [ProvisionalAnswer(for: profile, data: Data("provisional".utf8))],
                write: { if atConfirmation { try await start.wait() } },
                confirmed: { [ProvisionalAnswer(for: profile, data: Data("confirmed".utf8))] })
        }
        #expect(leftBehind == 0)
        #expect(transport.pendingUpdateKeys == 0)
        #expect(partitions(of: "/feed", in: transport) == ["you"])
    }

    // MARK: - Bad input

    @Test("a request that names no account fails with noAccount, whatever the call, and nothing is sent or stored")
    func noAccount() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let transport = transport(origin, accounts: try Self.signedIn())
        let plain = request("/feed", of: nil)
        #expect(await failure { try await transport.data(for: plain) } == .noAccount)
        #expect(
            await failure { try await transport.value(String.self, for: plain, decoder: TextDecoder()) } == .noAccount)
        #expect(
            await failure { try transport.store(ProvisionalAnswer(for: plain, data: Data("x".utf8))) } == .noAccount)
        #expect(await failure { try transport.prefetch(plain) } == .noAccount)
        var post = request("/send", of: nil, method: "POST")
        post.httpBody = Data("x".utf8)
        #expect(await failure { try await transport.data(for: post) } == .noAccount)
        #expect(origin.callCount == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test(
        "a request naming two accounts, an empty name or a control character fails with invalidAccount, sending nothing"
    )
    func invalidAccountName() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let transport = transport(origin, accounts: try Self.signedIn())
        var twoNames = request("/feed", of: nil)
        twoNames.addValue("me", forHTTPHeaderField: Self.accountHeader)
        twoNames.addValue("you", forHTTPHeaderField: Self.accountHeader)
        #expect(await failure { try await transport.data(for: twoNames) } == .invalidAccount)
        #expect(
            await failure { try transport.store(ProvisionalAnswer(for: twoNames, data: Data())) } == .invalidAccount)
        #expect(await failure { try await transport.data(for: request("/feed", of: "")) } == .invalidAccount)
        #expect(await failure { try await transport.data(for: request("/feed", of: "me\u{7}")) } == .invalidAccount)
        #expect(origin.callCount == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("setCredential refuses a name that cannot be an account, and changes nothing")
    func setCredentialRefusesInvalidNames() async throws {
        let accounts = try Self.signedIn()
        for name in ["", "me\u{7}", "me\n", "me,you", " me", "me "] {
            let signingIn = await failure { try accounts.setCredential("me-9", for: name) }
            #expect(signingIn == .invalidAccount, "\(name.debugDescription)")
            let signingOut = await failure { try accounts.setCredential(nil, for: name) }
            #expect(signingOut == .invalidAccount, "\(name.debugDescription)")
        }
        #expect(accounts.signedInAccounts == ["me", "you"])
        #expect(accounts.credential(for: "me") == "me-1")
    }

    @Test("a request with its own Authorization that also names an account fails with invalidAccount, sending nothing")
    func ownAuthorizationBesideAnAccount() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer app"]))
        let transport = transport(origin, accounts: try Self.signedIn())
        var both = request("/feed", of: "me")
        both.setValue("Bearer app", forHTTPHeaderField: "Authorization")
        #expect(await failure { try await transport.data(for: both) } == .invalidAccount)
        var post = request("/send", of: "me", method: "POST")
        post.setValue("Bearer app", forHTTPHeaderField: "Authorization")
        post.httpBody = Data("x".utf8)
        #expect(await failure { try await transport.data(for: post) } == .invalidAccount)
        // Refused where it is keyed: nothing is written for it, in an account or out of one.
        #expect {
            try transport.store(ProvisionalAnswer(for: both, data: Data("x".utf8)))
        } throws: { ($0 as? AuthenticationError)?.code == .invalidAccount }
        #expect(throws: AuthenticationError.self) { try transport.cachedValue(String.self, for: both) }
        #expect(origin.callCount == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a request with its own Authorization that names no account goes out as it is, keyed by that header")
    func ownAuthorizationGoesOutAsItIs() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer app"]))
        let transport = transport(origin, accounts: try Self.signedIn())
        var own = request("/feed", of: nil)
        own.setValue("Bearer app", forHTTPHeaderField: "Authorization")
        #expect(try await transport.data(for: own).0.text.contains("auth=Bearer app"))
        #expect(try await transport.data(for: own).0.text.contains("auth=Bearer app"))
        #expect(origin.callCount == 1)
        let sent = try #require(origin.calls.first)
        #expect(sent.value(forHTTPHeaderField: "Authorization") == "Bearer app")
        // The authenticator never touched it.
        #expect(sent.value(forHTTPHeaderField: "X-Account") == nil)
        // Me's request of the same URL is another key, sent with me's token.
        #expect(try await transport.data(for: request("/feed", of: "me")).0.text.contains("auth=Bearer me-1"))
        #expect(partitions(of: "/feed", in: transport) == [nil, "me"])
    }

    @Test("a request naming an account never signed in fails with noCredential, sending nothing")
    func accountNeverSignedIn() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let accounts = try Self.signedIn()
        let transport = transport(origin, accounts: accounts)
        #expect(await failure { try await transport.data(for: request("/feed", of: "him")) } == .noCredential)
        #expect(
            await failure { try transport.store(ProvisionalAnswer(for: request("/feed", of: "him"), data: Data())) }
                == .noCredential)
        #expect(origin.callCount == 0)
        #expect(accounts.credential(for: "him") == nil)
    }

    @Test(
        "a credential the app sets for an account while its refresh runs stays: the refresh runs to its end, its result is dropped, and its waiters go out with the app's"
    )
    func credentialSetDuringTheRefresh() async throws {
        let origin = origin(accepting: Locked(["Bearer you-1", "Bearer me-9"]))
        let refreshing = Gate()
        let authenticator = TokenAuthenticator(heldAt: refreshing) { token, _ in Self.renewed(token) }
        let accounts = try Self.signedIn(authenticator)
        let transport = transport(origin, accounts: accounts)
        let waiting = Task { try await transport.data(for: request("/feed", of: "me")).0.text }
        await refreshing.waitForArrivals(1)
        // Another account's requests do not wait for it.
        #expect(try await transport.data(for: request("/feed", of: "you")).0.text.contains("auth=Bearer you-1"))
        try accounts.setCredential("me-9", for: "me")
        refreshing.open()
        #expect(try await waiting.value.contains("auth=Bearer me-9"))
        #expect(refreshing.cancelled == 0)
        #expect(authenticator.refreshes == 1)
        #expect(accounts.credential(for: "me") == "me-9")
        #expect(accounts.credential(for: "you") == "you-1")
        #expect(!credentials(sentTo: "/feed", by: origin).contains("Bearer me-2"))
    }

    @Test("signing out an account never signed in leaves the others as they were")
    func signOutOfAnUnknownAccount() async throws {
        let origin = origin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let accounts = try Self.signedIn()
        let transport = transport(origin, accounts: accounts)
        _ = try await transport.data(for: request("/feed", of: "me"))
        _ = try await transport.data(for: request("/feed", of: "you"))
        transport.signOut(partition: "him")
        #expect(accounts.signedInAccounts == ["me", "you"])
        #expect(partitions(of: "/feed", in: transport) == ["me", "you"])
        #expect(try await transport.data(for: request("/feed", of: "me")).0.text.contains("auth=Bearer me-1"))
        #expect(try await transport.data(for: request("/feed", of: "you")).0.text.contains("auth=Bearer you-1"))
        #expect(origin.callCount == 2)
        #expect(try await transport.data(for: request("/other", of: "me")).0.text.contains("auth=Bearer me-1"))
    }

    @Test("the account's name never reaches the origin: not on a fetch, a POST, a prefetch, a revalidation or a resend")
    func accountHeaderNeverSent() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1", "Bearer you-1"])
        let origin = origin(accepting: accepted)
        let authenticator = TokenAuthenticator { token, _ in Self.renewed(token) }
        let transport = transport(origin, accounts: try Self.signedIn(authenticator))
        _ = try await transport.data(for: request("/feed", of: "me"))
        var post = request("/send", of: "you", method: "POST")
        post.httpBody = Data("x".utf8)
        _ = try await transport.data(for: post)
        #expect(await (try transport.prefetch(request("/row", of: "you"))).outcome.isLoaded)
        // Refused, then resent after me's refresh.
        accepted.withLock { $0 = ["Bearer me-2", "Bearer you-1"] }
        let summary = await transport.revalidateAll()
        #expect(summary.failed == 0)
        #expect(authenticator.refreshes == 1)
        #expect(origin.callCount == 6)
        #expect(origin.calls.allSatisfy { $0.value(forHTTPHeaderField: Self.accountHeader) == nil })
        #expect(
            origin.calls.allSatisfy {
                $0.allHTTPHeaderFields?.keys.contains { $0.lowercased() == Self.accountHeader.lowercased() } != true
            })
    }

    @Test("an account that signs in again while its sign-out is still removing its entries is never answered them")
    func signInDuringSignOut() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1", "Bearer you-1", "Bearer me-2"])
        let origin = origin(accepting: accepted)
        let accounts = try Self.signedIn()
        let transport = transport(origin, accounts: accounts)
        #expect(try await transport.data(for: request("/feed", of: "me")).0.text.contains("call=1"))
        // An invalidation under way, held as long as the test needs: the sign-out's removal of
        // me's entries waits behind it.
        let release = await holdingInvalidations(of: transport)
        let signedOut = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? accounts.setCredential(nil, for: "me")
            transport.signOut(partition: "me")
            signedOut.signal()
        }
        // The sign-out has begun; me's entry is still held.
        let deadline = ContinuousClock.now + .seconds(30)
        while transport.store.state.withLock({ $0.departing.isEmpty }), ContinuousClock.now < deadline {
            await Task.yield()
        }
        #expect(transport.statistics.entries == 1)
        try accounts.setCredential("me-2", for: "me")
        // Signed in again: what me held before is neither answered nor read from memory.
        #expect(try transport.cachedValue(String.self, for: request("/feed", of: "me")) == nil)
        let (data, _) = try await transport.data(for: request("/feed", of: "me"))
        #expect(data.text.contains("auth=Bearer me-2 call=2"))
        release.signal()
        signedOut.wait()
        #expect(try await transport.data(for: request("/feed", of: "you")).0.text.contains("auth=Bearer you-1"))
    }
}
