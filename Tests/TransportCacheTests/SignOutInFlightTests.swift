import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

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
        let authenticator = TokenAuthenticator(heldAt: refreshing) { _, _ in "me-2" }
        let (transport, credentials) = IdentityConfiguration.partitions.transport(origin, authenticator: authenticator)
        {
            $0.stayingCurrent.minimumRevalidationInterval = .zero
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
        // The old account's refresh is still held: the new account does not wait for it.
        #expect(try await transport.data(for: request("\(base)/yours")).0.text.contains("auth=Bearer you-1"))
        refreshing.open()

        written.open()
        try await write.value
        origin.openGate()
        _ = await revalidation.value
        await #expect(throws: AuthenticationError.self) { try await refused.value }
        #expect(refreshing.cancelled == 0)
        #expect(credentials?.credential == "you-1")
        #expect(!transport.snapshot().entries.contains { $0.partition == "me" })
        #expect(transport.snapshot().entries.map(\.url.path) == ["/yours"])
    }
}
