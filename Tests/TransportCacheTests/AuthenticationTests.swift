import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Adapters, credentials and their one shared refresh")
struct AuthenticationTests {
    let base = "https://api.example.com"

    func transport(
        _ origin: ScriptedOrigin, credentials: Credentials<TokenAuthenticator>? = nil,
        _ configure: (inout CachedTransport.Configuration) -> Void = { _ in }
    ) -> CachedTransport {
        makeTransport(loader: origin) { configuration in
            if let credentials { configuration.identity.authenticate(with: credentials) }
            configure(&configuration)
        }
    }

    // MARK: - Adapters

    @Test("adapters run in order before the key is built: what they add keeps identities apart")
    func adaptersJoinTheKey() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok())
        let tenant = Locked("a")
        let transport = transport(origin) { configuration in
            configuration.identity.keyHeaders = ["X-Tenant"]
            configuration.identity.requestAdapters = [
                .keyed { request in request.setValue(tenant.withLock { $0 }, forHTTPHeaderField: "X-Tenant") },
                .keyed { request in
                    let tenant = request.value(forHTTPHeaderField: "X-Tenant") ?? "none"
                    request.setValue("Bearer \(tenant)", forHTTPHeaderField: "Authorization")
                },
            ]
        }
        let first = try await transport.data(from: URL(string: "\(base)/feed")!).0
        _ = try await transport.data(from: URL(string: "\(base)/feed")!)
        tenant.withLock { $0 = "b" }
        let other = try await transport.data(from: URL(string: "\(base)/feed")!).0
        #expect(first.text.contains("auth=Bearer a"))
        #expect(other.text.contains("auth=Bearer b"))
        #expect(origin.callCount == 2)
        #expect(transport.statistics.memoryHits == 1)
    }

    @Test("an adapter that throws fails the request with its error: nothing is sent or stored")
    func adapterThrows() async throws {
        struct Refused: Error {}
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok())
        let transport = transport(origin) { configuration in
            configuration.identity.requestAdapters = [RequestAdapter { _ in throw Refused() }]
        }
        await #expect(throws: Refused.self) { try await transport.data(from: URL(string: "\(self.base)/feed")!) }
        await #expect(throws: Refused.self) {
            var post = request("\(self.base)/feed", method: "POST")
            post.httpBody = Data("x".utf8)
            return try await transport.data(for: post)
        }
        #expect(origin.callCount == 0)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a revalidation and a retry go out with what the adapters say now, not what they said then")
    func adaptersRunAgainOnTheTransportsOwnRequests() async throws {
        let stamp = Locked(1)
        let origin = ScriptedOrigin()
        let url = URL(string: "\(base)/feed")!
        origin.respond(to: url, with: .init(text: "one"), .init(status: 503), .init(text: "two"))
        let transport = transport(origin) { configuration in
            // The retry's wait of a millisecond passes on the system's clock.
            configuration.clock = .continuous
            configuration.stayingCurrent.minimumRevalidationInterval = .zero
            configuration.network.retryPolicy = RetryPolicy(
                maximumAttempts: 2, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))
            configuration.identity.requestAdapters = [
                RequestAdapter { request in
                    var request = request
                    request.setValue("\(stamp.withLock { $0 })", forHTTPHeaderField: "X-Stamp")
                    return request
                }
            ]
        }
        _ = try await transport.data(from: url)
        stamp.withLock { $0 = 2 }
        let summary = await transport.revalidateAll()
        #expect(summary.revalidated == 1 && summary.changed == 1)
        #expect(origin.calls.map { $0.value(forHTTPHeaderField: "X-Stamp") } == ["1", "2", "2"])
    }

    // MARK: - One shared refresh

    @Test("twenty fetches refused at once cause one refresh, and each is resent once with the new credential")
    func oneRefreshForManyRefusals() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-2"])
        let origin = authenticatingOrigin(accepting: accepted, gated: true)
        let authenticator = TokenAuthenticator()
        let credentials = Credentials(authenticator, credential: "me-1")
        // Twenty requests held at the origin at once: the host's limit lets them all through.
        let transport = transport(origin, credentials: credentials) { $0.network.maximumFetchesPerHost = 20 }
        let callers = (0..<20).map { index in
            Task { try await transport.data(from: URL(string: "\(self.base)/item/\(index)")!).0.text }
        }
        await origin.waitForCalls(20)
        origin.openGate()
        for caller in callers { #expect(try await caller.value.contains("auth=Bearer me-2")) }
        #expect(authenticator.refreshes == 1)
        #expect(origin.callCount == 40)
        let resent = origin.calls.dropFirst(20).map { $0.value(forHTTPHeaderField: "Authorization") }
        #expect(resent == Array(repeating: "Bearer me-2", count: 20))
        #expect(credentials.credential == "me-2")
    }

    @Test("the callers of one shared fetch share its one resend")
    func sharedFetchSharesItsResend() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-2"])
        let origin = authenticatingOrigin(accepting: accepted, gated: true)
        let authenticator = TokenAuthenticator()
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1"))
        let callers = (0..<5).map { _ in
            Task { try await transport.data(from: URL(string: "\(self.base)/shared")!).0.text }
        }
        await origin.waitForCalls(1)
        await transport.waitForCoalescedJoins(4)
        origin.openGate()
        for caller in callers { #expect(try await caller.value.contains("auth=Bearer me-2")) }
        #expect(origin.callCount == 2)
        #expect(authenticator.refreshes == 1)
    }

    @Test("a request refused with a credential replaced since is resent with the current one, without a refresh")
    func replacedCredentialIsNotRefreshed() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-9"])
        let origin = authenticatingOrigin(accepting: accepted, gated: true)
        let authenticator = TokenAuthenticator()
        // The account, not the token, is in the key: the app's new token of it is the same identity.
        let credentials = Credentials(
            authenticator, credential: "me-1", partition: { TokenAuthenticator.account(of: $0) })
        let transport = transport(origin, credentials: credentials)
        let call = Task { try await transport.data(from: URL(string: "\(self.base)/feed")!).0.text }
        await origin.waitForCalls(1)
        credentials.credential = "me-9"
        origin.openGate()
        #expect(try await call.value.contains("auth=Bearer me-9"))
        #expect(authenticator.refreshes == 0)
        #expect(origin.callCount == 2)
    }

    @Test(
        "a refused request is never resent with another account's credential the app set meanwhile",
        arguments: [false, true])
    func replacedByAnotherAccount(partitioned: Bool) async throws {
        let accepted = Locked<Set<String>>(["Bearer other-1"])
        let origin = authenticatingOrigin(accepting: accepted, gated: true)
        let authenticator = TokenAuthenticator()
        let credentials = Credentials(
            authenticator, credential: "me-1",
            partition: partitioned ? { @Sendable token in TokenAuthenticator.account(of: token) } : nil)
        let transport = transport(origin, credentials: credentials)
        let call = Task { try await transport.data(from: URL(string: "\(self.base)/feed")!) }
        await origin.waitForCalls(1)
        credentials.credential = "other-1"
        origin.openGate()
        await #expect {
            try await call.value
        } throws: { ($0 as? AuthenticationError)?.code == .identityChanged }
        #expect(origin.callCount == 1)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a request made while a refresh runs waits for it and goes out once, with the new credential")
    func requestsWaitForTheRefresh() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-2"])
        let origin = authenticatingOrigin(accepting: accepted)
        let gate = Gate()
        let authenticator = TokenAuthenticator { _, _ in
            try await gate.wait()
            return "me-2"
        }
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1"))
        let refused = Task { try await transport.data(from: URL(string: "\(self.base)/a")!).0.text }
        await gate.waitForArrivals(1)
        let later = Task { try await transport.data(from: URL(string: "\(self.base)/b")!).0.text }
        // The later request reaches nothing until the refresh ends.
        #expect(origin.callCount(for: "\(base)/b") == 0)
        gate.open()
        #expect(try await later.value.contains("auth=Bearer me-2"))
        #expect(try await refused.value.contains("auth=Bearer me-2"))
        #expect(origin.callCount(for: "\(base)/b") == 1)
        #expect(authenticator.refreshes == 1)
    }

    @Test(
        "a failed refresh fails every waiting caller with one clear error and its outcome; nothing is stored; a later request tries again"
    )
    func failedRefresh() async throws {
        struct Offline: Error {}
        let accepted = Locked<Set<String>>(["Bearer me-3"])
        let origin = authenticatingOrigin(accepting: accepted)
        let authenticator = TokenAuthenticator { _, refresh in
            if refresh == 1 { throw Offline() }
            return "me-3"
        }
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1"))
        let errors = await withTaskGroup(of: AuthenticationError?.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    do {
                        _ = try await transport.data(from: URL(string: "\(self.base)/feed")!)
                        return nil
                    } catch {
                        return error as? AuthenticationError
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(errors.count == 3)
        for error in errors {
            #expect(error?.code == .refreshFailed)
            #expect(error?.underlyingError is Offline)
            #expect(error?.cacheOutcome?.source == .network(.noEntry))
        }
        #expect(transport.statistics.entries == 0)
        #expect(authenticator.refreshes == 1)
        let next = try await transport.data(from: URL(string: "\(base)/feed")!).0
        #expect(next.text.contains("auth=Bearer me-3"))
        #expect(authenticator.refreshes == 2)
    }

    @Test("a request refused while no credential is set fails with noCredential, and no refresh starts")
    func refusedWithNoCredential() async throws {
        let origin = authenticatingOrigin(accepting: Locked([]))
        let authenticator = TokenAuthenticator()
        let transport = transport(origin, credentials: Credentials(authenticator, credential: nil))
        await #expect {
            try await transport.data(from: URL(string: "\(self.base)/feed")!)
        } throws: { ($0 as? AuthenticationError)?.code == .noCredential }
        #expect(origin.callCount == 1)
        #expect(authenticator.refreshes == 0)
    }

    @Test("past the refresh limit within its window, a refusal fails with tooManyRefreshes instead of a loop")
    func refreshLimit() async throws {
        let origin = authenticatingOrigin(accepting: Locked([]))
        let authenticator = TokenAuthenticator()
        let credentials = Credentials(
            authenticator, credential: "me-1", limit: RefreshLimit(maximumRefreshes: 2, window: .seconds(3600)))
        let transport = transport(origin, credentials: credentials)
        let (_, response) = try await transport.data(from: URL(string: "\(base)/0")!)
        // Resent after a refresh and refused again, then once more after one more refresh, and
        // refused again: the origin's answer.
        #expect((response as? HTTPURLResponse)?.statusCode == 401)
        await #expect {
            try await transport.data(from: URL(string: "\(self.base)/1")!)
        } throws: { ($0 as? AuthenticationError)?.code == .tooManyRefreshes }
        #expect(authenticator.refreshes == 2)
        #expect(origin.callCount == 4)
        #expect(transport.statistics.entries == 0)
    }

    @Test("the refresh limit's window is counted by the transport's clock")
    func refreshLimitWindowByTheTransportClock() async throws {
        let origin = authenticatingOrigin(accepting: Locked([]))
        let authenticator = TokenAuthenticator()
        let clock = TestClock()
        let credentials = Credentials(
            authenticator, credential: "me-1", limit: RefreshLimit(maximumRefreshes: 1, window: .seconds(60)))
        let transport = makeTransport(loader: origin, clock: clock) { $0.identity.authenticate(with: credentials) }
        _ = try await transport.data(from: URL(string: "\(base)/0")!)
        await #expect {
            try await transport.data(from: URL(string: "\(self.base)/1")!)
        } throws: { ($0 as? AuthenticationError)?.code == .tooManyRefreshes }
        clock.advance(by: .seconds(61))
        let (_, response) = try await transport.data(from: URL(string: "\(base)/2")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 401)
        #expect(authenticator.refreshes == 2)
    }

    @Test("a refresh that returns the refused credential fails with credentialUnchanged")
    func refreshReturnsTheSameCredential() async throws {
        let origin = authenticatingOrigin(accepting: Locked([]))
        let authenticator = TokenAuthenticator { token, _ in token }
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1"))
        await #expect {
            try await transport.data(from: URL(string: "\(self.base)/feed")!)
        } throws: { ($0 as? AuthenticationError)?.code == .credentialUnchanged }
        #expect(origin.callCount == 1)
    }

    @Test("the refresh's own request through the transport goes past the adapters and the authenticator: no deadlock")
    func refreshRequestBypassesTheChain() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-2"])
        let origin = ScriptedOrigin { request, call in
            if request.url!.path == "/token" {
                // The refresh's own request: refused if it carried the credential.
                let auth = request.value(forHTTPHeaderField: "Authorization")
                return auth == nil ? .init(text: "me-2") : .init(status: 401)
            }
            let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
            return accepted.withLock { $0.contains(auth) } ? .init(text: "auth=\(auth)") : .init(status: 401)
        }
        // Held weakly, as an app's authenticator holds the transport it refreshes through: the
        // transport holds the authenticator.
        final class WeakTransport: Sendable {
            nonisolated(unsafe) weak var transport: CachedTransport?
        }
        let box = WeakTransport()
        let authenticator = TokenAuthenticator { _, _ in
            var token = request("https://api.example.com/token", method: "POST")
            token.httpBody = Data("refresh".utf8)
            return try await box.transport!.data(for: token).0.text
        }
        let adapted = Locked(0)
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1")) {
            configuration in
            configuration.identity.requestAdapters = [
                RequestAdapter { request in
                    adapted.withLock { $0 += 1 }
                    return request
                }
            ]
        }
        box.transport = transport
        let answer = try await transport.data(from: URL(string: "\(base)/feed")!).0
        #expect(answer.text == "auth=Bearer me-2")
        #expect(origin.calls.filter { $0.url!.path == "/token" }.count == 1)
        // The caller's request, and its resend: never the refresh's.
        #expect(adapted.withLock { $0 } == 2)
    }

    @Test("when every caller waiting for a refresh leaves, each ends at once and the refresh runs to its end")
    func abandonedRefreshRunsToItsEnd() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-2"])
        let origin = authenticatingOrigin(accepting: accepted)
        let gate = Gate()
        let authenticator = TokenAuthenticator { _, _ in
            try await gate.wait()
            return "me-2"
        }
        let credentials = Credentials(authenticator, credential: "me-1")
        let transport = transport(origin, credentials: credentials)
        let callers = (0..<3).map { index in
            Task { try await transport.data(from: URL(string: "\(self.base)/\(index % 2)")!) }
        }
        await gate.waitForArrivals(1)
        await origin.waitForCalls(2)
        for caller in callers { caller.cancel() }
        // Each caller ends while the refresh is still held: none waits for it.
        for caller in callers { await #expect(throws: CancellationError.self) { try await caller.value } }
        #expect(transport.pendingWork.fetches == 0)
        gate.open()
        // The refresh was never cancelled, and its result became the credential.
        let next = try await transport.data(from: URL(string: "\(base)/next")!).0.text
        #expect(next.contains("auth=Bearer me-2"))
        #expect(gate.cancelled == 0)
        #expect(authenticator.refreshes == 1)
        #expect(credentials.credential == "me-2")
    }

    @Test(
        "a sending adapter whose caller leaves runs to its end, never cancelled: the caller ends at once and nothing goes out, for a fetch and for a request passed through",
        arguments: ["GET", "POST"])
    func sendingAdapterRunsToItsEnd(method: String) async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.ok())
        let (adapting, ended) = (Gate(), Gate())
        ended.open()
        let transport = transport(origin) { configuration in
            configuration.identity.requestAdapters = [
                RequestAdapter { request in
                    // Cut short, and counted, when the transport cancels the task that runs it.
                    try? await adapting.wait()
                    try? await ended.wait()
                    var request = request
                    request.setValue("1", forHTTPHeaderField: "X-Adapted")
                    return request
                }
            ]
        }
        var left = request("\(base)/left", method: method)
        if method == "POST" { left.httpBody = Data("{}".utf8) }
        let caller = Task { [left] in try await transport.data(for: left) }
        await adapting.waitForArrivals(1)
        caller.cancel()
        // The caller ends while its adapter is still held.
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(transport.pendingWork.fetches == 0)
        adapting.open()
        await ended.waitForArrivals(1)
        #expect(adapting.cancelled == 0)
        // What the adapter gave went nowhere; a later request goes out as usual.
        _ = try await transport.data(from: URL(string: "\(base)/next")!)
        #expect(origin.calls.map { $0.url!.path } == ["/next"])
    }

    @Test(
        "a request refused after a refresh that began while it was in flight has failed fails with that refresh's error and starts no other; one sent after starts a new one"
    )
    func failedRefreshEndsItsBurst() async throws {
        // Every credential is refused; `/late` is held while the gate is closed.
        let origin = ScriptedOrigin(
            gated: true, respond: { _, _ in .init(status: 401, text: "refused") },
            holding: { $0.url!.path == "/late" })
        let authenticator = TokenAuthenticator { _, _ in throw URLError(.userAuthenticationRequired) }
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1"))
        func code(_ path: String) async -> AuthenticationError.Code? {
            (await thrownError { try await transport.data(from: URL(string: "\(self.base)\(path)")!) }
                as? AuthenticationError)?.code
        }
        // Sent before the refresh, and refused after it failed.
        let late = Task { await code("/late") }
        await origin.waitForCalls(1)
        #expect(await code("/first") == .refreshFailed)
        #expect(authenticator.refreshes == 1)
        origin.openGate()
        #expect(await late.value == .refreshFailed)
        #expect(authenticator.refreshes == 1)
        // Sent after the failure: a burst of its own.
        #expect(await code("/after") == .refreshFailed)
        #expect(authenticator.refreshes == 2)
    }

    @Test("a refused POST is resent once after the refresh")
    func refusedPostIsResent() async throws {
        let accepted = Locked<Set<String>>(["Bearer me-2"])
        let origin = authenticatingOrigin(accepting: accepted)
        let authenticator = TokenAuthenticator()
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1"))
        var post = request("\(base)/orders", method: "POST")
        post.httpBody = Data("{}".utf8)
        let (data, response) = try await transport.data(for: post)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(data.text.contains("auth=Bearer me-2"))
        #expect(origin.callCount == 2)
        #expect(authenticator.refreshes == 1)
    }

    @Test("the refresh's own GET, retried after a 503, is retried past the chain and ends the refresh")
    func refreshRequestRetried() async throws {
        final class WeakTransport: Sendable {
            nonisolated(unsafe) weak var transport: CachedTransport?
        }
        let box = WeakTransport()
        let origin = ScriptedOrigin { request, call in
            if request.url!.path == "/token" { return call <= 2 ? .init(status: 503) : .init(text: "me-2") }
            let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
            return auth == "Bearer me-2" ? .init(text: "auth=\(auth)") : .init(status: 401)
        }
        let authenticator = TokenAuthenticator { _, _ in
            try await box.transport!.data(from: URL(string: "https://api.example.com/token")!).0.text
        }
        let transport = transport(origin, credentials: Credentials(authenticator, credential: "me-1")) {
            configuration in
            // The retry's wait of a millisecond passes on the system's clock.
            configuration.clock = .continuous
            configuration.network.retryPolicy = RetryPolicy(
                maximumAttempts: 2, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))
        }
        box.transport = transport
        let answer = try await transport.data(from: URL(string: "\(base)/feed")!).0
        #expect(answer.text == "auth=Bearer me-2")
        #expect(origin.callCount(for: "\(base)/token") == 2)
        #expect(
            origin.calls.filter { $0.url!.path == "/token" }.allSatisfy {
                $0.value(forHTTPHeaderField: "Authorization") == nil
            })
    }
}
