import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Retry with backoff")
struct RetryTests {
    let url = "https://api.example.com/feed"

    /// A policy whose waits are a millisecond at most.
    static let quick = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))

    static func response(_ status: Int, headers: [String: String] = [:]) -> (Data, URLResponse) {
        let response = HTTPURLResponse(
            url: URL(string: "https://api.example.com/feed")!, statusCode: status, httpVersion: "HTTP/1.1",
            headerFields: headers)!
        return (Data(), response)
    }

    // MARK: - The policy's decision

    @Test("the backoff doubles per retry up to the cap, and full jitter places the wait anywhere within it")
    func backoff() {
        let policy = RetryPolicy(maximumAttempts: 10, initialDelay: .milliseconds(100), maximumDelay: .seconds(1))
        let failure: Result<(Data, URLResponse), any Error> = .failure(URLError(.timedOut))
        let now = Date()
        #expect(policy.delay(after: failure, attempt: 1, now: now, random: 1) == .milliseconds(100))
        #expect(policy.delay(after: failure, attempt: 2, now: now, random: 1) == .milliseconds(200))
        #expect(policy.delay(after: failure, attempt: 3, now: now, random: 1) == .milliseconds(400))
        #expect(policy.delay(after: failure, attempt: 5, now: now, random: 1) == .seconds(1))
        #expect(policy.delay(after: failure, attempt: 9, now: now, random: 1) == .seconds(1))
        #expect(policy.delay(after: failure, attempt: 3, now: now, random: 0) == .zero)
        #expect(policy.delay(after: failure, attempt: 3, now: now, random: 0.5) == .milliseconds(200))
        // The last attempt is never followed by another.
        #expect(policy.delay(after: failure, attempt: 10, now: now, random: 1) == nil)
    }

    @Test("connectivity errors and 408, 429, 500, 502, 503, 504 are retried; other errors and statuses are not")
    func whatIsRetried() {
        let policy = RetryPolicy()
        let now = Date()
        for code in [URLError.Code.notConnectedToInternet, .cannotConnectToHost, .timedOut, .networkConnectionLost] {
            #expect(policy.delay(after: .failure(URLError(code)), attempt: 1, now: now, random: 1) != nil)
        }
        for code in [URLError.Code.cancelled, .badURL, .badServerResponse, .userAuthenticationRequired] {
            #expect(policy.delay(after: .failure(URLError(code)), attempt: 1, now: now, random: 1) == nil)
        }
        #expect(policy.delay(after: .failure(CancellationError()), attempt: 1, now: now, random: 1) == nil)
        for status in [408, 429, 500, 502, 503, 504] {
            #expect(policy.delay(after: .success(Self.response(status)), attempt: 1, now: now, random: 1) != nil)
        }
        for status in [200, 304, 400, 401, 403, 404, 501] {
            #expect(policy.delay(after: .success(Self.response(status)), attempt: 1, now: now, random: 1) == nil)
        }
    }

    @Test("Retry-After in seconds or as an HTTP date replaces the backoff, capped; a malformed one is ignored")
    func retryAfter() {
        let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(100), maximumDelay: .seconds(30))
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        func delay(_ value: String) -> Duration? {
            policy.delay(
                after: .success(Self.response(503, headers: ["Retry-After": value])), attempt: 1, now: now, random: 1)
        }
        #expect(delay("7") == .seconds(7))
        #expect(delay(" 0 ") == .zero)
        #expect(delay("3600") == .seconds(30))
        #expect(delay("99999999999999999999999") == .seconds(30))
        // 1,700,000,000 is Tue, 14 Nov 2023 22:13:20 GMT.
        #expect(delay("Tue, 14 Nov 2023 22:13:32 GMT") == .seconds(12))
        #expect(delay("Tue, 14 Nov 2023 23:13:20 GMT") == .seconds(30))
        #expect(delay("Tue, 14 Nov 2023 22:00:00 GMT") == .zero)
        for malformed in ["-5", "1.5", "soon", "", "Tue, 14 Nov 2023 22:13:32 CET"] {
            #expect(delay(malformed) == .milliseconds(100), "\(malformed)")
        }
    }

    // MARK: - Through the transport

    @Test("an origin that fails twice and then answers: three requests, one answer, two retries counted and reported")
    func failsTwiceThenAnswers() async throws {
        let origin = ScriptedOrigin()
        origin.respond(
            to: URL(string: url)!, with: .init(status: 503, text: "busy"), .failure(.networkConnectionLost),
            .init(text: "fresh"))
        let transport = makeTransport(loader: origin) { $0.retryQuickly() }
        let events = transport.events()

        let (data, response) = try await transport.data(for: request(url))

        #expect(data.text == "fresh")
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.callCount == 3)
        #expect(transport.statistics.retries == 2)
        // Each attempt was sent, and is counted as sent.
        #expect(transport.statistics.networkFetches == 3)
        var retries: [Int] = []
        for await event in events {
            if case .retrying(let attempt, _) = event.kind { retries.append(attempt) }
            if case .answered = event.kind { break }
        }
        #expect(retries == [2, 3])
    }

    @Test("without a policy, or past its last attempt, the failure reaches the caller")
    func lastAttempt() async throws {
        let failing = ScriptedOrigin(respond: ScriptedOrigin.status(503))
        let transport = makeTransport(loader: failing) { $0.retryQuickly() }
        let (_, response) = try await transport.data(for: request(url))
        #expect((response as? HTTPURLResponse)?.statusCode == 503)
        #expect(failing.callCount == 3)

        let once = ScriptedOrigin(respond: ScriptedOrigin.status(503))
        _ = try await makeTransport(loader: once).data(for: request(url))
        #expect(once.callCount == 1)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a hundred callers of one fetch cause one sequence of attempts, and all get the answer")
    func oneSchedulePerSharedFetch() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(
            to: URL(string: url)!, with: .init(status: 500, text: "down"), .init(status: 502, text: "down"),
            .init(text: "body"))
        let transport = makeTransport(loader: origin) { $0.retryQuickly() }
        let url = url
        let callers = startCalls(100) { try await transport.data(for: request(url)).0.text }
        #expect(transport.statistics.coalescedJoins == 99)
        await origin.waitForCalls(1)
        origin.openGate()
        var answers = 0
        for caller in callers {
            #expect(try await caller.value == "body")
            answers += 1
        }
        #expect(answers == 100)
        #expect(origin.callCount == 3)
        #expect(transport.statistics.retries == 2)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a caller that cancels during the wait leaves at once; the others still get the retried answer")
    func cancelDuringWait() async throws {
        let clock = TestClock()
        let origin = ScriptedOrigin()
        origin.respond(to: URL(string: url)!, with: .init(status: 503, text: "busy"), .init(text: "later"))
        let transport = makeTransport(loader: origin, clock: clock) {
            $0.network.retryPolicy = RetryPolicy(
                maximumAttempts: 2, initialDelay: .seconds(10), maximumDelay: .seconds(10))
        }
        let first = Task { try await transport.data(for: request(self.url)) }
        await origin.waitForCalls(1)
        let second = startCall { try await transport.data(for: request(self.url)) }
        #expect(transport.statistics.coalescedJoins == 1)
        await clock.waitForSleepers(1)

        first.cancel()
        #expect(await thrownError { try await first.value } is CancellationError)
        #expect(origin.callCount == 1)

        clock.advance(by: .seconds(10))
        #expect(try await second.value.0.text == "later")
        #expect(origin.callCount == 2)
    }

    @Test("when the last caller leaves during the wait, the attempts stop")
    func lastCallerLeaves() async throws {
        let clock = TestClock()
        let origin = ScriptedOrigin(respond: ScriptedOrigin.status(503))
        let transport = makeTransport(loader: origin, clock: clock) {
            $0.network.retryPolicy = RetryPolicy(
                maximumAttempts: 5, initialDelay: .seconds(1), maximumDelay: .seconds(1))
        }
        let caller = Task { try await transport.data(for: request(self.url)) }
        await clock.waitForSleepers(1)
        caller.cancel()
        #expect(await thrownError { try await caller.value } is CancellationError)
        // The caller's cancellation cancelled the wait before `cancel()` returned.
        #expect(clock.sleepers == 0)
        clock.advance(by: .seconds(60))
        #expect(origin.callCount == 1)
        #expect(transport.pendingWork == (0, 0, 0))
    }

    @Test("unsafe methods and requests that pass through as sent are never retried; a plain GET is")
    func methods() async throws {
        let origin = ScriptedOrigin(respond: ScriptedOrigin.status(503))
        let transport = makeTransport(loader: origin) { $0.retryQuickly() }
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            _ = try await transport.data(for: request(url, method: method))
        }
        #expect(origin.callCount == 4)
        _ = try await transport.data(for: request(url, headers: ["Range": "bytes=0-9"]))
        #expect(origin.callCount == 5)
        _ = try await transport.data(for: request(url))
        #expect(origin.callCount == 8)
        #expect(transport.statistics.retries == 2)
    }

    @Test("an answer's age counts from the attempt that brought it, not from the first")
    func ageFromLastAttempt() async throws {
        let clock = TestClock()
        let origin = ScriptedOrigin()
        origin.respond(
            to: URL(string: url)!, with: .init(status: 503, headers: ["Retry-After": "15"], text: "busy"),
            .init(headers: ["Cache-Control": "max-age=10"], text: "fresh for ten seconds"))
        let transport = makeTransport(loader: origin, clock: clock) {
            $0.network.retryPolicy = RetryPolicy(
                maximumAttempts: 2, initialDelay: .seconds(1), maximumDelay: .seconds(60))
            $0.freshness.conformsToHTTPCaching = true
        }
        let first = Task { try await transport.data(for: request(self.url)) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(15))
        _ = try await first.value
        clock.advance(by: .seconds(5))
        let (_, _, outcome) = try await transport.response(for: request(url))
        #expect(outcome.source == .memory(.fresh))
        #expect(origin.callCount == 2)
    }

    @Test("after the last attempt fails, staleIfError answers with the stored entry")
    func staleAfterLastAttempt() async throws {
        let clock = TestClock()
        let origin = ScriptedOrigin()
        origin.respond(to: URL(string: url)!, with: .init(text: "stored"), .failure(.cannotConnectToHost))
        let transport = makeTransport(loader: origin, clock: clock) {
            $0.network.retryPolicy = Self.quick
            $0.freshness.staleIfError = true
            $0.freshness.maximumAge = .seconds(60)
        }
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(61))
        let retrying = Task { try await transport.response(for: request(self.url)) }
        // The manual clock holds each wait: let both retries through.
        for _ in 0..<2 {
            await clock.waitForSleepers(1)
            clock.advance(by: .milliseconds(1))
        }
        let (data, _, outcome) = try await retrying.value
        #expect(data.text == "stored")
        #expect(outcome.source == .memory(.staleAfterFailure(.cannotConnectToHost)))
        #expect(origin.callCount == 4)
    }
}

extension CachedTransport.Configuration {
    /// Retries with waits of a millisecond at most, slept on the system's clock (the tests'
    /// manual clock would hold them until advanced).
    mutating func retryQuickly() {
        network.retryPolicy = RetryTests.quick
        clock = .continuous
    }
}
