import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache

/// A refresh against an authorization server that rotates refresh tokens: each refresh revokes
/// the refresh token it presents, so a second refresh that starts before the first has answered
/// presents a revoked token and is refused, and the user is signed out for nothing. The transport
/// must therefore let a refresh run to its end, even when every caller waiting for it has left
/// (the server carries it out whatever the client does), make its answer the credential, and
/// let a request refused meanwhile wait for that refresh instead of starting another.
@Suite("A refresh runs to its end, one at a time, against an origin that rotates refresh tokens")
struct RefreshRotationEndToEndTests {
    /// Signed in to the rotating origin as account `me`, with an access token the origin has
    /// already expired, on a transport keyed by account whose refreshes wait at the origin's gate
    /// `token` and go through `session`, the app's own.
    static func signedIn(on origin: LoopbackOrigin, session: URLSession) async -> (
        tokens: RotatingTokens, credentials: Credentials<RotatingTokens>, transport: CachedTransport
    ) {
        let grant = await origin.signIn()
        await origin.expireToken()
        let tokens = RotatingTokens(session: session, tokenURL: origin.url("/token?rotate=1&gate=token"))
        let credentials = Credentials(
            tokens, credential: Grant(account: "me", accessToken: grant.accessToken, refreshToken: grant.refreshToken),
            partition: { $0.account })
        var configuration = CachedTransport.Configuration()
        configuration.identity.authenticate(with: credentials)
        return (tokens, credentials, CachedTransport(configuration: configuration))
    }

    /// Waits until the transport has had `path`'s `401`: from there it either joins the refresh
    /// under way or starts another, and another reaches the origin, whose count the test reads.
    static func refusal(of path: String, in events: CacheEvents) async {
        for await event in events where event.url.path == path {
            if case .fetchEnded(status: 401, _, _) = event.kind { return }
        }
    }

