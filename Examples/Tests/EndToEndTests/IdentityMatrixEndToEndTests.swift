import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheQueries

/// The plain request a screen holds (a URL, no `Authorization`) finds, drops and overwrites the
/// entry its own fetch stored, whatever shapes the key: nothing, adapters, a credential's account,
/// a partition, or the account it names among several. Every call keys it as the request that
/// goes to the network is keyed.
@Suite("Every call keys a request as the network will, in every identity configuration")
struct IdentityMatrixEndToEndTests {
    /// What a transport puts on the requests it keys and sends.
    enum Identity: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// No adapter, no credential.
        case none
        /// A keyed adapter (`Accept-Language: de`) and a sending one (`X-App-Version: 4.2`).
        case adapter
        /// The origin's bearer tokens, each credential an account of its own.
        case authenticator
        /// The origin's bearer tokens, partitioned by the account's name.
        case partitions
        /// The origin's bearer tokens of two accounts signed in at once, `me` and `you`; every
        /// request names `me`, so each call must find `me`'s credential and entries, never `you`'s.
        case accounts

        var testDescription: String { rawValue }

        var hasCredentials: Bool { self != .none && self != .adapter }

        /// The partition its entries are kept in.
        var partition: String? { self == .partitions || self == .accounts ? "me" : nil }

        /// The request a screen holds: the URL alone, naming its account when each request names
        /// one.
        func request(_ url: URL, method: String = "GET") -> URLRequest {
            var request = EndToEndTests.request(url, method: method)
            if self == .accounts { request.account = "me" }
            return request
        }

        /// `pathAndQuery` with `token=1` when the identity carries a credential, so the origin
        /// answers `200` only to a request that went out with the current token; without one the
        /// origin answers any request.
        func pathAndQuery(_ pathAndQuery: String) -> String {
            guard hasCredentials else { return pathAndQuery }
            return pathAndQuery + (pathAndQuery.contains("?") ? "&" : "?") + "token=1"
        }

