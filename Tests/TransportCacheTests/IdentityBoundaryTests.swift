import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

/// The identity configurations a screen's plain request (a URL, no `Authorization`) meets.
enum IdentityConfiguration: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case none, adapter, authenticator, partitions

    var testDescription: String { rawValue }

    /// A transport over `origin` in this configuration, with the credentials it holds (`me-1`).
    func transport(
        _ origin: ScriptedOrigin, authenticator: TokenAuthenticator = TokenAuthenticator(),
        _ configure: (inout CachedTransport.Configuration) -> Void = { _ in }
    ) -> (CachedTransport, Credentials<TokenAuthenticator>?) {
        var credentials: Credentials<TokenAuthenticator>?
        switch self {
        case .none, .adapter: break
        case .authenticator: credentials = Credentials(authenticator, credential: "me-1")
        case .partitions:
            credentials = Credentials(
                authenticator, credential: "me-1", partition: { TokenAuthenticator.account(of: $0) })
        }
        let transport = makeTransport(loader: origin) { configuration in
            if let credentials { configuration.authenticate(with: credentials) }
            if self == .adapter {
                configuration.requestAdapters = [
                    .keyed { $0.setValue("de", forHTTPHeaderField: "Accept-Language") },
                    RequestAdapter { request in
                        var request = request
                        request.setValue("4.2", forHTTPHeaderField: "X-App-Version")
                        return request
                    },
                ]
            }
            configuration.queryEndpoints = [.pathPrefix("/search")]
            configure(&configuration)
        }
        return (transport, credentials)
    }
}

@Suite("One boundary: every call keys a screen's plain request as data(for:) does")
struct IdentityBoundaryTests {
    let base = "https://api.example.com"

    func origin() -> ScriptedOrigin {
        authenticatingOrigin(accepting: Locked(["-", "Bearer me-1", "Bearer me-2"]))
    }

    @Test("invalidate(request) drops the entry data(for:) stored", arguments: IdentityConfiguration.allCases)
    func invalidateByRequest(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = request("\(base)/feed")
        _ = try await transport.data(for: plain)
        transport.invalidate(plain)
        #expect(transport.statistics.entries == 0)
        _ = try await transport.data(for: plain)
        #expect(origin.callCount == 2)
    }

    @Test("store(_:) writes the entry data(for:) reads, and no other", arguments: IdentityConfiguration.allCases)
    func storeIsRead(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = request("\(base)/feed")
        try transport.store(ProvisionalAnswer(for: plain, data: Data("stored".utf8)))
        #expect(try await transport.data(for: plain).0.text == "stored")
        #expect(origin.callCount == 0)
        #expect(transport.snapshot().entries.count == 1)
    }

