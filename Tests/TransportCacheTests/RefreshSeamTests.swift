import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("The token refresh under cancellation and account switches", .timeLimit(.minutes(1)))
struct RefreshSeamTests {
    let base = "https://api.example.com"

    @Test(
        "a refresh every waiter left runs to its end: a request refused meanwhile joins it, and its result is the credential"
    )
    func abandonedRefresh() async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-2"]))
        let refreshing = Gate()
        let authenticator = TokenAuthenticator(heldAt: refreshing) { _, _ in "me-2" }
        let (transport, credentials) = IdentityConfiguration.authenticator.transport(
            origin, authenticator: authenticator)
        let dismissed = Task { try await transport.data(for: request("\(self.base)/dismissed")) }
        await refreshing.waitForArrivals(1)
        dismissed.cancel()
        // The caller that left ends at once, while the refresh is still held.
        await #expect(throws: CancellationError.self) { try await dismissed.value }
        // Made while the refresh runs: it waits for that refresh instead of starting one.
        let next = Task { try await transport.data(for: request("\(self.base)/next")).0.text }
        refreshing.open()
        #expect(try await next.value.contains("auth=Bearer me-2"))
        #expect(authenticator.refreshes == 1)
        #expect(refreshing.cancelled == 0)
        #expect(credentials?.credential == "me-2")
    }

    @Test("a credential the app sets while a refresh runs is not replaced by the refresh's result")
    func refreshDoesNotReplaceTheAppsCredential() async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer me-5"]))
        let refreshing = Gate()
        let authenticator = TokenAuthenticator(heldAt: refreshing) { _, _ in "me-2" }
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin, authenticator: authenticator)
        let waiting = Task { try await transport.data(for: request("\(self.base)/feed")).0.text }
        await refreshing.waitForArrivals(1)
        credentials?.credential = "me-5"
        // The waiting request goes out at once with the app's credential, of the same account.
        #expect(try await waiting.value.contains("auth=Bearer me-5"))
        refreshing.open()
        #expect(try await transport.data(for: request("\(base)/next")).0.text.contains("auth=Bearer me-5"))
        #expect(credentials?.credential == "me-5")
        #expect(authenticator.refreshes == 1)
    }

    @Test(
        "another account's credential, or a sign-out, ends the old account's refresh: the new account never waits for it",
        arguments: [false, true])
    func accountSwitchEndsTheRefresh(signsOut: Bool) async throws {
        let origin = authenticatingOrigin(accepting: Locked(["Bearer you-1"]))
        let refreshing = Gate()
        let authenticator = TokenAuthenticator(heldAt: refreshing) { _, _ in throw URLError(.badServerResponse) }
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin, authenticator: authenticator)
        let old = Task { try await transport.data(for: request("\(self.base)/mine")) }
        await refreshing.waitForArrivals(1)
        credentials?.credential = "you-1"
        if signsOut { transport.signOut(partition: "me") }
        // The new account's first request goes out at once, with its own credential.
        #expect(try await transport.data(for: request("\(base)/yours")).0.text.contains("auth=Bearer you-1"))
        await #expect {
            try await old.value
        } throws: {
            [.identityChanged, .signedOut].contains(($0 as? AuthenticationError)?.code)
        }
        let sentAsTheNewAccount = origin.calls.contains { call in
            call.url!.path == "/mine" && call.value(forHTTPHeaderField: "Authorization") == "Bearer you-1"
        }
        #expect(!sentAsTheNewAccount)
        // The old account's refresh was never cancelled; its result does not replace the new one.
        refreshing.open()
        #expect(refreshing.cancelled == 0)
        #expect(try await transport.data(for: request("\(base)/again")).0.text.contains("auth=Bearer you-1"))
        #expect(credentials?.credential == "you-1")
    }
}
