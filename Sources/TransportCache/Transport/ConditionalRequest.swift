import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Conditional requests (RFC 9110 section 13): the ones a caller sends itself, which bypass the
/// store, and the ones the transport sends to revalidate an entry.
enum ConditionalRequest {
    /// Request headers that make the origin's answer depend on what the caller already holds
    /// (a `304`, a `412`, a `206`): such an answer is the caller's own, and must neither come
    /// from nor go into the store.
    static let callerHeaders = ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range"]

    /// True when `headers` carries any of ``callerHeaders``.
    /// - Complexity: O(h) in the number of header fields; no allocation.
    static func isCallerConditional(_ headers: [String: String]?) -> Bool {
        guard let headers, !headers.isEmpty else { return false }
        for field in headers.keys {
            // Every such name starts with "i" or "r"; most header names do not.
            guard let first = field.utf8.first, first | 0x20 == UInt8(ascii: "i") || first | 0x20 == UInt8(ascii: "r") else {
                continue
            }
            if callerHeaders.contains(where: { ASCII.equalsIgnoringCase($0, field) }) { return true }
        }
        return false
    }

    /// `request` asking the origin to answer `304 Not Modified` if `entry` is still current.
    static func revalidating(_ request: URLRequest, against entry: StoredResponse) -> URLRequest {
        var request = request
        if let entityTag = entry.entityTag { request.setValue(entityTag, forHTTPHeaderField: "If-None-Match") }
        if let lastModified = entry.lastModified { request.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since") }
        return request
    }
}
