import Foundation
import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An origin in memory, for tests of code that uses a `CachedTransport`: it
/// answers each request from a script, counts every call, and can hold calls at a gate until the
/// test lets them through, so that a test drives the transport with no server and no sleeping.
///
/// ```swift
/// let origin = ScriptedOrigin()
/// origin.respond(to: articlesURL, with: .init(headers: ["ETag": "\"v1\""], body: articlesJSON))
/// let transport = CachedTransport(origin: origin)
///
/// _ = try await transport.data(from: articlesURL)
/// _ = try await transport.data(from: articlesURL)
/// #expect(origin.callCount(for: articlesURL) == 1)
/// ```
///
/// A request with nothing scripted for its method and URL gets the answer of the responder given
/// to ``init(gated:respond:holding:)``, or, without one, `404 Not Found`.
///
/// To age entries, give the transport a `ManualCacheClock` in its configuration
/// and advance it.
public final class ScriptedOrigin: Sendable {
    /// One answer: a status, header fields and a body, after an optional delay; or a failure.
    public struct Reply: Sendable {
        /// The status code.
        public var status: Int
        /// The header fields.
        public var headers: [String: String]
        /// The body.
        public var body: Data
        /// How long to wait before answering (a real delay, cancelled with the load); prefer a
        /// gate (``init(gated:respond:holding:)``) to hold an answer for as long as a test needs.
        public var delay: Duration?
        /// When set, the load fails with this error instead of answering.
        public var failure: URLError?

        /// An answer with `status`, `headers` and `body`.
        public init(status: Int = 200, headers: [String: String] = [:], body: Data = Data(), delay: Duration? = nil) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
        }

        /// An answer with `status`, `headers` and the UTF-8 bytes of `text`.
        public init(status: Int = 200, headers: [String: String] = [:], text: String, delay: Duration? = nil) {
            self.init(status: status, headers: headers, body: Data(text.utf8), delay: delay)
        }

