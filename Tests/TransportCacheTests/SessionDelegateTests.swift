import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

/// An app's session delegate that records what it is asked and answers challenges as told.
final class RecordingDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    private let answer: URLSession.AuthChallengeDisposition
    private let asked = Locked<[String]>([])

    init(answering answer: URLSession.AuthChallengeDisposition = .cancelAuthenticationChallenge) {
        self.answer = answer
    }

    /// What it was asked, in order: `challenge <method>`, `metrics <URL>`.
    var calls: [String] { asked.withLock { $0 } }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @Sendable @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        asked.withLock { $0.append("challenge \(challenge.protectionSpace.authenticationMethod)") }
        completionHandler(answer, nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        asked.withLock { $0.append("metrics \(task.originalRequest?.url?.absoluteString ?? "-")") }
    }
}

/// A delegate that implements none of the task's methods.
final class SilentDelegate: NSObject, URLSessionTaskDelegate, Sendable {}

@Suite("The app's session delegate")
struct SessionDelegateTests {
    let url = URL(string: "https://api.example.com/private")!

    func loader(of transport: CachedTransport) async throws -> URLSessionLoader {
        try #require(transport.queue.loader as? URLSessionLoader)
    }

    func configuration(overrideOn: Bool) -> CachedTransport.Configuration {
        var configuration = CachedTransport.Configuration()
        if !overrideOn { configuration.network.cacheOverride = nil }
        return configuration
    }

    @Test(
        "a transport with a delegate has a network session of its own, whose delegate it is",
        arguments: [true, false])
    func ownSession(overrideOn: Bool) async throws {
        let delegate = SilentDelegate()
        let first = CachedTransport(configuration: configuration(overrideOn: overrideOn), sessionDelegate: delegate)
        let second = CachedTransport(configuration: configuration(overrideOn: overrideOn), sessionDelegate: delegate)
        let firstSession = try await loader(of: first).networkSession
        #expect(firstSession.delegate === delegate)
        #expect(firstSession !== CacheOverrideURLProtocol.sharedInnerSession)
        #expect(firstSession !== (try await loader(of: second).networkSession))
        if overrideOn {
            // The outer session only hands requests to the override: it has no delegate to ask.
            #expect(try await loader(of: first).session.delegate == nil)
        }
    }

    @Test("transports without a delegate keep sharing the process's inner session")
    func sharedWithoutDelegate() async throws {
        let transport = CachedTransport()
        #expect(try await loader(of: transport).networkSession === CacheOverrideURLProtocol.sharedInnerSession)
        #expect(try await loader(of: transport).networkSession.delegate == nil)
    }

    @Test("a network task's metrics reach the app's delegate once, and events() as a networkMetrics event")
    func metricsForwarded() async throws {
        let delegate = RecordingDelegate()
        let transport = CachedTransport(sessionDelegate: delegate)
        var events = transport.events().makeAsyncIterator()
        let session = try await loader(of: transport).networkSession
        let task = session.dataTask(with: url)
        let taskDelegate = NetworkTaskDelegate(metrics: try await loader(of: transport).metrics)
        // What URLSession does when a task has finished collecting (Apple platforms).
        taskDelegate.urlSession(session, task: task, didFinishCollecting: URLSessionTaskMetrics())
        #expect(delegate.calls == ["metrics \(url.absoluteString)"])
        let event = try #require(await events.next())
        #expect(event.url == url)
        #expect(event.kind.name == "networkMetrics")
        if case .networkMetrics(let metrics) = event.kind { #expect(metrics.redirectCount == 0) }
    }

    @Test("metrics of a session without a delegate still reach events()")
    func metricsWithoutDelegate() async throws {
        let transport = CachedTransport(configuration: configuration(overrideOn: false))
        var events = transport.events().makeAsyncIterator()
        let session = try await loader(of: transport).networkSession
        let taskDelegate = NetworkTaskDelegate(metrics: try await loader(of: transport).metrics)
        taskDelegate.urlSession(
            session, task: session.dataTask(with: url), didFinishCollecting: URLSessionTaskMetrics())
        #expect(await events.next()?.kind.name == "networkMetrics")
    }

    #if canImport(FoundationNetworking)
    // swift-corelibs-foundation raises a challenge for any protocol's `401` with
    // `WWW-Authenticate: Basic`, so an in-process protocol in the app's session configuration can
    // raise one; Apple platforms raise challenges only from their own HTTP loading.

    func challengingConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [BasicChallengeProtocol.self]
        return configuration
    }

