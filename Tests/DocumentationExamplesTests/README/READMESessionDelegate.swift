// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Security)
import Security
#endif
import TransportCache

enum READMESessionDelegate {
    final class PinningDelegate: NSObject, URLSessionDelegate, Sendable {
        private let pinnedCertificates: Set<Data>   // DER bytes, from the app's bundle
        init(pinnedCertificates: Set<Data>) { self.pinnedCertificates = pinnedCertificates }

        func urlSession(
            _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            #if canImport(Security)
            if challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust {
                guard let trust = challenge.protectionSpace.serverTrust, SecTrustEvaluateWithError(trust, nil),
                    let chain = SecTrustCopyCertificateChain(trust) as? [SecCertificate],
                    chain.contains(where: { pinnedCertificates.contains(SecCertificateCopyData($0) as Data) })
                else { return completionHandler(.cancelAuthenticationChallenge, nil) }
                return completionHandler(.useCredential, URLCredential(trust: trust))
            }
            #endif
            completionHandler(.performDefaultHandling, nil)   // Linux raises no server-trust challenge
        }
    }

    static func make(certificate: Data) -> CachedTransport {
        let transport = CachedTransport(sessionDelegate: PinningDelegate(pinnedCertificates: [certificate]))
        return transport
    }
}
