import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

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
        let transport = makeTransport(loader: origin) { $0.identity.authenticate(with: credentials) }
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
        let transport = makeTransport(loader: origin) { $0.identity.authenticate(with: credentials) }
        for _ in 0..<3 { _ = try await transport.data(for: request("\(base)/feed")) }
        #expect(origin.callCount == 1)
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("a sending adapter that changes a key header fails its request: nothing is sent")
    func sendingAdapterChangesKeyHeader() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok())
        let transport = makeTransport(loader: origin) { configuration in
            configuration.identity.requestAdapters = [
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
            configuration.identity.requestAdapters = [.keyed { $0 = rewrite($0) }]
        }
        let plain = request("\(base)/v1/feed")
        _ = try await keyed.data(for: plain)
        #expect(keyed.snapshot().entries.map(\.url.path) == ["/v2/feed"])
        keyed.invalidate(plain)
        #expect(keyed.statistics.entries == 0)

        let sending = makeTransport(loader: origin) { configuration in
            configuration.identity.requestAdapters = [RequestAdapter { rewrite($0) }]
        }
        _ = try await sending.data(for: plain)
        #expect(sending.snapshot().entries.map(\.url.path) == ["/v1/feed"])
        #expect(origin.calls.map { $0.url!.path } == ["/v2/feed", "/v2/feed"])
        _ = try await sending.data(for: plain)
        #expect(origin.callCount == 2)
    }
}