        /// What the origin's body says of the `Authorization` the request went out with.
        var auth: String { hasCredentials ? "auth=Bearer t0" : "auth=-" }
    }

    /// A transport of one identity, with its tokens and credentials when it has them.
    struct Client: Sendable {
        let transport: CachedTransport
        let tokens: OriginTokens?
        let credentials: Credentials<OriginTokens>?
    }

    /// A transport for `origin` in the `identity` configuration; its credentials, if any, are
    /// account `me` with the origin's current token, refreshed from `tokenPath`.
    static func client(_ identity: Identity, on origin: LoopbackOrigin, tokenPath: String = "/token") async -> Client {
        var configuration = CachedTransport.Configuration()
        var tokens: OriginTokens?
        var credentials: Credentials<OriginTokens>?
        switch identity {
        case .none:
            break
        case .adapter:
            configuration.identity.requestAdapters = [
                .keyed { request in request.setValue("de", forHTTPHeaderField: "Accept-Language") },
                RequestAdapter { request in
                    var request = request
                    request.setValue("4.2", forHTTPHeaderField: "X-App-Version")
                    return request
                },
            ]
        case .authenticator, .partitions:
            let originTokens = OriginTokens(tokenURL: origin.url(tokenPath))
            let account = OriginAccount(name: "me", token: await origin.currentToken)
            let made =
                identity == .partitions
                ? Credentials(originTokens, credential: account, partition: { $0.name })
                : Credentials(originTokens, credential: account)
            configuration.identity.authenticate(with: made)
            tokens = originTokens
            credentials = made
        case .accounts:
            let originTokens = OriginTokens(tokenURL: origin.url(tokenPath))
            let accounts = Accounts(originTokens)
            // `you` holds a token of its own, so a request that went out with it would show.
            let me = OriginAccount(name: "me", token: await origin.currentToken)
            let you = OriginAccount(name: "you", token: await origin.currentToken(of: "you"))
            // Names without a comma, a control character or an outer space: never refused.
            try! accounts.setCredential(me, for: me.name)
            try! accounts.setCredential(you, for: you.name)
            configuration.identity.authenticate(with: accounts)
            tokens = originTokens
        }
        let transport = CachedTransport(configuration: configuration)
        tokens?.use(transport)
        return Client(transport: transport, tokens: tokens, credentials: credentials)
    }

    /// Checks that the latest request for `pathAndQuery` went out with what `identity` puts on it.
    static func expectSent(
        _ identity: Identity, _ pathAndQuery: String, to origin: LoopbackOrigin,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let header = { (name: String) in await origin.lastRequestHeader(name, for: pathAndQuery) }
        let adapted = identity == .adapter
        // URLSession sends an `Accept-Language` of its own when the request has none.
        let language = await header("Accept-Language")
        #expect(adapted ? language == "de" : language != "de", sourceLocation: sourceLocation)
        #expect(await header("X-App-Version") == (adapted ? "4.2" : nil), sourceLocation: sourceLocation)
        let authorization = identity.hasCredentials ? "Bearer t0" : nil
        #expect(await header("Authorization") == authorization, sourceLocation: sourceLocation)
        #expect(await header("X-Account") == (identity.hasCredentials ? "me" : nil), sourceLocation: sourceLocation)
        // The account a request names is the transport's to read: it never goes out.
        #expect(await header("X-Cache-Account") == nil, sourceLocation: sourceLocation)
    }

    static func status(_ response: URLResponse) -> Int? { (response as? HTTPURLResponse)?.statusCode }

    // MARK: - Every identity

    @Test(
        "invalidate(plain request) drops the entry its fetch stored; the next fetch reaches the origin",
        arguments: Identity.allCases)
    func invalidatePlainRequest(identity: Identity) async throws {
        try await withOrigin { origin in
            let transport = await Self.client(identity, on: origin).transport
            let path = identity.pathAndQuery("/list?stable=1")
            let plain = identity.request(origin.url(path))
            let (fetched, response) = try await transport.data(for: plain)
            #expect(Self.status(response) == 200)
            #expect(fetched.text.hasSuffix(identity.auth))
            await Self.expectSent(identity, path, to: origin)
            // Held under the key the plain request makes: answered from memory.
            #expect(try await transport.data(for: plain).0 == fetched)
            #expect(await origin.hits(path) == 1)
            #expect(transport.statistics.entries == 1)

            transport.invalidate(plain)
            #expect(transport.statistics.entries == 0)
            let (refetched, refetchedResponse) = try await transport.data(for: plain)
            #expect(Self.status(refetchedResponse) == 200)
            #expect(refetched == fetched)
            #expect(await origin.hits(path) == 2)
        }
    }

    @Test(
        "store(plain request) is what the next fetch of it answers, from memory, in one entry",
        arguments: Identity.allCases)
    func storePlainRequest(identity: Identity) async throws {
        try await withOrigin { origin in
            let transport = await Self.client(identity, on: origin).transport
            let path = identity.pathAndQuery("/profile?stable=1")
            let plain = identity.request(origin.url(path))
            try transport.store(ProvisionalAnswer(for: plain, data: Data("stored".utf8)))
            let (data, response) = try await transport.data(for: plain)
            #expect(Self.status(response) == 200)
            #expect(data.text == "stored")
            #expect(await origin.totalHits == 0)
            let entries = transport.snapshot().entries
            #expect(entries.count == 1)
            #expect(entries.first?.partition == identity.partition)
        }
    }

    @Test(
        "an optimistic update of the plain request shows while its write is pending, then the origin's answer",
        arguments: Identity.allCases)
    func optimisticUpdatePlainRequest(identity: Identity) async throws {
        try await withOrigin { origin in
            let transport = await Self.client(identity, on: origin).transport
            let path = identity.pathAndQuery("/articles")
            let plain = identity.request(origin.url(path))
            #expect(try await transport.data(for: plain).0.text.hasSuffix("\(identity.auth) hit=1"))

            await origin.closeGate()
            let write = identity.request(origin.url("/write?gate=1"), method: "POST")
            let update = Task {
                try await transport.optimisticUpdate(
                    [ProvisionalAnswer(for: plain, data: Data("provisional".utf8))],
                    write: { try await transport.data(for: write).0 })
            }
            // The provisional answer is shown before the write starts; the write is held.
            await origin.waitForHits("/write?gate=1", count: 1)
            let (shown, response) = try await transport.data(for: plain)
            #expect(Self.status(response) == 200)
            #expect(shown.text == "provisional")
            #expect(await origin.hits(path) == 1)

            await origin.openGate()
            _ = try await update.value
            // Settled by a refetch of the same key, which a plain fetch then finds in memory.
            #expect(await origin.hits(path) == 2)
            #expect(try await transport.data(for: plain).0.text.hasSuffix("\(identity.auth) hit=2"))
            #expect(await origin.hits(path) == 2)
            await Self.expectSent(identity, path, to: origin)
        }
    }

    @Test(
        "value(_:for:) of the plain request is then cachedValue(_:for:) of it, from memory",
        arguments: Identity.allCases)
    func cachedValueOfPlainRequest(identity: Identity) async throws {
        try await withOrigin { origin in
            let transport = await Self.client(identity, on: origin).transport
            let path = identity.pathAndQuery("/settings?stable=1")
            let plain = identity.request(origin.url(path))
            // The origin's bodies are text, not JSON: decoded as their text.
            let decoder = BodyTextDecoder()
            let value = try await transport.value(String.self, for: plain, decoder: decoder)
            #expect(value.hasSuffix(identity.auth))
            let cached = try transport.cachedValue(String.self, for: plain, decoder: decoder)
            #expect(cached?.value == value)
            #expect(cached?.outcome.isFromMemory == true)
            #expect(await origin.hits(path) == 1)
        }
    }

    @MainActor
    @Test(
        "a query of the plain request shows what memory holds in its first frame, without fetching",
        arguments: Identity.allCases)
    func queryFirstFrame(identity: Identity) async throws {
        try await withOrigin { origin in
            let transport = await Self.client(identity, on: origin).transport
            let path = identity.pathAndQuery("/feed?stable=1")
            let plain = identity.request(origin.url(path))
            let (fetched, _) = try await transport.data(for: plain)
            #expect(fetched.text.hasSuffix(identity.auth))

            let query = CachedQuery(String.self, for: plain, in: transport, decoder: BodyTextDecoder())
            #expect(query.status == .loaded)
            #expect(!query.isFetching)
            #expect(query.value == fetched.text)
            #expect(query.outcome?.isFromMemory == true)
            await query.waitForFetches()
            #expect(await origin.hits(path) == 1)
        }
    }

    @Test(
        "refresh(plain request) reaches the origin; the next fetch of it is a hit with the refreshed bytes",
        arguments: Identity.allCases)
    func refreshPlainRequest(identity: Identity) async throws {
        try await withOrigin { origin in
            let transport = await Self.client(identity, on: origin).transport
            let path = identity.pathAndQuery("/inbox")
            let plain = identity.request(origin.url(path))
            #expect(try await transport.data(for: plain).0.text.hasSuffix("\(identity.auth) hit=1"))

            let (refreshed, response) = try await transport.refresh(plain)
            #expect(Self.status(response) == 200)
            #expect(refreshed.text.hasSuffix("\(identity.auth) hit=2"))
            #expect(await origin.hits(path) == 2)
            await Self.expectSent(identity, path, to: origin)

            let (next, _, outcome) = try await transport.response(for: plain)
            #expect(next == refreshed)
            #expect(outcome.isFromMemory)
            #expect(await origin.hits(path) == 2)
            #expect(transport.statistics.entries == 1)
        }
    }

    @Test("a tagged fetch of the plain request is dropped by its tag", arguments: Identity.allCases)
    func taggedPlainRequest(identity: Identity) async throws {
        try await withOrigin { origin in
            let transport = await Self.client(identity, on: origin).transport
            let path = identity.pathAndQuery("/tagged?stable=1")
            let plain = identity.request(origin.url(path))
            let (fetched, response) = try await transport.data(for: plain, tags: ["t"])
            #expect(Self.status(response) == 200)
            #expect(fetched.text.hasSuffix(identity.auth))
            #expect(try await transport.data(for: plain).0 == fetched)
            #expect(await origin.hits(path) == 1)

            #expect(transport.invalidate(tag: "t") == 1)
            #expect(transport.statistics.entries == 0)
            _ = try await transport.data(for: plain)
            #expect(await origin.hits(path) == 2)
        }
    }

    // MARK: - Partitions

    @Test("signing out drops what store wrote for the plain request; the same account signed in again finds nothing")
    func signOutDropsStoredAnswer() async throws {
        try await withOrigin { origin in
            let client = await Self.client(.partitions, on: origin)
            let transport = client.transport
            let credentials = try #require(client.credentials)
            // No token=1: the origin answers it signed in and signed out.
            let path = "/profile?stable=1"
            let plain = URLRequest(url: origin.url(path))
            try transport.store(ProvisionalAnswer(for: plain, data: Data("stored".utf8)))
            #expect(transport.snapshot().entries.map(\.partition) == ["me"])
            #expect(try await transport.data(for: plain).0.text == "stored")

            credentials.credential = nil
            transport.signOut(partition: "me")
            #expect(!transport.snapshot().entries.contains { $0.partition == "me" })
            let (signedOut, response) = try await transport.data(for: plain)
            #expect(Self.status(response) == 200)
            #expect(signedOut.text == "path=/profile query=stable=1 version=0 auth=-")
            #expect(await origin.hits(path) == 1)

            // What the account held went with its sign-out: signed in again, it fetches.
            credentials.credential = OriginAccount(name: "me", token: await origin.currentToken)
            let (signedIn, signedInResponse) = try await transport.data(for: plain)
            #expect(Self.status(signedInResponse) == 200)
            #expect(signedIn.text == "path=/profile query=stable=1 version=0 auth=Bearer t0")
            #expect(await origin.hits(path) == 2)
        }
    }

    @Test("a hit is answered while a token refresh is held; the refused request then goes out with the new token")
    func hitDuringRefresh() async throws {
        try await withOrigin { origin in
            let client = await Self.client(.partitions, on: origin, tokenPath: "/token?gate=1")
            let transport = client.transport
            let tokens = try #require(client.tokens)
            let kept = URLRequest(url: origin.url("/kept?token=1&stable=1"))
            let before = try await transport.data(for: kept).0
            #expect(before.text.hasSuffix("auth=Bearer t0"))

            await origin.expireToken()
            await origin.closeGate()
            let refused = Task { try await transport.data(from: origin.url("/other?token=1")).0.text }
            // Refused with the expired token: its refresh is held at the origin.
            await origin.waitForHits("/token?gate=1", count: 1)
            #expect(await origin.hits("/other?token=1") == 1)
            #expect(tokens.refreshes == 1)

            let hit = await ending(within: .seconds(30)) {
                let (data, _, outcome) = try await transport.response(for: kept)
                return (data, outcome)
            }
            let (data, outcome) = try #require(try hit?.get())
            #expect(data == before)
            #expect(outcome.isFromMemory)
            #expect(await origin.hits("/kept?token=1&stable=1") == 1)
            #expect(await origin.hits(path: "/token") == 1)

            await origin.openGate()
            // The token after the one that expired (`expireToken()` counts as one the origin made).
            let resent = try await refused.value
            #expect(resent.hasSuffix("auth=Bearer \(await origin.currentToken) hit=2"), "\(resent)")
            #expect(await origin.currentToken == "t2")
            #expect(await origin.hits("/other?token=1") == 2)
            #expect(tokens.refreshes == 1)
        }
    }
}