    @Test("an optimistic update shows where data(for:) looks", arguments: IdentityConfiguration.allCases)
    func optimisticUpdateIsShown(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = request("\(base)/feed")
        _ = try await transport.data(for: plain)
        let written = Gate()
        let update = Task {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: plain, data: Data("provisional".utf8))], write: { try await written.wait() })
        }
        await written.waitForArrivals(1)
        #expect(try await transport.data(for: plain).0.text == "provisional")
        #expect(transport.snapshot().entries.count == 1)
        written.open()
        try await update.value
    }

    @Test("cachedValue finds what value(_:for:) fetched", arguments: IdentityConfiguration.allCases)
    func cachedValueAfterValue(identity: IdentityConfiguration) async throws {
        let origin = ScriptedOrigin { _, _ in ScriptedOrigin.Reply(text: "\"article\"") }
        let (transport, _) = identity.transport(origin)
        let plain = request("\(base)/article")
        #expect(try await transport.value(String.self, for: plain) == "article")
        #expect(try transport.cachedValue(String.self, for: plain)?.value == "article")
        #expect(origin.callCount == 1)
    }

    @Test("refresh, tagged fetches and query POSTs share the key", arguments: IdentityConfiguration.allCases)
    func refreshTagsAndQueries(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, _) = identity.transport(origin)
        let plain = request("\(base)/feed")
        _ = try await transport.data(for: plain, tags: ["feed"])
        let refreshed = try await transport.refresh(plain).0
        #expect(try await transport.data(for: plain).0 == refreshed)
        #expect(origin.callCount == 2)
        #expect(transport.invalidate(tag: "feed") == 1)

        var query = request("\(base)/search", method: "POST")
        query.httpBody = Data("q=1".utf8)
        _ = try await transport.data(for: query)
        _ = try await transport.data(for: query)
        #expect(origin.callCount(for: "\(base)/search", method: "POST") == 1)
    }

    @Test(
        "what the app stored is gone after signing out as the README shows: the next request goes to the origin",
        arguments: [IdentityConfiguration.authenticator, .partitions])
    func signOutLeavesNoStoredAnswer(identity: IdentityConfiguration) async throws {
        let origin = origin()
        let (transport, credentials) = identity.transport(origin)
        let plain = request("\(base)/inbox")
        try transport.store(ProvisionalAnswer(for: plain, data: Data("mine".utf8)))
        credentials?.credential = nil
        if identity == .partitions {
            transport.signOut(partition: "me")
            #expect(transport.snapshot().entries.isEmpty)
        }
        let answer = try await transport.data(for: plain).0.text
        #expect(answer.contains("auth=-"))
        #expect(origin.callCount == 1)
    }

    @Test("snapshot() shows each entry's partition")
    func snapshotShowsPartitions() async throws {
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin())
        _ = try await transport.data(for: request("\(base)/feed"))
        credentials?.credential = "you-1"
        try transport.store(ProvisionalAnswer(for: request("\(base)/feed"), data: Data("yours".utf8)))
        #expect(Set(transport.snapshot().entries.map(\.partition)) == ["me", "you"])
        #expect(transport.snapshot().description.contains("[you] https://api.example.com/feed"))
    }

    @Test(
        "a hit is answered while a token refresh runs: the key holds the account, not the token",
        arguments: [IdentityConfiguration.authenticator, .partitions])
    func hitDuringRefresh(identity: IdentityConfiguration) async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1"])
        let origin = authenticatingOrigin(accepting: accepted)
        let refreshing = Gate()
        let authenticator = TokenAuthenticator { _, refresh in
            try await refreshing.wait()
            return "me-\(refresh + 1)"
        }
        let (transport, _) = identity.transport(origin, authenticator: authenticator)
        let kept = request("\(base)/kept")
        _ = try await transport.data(for: kept)
        accepted.withLock { $0 = ["Bearer me-2"] }
        let refused = Task { try await transport.data(for: request("\(self.base)/other")).0.text }
        await refreshing.waitForArrivals(1)
        #expect(try await transport.data(for: kept).0.text.contains("auth=Bearer me-1"))
        refreshing.open()
        #expect(try await refused.value.contains("auth=Bearer me-2"))
        // The refreshed token is the same account's: the entry is still read.
        _ = try await transport.data(for: kept)
        #expect(origin.callCount(for: "\(base)/kept") == 1)
    }
}

@Suite("The boundary's rules for bad input")
struct IdentityBadInputTests {
    let base = "https://api.example.com"