        /// A load that fails with `URLError(code)`, as a dropped connection or an unreachable host
        /// does.
        public static func failure(_ code: URLError.Code, delay: Duration? = nil) -> Reply {
            var reply = Reply(status: 0, delay: delay)
            reply.failure = URLError(code)
            return reply
        }
    }

    /// Answers a request that has no script: the request and its call number (1 for the first
    /// call the origin received).
    public typealias Responder = @Sendable (_ request: URLRequest, _ call: Int) throws -> Reply

    private struct Route: Hashable {
        let method: String
        let url: String
    }

    private struct State {
        var scripts: [Route: [Reply]] = [:]
        var calls: [URLRequest] = []
        var gateOpen: Bool
        var held: [Int: CheckedContinuation<Void, any Error>] = [:]
        /// Calls let through by ``release(_:)`` before they arrived.
        var released: Set<Int> = []
        var cancelledCalls = 0
        /// Answers (or failures) of fetches that the transport has finished taking in.
        var deliveredAnswers = 0
        var callWaiters = CountWaiters()
        var cancellationWaiters = CountWaiters()
        var deliveryWaiters = CountWaiters()
    }

    private let state: Locked<State>
    private let respond: Responder?
    private let holding: @Sendable (URLRequest) -> Bool

    /// - Parameters:
    ///   - gated: start with the gate closed: calls wait until ``openGate()`` or
    ///     ``release(_:)``.
    ///   - respond: the answer to a request with no script; nil for `404 Not Found`.
    ///   - holding: which calls a closed gate holds; others pass at once. Default: all.
    public init(
        gated: Bool = false,
        respond: Responder? = nil,
        holding: @escaping @Sendable (URLRequest) -> Bool = { _ in true }
    ) {
        state = Locked(State(gateOpen: !gated))
        self.respond = respond
        self.holding = holding
    }

    // MARK: - The script

    /// Answers `method` requests to `url` with `replies`, one per call in order; the last one
    /// answers every later call. Replaces any earlier script for them.
    public func respond(to url: URL, method: String = "GET", with replies: Reply...) {
        precondition(!replies.isEmpty, "a script needs at least one reply")
        state.withLock { $0.scripts[Route(method: method, url: url.absoluteString)] = replies }
    }

    // MARK: - The gate

    /// Closes the gate: later calls that ``init(gated:respond:holding:)``'s `holding` selects
    /// wait until it opens.
    public func closeGate() {
        state.withLock { $0.gateOpen = false }
    }

    /// Lets every held call and every later one through.
    public func openGate() {
        let held = state.withLock { state in
            state.gateOpen = true
            defer { state.held.removeAll() }
            return Array(state.held.values)
        }
        for continuation in held { continuation.resume() }
    }

    /// Lets call number `call` through, now if it is held or when it arrives, leaving the gate
    /// closed for the others.
    public func release(_ call: Int) {
        let continuation = state.withLock { state in
            guard let held = state.held.removeValue(forKey: call) else {
                state.released.insert(call)
                return nil as CheckedContinuation<Void, any Error>?
            }
            return held
        }
        continuation?.resume()
    }

    /// Suspends until at least `count` calls have arrived (held or answered). It waits as long as
    /// it takes: start the calls first.
    public func waitForCalls(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                state.callWaiters.add(continuation, until: count, reached: state.calls.count)
            }
            if ready { continuation.resume() }
        }
    }

    /// Suspends until at least `count` calls have been cancelled while held at the gate (see
    /// ``cancelledCalls``). It waits as long as it takes: cancel the calls first.
    public func waitForCancelledCalls(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                state.cancellationWaiters.add(continuation, until: count, reached: state.cancelledCalls)
            }
            if ready { continuation.resume() }
        }
    }

    /// Suspends until the transport has taken in at least `count` of the answers this origin gave
    /// its fetches, failures and cancelled calls included (see ``deliveredAnswers``). Everything a
    /// fetch does with its answer has then happened: it is stored or not, counted in
    /// `statistics`, announced to `changes()` streams and handed to its callers, and the fetch no
    /// longer counts as in flight. A background revalidation has then ended.
    ///
    /// It waits as long as it takes: let the answers through first.
    public func waitForDeliveredAnswers(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                state.deliveryWaiters.add(continuation, until: count, reached: state.deliveredAnswers)
            }
            if ready { continuation.resume() }
        }
    }

    // MARK: - What it received

    /// Every call, in the order it arrived.
    public var calls: [URLRequest] { state.withLock { $0.calls } }

    /// How many calls arrived.
    public var callCount: Int { state.withLock { $0.calls.count } }

    /// How many calls arrived for `url`, with `method` when given.
    public func callCount(for url: URL, method: String? = nil) -> Int {
        callCount(for: url.absoluteString, method: method)
    }

    /// How many calls arrived for the URL `url`, with `method` when given.
    public func callCount(for url: String, method: String? = nil) -> Int {
        state.withLock { state in
            state.calls.count { request in
                request.url?.absoluteString == url && (method == nil || (request.httpMethod ?? "GET") == method)
            }
        }
    }

    /// Calls that were cancelled while held at the gate.
    public var cancelledCalls: Int { state.withLock { $0.cancelledCalls } }

    /// Answers of fetches (failures and cancelled calls included) that the transport has
    /// finished taking in: see ``waitForDeliveredAnswers(_:)``. Requests the transport sends
    /// without a fetch of its own (other methods, requests with their own conditions) are not
    /// counted.
    public var deliveredAnswers: Int { state.withLock { $0.deliveredAnswers } }

    // MARK: - Answering

    /// Answers `request` as the script says, after the gate and the reply's delay. A reply is
    /// given as scripted, whatever the request asks: a scripted `304` answers an unconditional
    /// request too. A call cancelled while it waits ends with `URLError(.cancelled)`, as a
    /// URLSession task does.
    func answer(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let (call, scripted, ready) = state.withLock { state in
            state.calls.append(request)
            let count = state.calls.count
            let ready = state.callWaiters.reached(count)
            let route = Route(method: request.httpMethod ?? "GET", url: request.url?.absoluteString ?? "")
            var scripted: Reply?
            if var replies = state.scripts[route] {
                scripted = replies[0]
                if replies.count > 1 {
                    replies.removeFirst()
                    state.scripts[route] = replies
                }
            }
            return (count, scripted, ready)
        }
        for continuation in ready { continuation.resume() }
        if holding(request) { try await passGate(call) }
        guard let url = request.url else { throw URLError(.badURL) }
        let reply = try scripted ?? respond?(request, call) ?? Reply(status: 404, text: "not scripted")
        if let delay = reply.delay {
            do {
                try await Task.sleep(for: delay)
            } catch {
                throw URLError(.cancelled)
            }
        }
        if let failure = reply.failure { throw failure }
        guard
            let response = HTTPURLResponse(
                url: url, statusCode: reply.status, httpVersion: HTTPResponseBuilder.httpVersion,
                headerFields: reply.headers)
        else { throw URLError(.badServerResponse) }
        return (reply.body, response)
    }

    private func passGate(_ call: Int) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Decided under the lock the cancellation handler takes, so that a cancellation
                // either comes first (and is seen here) or finds the call held.
                let (proceed, waiters) = state.withLock { state -> (Bool?, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled {
                        state.cancelledCalls += 1
                        return (nil, state.cancellationWaiters.reached(state.cancelledCalls))
                    }
                    if state.gateOpen || state.released.remove(call) != nil { return (true, []) }
                    state.held[call] = continuation
                    return (false, [])
                }
                for waiter in waiters { waiter.resume() }
                switch proceed {
                case true?: continuation.resume()
                case nil: continuation.resume(throwing: URLError(.cancelled))
                case false?: break
                }
            }
        } onCancel: {
            let (continuation, waiters) = state.withLock {
                state -> (CheckedContinuation<Void, any Error>?, [CheckedContinuation<Void, Never>]) in
                let continuation = state.held.removeValue(forKey: call)
                guard continuation != nil else { return (nil, []) }
                state.cancelledCalls += 1
                return (continuation, state.cancellationWaiters.reached(state.cancelledCalls))
            }
            continuation?.resume(throwing: URLError(.cancelled))
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Counts an answer the transport has finished taking in, and wakes who waits for it.
    fileprivate func delivered() {
        let waiters = state.withLock { state in
            state.deliveredAnswers += 1
            return state.deliveryWaiters.reached(state.deliveredAnswers)
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Tasks waiting until a count reaches theirs.
private struct CountWaiters {
    private var waiting: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    /// Keeps `continuation` until the count reaches `count`. - Returns: true when `reached` already
    /// has: the caller resumes it at once, and it is not kept.
    mutating func add(_ continuation: CheckedContinuation<Void, Never>, until count: Int, reached: Int) -> Bool {
        if reached >= count { return true }
        waiting.append((count, continuation))
        return false
    }

    /// Takes the continuations that `count` reaches, for the caller to resume once it has let go
    /// of the lock.
    mutating func reached(_ count: Int) -> [CheckedContinuation<Void, Never>] {
        guard !waiting.isEmpty else { return [] }
        let ready = waiting.filter { $0.count <= count }.map(\.continuation)
        waiting.removeAll { $0.count <= count }
        return ready
    }
}

extension ScriptedOrigin: NetworkLoading {
    package func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
        try await answer(request)
    }

    /// Answers a fetch's request in a task of its own, as the default does, and counts the answer
    /// once `completion` (the transport taking it in) has returned.
    package func start(
        _ request: URLRequest, completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>) -> Void
    ) -> any NetworkLoad {
        ScriptedLoad(
            task: Task {
                let result: Result<(Data, URLResponse), any Error>
                do {
                    result = .success(try await answer(request))
                } catch {
                    result = .failure(error)
                }
                completion(result)
                delivered()
            })
    }
}

/// A fetch's call of a ``ScriptedOrigin``, cancelled by cancelling its task.
private struct ScriptedLoad: NetworkLoad {
    let task: Task<Void, Never>

    func cancel() { task.cancel() }
}

extension CachedTransport {
    /// Makes a transport whose every request goes to `origin` instead of the network: for tests.
    ///
    /// It behaves as a transport with the same configuration does against a real origin:
    /// coalescing, storing (what the origin marks `no-cache` too, unless the header override is
    /// narrowed or off), revalidating, invalidating and reporting outcomes. Its queue lets at
    /// most `configuration.network.maximumFetchesPerHost` calls of one host
    /// (6 unless set) reach the origin at once.
    public init(configuration: Configuration = .init(), origin: ScriptedOrigin) {
        self.init(configuration: configuration, loader: origin)
    }
}
