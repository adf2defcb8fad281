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
