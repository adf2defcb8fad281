import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The protocol a ``CachedTransport``'s session sends its requests through.
///
/// It fetches with the transport's inner session and rewrites nothing: the transport reads each
/// answer through its header override once, in ``Committer/prepared(_:)``, whatever loaded it.
///
/// Protocol classes are configured per class, but every transport has its own inner session. The
/// transport's loader tags each request with a private header naming its route; this class looks
/// the route up, and strips the header before the request leaves.
///
/// For the loader's own requests it does less: the loader registers each one as a
/// ``PendingAnswer`` under its data task, with its route and the request as it was before it was
/// tagged. The protocol then sends that request as it is (nothing to copy and strip), and hands
/// the answer to the loader the moment its inner fetch has it, before delivering it to
/// the session as usual.
final class TransportOverrideURLProtocol: CacheOverrideURLProtocol {
    static let routeHeader = "X-TransportCache-Route"

    struct Route: Sendable {
        let session: URLSession
        /// Where the inner fetches report their metrics: the transport's events.
        let metrics: MetricsRelay
    }

    /// What the protocol looks up: the transports' routes, by the value their requests carry
    /// (with the last value given), and the loader's requests in flight, by their outer data task.
    fileprivate struct Registry {
        var routes: [Int: Route] = [:]
        var lastRouteID = 0
        var pendingAnswers: [ObjectIdentifier: PendingAnswer] = [:]
    }

    fileprivate static let registry = Locked(Registry())

    /// Registers a transport's route. - Returns: the value its requests carry in ``routeHeader``.
    static func register(_ route: Route) -> Int {
        registry.withLock { registry in
            registry.lastRouteID += 1
            registry.routes[registry.lastRouteID] = route
            return registry.lastRouteID
        }
    }

    static func unregister(_ id: Int) {
        registry.withLock { $0.routes[id] = nil }
    }

    override class func route(for request: URLRequest) -> (override: CacheOverride?, session: URLSession)? {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let value = request.value(forHTTPHeaderField: routeHeader), let id = Int(value),
            let route = registry.withLock({ $0.routes[id] })
        else { return nil }
        return (nil, route.session)
    }

    override class func outgoingRequest(for request: URLRequest) -> URLRequest {
        var request = request
        request.setValue(nil, forHTTPHeaderField: routeHeader)
        return request
    }

    /// The loader's request this loading carries, if it is one.
    private var pendingAnswer: PendingAnswer? {
        guard let task else { return nil }
        return Self.registry.withLock { $0.pendingAnswers[ObjectIdentifier(task)] }
    }

    override func innerRoute() -> (override: CacheOverride?, session: URLSession)? {
        guard let route = pendingAnswer?.route else { return super.innerRoute() }
        return (nil, route.session)
    }

    override func innerRequest() -> URLRequest {
        // Untagged already. Its cache policy is left as the caller set it: the inner session has
        // no URL cache, so no policy can answer from one, and changing it would copy the request.
        pendingAnswer?.request ?? super.innerRequest()
    }

    override func innerTaskDelegate() -> NetworkTaskDelegate {
        NetworkTaskDelegate(metrics: pendingAnswer?.route?.metrics)
    }

    override func innerFetchEnded(data: Data?, response: URLResponse?, error: (any Error)?) {
        pendingAnswer?.deliver(URLSessionLoader.result(data: data, response: response, error: error))
    }
}

/// One request of a transport's loader, waiting for its answer.
///
/// Answered exactly once: by ``TransportOverrideURLProtocol`` when its inner fetch ends, or by the
/// outer data task's completion handler (errors before the fetch, cancellations, no override).
/// Whichever comes second finds it answered and does nothing.
final class PendingAnswer: Sendable {
    typealias Completion = @Sendable (Result<(Data, URLResponse), any Error>) -> Void

    /// The request as the caller made it, without the route header.
    let request: URLRequest
    let route: TransportOverrideURLProtocol.Route?

    private struct State {
        var completion: Completion?
        var task: ObjectIdentifier?
    }

    private let state: Locked<State>

    init(request: URLRequest, route: TransportOverrideURLProtocol.Route?, completion: @escaping Completion) {
        self.request = request
        self.route = route
        state = Locked(State(completion: completion))
    }

    /// Makes this the pending answer of `task`, for the protocol to find. Call before resuming it.
    func await(_ task: URLSessionTask) {
        let id = ObjectIdentifier(task)
        state.withLock { $0.task = id }
        TransportOverrideURLProtocol.registry.withLock { $0.pendingAnswers[id] = self }
    }

    /// Answers with `result` unless already answered, and forgets the task.
    func deliver(_ result: Result<(Data, URLResponse), any Error>) {
        let (completion, task) = state.withLock { state in
            defer { state = State() }
            return (state.completion, state.task)
        }
        if let task {
            TransportOverrideURLProtocol.registry.withLock { registry in
                if registry.pendingAnswers[task] === self { registry.pendingAnswers[task] = nil }
            }
        }
        completion?(result)
    }
}
