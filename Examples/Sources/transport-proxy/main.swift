import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import TransportCache

// A reverse proxy with one CachedTransport in front of an upstream origin: every request that
// reaches it is sent through the transport and its answer returned as it came. It is how the
// transport is measured by a public HTTP cache test suite (see the Revalidation article and
// Benchmarks/README.md), which talks to a cache in front of its own server.
//
//     swift run --package-path Examples transport-proxy --upstream http://127.0.0.1:8000 --port 8080 \
//         [--http-caching] [--stale-if-error]
//
// The header override is off: the origin's caching headers are taken at their word. With
// `--http-caching` the transport follows HTTP caching (`freshness.conformsToHTTPCaching`); without it, it
// keeps its default behaviour. With `--stale-if-error` (`freshness.staleIfError`) a stored answer stands in
// for an origin that cannot be reached (and, following HTTP, for its 500, 502, 503 or 504).

struct Options {
    var upstream = URL(string: "http://127.0.0.1:8000")!
    var port = 8080
    var httpCaching = false
    var staleIfError = false

    init(_ arguments: [String]) {
        var remaining = arguments.dropFirst()
        while let argument = remaining.popFirst() {
            switch argument {
            case "--upstream": if let value = remaining.popFirst(), let url = URL(string: value) { upstream = url }
            case "--port": if let value = remaining.popFirst(), let port = Int(value) { self.port = port }
            case "--http-caching": httpCaching = true
            case "--stale-if-error": staleIfError = true
            default:
                FileHandle.standardError.write(Data("unknown argument \(argument)\n".utf8))
                exit(2)
            }
        }
    }
}

/// Fields that describe one connection, not the message (RFC 9110 section 7.6.1), and those the
/// client side or the server side computes again.
let connectionFields: Set<String> = [
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host",
    "content-length",
]

let options = Options(CommandLine.arguments)
var configuration = CachedTransport.Configuration()
configuration.network.cacheOverride = nil
configuration.freshness.conformsToHTTPCaching = options.httpCaching
configuration.freshness.staleIfError = options.staleIfError
configuration.stayingCurrent.changeBufferLimit = 1
let transport = CachedTransport(configuration: configuration)

/// The fields `Connection` names in `fields`: they describe that connection only.
func connectionListed(_ fields: [String: String]) -> Set<String> {
    guard let value = fields.first(where: { $0.key.lowercased() == "connection" })?.value else { return [] }
    return Set(value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
}

/// The answer to one request that reached the proxy.
func answer(_ request: Request) async throws -> (HTTPResponse, ByteBuffer) {
    var request = request
    var outgoing = URLRequest(url: URL(string: options.upstream.absoluteString + request.uri.description)!)
    outgoing.httpMethod = request.method.rawValue
    for field in request.headers where !connectionFields.contains(field.name.canonicalName) {
        outgoing.addValue(field.value, forHTTPHeaderField: field.name.rawName)
    }
    let body = try await request.collectBody(upTo: 16 * 1024 * 1024)
    if body.readableBytes > 0 { outgoing.httpBody = Data(body.readableBytesView) }
    let data: Data
    let response: URLResponse
    do {
        (data, response) = try await transport.data(for: outgoing)
    } catch {
        return (HTTPResponse(status: .badGateway), ByteBuffer(string: "\(error)"))
    }
    guard let http = response as? HTTPURLResponse else { return (HTTPResponse(status: .badGateway), ByteBuffer()) }
    let fields = http.allHeaderFields.reduce(into: [String: String]()) { fields, field in
        fields[String(describing: field.key)] = String(describing: field.value)
    }
    let dropped = connectionFields.union(connectionListed(fields))
    var headers = HTTPFields()
    for (name, value) in fields {
        guard !dropped.contains(name.lowercased()), let fieldName = HTTPField.Name(name) else { continue }
        headers.append(HTTPField(name: fieldName, value: value))
    }
    let noBody = request.method == .head || http.statusCode == 204 || http.statusCode == 304 || http.statusCode < 200
    if !noBody { headers[.contentLength] = String(data.count) }
    return (
        HTTPResponse(status: .init(code: http.statusCode), headerFields: headers),
        noBody ? ByteBuffer() : ByteBuffer(bytes: data)
    )
}

var logger = Logger(label: "transport-proxy")
logger.logLevel = .error
// HummingbirdCore's server rather than an Application: an Application sets its own `Date` on
// every response, and a cache must pass on the origin's.
let server = Server(
    childChannelSetup: HTTP1Channel { request, responseWriter, _ in
        let (head, body) = try await answer(request)
        try await responseWriter.write(response: head, body: .init(byteBuffer: body))
    },
    configuration: .init(address: .hostname("127.0.0.1", port: options.port)),
    eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
    logger: logger
)
print(
    "transport-proxy on 127.0.0.1:\(options.port) -> \(options.upstream.absoluteString)\(options.httpCaching ? " (HTTP caching)" : "")"
)
try await server.run()
