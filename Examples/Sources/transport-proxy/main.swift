import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import TransportCache

// A reverse proxy with one CachedTransport in front of an upstream origin: every request that
// reaches it is sent through the transport and its answer returned as it came. It is how the
// transport is measured by a public HTTP cache test suite (see the README), which talks to a cache
// in front of its own server.
//
//     swift run --package-path Examples transport-proxy --upstream http://127.0.0.1:8000 --port 8080 [--http-caching]
//
// The header override is off: the origin's caching headers are taken at their word. With
// `--http-caching` the transport follows HTTP caching (`conformsToHTTPCaching`); without it, it
// keeps its default behaviour.

struct Options {
    var upstream = URL(string: "http://127.0.0.1:8000")!
    var port = 8080
    var httpCaching = false

    init(_ arguments: [String]) {
        var remaining = arguments.dropFirst()
        while let argument = remaining.popFirst() {
            switch argument {
            case "--upstream": if let value = remaining.popFirst(), let url = URL(string: value) { upstream = url }
            case "--port": if let value = remaining.popFirst(), let port = Int(value) { self.port = port }
            case "--http-caching": httpCaching = true
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
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
]

let options = Options(CommandLine.arguments)
var configuration = CachedTransport.Configuration()
configuration.cacheOverride = nil
configuration.conformsToHTTPCaching = options.httpCaching
configuration.changeBufferLimit = 1
let transport = CachedTransport(configuration: configuration)

var logger = Logger(label: "transport-proxy")
logger.logLevel = .error
let application = Application(
    responder: CallbackResponder<BasicRequestContext> { incoming, _ in
        var request = incoming
        var outgoing = URLRequest(url: URL(string: options.upstream.absoluteString + request.uri.description)!)
        outgoing.httpMethod = request.method.rawValue
        for field in request.headers where !connectionFields.contains(field.name.canonicalName) {
            outgoing.addValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        let body = try await request.collectBody(upTo: 16 * 1024 * 1024)
        if body.readableBytes > 0 { outgoing.httpBody = Data(buffer: body) }
        let data: Data
        let answer: URLResponse
        do {
            (data, answer) = try await transport.data(for: outgoing)
        } catch {
            return Response(status: .badGateway, body: .init(byteBuffer: ByteBuffer(string: "\(error)")))
        }
        guard let http = answer as? HTTPURLResponse else { return Response(status: .badGateway) }
        var headers = HTTPFields()
        for (name, value) in http.allHeaderFields {
            let name = String(describing: name)
            guard !connectionFields.contains(name.lowercased()), let fieldName = HTTPField.Name(name) else { continue }
            headers.append(HTTPField(name: fieldName, value: String(describing: value)))
        }
        return Response(
            status: .init(code: http.statusCode),
            headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    },
    configuration: .init(address: .hostname("127.0.0.1", port: options.port)),
    logger: logger
)
print("transport-proxy on 127.0.0.1:\(options.port) -> \(options.upstream.absoluteString)\(options.httpCaching ? " (HTTP caching)" : "")")
try await application.runService()
