import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// A real HTTP/1.1 origin on 127.0.0.1 and a random port, for end-to-end tests, the demo and the
/// benchmarks.
///
/// GET and HEAD on any path answer `200` with the body
/// `path=<path> query=<query> version=<n> auth=<Authorization or -> hit=<n>` (followed by
/// ` cookie=<Cookie>` when the request sends one) and `Cache-Control: no-cache`. Query parameters
/// change the answer, and so do the same parameters in an `X-Origin-Query` request header (which
/// is not part of a cache key, so a test can make one URL fail):
/// - `delay=<ms>`: answer after that many milliseconds;
/// - `status=<code>`: answer with that status;
/// - `size=<bytes>`: a body of exactly that many bytes;
/// - `cc=<value>`: `Cache-Control: <value>` (`cc=none` sends none; `maxage0` stands for `max-age=0`);
/// - `cc2=<value>`: a second `Cache-Control` field line after the first;
/// - `pragma=no-cache`, `vary=<header or *>`, `setcookie=1`: those headers;
/// - `expires=<value>`: `Expires: <value>` (`past` stands for the epoch);
/// - `gate=1`: wait until the gate is open (see ``closeGate()``);
/// - `drop=1`: promise a longer body than is sent, then close the connection;
/// - `reset=1`: reset the connection (TCP RST) without answering;
/// - `redirect=<path>`: `302` to that path;
/// - `loop=1`: `302` to the request's own path and query, for ever.
///
/// Other methods bump the path's version, answer with the request body echoed and `X-Version`.
public final class LoopbackOrigin: Sendable {
    /// `http://127.0.0.1:<port>`.
    public let baseURL: URL
    private let state: OriginState
    private let serviceGroup: ServiceGroup
    private let running: Task<Void, any Error>

    private init(baseURL: URL, state: OriginState, serviceGroup: ServiceGroup, running: Task<Void, any Error>) {
        self.baseURL = baseURL
        self.state = state
        self.serviceGroup = serviceGroup
        self.running = running
    }

