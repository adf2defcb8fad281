import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one place the library makes an `HTTPURLResponse` from fields: an answer of its own (a `504`
/// for `only-if-cached`) or a copy of a response with some fields changed. The header override's
/// rewritten response, a subclass that keeps its fields, takes its version from here.
enum HTTPResponseBuilder {
    /// The version every response the library makes carries. Foundation's responses do not say
    /// which version brought them, and nothing reads it.
    static let httpVersion = "HTTP/1.1"

    /// A response to `url` with `statusCode` and `fields`.
    static func response(url: URL, statusCode: Int, fields: [String: String]) -> HTTPURLResponse {
        // Foundation returns nil only for a status outside 100-599, which no caller passes.
        HTTPURLResponse(url: url, statusCode: statusCode, httpVersion: httpVersion, headerFields: fields)!
    }

    /// `response` with its fields replaced by `fields`; `response` itself when it is not HTTP.
    static func response(_ response: URLResponse, fields: [String: String]) -> URLResponse {
        guard let http = response as? HTTPURLResponse, let url = http.url else { return response }
        return self.response(url: url, statusCode: http.statusCode, fields: fields)
    }

    /// `response` with the field `name` set to `value` (any spelling of the name replaced).
    static func response(_ response: URLResponse, setting name: String, to value: String) -> URLResponse {
        guard let http = response as? HTTPURLResponse else { return response }
        var fields = HeaderFields(of: http)
        fields.set(value, name: name, lowercasedName: ASCII.lowercased(name))
        return self.response(response, fields: fields.fields)
    }

    /// `response` marked as a stored answer that is not fresh: ``CachedTransport/staleHeaderField``
    /// set to `value`.
    static func stale(_ response: URLResponse, value: String) -> URLResponse {
        self.response(response, setting: CachedTransport.staleHeaderField, to: value)
    }

    /// `response` without `Connection` and the fields it names: they describe one connection, and
    /// a cache must not store or pass them on (RFC 9110 section 7.6.1, RFC 9111 section 3.1).
    static func withoutConnectionFields(_ response: URLResponse) -> URLResponse {
        guard let http = response as? HTTPURLResponse, let connection = http.headerValue("connection") else {
            return response
        }
        let listed = Set(HeaderList.lowercasedElements(connection))
        var fields = HeaderFields(of: http).fields
        for name in fields.keys {
            let lowercased = ASCII.lowercased(name)
            if lowercased == "connection" || listed.contains(lowercased) { fields[name] = nil }
        }
        return self.response(response, fields: fields)
    }
}
