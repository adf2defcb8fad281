import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The conditional requests the transport sends to revalidate a stored entry (RFC 9110
/// section 13).
enum ConditionalRequest {
    /// `request` asking the origin to answer `304 Not Modified` if `entry` is still current.
    static func revalidating(_ request: URLRequest, against entry: StoredResponse) -> URLRequest {
        var request = request
        if let entityTag = entry.entityTag { request.setValue(entityTag, forHTTPHeaderField: "If-None-Match") }
        if let lastModified = entry.lastModified {
            request.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since")
        }
        return request
    }
}
