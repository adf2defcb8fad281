import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheQueries

/// Two accounts of one app signed in at once (``Accounts``), `me` and `you`, against an origin
/// that tells them apart by their tokens alone: both ask for the same URLs, and only the account
/// each request names keeps their answers, entries and refreshes apart. Each account refreshes at
/// a gate named after it, so a test can hold one account's refresh and watch the other go on.
@Suite("Two accounts signed in at once: each keeps its own token, entries and refresh")
struct SeveralAccountsEndToEndTests {
    static let names = ["me", "you"]

    struct Client: Sendable {
        let transport: CachedTransport
        let accounts: Accounts<OriginTokens>
        let tokens: OriginTokens
    }

    /// A transport with `me` and `you` signed in with their current tokens at `origin`; each
    /// account refreshes at `/token?account=<name>&gate=<name>`.
    static func client(on origin: LoopbackOrigin) async throws -> Client {
        let tokens = OriginTokens { name in origin.url("/token?account=\(name)&gate=\(name)") }
        let accounts = Accounts(tokens)
        for name in names {
            try accounts.setCredential(OriginAccount(name: name, token: await origin.currentToken(of: name)), for: name)
        }
        var configuration = CachedTransport.Configuration()
        configuration.identity.authenticate(with: accounts)
        let transport = CachedTransport(configuration: configuration)
        tokens.use(transport)
        return Client(transport: transport, accounts: accounts, tokens: tokens)
    }

    /// `pathAndQuery` with `token=account`, which the origin answers only with the current token
    /// of the account the token was issued to, as a request naming `account`.
    static func request(_ pathAndQuery: String, as account: String, method: String = "GET", on origin: LoopbackOrigin)
        -> URLRequest
    {
        let separator = pathAndQuery.contains("?") ? "&" : "?"
        var request = EndToEndTests.request(origin.url(pathAndQuery + separator + "token=account"), method: method)
        request.account = account
        return request
    }

    /// Whether `body` is what `account` may be answered: the origin's answer to its own current
    /// token `token`, or what it stored itself.
    static func isOwn(_ body: String, of account: String, token: String = "t0") -> Bool {
        body == "stored for \(account)" || (body + " ").contains(" auth=Bearer \(account)-\(token) ")
    }

    /// Returns once `wait` (one of the origin's or the authenticator's waits) has; ends the test
    /// with a failure, not a hang, when what it waits for has not come within thirty seconds.
    static func until(
        _ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ wait: @escaping @Sendable () async -> Void
    ) async throws {
        let ended = await ending(within: .seconds(30), whenHung: what, sourceLocation: sourceLocation) { await wait() }
        try #require(ended != nil, sourceLocation: sourceLocation)
    }

    /// Returns once `count` fetches have ended refused (`401`): each has then asked its account
    /// for a new credential, or is about to.
    static func waitForRefusals(
        _ count: Int, in events: CacheEvents, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await until("\(count) refusals", sourceLocation: sourceLocation) {
            var refused = 0
            for await event in events {
                if case .fetchEnded(401?, _, _) = event.kind { refused += 1 }
                if refused == count { return }
            }
        }
    }