    /// Starts an origin on 127.0.0.1 and a port the system picks.
    public static func start() async throws -> LoopbackOrigin {
        let state = OriginState()
        var logger = Logger(label: "LoopbackOrigin")
        logger.logLevel = .error
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let application = Application(
            responder: CallbackResponder<OriginContext> { request, context in
                try await OriginResponder.respond(to: request, context: context, state: state)
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger
        )
        let serviceGroup = ServiceGroup(
            configuration: .init(services: [application], gracefulShutdownSignals: [], logger: logger)
        )
        let running = Task { try await serviceGroup.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            running.cancel()
            throw URLError(.cannotConnectToHost)
        }
        return LoopbackOrigin(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!,
            state: state,
            serviceGroup: serviceGroup,
            running: running
        )
    }

    /// Stops the server and waits until it has stopped.
    public func stop() async {
        await state.openGate()
        await serviceGroup.triggerGracefulShutdown()
        _ = await running.result
    }

    /// `baseURL` with `pathAndQuery` (such as `/items?page=1`) appended.
    public func url(_ pathAndQuery: String) -> URL {
        URL(string: baseURL.absoluteString + pathAndQuery)!
    }

    /// Requests that arrived for exactly this path and query (`/items?page=1`).
    public func hits(_ pathAndQuery: String) async -> Int { await state.hits(pathAndQuery) }

    /// Requests that arrived for this path, whatever their query.
    public func hits(path: String) async -> Int { await state.pathHits(path) }

    /// Requests that arrived in all.
    public var totalHits: Int { get async { await state.totalHits } }

    /// The path's version: how many non-GET requests it has received, plus the bumps of
    /// ``bumpVersion(of:)``.
    public func version(of path: String) async -> Int { await state.version(of: path) }

    /// Changes the path's data on the server's side, as another client would.
    /// - Returns: the new version.
    @discardableResult
    public func bumpVersion(of path: String) async -> Int { await state.bumpVersion(of: path) }

    /// From now on, requests with `gate=1` wait until ``openGate()``.
    public func closeGate() async { await state.closeGate() }

    /// Lets every waiting request through, and later ones at once.
    public func openGate() async { await state.openGate() }

    /// Suspends until at least `count` requests for `pathAndQuery` have arrived.
    public func waitForHits(_ pathAndQuery: String, count: Int) async {
        await state.waitForHits(pathAndQuery, count: count)
    }
}

actor OriginState {
    private var hitsByKey: [String: Int] = [:]
    private var hitsByPath: [String: Int] = [:]
    private(set) var totalHits = 0
    private var versions: [String: Int] = [:]
    private var gateOpen = true
    private var gateWaiters: [CheckedContinuation<Void, Never>] = []
    private var hitWaiters: [(key: String, count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    func recordHit(key: String, path: String) -> Int {
        hitsByKey[key, default: 0] += 1
        hitsByPath[path, default: 0] += 1
        totalHits += 1
        let count = hitsByKey[key]!
        let ready = hitWaiters.filter { $0.key == key && $0.count <= count }
        hitWaiters.removeAll { $0.key == key && $0.count <= count }
        for waiter in ready { waiter.continuation.resume() }
        return count
    }

    func hits(_ key: String) -> Int { hitsByKey[key] ?? 0 }
    func pathHits(_ path: String) -> Int { hitsByPath[path] ?? 0 }
    func version(of path: String) -> Int { versions[path] ?? 0 }

    func bumpVersion(of path: String) -> Int {
        versions[path, default: 0] += 1
        return versions[path]!
    }

    func closeGate() { gateOpen = false }

    func openGate() {
        gateOpen = true
        let waiters = gateWaiters
        gateWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
    }

    func passGate() async {
        guard !gateOpen else { return }
        await withCheckedContinuation { gateWaiters.append($0) }
    }

    func waitForHits(_ key: String, count: Int) async {
        guard (hitsByKey[key] ?? 0) < count else { return }
        await withCheckedContinuation { hitWaiters.append((key, count, $0)) }
    }
}

/// The request context: the basic one plus the connection, which the `reset` answer needs.
struct OriginContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

enum OriginResponder {
    static func respond(to request: Request, context: OriginContext, state: OriginState) async throws -> Response {
        var request = request
        let path = request.uri.path
        let query = request.uri.query
        let key = query.map { "\(path)?\($0)" } ?? path
        let parameters = request.uri.queryParameters
        let extra = request.headers[.init("X-Origin-Query")!]
            .flatMap { URLComponents(string: "?" + $0)?.queryItems } ?? []
        func parameter(_ name: String) -> String? {
            if let item = extra.last(where: { $0.name == name }) { return item.value ?? "" }
            return parameters[Substring(name)].map(String.init)
        }

        let hit = await state.recordHit(key: key, path: path)
        if parameter("reset") == "1" {
            // SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            try? await (context.channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
            try? await context.channel.close()
            throw CancellationError()
        }
        if parameter("gate") == "1" { await state.passGate() }
        if let delay = parameter("delay").flatMap(Int.init), delay > 0 {
            try await Task.sleep(for: .milliseconds(delay))
        }
        let status = HTTPResponse.Status(code: parameter("status").flatMap(Int.init) ?? 200)

        guard request.method == .get || request.method == .head else {
            let body = try await request.collectBody(upTo: 64 * 1024 * 1024)
            let version = await state.bumpVersion(of: path)
            var headers = HTTPFields()
            headers[.init("X-Version")!] = String(version)
            return Response(status: status, headers: headers, body: .init(byteBuffer: body))
        }

        var headers = HTTPFields()
        switch parameter("cc") {
        case nil: headers[.cacheControl] = "no-cache"
        case "none": break
        case "maxage0": headers[.cacheControl] = "max-age=0"
        case let value?: headers[.cacheControl] = value
        }
        if let second = parameter("cc2") { headers.append(.init(name: .cacheControl, value: second)) }
        if parameter("pragma") == "no-cache" { headers[.init("Pragma")!] = "no-cache" }
        switch parameter("expires") {
        case nil: break
        case "past": headers[.expires] = "Thu, 01 Jan 1970 00:00:00 GMT"
        case let value?: headers[.expires] = value
        }
        if let vary = parameter("vary") { headers[.vary] = vary }
        if parameter("setcookie") == "1" { headers[.setCookie] = "session=\(hit)" }
        if parameter("loop") == "1" {
            headers[.location] = key
            return Response(status: .found, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "loop")))
        }
        if let location = parameter("redirect") {
            headers[.location] = location
            return Response(status: .found, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "redirect")))
        }
        if parameter("drop") == "1" {
            let partial = ByteBuffer(repeating: UInt8(ascii: "d"), count: 1_000)
            headers[.contentLength] = "100000"
            return Response(status: status, headers: headers, body: ResponseBody(contentLength: 100_000) { writer in
                try await writer.write(partial)
                throw CancellationError()
            })
        }
        let body: ByteBuffer
        if let size = parameter("size").flatMap(Int.init) {
            body = ByteBuffer(repeating: UInt8(ascii: "x"), count: max(0, size))
        } else {
            let auth = request.headers[.authorization] ?? "-"
            let version = await state.version(of: path)
            let cookie = request.headers[.cookie].map { " cookie=\($0)" } ?? ""
            body = ByteBuffer(string: "path=\(path) query=\(query ?? "") version=\(version) auth=\(auth) hit=\(hit)\(cookie)")
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
}
