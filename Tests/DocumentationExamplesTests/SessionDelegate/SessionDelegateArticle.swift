// swift-format-ignore-file
// The blocks of SessionDelegate.md, verbatim as a reader copies them: DocumentationBlocksTests checks they are the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Security)
import Security
#endif
import TransportCache

/// Accepts a server only when its certificate chain holds one of the pinned certificates.
final class PinningDelegate: NSObject, URLSessionDelegate, Sendable {
    /// The DER bytes of the certificates to trust, from the app's bundle.
    private let pinnedCertificates: Set<Data>

    init(pinnedCertificates: Set<Data>) {
        self.pinnedCertificates = pinnedCertificates
    }

    func urlSession(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(Security)
        if challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust {
            guard let trust = challenge.protectionSpace.serverTrust, SecTrustEvaluateWithError(trust, nil),
                let chain = SecTrustCopyCertificateChain(trust) as? [SecCertificate],
                chain.contains(where: { pinnedCertificates.contains(SecCertificateCopyData($0) as Data) })
            else {
                completionHandler(.cancelAuthenticationChallenge, nil)
                return
            }
            completionHandler(.useCredential, URLCredential(trust: trust))
            return
        }
        #endif
        // Any other challenge, and every challenge on Linux, where libcurl checks certificates itself.
        completionHandler(.performDefaultHandling, nil)
    }
}

func sessionDelegateArticlePinning(certificateURL: URL) throws -> CachedTransport {
    let certificate = try Data(contentsOf: certificateURL)
    let transport = CachedTransport(sessionDelegate: PinningDelegate(pinnedCertificates: [certificate]))
    return transport
}

/// Follows a redirect only within the host the request was sent to.
final class SameHostRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(request.url?.host == task.originalRequest?.url?.host ? request : nil)
    }
}

func sessionDelegateArticleMetrics(transport: CachedTransport) async {
    for await event in transport.events() {
        if case .networkMetrics(let metrics) = event.kind {
            print("\(event.url): \(metrics.taskMetrics.transactionMetrics.count) requests, \(metrics.duration)")
        }
    }
}
