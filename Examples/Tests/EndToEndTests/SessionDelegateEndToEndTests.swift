import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Synchronization
import Testing
import TransportCache

/// An app's session delegate whose answers a test chooses, recording what it was asked.
final class AppDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    typealias ChallengeAnswer =
        @Sendable (URLAuthenticationChallenge) -> (
            URLSession.AuthChallengeDisposition, URLCredential?
        )

    private let challengeAnswer: ChallengeAnswer
    private let redirectAnswer: @Sendable (URLRequest) -> URLRequest?
    private let asked = Mutex<[String]>([])

    init(
        challenge: @escaping ChallengeAnswer = { _ in (.performDefaultHandling, nil) },
        redirect: @escaping @Sendable (URLRequest) -> URLRequest? = { $0 }
    ) {
        challengeAnswer = challenge
        redirectAnswer = redirect
    }

    /// What it was asked, in order: `challenge <method> <failures>`, `redirect <status> <path>`,
    /// `metrics <path>`.
    var calls: [String] { asked.withLock { $0 } }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @Sendable @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let method = challenge.protectionSpace.authenticationMethod
        asked.withLock { $0.append("challenge \(method) \(challenge.previousFailureCount)") }
        let (disposition, credential) = challengeAnswer(challenge)
        completionHandler(disposition, credential)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @Sendable @escaping (URLRequest?) -> Void
    ) {
        asked.withLock { $0.append("redirect \(response.statusCode) \(request.url?.path ?? "-")") }
        completionHandler(redirectAnswer(request))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        asked.withLock { $0.append("metrics \(task.originalRequest?.url?.path ?? "-")") }
    }
}

@Suite("The app's session delegate over TCP")
struct SessionDelegateEndToEndTests {
    static let basic = NSURLAuthenticationMethodHTTPBasic

    /// A transport with `delegate`, with the header override on or off.
    static func transport(_ delegate: AppDelegate?, overrideOn: Bool) -> CachedTransport {
        var configuration = CachedTransport.Configuration()
        if !overrideOn { configuration.network.cacheOverride = nil }
        return CachedTransport(configuration: configuration, sessionDelegate: delegate)
    }

    @Test(
        "the delegate answers a Basic challenge; the answer is stored under the request and served from memory",
        arguments: [true, false])
    func basicChallengeAnswered(overrideOn: Bool) async throws {
        try await withOrigin { origin in
            let delegate = AppDelegate { challenge in
                challenge.previousFailureCount == 0
                    ? (.useCredential, URLCredential(user: "user", password: "secret", persistence: .forSession))
                    : (.cancelAuthenticationChallenge, nil)
            }
            let transport = Self.transport(delegate, overrideOn: overrideOn)
            let path = "/private?basic=user:secret&stable=1&cc=max-age%3D600"
            let (data, response) = try await transport.data(from: origin.url(path))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(data.text.contains("auth=Basic dXNlcjpzZWNyZXQ="))
            #expect(delegate.calls == ["challenge \(Self.basic) 0"])
            #expect(await origin.hits(path) == 2)
            #expect(try await transport.data(from: origin.url(path)).0 == data)
            #expect(await origin.hits(path) == 2)
            #expect(transport.snapshot().entries.map(\.url) == [origin.url(path)])
        }
    }

    @Test(
        "a delegate that cancels a challenge: the caller gets URLError(.cancelled) with its outcome, nothing stored",
        arguments: [true, false])
    func challengeCancelled(overrideOn: Bool) async throws {
        try await withOrigin { origin in
            let delegate = AppDelegate { _ in (.cancelAuthenticationChallenge, nil) }
            let transport = Self.transport(delegate, overrideOn: overrideOn)
            var events = transport.events().makeAsyncIterator()
            let url = origin.url("/private?basic=user:secret")
            let error = await #expect(throws: URLError.self) { try await transport.data(from: url) }
            #expect(error?.code == .cancelled)
            #expect(error?.cacheOutcome?.source == .network(.noEntry))
            #expect(delegate.calls == ["challenge \(Self.basic) 0"])
            #expect(transport.statistics.stores == 0)
            while let event = await events.next() {
                guard case .failed(let outcome, let failure) = event.kind else { continue }
                #expect(outcome?.source == .network(.noEntry))
                #expect((failure as? URLError)?.code == .cancelled)
                break
            }
        }
    }

    @Test(
        "a Basic challenge nobody answers reaches the caller as its 401, with or without a delegate",
        arguments: [true, false])
    func challengeUnanswered(overrideOn: Bool) async throws {
        try await withOrigin { origin in
            // A wrong password, then default handling; a delegate without a challenge method; none.
            let wrongOnce = AppDelegate { challenge in
                challenge.previousFailureCount == 0
                    ? (.useCredential, URLCredential(user: "user", password: "wrong", persistence: .forSession))
                    : (.performDefaultHandling, nil)
            }
            let transports = [
                Self.transport(wrongOnce, overrideOn: overrideOn), Self.transport(nil, overrideOn: overrideOn),
                Self.transport(AppDelegate(), overrideOn: overrideOn),
            ]
            for (index, transport) in transports.enumerated() {
                let url = origin.url("/unanswered\(index)?basic=user:secret")
                let answer = await ending(within: .seconds(30)) { try await transport.data(from: url) }
                let (_, response) = try #require(try answer?.get())
                #expect((response as? HTTPURLResponse)?.statusCode == 401)
                #expect(transport.statistics.stores == 0)
            }
            #expect(wrongOnce.calls == ["challenge \(Self.basic) 0", "challenge \(Self.basic) 1"])
        }
    }