    @Test(
        "a refresh every caller left still runs to its end and becomes the credential; a request refused meanwhile joins it: the origin sees one refresh"
    )
    func abandonedRefreshRunsToItsEnd() async throws {
        try await withOrigin { origin in
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let (tokens, credentials, transport) = await Self.signedIn(on: origin, session: session)
            let signedIn = try #require(credentials.credential)
            await origin.closeGate("token")
            await origin.closeGate("later")
            // Sent before any refresh starts, so that it goes out with the expired token and is
            // refused, whatever the transport does with requests made during a refresh.
            let later = Task {
                await CallEnd { try await transport.data(from: origin.url("/later?token=1&gate=later")) }
            }
            await origin.waitForHits("/later?token=1&gate=later", count: 1)
            let first = Task { await CallEnd { try await transport.data(from: origin.url("/first?token=1")) } }
            await origin.waitForHits(path: "/token", count: 1)

            // Its only caller leaves while the origin holds the refresh: the caller ends at once.
            first.cancel()
            let left = try await ending(within: .seconds(30)) { await first.value }?.get()
            #expect(left == .cancelled)

            let events = transport.events()
            await origin.openGate("later")
            _ = await ending(within: .seconds(30)) { await Self.refusal(of: "/later", in: events) }
            await origin.openGate("token")
            let answer = try await ending(within: .seconds(30)) { await later.value }?.get()

            let answers = await origin.refreshAnswers
            #expect(answers.count == 1, "refreshes the origin answered: \(answers)")
            #expect(tokens.refreshes == 1)
            #expect(await origin.overlappingRefreshes == 0)
            let issued = try #require(answers.first)
            #expect(issued.presented == signedIn.refreshToken)
            // The one refresh's answer is the credential, and the refused request went out with it.
            #expect(credentials.credential?.accessToken == issued.accessToken)
            #expect(credentials.credential?.refreshToken == issued.refreshToken)
            #expect(
                answer?.answer?.contains("auth=Bearer \(issued.accessToken ?? "?")") == true,
                "\(String(describing: answer))")
        }
    }

    @Test(
        "a credential the app sets while a refresh runs stays: the refresh's answer does not replace it, and the next refresh presents the app's refresh token"
    )
    func credentialSetDuringRefreshStays() async throws {
        try await withOrigin { origin in
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let (tokens, credentials, transport) = await Self.signedIn(on: origin, session: session)
            let signedIn = try #require(credentials.credential)
            await origin.closeGate("token")
            let caller = Task { await CallEnd { try await transport.data(from: origin.url("/a?token=1")) } }
            await origin.waitForHits(path: "/token", count: 1)

            // The user signs in again meanwhile: another grant of the same account.
            let again = await origin.signIn()
            let appSet = Grant(account: "me", accessToken: again.accessToken, refreshToken: again.refreshToken)
            credentials.credential = appSet
            await origin.openGate("token")
            // The waiting caller goes out with the credential the app set.
            let end = try await ending(within: .seconds(30)) { await caller.value }?.get()
            #expect(end?.answer?.contains("auth=Bearer \(again.accessToken)") == true, "\(String(describing: end))")

            // Once the refresh has ended on both sides, its answer has been taken or dropped.
            await origin.waitForRefreshAnswers(count: 1)
            _ = await ending(within: .seconds(30)) {
                var ended = tokens.endedRefreshes.makeAsyncIterator()
                await ended.next()
            }
            #expect(credentials.credential == appSet)

            // The next refresh starts from the grant the app set, not from the one the dropped
            // answer carried, which the app never saw.
            await origin.expireToken()
            let next = try await ending(within: .seconds(30)) {
                await CallEnd { try await transport.data(from: origin.url("/b?token=1")) }
            }?.get()
            let answers = await origin.refreshAnswers
            #expect(answers.map(\.presented) == [signedIn.refreshToken, again.refreshToken], "\(answers)")
            let refreshed = try #require(answers.last?.accessToken)
            #expect(credentials.credential?.accessToken == refreshed)
            #expect(next?.answer?.contains("auth=Bearer \(refreshed)") == true, "\(String(describing: next))")
            #expect(await origin.overlappingRefreshes == 0)
        }
    }

    @Test(
        "several accounts: a refresh token revoked behind the app's back fails every waiting request of its account alone with refreshFailed; the other account refreshes and is answered"
    )
    func revokedRefreshTokenFailsOnlyItsAccount() async throws {
        try await withOrigin { origin in
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let mine = await origin.signIn()
            let yours = await origin.signIn()
            // Another device of the same user refreshed mine first: the refresh token the app
            // holds for it is revoked.
            var revoking = URLRequest(url: origin.url("/token?rotate=1"))
            revoking.httpMethod = "POST"
            revoking.httpBody = Data("grant_type=refresh_token&refresh_token=\(mine.refreshToken)".utf8)
            _ = try await session.data(for: revoking)
            // Both access tokens expire.
            await origin.expireToken()

            // Refreshes wait at the gate: every request of an account is refused meanwhile or
            // waits for its refresh, one burst.
            await origin.closeGate("token")
            let tokens = RotatingTokens(session: session, tokenURL: origin.url("/token?rotate=1&gate=token"))
            let accounts = Accounts(tokens)
            try accounts.setCredential(
                Grant(account: "me", accessToken: mine.accessToken, refreshToken: mine.refreshToken), for: "me")
            try accounts.setCredential(
                Grant(account: "you", accessToken: yours.accessToken, refreshToken: yours.refreshToken), for: "you")
            var configuration = CachedTransport.Configuration()
            configuration.identity.authenticate(with: accounts)
            let transport = CachedTransport(configuration: configuration)

            let calls = (0..<6).map { index in
                let account = index % 2 == 0 ? "me" : "you"
                var request = URLRequest(url: origin.url("/feed/\(index)?token=1"))
                request.account = account
                return (account, Task { [request] in await CallEnd { try await transport.data(for: request) } })
            }
            // Both accounts' refreshes have reached the origin (beside the revoking one): every
            // request has been refused, or waits for its account's refresh.
            _ = try #require(await ending(within: .seconds(30)) { await origin.waitForHits(path: "/token", count: 3) })
            await origin.openGate("token")
            var ends: [(String, CallEnd)] = []
            for (account, call) in calls {
                let end = try #require(try await ending(within: .seconds(30)) { await call.value }?.get())
                ends.append((account, end))
            }
            let answers = await origin.refreshAnswers
            let yourRefresh = try #require(answers.first { $0.presented == yours.refreshToken }?.accessToken)
            for (account, end) in ends {
                if account == "me" {
                    #expect(end == .authentication(.refreshFailed), "\(end)")
                } else {
                    #expect(end.answer?.contains("auth=Bearer \(yourRefresh)") == true, "\(end)")
                }
            }
            // One refresh of each account for the burst: mine presented the revoked token once.
            #expect(answers.filter { $0.presented == mine.refreshToken }.count == 2, "\(answers)")
            #expect(answers.filter { $0.presented == yours.refreshToken }.count == 1, "\(answers)")
            #expect(accounts.credential(for: "me")?.refreshToken == mine.refreshToken)
            #expect(accounts.credential(for: "you")?.accessToken == yourRefresh)
        }
    }
}
