import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

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
        let authenticator = TokenAuthenticator(heldAt: refreshing) { _, _ in "me-2" }
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
        // The signed-out account's refresh runs to its end; its credential is not taken.
        refreshing.open()
        #expect(try await transport.data(for: request("\(base)/last")).0.text.contains("auth=Bearer you-1"))
        #expect(credentials?.credential == "you-1")
    }
}
