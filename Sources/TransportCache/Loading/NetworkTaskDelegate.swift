import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The task delegate of every data task that really goes to the network: a transport's (its inner
/// session's through the header override, its own session's without it) and the header override's
/// on its own. The session's delegate, the app's when it gave one, still hears everything this
/// does not implement; URLSession asks a task's delegate first and falls back to its session's.
///
/// It adds two things:
/// - **Metrics.** URLSession hands a task's metrics to the task's delegate instead of the
///   session's. This one reports them (to ``CachedTransport/events()``) and passes them on to the
///   session's delegate, which so hears them as it would without a task delegate. Where the
///   platform collects none (Linux), it is never called.
/// - **Basic challenges on Linux.** swift-corelibs-foundation answers a challenge given default
///   handling only with a credential from the credential storage; without one it neither
///   completes the task nor times it out, so a `401` with `WWW-Authenticate: Basic` that nobody
///   answers would keep its callers waiting for ever. Here such a challenge ends the task with the
///   `401` itself, as Apple platforms do (corelibs keeps its body, so it arrives empty). A
///   `.useCredential` without a credential (which corelibs would crash on) and a rejected
///   protection space (corelibs has only one per request) are taken the same way. Apple platforms
///   keep their own challenge handling: there this delegate does not implement the challenge.
final class NetworkTaskDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    /// Where metrics go besides the session's delegate; nil reports them nowhere else.
    private let metrics: MetricsRelay?
    /// The `401` of a challenge this delegate ended, to answer with instead of the cancellation.
    private let unansweredChallenge = Locked<HTTPURLResponse?>(nil)

    init(metrics: MetricsRelay?) {
        self.metrics = metrics
    }

    /// What the task's completion handler received, as its caller is to take it: the `401` of a
    /// challenge this delegate ended instead of the cancellation that ended it.
    func settled(data: Data?, response: URLResponse?, error: (any Error)?) -> (Data?, URLResponse?, (any Error)?) {
        guard let urlError = error as? URLError, urlError.code == .cancelled,
            let refused = unansweredChallenge.withLock({ $0 })
        else { return (data, response, error) }
        return (Data(), refused, nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        if let url = task.originalRequest?.url { self.metrics?.report(url, metrics) }
        guard let delegate = session.delegate as? URLSessionTaskDelegate, delegate !== self else { return }
        #if canImport(FoundationNetworking)
        delegate.urlSession(session, task: task, didFinishCollecting: metrics)
        #else
        delegate.urlSession?(session, task: task, didFinishCollecting: metrics)
        #endif
    }

    #if canImport(FoundationNetworking)
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @Sendable @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let delegate = session.delegate as? URLSessionTaskDelegate, delegate !== self else {
            let (disposition, credential) = answer(challenge, .performDefaultHandling, nil)
            completionHandler(disposition, credential)
            return
        }
        delegate.urlSession(session, task: task, didReceive: challenge) { disposition, credential in
            let (disposition, credential) = self.answer(challenge, disposition, credential)
            completionHandler(disposition, credential)
        }
    }

    /// What corelibs is told for `challenge` when the app's delegate (or, without one, default
    /// handling) said `disposition` with `credential`: the same, unless corelibs would then never
    /// complete the task or would crash, in which case the task is cancelled and answered with the
    /// challenge's `401` (see ``settled(data:response:error:)``).
    func answer(
        _ challenge: URLAuthenticationChallenge, _ disposition: URLSession.AuthChallengeDisposition,
        _ credential: URLCredential?
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        let endsWithoutCredential: Bool =
            switch disposition {
            case .useCredential: credential == nil
            // Default handling proceeds only with a stored credential it has not tried yet.
            case .performDefaultHandling: challenge.proposedCredential == nil || challenge.previousFailureCount > 0
            case .rejectProtectionSpace: true
            case .cancelAuthenticationChallenge: false
            @unknown default: false
            }
        guard endsWithoutCredential, let refused = challenge.failureResponse as? HTTPURLResponse else {
            return (disposition, credential)
        }
        unansweredChallenge.withLock { $0 = refused }
        return (.cancelAuthenticationChallenge, nil)
    }
    #endif
}

/// Where a loader's network tasks report their metrics: set once, by the transport that owns the
/// loader, before it sends anything.
final class MetricsRelay: Sendable {
    private let destination = Locked<(@Sendable (URL, URLSessionTaskMetrics) -> Void)?>(nil)

    /// Sends every later report to `report`.
    func send(to report: @escaping @Sendable (URL, URLSessionTaskMetrics) -> Void) {
        destination.withLock { $0 = report }
    }

    /// Reports the metrics of a task that fetched `url`.
    func report(_ url: URL, _ metrics: URLSessionTaskMetrics) {
        destination.withLock { $0 }?(url, metrics)
    }
}