    @Test(
        "the delegate is asked for a Basic challenge; its cancel reaches the caller as URLError(.cancelled) with its outcome",
        arguments: [true, false])
    func challengeCancelled(overrideOn: Bool) async throws {
        let delegate = RecordingDelegate(answering: .cancelAuthenticationChallenge)
        let transport = CachedTransport(
            configuration: configuration(overrideOn: overrideOn), sessionConfiguration: challengingConfiguration(),
            sessionDelegate: delegate)
        let error = await #expect(throws: URLError.self) { try await transport.data(from: url) }
        #expect(error?.code == .cancelled)
        #expect(error?.cacheOutcome?.source == .network(.noEntry))
        #expect(delegate.calls == ["challenge \(NSURLAuthenticationMethodHTTPBasic)"])
        #expect(transport.statistics.stores == 0)
    }

    @Test(
        "a Basic challenge left to default handling answers with its 401 instead of waiting for ever",
        .timeLimit(.minutes(1)),
        arguments: [true, false])
    func challengeDefaultHandling(overrideOn: Bool) async throws {
        let delegates: [(any URLSessionDelegate)?] = [
            nil, SilentDelegate(), RecordingDelegate(answering: .performDefaultHandling),
            RecordingDelegate(answering: .rejectProtectionSpace), RecordingDelegate(answering: .useCredential),
        ]
        for delegate in delegates {
            let transport = CachedTransport(
                configuration: configuration(overrideOn: overrideOn), sessionConfiguration: challengingConfiguration(),
                sessionDelegate: delegate)
            let (data, response) = try await transport.data(from: url)
            #expect((response as? HTTPURLResponse)?.statusCode == 401)
            #expect(data.isEmpty)
            #expect(transport.statistics.stores == 0)
        }
    }

    @Test("default handling still uses a stored credential it has not tried")
    func defaultHandlingWithProposedCredential() {
        let taskDelegate = NetworkTaskDelegate(metrics: nil)
        let credential = URLCredential(user: "user", password: "secret", persistence: .forSession)
        let fresh = BasicChallengeProtocol.challenge(for: url, proposing: credential, failures: 0)
        #expect(taskDelegate.answer(fresh, .performDefaultHandling, nil).0 == .performDefaultHandling)
        #expect(taskDelegate.answer(fresh, .useCredential, credential).0 == .useCredential)
        #expect(taskDelegate.answer(fresh, .cancelAuthenticationChallenge, nil).0 == .cancelAuthenticationChallenge)
        // Cancelled by the delegate: the caller gets the cancellation, not a 401.
        let cancelled = taskDelegate.settled(data: nil, response: nil, error: URLError(.cancelled))
        #expect((cancelled.2 as? URLError)?.code == .cancelled)

        let tried = BasicChallengeProtocol.challenge(for: url, proposing: credential, failures: 1)
        #expect(taskDelegate.answer(tried, .performDefaultHandling, nil).0 == .cancelAuthenticationChallenge)
        let settled = taskDelegate.settled(data: nil, response: nil, error: URLError(.cancelled))
        #expect((settled.1 as? HTTPURLResponse)?.statusCode == 401)
        #expect(settled.2 == nil)
    }
    #endif
}

#if canImport(FoundationNetworking)
/// Answers every request with `401` and `WWW-Authenticate: Basic realm="test"`.
final class BasicChallengeProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    static func refusal(for url: URL) -> HTTPURLResponse {
        HTTPURLResponse(
            url: url, statusCode: 401, httpVersion: "HTTP/1.1",
            headerFields: ["WWW-Authenticate": #"Basic realm="test""#, "Content-Length": "7"])!
    }

    static func challenge(for url: URL, proposing credential: URLCredential?, failures: Int)
        -> URLAuthenticationChallenge
    {
        let space = URLProtectionSpace(
            host: url.host ?? "", port: 443, protocol: "https", realm: "test",
            authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        return URLAuthenticationChallenge(
            protectionSpace: space, proposedCredential: credential, previousFailureCount: failures,
            failureResponse: refusal(for: url), error: nil, sender: IgnoredSender())
    }

    override func startLoading() {
        guard let url = request.url else { return }
        client?.urlProtocol(self, didReceive: Self.refusal(for: url), cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Data("refused".utf8))
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

/// A challenge's sender, which URLSession's challenges never call.
final class IgnoredSender: NSObject, URLAuthenticationChallengeSender, Sendable {
    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
    func cancel(_ challenge: URLAuthenticationChallenge) {}
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
}
#endif
