import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import OpenAPIRuntime
import TransportCache

/// A `ClientTransport` for clients made by swift-openapi-generator that sends every operation
/// through a ``CachedTransport``: GET and HEAD operations are answered from memory and coalesced,
/// other methods pass through and invalidate what they changed. Each stored answer is tagged with
/// its operation's ID, so `transport.invalidate(tag: "<operationID>")` drops every answer of that
/// operation, whatever its parameters.
///
/// ```swift
/// let transport = CachedTransport()   // one per app, shared with the rest of the app
/// let client = Client(serverURL: try Servers.Server1.url(), transport: CachedClientTransport(transport))
/// let refreshing = Client(
///     serverURL: try Servers.Server1.url(),
///     transport: CachedClientTransport(transport, cachePolicy: .reloadIgnoringLocalCacheData)
/// )
/// ```
///
/// The response body is delivered whole: the transport buffers it to store and share it.
public struct CachedClientTransport: ClientTransport {
    /// The transport every operation goes through.
    public let transport: CachedTransport
    /// The cache policy of every request: `useProtocolCachePolicy` answers from memory when it
    /// can; `reloadIgnoringLocalCacheData` makes every call a pull-to-refresh, which stores the
    /// answer and announces a change; `returnCacheDataDontLoad` never touches the network.
    public let cachePolicy: URLRequest.CachePolicy
    /// The largest request body, in bytes, that is collected and sent; a larger one throws
    /// ``CachedClientTransportError/requestBodyTooLarge`` before anything is sent.
    public let maximumRequestBodySize: Int

    /// Makes a transport for generated clients over `transport`.
    public init(
        _ transport: CachedTransport,
        cachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy,
        maximumRequestBodySize: Int = 16 * 1024 * 1024
    ) {
        self.transport = transport
        self.cachePolicy = cachePolicy
        self.maximumRequestBodySize = maximumRequestBodySize
    }

    /// Sends `request` through ``transport`` and hands back its answer, tagging what it stores with
    /// `operationID` (see ``CachedTransport/data(for:tags:)``).
    ///
    /// - Throws: what ``CachedTransport/data(for:)`` throws (`URLError`, `CancellationError`), or a
    ///   ``CachedClientTransportError``. The generated client wraps each in its `ClientError`.
    public func send(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var urlRequest = URLRequest(url: try Self.url(of: request, baseURL: baseURL))
        urlRequest.httpMethod = request.method.rawValue
        urlRequest.cachePolicy = cachePolicy
        for (name, value) in Self.combinedFields(request.headerFields) {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        if let body {
            urlRequest.httpBody = try await collect(body)
        }
        let (data, response) = try await transport.data(for: urlRequest, tags: [operationID])
        guard let http = response as? HTTPURLResponse else {
            throw CachedClientTransportError.notHTTPResponse
        }
        // A HEAD answer has no body; every other answer has one, possibly empty, because
        // generated code treats a missing body as a malformed response.
        let responseBody = request.method == .head ? nil : HTTPBody(data)
        return (Self.response(of: http), responseBody)
    }

    private func collect(_ body: HTTPBody) async throws -> Data {
        if case .known(let length) = body.length, length > maximumRequestBodySize {
            throw CachedClientTransportError.requestBodyTooLarge
        }
        var data = Data()
        for try await chunk in body {
            guard data.count + chunk.count <= maximumRequestBodySize else {
                throw CachedClientTransportError.requestBodyTooLarge
            }
            data.append(contentsOf: chunk)
        }
        return data
    }

    /// `baseURL` followed by the request's path and query, both kept percent-encoded as the
    /// generated client wrote them. A base URL ending in `/` does not double the slash.
    static func url(of request: HTTPRequest, baseURL: URL) throws -> URL {
        let pathAndQuery = request.path ?? "/"
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: true),
            let requested = URLComponents(string: pathAndQuery)
        else {
            throw CachedClientTransportError.invalidRequestURL
        }
        var basePath = components.percentEncodedPath
        if basePath.hasSuffix("/"), requested.percentEncodedPath.hasPrefix("/") {
            basePath.removeLast()
        }
        components.percentEncodedPath = basePath + requested.percentEncodedPath
        components.percentEncodedQuery = requested.percentEncodedQuery
        components.fragment = nil
        guard let url = components.url else { throw CachedClientTransportError.invalidRequestURL }
        return url
    }

    /// One value per field name, repeated fields joined as RFC 9110 section 5.3 allows (`; ` for
    /// `Cookie`, section 5.4 of RFC 6265), since `URLRequest` keeps one value per name.
    static func combinedFields(_ fields: HTTPFields) -> [(String, String)] {
        var order: [HTTPField.Name] = []
        var values: [HTTPField.Name: String] = [:]
        for field in fields {
            if let existing = values[field.name] {
                values[field.name] = existing + (field.name == .cookie ? "; " : ", ") + field.value
            } else {
                order.append(field.name)
                values[field.name] = field.value
            }
        }
        return order.map { ($0.rawName, values[$0]!) }
    }

    static func response(of http: HTTPURLResponse) -> HTTPResponse {
        var response = HTTPResponse(status: .init(code: http.statusCode))
        for (name, value) in http.allHeaderFields {
            guard let name = (name as? String).flatMap({ HTTPField.Name($0) }),
                let value = value as? String
            else { continue }
            response.headerFields.append(HTTPField(name: name, value: value))
        }
        return response
    }
}
