import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLResponse {
    /// True when a ``CachedTransport`` answered with a stored entry because the network failed
    /// (``CachedTransport/Configuration/staleIfError``).
    public var isStaleAnswer: Bool {
        (self as? HTTPURLResponse)?.value(forHTTPHeaderField: CachedTransport.staleHeaderField) != nil
    }
}
