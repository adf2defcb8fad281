import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a `304 Not Modified` updates the stored response it confirms (RFC 9111 sections 3.2 and
/// 4.3.4): every field it carries replaces the stored one, except the fields that describe the
/// stored message or the connection, and `Set-Cookie`, which belongs to the exchange that
/// received it and is never stored.
enum NotModifiedMerge {
    /// Fields a `304` must not change in the stored response: they describe the stored message
    /// itself (its length and encoding), or only the connection (sections 3.1 and 3.2).
    static let keptFields: Set<String> = [
        "content-length", "content-encoding", "content-range", "transfer-encoding", "connection",
        "keep-alive", "te", "trailer", "upgrade", "proxy-connection", "proxy-authenticate",
        "proxy-authorization",
    ]

    /// Fields that reach the callers of the revalidating request but never the stored entry: a
    /// cookie set for one exchange must not be handed to every later request.
    static let unstoredFields: Set<String> = ["set-cookie", "set-cookie2"]

    /// `stored` updated from `notModified`, with the stored status.
    /// - Returns: the response to store (without `Set-Cookie`) and the one the revalidating
    ///   request's callers get (with the `304`'s `Set-Cookie`, when it has one).
    static func merge(_ stored: URLResponse, with notModified: HTTPURLResponse) -> (
        stored: URLResponse, answered: URLResponse
    ) {
        guard let http = stored as? HTTPURLResponse else { return (stored, stored) }
        var fields = HeaderFields(of: http)
        var unstored: [(name: String, lowercasedName: String, value: String)] = []
        for (lowercasedName, field) in HeaderFields(of: notModified).byLowercasedName
        where !keptFields.contains(lowercasedName) {
            if unstoredFields.contains(lowercasedName) {
                unstored.append((field.name, lowercasedName, field.value))
            } else {
                fields.set(field.value, name: field.name, lowercasedName: lowercasedName)
            }
        }
        // The stored response carries the outcome every stored response does: a fresh answer.
        let storedResponse = HTTPResponseBuilder.response(stored, fields: fields, outcome: .fresh)
        guard !unstored.isEmpty else { return (storedResponse, storedResponse) }
        for field in unstored { fields.set(field.value, name: field.name, lowercasedName: field.lowercasedName) }
        return (storedResponse, HTTPResponseBuilder.response(stored, fields: fields))
    }
}