    @Test(
        "a redirect the delegate follows is stored under the requested URL only; the target is fetched when asked for",
        arguments: [true, false])
    func redirectFollowed(overrideOn: Bool) async throws {
        try await withOrigin { origin in
            let delegate = AppDelegate()
            let transport = Self.transport(delegate, overrideOn: overrideOn)
            let from = origin.url("/from?redirect=/to%3Fstable%3D1&cc=max-age%3D600")
            let (data, response) = try await transport.data(from: from)
            #expect(data.text.hasPrefix("path=/to "))
            #expect(response.url?.path == "/to")
            #expect(delegate.calls == ["redirect 302 /to"])
            #expect(transport.snapshot().entries.map(\.url) == [from])
            #expect(try await transport.data(from: from).0 == data)
            #expect(await origin.hits(path: "/from") == 1)
            _ = try await transport.data(from: origin.url("/to?stable=1"))
            #expect(await origin.hits(path: "/to") == 2)
        }
    }

    @Test(
        "a redirect the delegate rewrites fetches its request, stored under the requested URL",
        arguments: [true, false])
    func redirectRewritten(overrideOn: Bool) async throws {
        try await withOrigin { origin in
            let elsewhere = origin.url("/elsewhere?stable=1")
            let delegate = AppDelegate(redirect: { request in
                var rewritten = request
                rewritten.url = elsewhere
                rewritten.setValue("rewritten", forHTTPHeaderField: "X-Redirect")
                return rewritten
            })
            let transport = Self.transport(delegate, overrideOn: overrideOn)
            let from = origin.url("/from?redirect=/to")
            let (data, _) = try await transport.data(from: from)
            #expect(data.text.hasPrefix("path=/elsewhere "))
            #expect(await origin.lastRequestHeader("X-Redirect", for: "/elsewhere?stable=1") == "rewritten")
            #expect(await origin.hits(path: "/to") == 0)
            #expect(transport.snapshot().entries.map(\.url) == [from])
        }
    }

    @Test(
        "a redirect the delegate refuses answers the caller with the 3xx; a 301 is stored under the requested URL, a 302 is not",
        arguments: [true, false])
    func redirectRefused(overrideOn: Bool) async throws {
        try await withOrigin { origin in
            let delegate = AppDelegate(redirect: { _ in nil })
            let transport = Self.transport(delegate, overrideOn: overrideOn)
            for status in [302, 301] {
                let from = origin.url("/refused\(status)?redirect=/to&redirectstatus=\(status)")
                let (_, response) = try await transport.data(from: from)
                let http = try #require(response as? HTTPURLResponse)
                #expect(http.statusCode == status)
                #expect(http.value(forHTTPHeaderField: "Location") == "/to")
                _ = try await transport.data(from: from)
                #expect(await origin.hits(path: "/refused\(status)") == (status == 301 ? 1 : 2))
            }
            #expect(await origin.hits(path: "/to") == 0)
            #expect(delegate.calls == ["redirect 302 /to", "redirect 302 /to", "redirect 301 /to"])
            #expect(
                transport.snapshot().entries.map(\.url) == [origin.url("/refused301?redirect=/to&redirectstatus=301")])
        }
    }

    @Test("a redirect loop through the delegate ends in httpTooManyRedirects with its outcome")
    func redirectLoop() async throws {
        try await withOrigin { origin in
            let delegate = AppDelegate()
            let transport = Self.transport(delegate, overrideOn: true)
            let url = origin.url("/loop?loop=1")
            let ended = await ending(within: .seconds(30)) { try await transport.data(from: url) }
            guard case .failure(let error as URLError) = try #require(ended) else {
                Issue.record("a redirect loop produced an answer")
                return
            }
            #expect(error.code == .httpTooManyRedirects)
            #expect(error.cacheOutcome?.source == .network(.noEntry))
            #expect(delegate.calls.count == 20)
            #expect(transport.statistics.stores == 0)
        }
    }

    @Test("task metrics reach the delegate and events() where the platform collects them", arguments: [true, false])
    func metrics(overrideOn: Bool) async throws {
        try await withOrigin { origin in
            let delegate = AppDelegate()
            let transport = Self.transport(delegate, overrideOn: overrideOn)
            var events = transport.events().makeAsyncIterator()
            let url = origin.url("/measured")
            _ = try await transport.data(from: url)
            var kinds: [String] = []
            #if canImport(FoundationNetworking)
            // swift-corelibs-foundation collects no metrics: neither the delegate nor events() hear any.
            while let event = await events.next() {
                kinds.append(event.kind.name)
                if case .answered = event.kind { break }
            }
            #expect(!kinds.contains("networkMetrics"))
            #expect(!delegate.calls.contains { $0.hasPrefix("metrics") })
            #else
            while let event = await events.next() {
                kinds.append(event.kind.name)
                if case .networkMetrics(let metrics) = event.kind {
                    #expect(event.url == url)
                    #expect(metrics.taskMetrics.transactionMetrics.count >= 1)
                    break
                }
            }
            #expect(delegate.calls == ["metrics /measured"])
            #endif
            #expect(kinds.contains("fetchEnded"))
        }
    }
}