    @Test("a request carrying its own Authorization goes out as it is, keyed by that header, never refreshed")
    func ownAuthorization() async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-1", "Bearer app"]))
        let authenticator = TokenAuthenticator()
        let (transport, _) = IdentityConfiguration.partitions.transport(origin, authenticator: authenticator)
        let own = request("\(base)/feed", headers: ["Authorization": "Bearer app"])
        #expect(try await transport.data(for: own).0.text.contains("auth=Bearer app"))
        #expect(try await transport.data(for: request("\(base)/feed")).0.text.contains("auth=Bearer me-1"))
        let refused = request("\(base)/feed", headers: ["Authorization": "Bearer wrong"])
        #expect((try await transport.data(for: refused).1 as? HTTPURLResponse)?.statusCode == 401)
        #expect(authenticator.refreshes == 0)
        #expect(transport.snapshot().entries.map(\.partition).sorted { ($0 ?? "") < ($1 ?? "") } == [nil, "me"])
    }

    @Test("a partition closure that throws fails the requests of that credential: nothing sent or stored")
    func partitionThrows() async throws {
        struct Unreadable: Error {}
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-1"]))
        let credentials = Credentials(TokenAuthenticator(), credential: "me-1", partition: { _ in throw Unreadable() })
        let transport = makeTransport(loader: origin) { $0.authenticate(with: credentials) }
        let plain = request("\(base)/feed")
        await #expect {
            try await transport.data(for: plain)
        } throws: {
            ($0 as? AuthenticationError)?.code == .partitionUnavailable
                && ($0 as? AuthenticationError)?.underlyingError is Unreadable
        }
        #expect(throws: AuthenticationError.self) { try transport.cachedValue(String.self, for: plain) }
        #expect(throws: AuthenticationError.self) {
            try transport.store(ProvisionalAnswer(for: plain, data: Data()))
        }
        #expect(origin.callCount == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a partition closure that answers differently on two calls is read once per credential")
    func partitionReadOnce() async throws {
        let calls = Locked(0)
        let credentials = Credentials(
            TokenAuthenticator(), credential: "me-1",
            partition: { _ in
                calls.withLock { count in
                    count += 1
                    return "account-\(count)"
                }
            })
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-1"]))
        let transport = makeTransport(loader: origin) { $0.authenticate(with: credentials) }
        for _ in 0..<3 { _ = try await transport.data(for: request("\(base)/feed")) }
        #expect(origin.callCount == 1)
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("a sending adapter that changes a key header fails its request: nothing is sent")
    func sendingAdapterChangesKeyHeader() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok())
        let transport = makeTransport(loader: origin) { configuration in
            configuration.requestAdapters = [
                RequestAdapter { request in
                    var request = request
                    request.setValue("Bearer from-state", forHTTPHeaderField: "Authorization")
                    return request
                }
            ]
        }
        await #expect {
            try await transport.data(for: request("\(base)/feed"))
        } throws: { ($0 as? AuthenticationError)?.code == .identityChanged }
        #expect(origin.callCount == 0)
    }

    @Test("an adapter that changes the URL: keyed, every call finds the new URL; sending, the entry keeps the app's")
    func adapterChangesTheURL() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok())
        let rewrite: @Sendable (URLRequest) -> URLRequest = { request in
            var request = request
            request.url = URL(string: request.url!.absoluteString.replacingOccurrences(of: "/v1/", with: "/v2/"))
            return request
        }
        let keyed = makeTransport(loader: origin) { configuration in
            configuration.requestAdapters = [.keyed { $0 = rewrite($0) }]
        }
        let plain = request("\(base)/v1/feed")
        _ = try await keyed.data(for: plain)
        #expect(keyed.snapshot().entries.map(\.url.path) == ["/v2/feed"])
        keyed.invalidate(plain)
        #expect(keyed.statistics.entries == 0)

        let sending = makeTransport(loader: origin) { configuration in
            configuration.requestAdapters = [RequestAdapter { rewrite($0) }]
        }
        _ = try await sending.data(for: plain)
        #expect(sending.snapshot().entries.map(\.url.path) == ["/v1/feed"])
        #expect(origin.calls.map { $0.url!.path } == ["/v2/feed", "/v2/feed"])
        _ = try await sending.data(for: plain)
        #expect(origin.callCount == 2)
    }
}

@Suite("The token refresh under cancellation and account switches", .timeLimit(.minutes(1)))
struct RefreshSeamTests {
    let base = "https://api.example.com"