    /// The ends of `calls`, in their order; a failure when they have not all ended within thirty
    /// seconds.
    static func ends(
        of calls: [Task<CallEnd, Never>], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [CallEnd] {
        let ended = await ending(
            within: .seconds(30), whenHung: "callers still waiting", sourceLocation: sourceLocation
        ) {
            var ends: [CallEnd] = []
            for call in calls { ends.append(await call.value) }
            return ends
        }
        return try #require(ended, sourceLocation: sourceLocation).get()
    }

    /// The calls a screen makes of one request.
    enum Call: CaseIterable {
        case data, value, refresh, invalidate, store, prefetch

        /// Makes this call of `request` as its account, and returns the body it ends with.
        func body(of request: URLRequest, on transport: CachedTransport) async throws -> String {
            switch self {
            case .data:
                return try await transport.data(for: request).0.text
            case .value:
                return try await transport.value(String.self, for: request, decoder: BodyTextDecoder())
            case .refresh:
                return try await transport.refresh(request).0.text
            case .invalidate:
                transport.invalidate(request)
                return try await transport.data(for: request).0.text
            case .store:
                let account = try #require(request.account)
                try transport.store(ProvisionalAnswer(for: request, data: Data("stored for \(account)".utf8)))
                return try await transport.data(for: request).0.text
            case .prefetch:
                if case .failed(let error) = try await transport.prefetch(request).outcome { throw error }
                return try await transport.data(for: request).0.text
            }
        }
    }

    @Test("calls of two accounts at once, to the same URLs, each answer with their own account's token")
    func concurrentCallsKeepTheirAccounts() async throws {
        try await withOrigin { origin in
            let client = try await Self.client(on: origin)
            let transport = client.transport
            let paths = (0..<4).map { "/shared/\($0)?stable=1" }
            let calls = await ending(within: .seconds(60)) {
                try await withThrowingTaskGroup(of: (account: String, body: String).self) { group in
                    for _ in 0..<2 {
                        for path in paths {
                            for call in Call.allCases {
                                for account in Self.names {
                                    let request = Self.request(path, as: account, on: origin)
                                    group.addTask { (account, try await call.body(of: request, on: transport)) }
                                }
                            }
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            let answers = try #require(calls).get()
            #expect(answers.count == 2 * paths.count * Call.allCases.count * Self.names.count)
            let foreign = answers.filter { !Self.isOwn($0.body, of: $0.account) }
            #expect(foreign.isEmpty, "answered with another account's token or entry: \(foreign)")

            // Each account reads its own answer of every URL, from an entry of its own.
            for account in Self.names {
                for path in paths {
                    let body = try await transport.data(for: Self.request(path, as: account, on: origin)).0.text
                    #expect(Self.isOwn(body, of: account), "\(account) \(path): \(body)")
                }
            }
            let entries = transport.snapshot().entries
            #expect(entries.count == 2 * paths.count)
            for account in Self.names { #expect(entries.count { $0.partition == account } == paths.count) }
            #expect(client.tokens.refreshes == 0)
            #expect(await origin.requests(carrying: "X-Account") > 0)
            #expect(await origin.requests(carrying: "X-Cache-Account") == 0)
        }
    }

    @Test("one account's refresh held at the origin delays none of the other account's calls, nor its refresh")
    func heldRefreshHoldsOnlyItsAccount() async throws {
        try await withOrigin { origin in
            let client = try await Self.client(on: origin)
            let transport = client.transport
            await origin.expireToken(of: "me")
            await origin.closeGate("me")
            let mine = Task {
                await CallEnd { try await transport.data(for: Self.request("/mail", as: "me", on: origin)) }
            }
            // Refused with its expired token, `me` waits for its refresh, which the origin holds.
            try await Self.until("me's refresh held at the origin") { await origin.waitUntilHeld(atGate: "me") }

            // `you`'s calls, the same URL among them, go out and are answered meanwhile.
            let yours = await ending(within: .seconds(30), whenHung: "you waits for me's refresh") {
                try await withThrowingTaskGroup(of: String.self) { group in
                    for path in ["/mail"] + (0..<7).map({ "/box/\($0)" }) {
                        let request = Self.request(path, as: "you", on: origin)
                        group.addTask { try await transport.data(for: request).0.text }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            let bodies = try #require(yours).get()
            #expect(bodies.count == 8)
            #expect(bodies.allSatisfy { Self.isOwn($0, of: "you") }, "\(bodies)")

            // `you`'s token expires too: its own refresh runs and ends while `me`'s is held.
            await origin.expireToken(of: "you")
            let renewed = await ending(within: .seconds(30), whenHung: "you's refresh waits for me's") {
                try await transport.data(for: Self.request("/renewed", as: "you", on: origin)).0.text
            }
            let renewedBody = try #require(renewed).get()
            #expect(Self.isOwn(renewedBody, of: "you", token: "t1"), "\(renewedBody)")
            #expect(client.tokens.refreshes(of: "you") == 1)
            #expect(client.accounts.credential(for: "you")?.token == "you-t1")
            // `me` still waits: not renewed, not sent again (its refusal and `you`'s answer).
            #expect(client.accounts.credential(for: "me")?.token == "me-t0")
            #expect(await origin.hits("/mail?token=account") == 2)

            await origin.openGate("me")
            let end = try await Self.ends(of: [mine])
            #expect(end.allSatisfy { $0.answer.map { Self.isOwn($0, of: "me", token: "t1") } == true }, "\(end)")
            #expect(client.tokens.refreshes(of: "me") == 1)
            #expect(client.tokens.refreshes(of: "you") == 1)
            #expect(await origin.hits("/mail?token=account") == 3)
            #expect(await origin.requests(carrying: "X-Cache-Account") == 0)
        }
    }

    @Test("a burst of one account's refusals makes exactly one refresh of it, and its entries are kept through it")
    func oneRefreshPerBurstOfRefusals() async throws {
        try await withOrigin { origin in
            let client = try await Self.client(on: origin)
            let transport = client.transport
            let kept = Self.request("/kept?stable=1", as: "me", on: origin)
            let before = try await transport.data(for: kept).0
            #expect(Self.isOwn(before.text, of: "me"))

            let events = transport.events()
            await origin.expireToken(of: "me")
            await origin.closeGate("me")
            await origin.closeGate("sent")
            // Distinct URLs, each a fetch of its own, as many as the host takes at once: all go out
            // with the expired token and are held on the way, then refused together.
            let burst = (0..<6).map { item in
                Task {
                    let request = Self.request("/burst/\(item)?gate=sent", as: "me", on: origin)
                    return await CallEnd { try await transport.data(for: request) }
                }
            }
            try await Self.until("the burst held at the origin") {
                await origin.waitUntilHeld(atGate: "sent", count: burst.count)
            }
            await origin.openGate("sent")
            // Every one refused while the refresh is held: each asks the account for a new token.
            try await Self.waitForRefusals(burst.count, in: events)
            try await Self.until("me's refresh held at the origin") { await origin.waitUntilHeld(atGate: "me") }
            let (held, _, heldOutcome) = try await transport.response(for: kept)
            #expect(held == before)
            #expect(heldOutcome.isFromMemory)

            await origin.openGate("me")
            let ends = try await Self.ends(of: burst)
            let others = ends.filter { $0.answer.map { Self.isOwn($0, of: "me", token: "t1") } != true }
            #expect(others.isEmpty, "\(others)")
            #expect(client.tokens.refreshes(of: "me") == 1)
            #expect(await origin.hits(path: "/token") == 1)
            #expect(await origin.currentToken(of: "me") == "me-t1")

            // The renewal kept the account's entries: a hit, with no request to the origin.
            let (after, _, outcome) = try await transport.response(for: kept)
            #expect(after == before)
            #expect(outcome.isFromMemory)
            #expect(await origin.hits("/kept?stable=1&token=account") == 1)
            #expect(client.tokens.refreshes(of: "you") == 0)
            #expect(await origin.requests(carrying: "X-Cache-Account") == 0)
        }
    }

    @Test("signing one account out while its refresh is held fails its waiting callers and leaves nothing of it")
    func signOutDuringHeldRefresh() async throws {
        try await withOrigin { origin in
            let client = try await Self.client(on: origin)
            let transport = client.transport
            for account in Self.names {
                _ = try await transport.data(for: Self.request("/inbox?stable=1", as: account, on: origin))
                try transport.store(
                    ProvisionalAnswer(
                        for: Self.request("/draft", as: account, on: origin), data: Data("stored for \(account)".utf8)))
            }
            #expect(transport.snapshot().entries.count { $0.partition == "me" } == 2)

            let events = transport.events()
            await origin.expireToken(of: "me")
            await origin.closeGate("me")
            await origin.closeGate("sent")
            // Fetches that went out with the expired token before its refresh began, held on the
            // way: three, so that the write and the refresh find room on the host too.
            let fetches = (0..<3).map { item in
                Task {
                    let request = Self.request("/wait/\(item)?gate=sent", as: "me", on: origin)
                    return await CallEnd { try await transport.data(for: request) }
                }
            }
            try await Self.until("me's fetches held at the origin") {
                await origin.waitUntilHeld(atGate: "sent", count: fetches.count)
            }
            // A write, never stored, waits for the refresh in the account, not among the fetches a
            // sign-out drops: refused first, it starts the refresh, which the origin holds.
            let write = Task {
                let request = Self.request("/outbox", as: "me", method: "POST", on: origin)
                return await CallEnd { try await transport.data(for: request) }
            }
            try await Self.until("me's refresh held at the origin") { await origin.waitUntilHeld(atGate: "me") }
            // Then the fetches are refused, and wait for that refresh too.
            await origin.openGate("sent")
            try await Self.waitForRefusals(fetches.count, in: events)

            transport.signOut(partition: "me")
            let ends = try await Self.ends(of: [write] + fetches)
            #expect(ends.allSatisfy { $0 == .authentication(.signedOut) }, "\(ends)")
            #expect(!transport.snapshot().entries.contains { $0.partition == "me" })
            #expect(client.accounts.credential(for: "me") == nil)
            #expect(client.accounts.signedInAccounts == ["you"])

            // `you` goes on while `me`'s refresh is still held: its entries, and the origin.
            let inbox = Self.request("/inbox?stable=1", as: "you", on: origin)
            let (_, _, inboxOutcome) = try await transport.response(for: inbox)
            #expect(inboxOutcome.isFromMemory)
            #expect(
                try await transport.data(for: Self.request("/draft", as: "you", on: origin)).0.text == "stored for you")
            let fresh = try await transport.data(for: Self.request("/fresh", as: "you", on: origin)).0.text
            #expect(Self.isOwn(fresh, of: "you"), "\(fresh)")
            #expect(transport.snapshot().entries.count { $0.partition == "you" } == 3)

            // A new call of `me` fails at once, sending nothing.
            let sent = await origin.totalHits
            let again = await CallEnd {
                try await transport.data(for: Self.request("/inbox?stable=1", as: "me", on: origin))
            }
            #expect(again == .authentication(.signedOut))
            #expect(await origin.totalHits == sent)

            // `me`'s refresh runs to its end, and its token signs nobody in again.
            await origin.openGate("me")
            try await Self.until("me's refresh ended") { await client.tokens.waitUntilIdle() }
            #expect(client.tokens.refreshes(of: "me") == 1)
            #expect(client.accounts.credential(for: "me") == nil)
            #expect(!transport.snapshot().entries.contains { $0.partition == "me" })
            let late = await CallEnd {
                try await transport.data(for: Self.request("/inbox?stable=1", as: "me", on: origin))
            }
            #expect(late == .authentication(.signedOut))
            #expect(await origin.requests(carrying: "X-Cache-Account") == 0)
        }
    }

    @Test("the account a request names never reaches the origin, whichever call sends it")
    func accountNameStaysInTheTransport() async throws {
        try await withOrigin { origin in
            let client = try await Self.client(on: origin)
            let transport = client.transport
            for account in Self.names {
                let screen = Self.request("/screen", as: account, on: origin)
                _ = try await transport.data(for: screen)
                _ = try await transport.refresh(screen)
                _ = try await transport.value(String.self, for: screen, decoder: BodyTextDecoder())
                _ = try await transport.prefetch(Self.request("/ahead", as: account, on: origin)).outcome
                _ = try await transport.data(for: Self.request("/notes", as: account, method: "POST", on: origin))
                _ = try await transport.optimisticUpdate(
                    [ProvisionalAnswer(for: screen, data: Data("stored for \(account)".utf8))],
                    write: {
                        try await transport.data(for: Self.request("/edit", as: account, method: "POST", on: origin))
                    })
                // Refused, refreshed and sent again.
                await origin.expireToken(of: account)
                let resent = try await transport.data(for: Self.request("/resent", as: account, on: origin)).0.text
                #expect(Self.isOwn(resent, of: account, token: "t1"), "\(resent)")
            }
            #expect(client.tokens.refreshes == 2)
            #expect(await origin.requests(carrying: "X-Cache-Account") == 0)
            // Every request but the refreshes' own went out with its account's credential.
            let refreshes = await origin.hits(path: "/token")
            #expect(await origin.requests(carrying: "X-Account") == (await origin.totalHits) - refreshes)
        }
    }
}
