import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache

/// A caller waiting for its account's refresh when the app signs that account out: the app
/// clears the credential and signs the partition out, in either order, as its sign-out screen
/// happens to, and the caller must learn that it was signed out, the error an app answers with
/// its sign-in screen, not that its identity changed under it. Each round is a new transport and
/// a new refresh, so a round that goes wrong cannot hide in the next; the rounds repeat the
/// moments the two steps can meet the caller's own task.
@Suite("A caller waiting for a refresh when its account is signed out fails with signedOut")
struct SignOutDuringRefreshEndToEndTests {
    static let rounds = 100

    /// How round `round` of signing out ended for the caller that waited for the refresh.
    static func signOut(round: Int, on origin: LoopbackOrigin, session: URLSession, partitionFirst: Bool) async throws
        -> CallEnd?
    {
        let tokenPath = "/token?gate=1&round=\(round)"
        let tokens = SessionTokens(session: session, tokenURL: origin.url(tokenPath))
        let credentials = Credentials(
            tokens, credential: OriginAccount(name: "alice", token: "stale"), partition: { $0.name })
        var configuration = CachedTransport.Configuration()
        configuration.identity.authenticate(with: credentials)
        let transport = CachedTransport(configuration: configuration)

        await origin.closeGate()
        let caller = Task { await CallEnd { try await transport.data(from: origin.url("/a?token=1&round=\(round)")) } }
        // Refused, the caller waits for the refresh, which the origin holds.
        await origin.waitForHits(tokenPath, count: 1)
        if partitionFirst {
            transport.signOut(partition: "alice")
            credentials.credential = nil
        } else {
            credentials.credential = nil
            transport.signOut(partition: "alice")
        }
        let end = try await ending(within: .seconds(30)) { await caller.value }?.get()
        await origin.openGate()
        // The refresh runs on to its end, the app's own task, which nothing cancels. Waited for
        // here: left running, the next round's closed gate would hold its request again, and the
        // session would queue the next round's refresh behind it until its 60-second timeout.
        await tokens.waitUntilIdle()
        return end
    }

    @Test("the credential cleared, then the partition signed out: the waiting caller fails with signedOut, every round")
    func credentialClearedFirst() async throws {
        try await withOrigin { origin in
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            var others: [String] = []
            for round in 0..<Self.rounds {
                let end = try await Self.signOut(round: round, on: origin, session: session, partitionFirst: false)
                if end != .authentication(.signedOut) { others.append("\(round): \(end.map(\.description) ?? "-")") }
            }
            #expect(others.isEmpty, "rounds of \(Self.rounds) that ended otherwise: \(others)")
        }
    }

    @Test("the partition signed out, then the credential cleared: the waiting caller fails with signedOut, every round")
    func partitionSignedOutFirst() async throws {
        try await withOrigin { origin in
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            var others: [String] = []
            for round in 0..<Self.rounds {
                let end = try await Self.signOut(round: round, on: origin, session: session, partitionFirst: true)
                if end != .authentication(.signedOut) { others.append("\(round): \(end.map(\.description) ?? "-")") }
            }
            #expect(others.isEmpty, "rounds of \(Self.rounds) that ended otherwise: \(others)")
        }
    }
}