    @Test(
        "a refresh every waiter left never fails a later request, whose refusal goes out again only with a newer credential"
    )
    func abandonedRefresh() async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-2"]))
        let refreshing = Gate()
        let (windingDown, windDown) = AsyncStream<CheckedContinuation<Void, Never>>.makeStream()
        let authenticator = TokenAuthenticator { _, refresh in
            guard refresh == 1 else { return "me-2" }
            do {
                try await refreshing.wait()
            } catch {
                // Abandoned: the token request winds down as URLSession's does, then says cancelled.
                await withCheckedContinuation { windDown.yield($0) }
                throw URLError(.cancelled)
            }
            return "me-9"
        }
        let (transport, _) = IdentityConfiguration.authenticator.transport(origin, authenticator: authenticator)
        let dismissed = Task { try await transport.data(for: request("\(self.base)/dismissed")) }
        await refreshing.waitForArrivals(1)
        dismissed.cancel()
        var iterator = windingDown.makeAsyncIterator()
        let stillWindingDown = await iterator.next()
        // Refused with me-1 while the abandoned refresh winds down: a new refresh, then me-2.
        let next = try await transport.data(for: request("\(base)/next")).0.text
        #expect(next.contains("auth=Bearer me-2"))
        #expect(authenticator.refreshes == 2)
        stillWindingDown?.resume()
        await #expect(throws: CancellationError.self) { try await dismissed.value }
        #expect(origin.calls.filter { $0.value(forHTTPHeaderField: "Authorization") == "Bearer me-1" }.count == 2)
    }

    @Test(
        "another account's credential, or a sign-out, ends the old account's refresh: the new account never waits for it",
        arguments: [false, true])
    func accountSwitchEndsTheRefresh(signsOut: Bool) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer you-1"]))
        let refreshing = Gate()
        let authenticator = TokenAuthenticator { _, _ in
            try await refreshing.wait()
            throw URLError(.badServerResponse)
        }
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin, authenticator: authenticator)
        let old = Task { try await transport.data(for: request("\(self.base)/mine")) }
        await refreshing.waitForArrivals(1)
        credentials?.credential = "you-1"
        if signsOut { transport.signOut(partition: "me") }
        // The new account's first request goes out at once, with its own credential.
        #expect(try await transport.data(for: request("\(base)/yours")).0.text.contains("auth=Bearer you-1"))
        await refreshing.waitForCancellations(1)
        await #expect {
            try await old.value
        } throws: {
            [.identityChanged, .signedOut].contains(($0 as? AuthenticationError)?.code)
        }
        let sentAsTheNewAccount = origin.calls.contains { call in
            call.url!.path == "/mine" && call.value(forHTTPHeaderField: "Authorization") == "Bearer you-1"
        }
        #expect(!sentAsTheNewAccount)
    }
}

@Suite("Another account's credential set while a call of the old one runs", .timeLimit(.minutes(1)))
struct AccountSwitchTests {
    let base = "https://api.example.com"

