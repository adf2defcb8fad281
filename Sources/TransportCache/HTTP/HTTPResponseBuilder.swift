import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one place the library makes an `HTTPURLResponse`: the header override's rewrite, an answer
/// of its own (a `504` for `only-if-cached`), a copy of a response with some fields changed, and
/// a response carrying the ``CacheOutcome`` of the answer it is part of. Each is a
/// ``TransportHTTPURLResponse``, which keeps its fields for later lookups.
package enum HTTPResponseBuilder {
    /// The version every response the package makes carries (the scripted origin's too).
    /// Foundation's responses do not say which version brought them, and nothing reads it.
    package static let httpVersion = "HTTP/1.1"

    /// A response to `url` with `statusCode` and `headerFields`.
    static func response(
        url: URL, statusCode: Int, headerFields: HeaderFields, isFresh: Bool = false, outcome: CacheOutcome?
    ) -> TransportHTTPURLResponse {
        // Foundation returns nil only for a status outside 100-599, which no caller passes.
        TransportHTTPURLResponse(
            url: url, statusCode: statusCode, headerFields: headerFields, isFresh: isFresh, outcome: outcome)!
    }

    /// `response` with its fields replaced by `fields`; `response` itself when it is not HTTP.
    static func response(_ response: URLResponse, fields: HeaderFields, outcome: CacheOutcome? = nil) -> URLResponse {
        guard let http = response as? HTTPURLResponse, let url = http.url else { return response }
        return self.response(
            url: url, statusCode: http.statusCode, headerFields: fields,
            isFresh: (http as? TransportHTTPURLResponse)?.isFresh ?? false, outcome: outcome)
    }

    /// `response` carrying `outcome`, its fields unchanged; `response` itself when it is not HTTP.
    static func answer(_ response: URLResponse, outcome: CacheOutcome) -> URLResponse {
        guard let http = response as? HTTPURLResponse else { return response }
        return self.response(response, fields: HeaderFields(of: http), outcome: outcome)
    }

    /// `response` with the field `name` set to `value` (any spelling of the name replaced).
    static func response(
        _ response: URLResponse, setting name: String, to value: String, outcome: CacheOutcome?
    ) -> URLResponse {
        guard let http = response as? HTTPURLResponse else { return response }
        var fields = HeaderFields(of: http)
        fields.set(value, name: name, lowercasedName: ASCII.lowercased(name))
        return self.response(response, fields: fields, outcome: outcome)
    }

    /// `response` marked as a stored answer that is not fresh: ``CachedTransport/staleHeaderField``
    /// set to `value`.
    static func stale(_ response: URLResponse, value: String, outcome: CacheOutcome) -> URLResponse {
        self.response(response, setting: CachedTransport.staleHeaderField, to: value, outcome: outcome)
    }

    /// `response` without `Connection` and the fields it names: they describe one connection, and
    /// a cache must not store or pass them on (RFC 9110 section 7.6.1, RFC 9111 section 3.1).
    static func withoutConnectionFields(_ response: URLResponse) -> URLResponse {
        guard let http = response as? HTTPURLResponse, let connection = http.headerValue("connection") else {
            return response
        }
        let listed = Set(HeaderList.lowercasedElements(connection))
        var fields = HeaderFields()
        for (lowercased, field) in HeaderFields(of: http).byLowercasedName
        where lowercased != "connection" && !listed.contains(lowercased) {
            fields.set(field.value, name: field.name, lowercasedName: lowercased)
        }
        return self.response(response, fields: fields)
    }
}