    @Test(
        "an optimistic update's confirmed answers go under the account it began with, never the next one's",
        arguments: [IdentityConfiguration.authenticator, .partitions])
    func confirmedAnswersKeepTheirAccount(identity: IdentityConfiguration) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-1", "Bearer you-1"]))
        let (transport, credentials) = identity.transport(origin)
        let written = Gate()
        let update = Task {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: request("\(self.base)/draft"), data: Data("draft".utf8))],
                write: { try await written.wait() },
                confirmed: { _ in [ProvisionalAnswer(for: request("\(self.base)/me"), data: Data("mine".utf8))] })
        }
        await written.waitForArrivals(1)
        credentials?.credential = "you-1"
        written.open()
        _ = try? await update.value
        let yours = try await transport.data(for: request("\(base)/me")).0.text
        #expect(yours.contains("auth=Bearer you-1"))
    }

    @Test("a refused POST is never resent with another account's credential the app set meanwhile")
    func refusedPOSTKeepsItsAccount() async throws {
        let accepted = Locked<Set<String>>(["Bearer you-1"])
        let origin = authenticatingOrigin(accepting: accepted, gated: true)
        let (transport, credentials) = IdentityConfiguration.authenticator.transport(origin)
        var post = request("\(base)/messages", method: "POST")
        post.httpBody = Data("hello".utf8)
        let sent = Task { try await transport.data(for: post) }
        await origin.waitForCalls(1)
        credentials?.credential = "you-1"
        origin.openGate()
        await #expect {
            try await sent.value
        } throws: { ($0 as? AuthenticationError)?.code == .identityChanged }
        #expect(origin.calls.map { $0.value(forHTTPHeaderField: "Authorization") } == ["Bearer me-1"])
    }

    @Test("a partition signed out with its credential still set is neither sent nor refreshed again")
    func signedOutCredentialStaysOut() async throws {
        let accepted = Locked<Set<String>>(["Bearer you-1"])
        let origin = authenticatingOrigin(accepting: accepted)
        let refreshing = Gate()
        let authenticator = TokenAuthenticator { _, _ in
            try await refreshing.wait()
            return "me-2"
        }
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin, authenticator: authenticator)
        let refused = Task { try await transport.data(for: request("\(self.base)/feed")) }
        await refreshing.waitForArrivals(1)
        transport.signOut(partition: "me")
        await #expect(throws: AuthenticationError.self) { try await refused.value }
        await #expect {
            try await transport.data(for: request("\(self.base)/other"))
        } throws: { ($0 as? AuthenticationError)?.code == .signedOut }
        #expect(authenticator.refreshes == 1)
        credentials?.credential = "you-1"
        #expect(try await transport.data(for: request("\(base)/other")).0.text.contains("auth=Bearer you-1"))
    }
}

@Suite("Signing out with everything of the account in flight at once", .timeLimit(.minutes(1)))
struct SignOutInFlightTests {
    let base = "https://api.example.com"

    @Test(
        "a write, a revalidation and a refresh in flight at sign-out: none of them stores, the next account waits for none"
    )
    func signOutWithEverythingInFlight() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-1", "Bearer you-1"])
        let origin = ScriptedOrigin(
            respond: { request, call in
                let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
                guard accepted.withLock({ $0.contains(auth) }) else { return .init(status: 401, text: "refused") }
                return .init(text: "\(request.url!.path) auth=\(auth) call=\(call)")
            },
            holding: { $0.url!.path == "/feed" })
        let refreshing = Gate()
        let authenticator = TokenAuthenticator { _, _ in
            try await refreshing.wait()
            return "me-2"
        }
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin, authenticator: authenticator)
        {
            $0.minimumRevalidationInterval = .zero
        }
        _ = try await transport.data(for: request("\(base)/feed"))
        _ = try await transport.data(for: request("\(base)/profile"))

        // A write of the account's, pending; a revalidation of its feed, held at the origin; a
        // refresh of its token, held by the authenticator.
        let written = Gate()
        let write = Task {
            try await transport.optimisticUpdate(
                [ProvisionalAnswer(for: request("\(self.base)/profile"), data: Data("provisional".utf8))],
                write: { try await written.wait() })
        }
        await written.waitForArrivals(1)
        origin.closeGate()
        let revalidation = Task { await transport.revalidateAll() }
        await origin.waitForCalls(3)
        accepted.withLock { $0 = ["Bearer you-1"] }
        let refused = Task { try await transport.data(for: request("\(self.base)/inbox")) }
        await refreshing.waitForArrivals(1)

        credentials?.credential = "you-1"
        transport.signOut(partition: "me")
        await refreshing.waitForCancellations(1)
        #expect(try await transport.data(for: request("\(base)/yours")).0.text.contains("auth=Bearer you-1"))

        written.open()
        try await write.value
        origin.openGate()
        _ = await revalidation.value
        await #expect(throws: AuthenticationError.self) { try await refused.value }
        #expect(!transport.snapshot().entries.contains { $0.partition == "me" })
        #expect(transport.snapshot().entries.map(\.url.path) == ["/yours"])
    }
}
