import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Loads through a `URLSession` of the transport's own, with no cache and no cookie storage.
///
/// The session has no `URLCache` because the transport owns every caching decision: on Linux a
/// session ignores the request's cache policy and evicts entries it dislikes from whatever cache
/// it is given. It keeps no cookies so that no `Cookie` header is added after the key was built.
///
/// Completion-handler tasks bridged with a continuation are used instead of the async
/// `data(for:)`, which can deadlock on cancellation in corelibs-foundation 6.3.
///
/// The app's session delegate, when it gives one, is the delegate of the session that really
/// moves the bytes: the inner session of the header override's route, or, with the override off,
/// this loader's own. Every such task also gets a ``NetworkTaskDelegate``.
final class URLSessionLoader: NetworkLoading {
    let session: URLSession
    /// Where ``TransportOverrideURLProtocol`` sends this loader's requests, when they go through it.
    private let overrideRoute: (id: Int, route: TransportOverrideURLProtocol.Route)?
    /// The inner session is the process-wide one, which outlives the loader.
    private let sharesInnerSession: Bool
    /// Where the network tasks' metrics go (see ``reportMetrics(to:)``).
    let metrics = MetricsRelay()
    /// Whether this loader's own session is the one that goes to the network (the override is off).
    private let sendsItself: Bool

    /// - Parameters:
    ///   - routesThroughProtocol: requests go through ``TransportOverrideURLProtocol``, which
    ///     fetches them with an inner session made from `configuration` (the transport does so
    ///     when its header override is on; the override itself is applied by the transport).
    ///   - sessionDelegate: the delegate of the session that goes to the network. With one, that
    ///     session is always this loader's own.
    ///   - sharesInnerSession: `configuration` is the default one: fetch through
    ///     ``CacheOverrideURLProtocol/sharedInnerSession``, made from the same, whose connections
    ///     outlive this loader. A new transport then starts on warm connections instead of opening
    ///     its own (on Linux the first request on a new connection also keeps a dispatch write
    ///     source firing until its answer arrives: about one core busy for that long). Ignored
    ///     with a `sessionDelegate`: a session's delegate hears every task of the session.
    init(
        configuration: URLSessionConfiguration, routesThroughProtocol: Bool,
        sessionDelegate: (any URLSessionDelegate)? = nil, sharesInnerSession: Bool = false
    ) {
        let configuration = CacheOverrideURLProtocol.innerConfiguration(from: configuration)
        let sharesInnerSession = sharesInnerSession && routesThroughProtocol && sessionDelegate == nil
        self.sharesInnerSession = sharesInnerSession
        sendsItself = !routesThroughProtocol
        if routesThroughProtocol {
            let inner =
                sharesInnerSession
                ? CacheOverrideURLProtocol.sharedInnerSession
                : NetworkQueues.session(configuration, delegate: sessionDelegate)
            let route = TransportOverrideURLProtocol.Route(session: inner, metrics: metrics)
            overrideRoute = (TransportOverrideURLProtocol.register(route), route)
            configuration.protocolClasses = [TransportOverrideURLProtocol.self] + (configuration.protocolClasses ?? [])
            session = NetworkQueues.session(configuration)
        } else {
            overrideRoute = nil
            session = NetworkQueues.session(configuration, delegate: sessionDelegate)
        }
        routeValue = overrideRoute.map { String($0.id) }
    }

    /// The session whose tasks go to the network: the header override's inner session, or this
    /// loader's own when the override is off.
    var networkSession: URLSession { overrideRoute?.route.session ?? session }

    func reportMetrics(to report: @escaping @Sendable (URL, URLSessionTaskMetrics) -> Void) {
        metrics.send(to: report)
    }

    /// The value this loader's requests carry in ``TransportOverrideURLProtocol/routeHeader``.
    let routeValue: String?

    deinit {
        session.finishTasksAndInvalidate()
        if let overrideRoute {
            TransportOverrideURLProtocol.unregister(overrideRoute.id)
            if !sharesInnerSession { overrideRoute.route.session.finishTasksAndInvalidate() }
        }
    }

    func start(_ request: URLRequest, completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>) -> Void)
        -> any NetworkLoad
    {
        let handle = TaskHandle(session: session)
        begin(request, handle: handle, completion: completion)
        return handle
    }

    func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let handle = TaskHandle(session: session)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                begin(request, handle: handle) { continuation.resume(with: $0) }
            }
        } onCancel: {
            handle.cancel()
        }
    }

    /// Sends `request` through the session and completes once with the answer.
    ///
    /// Through the header override, the answer is taken from the protocol as soon as its inner
    /// fetch has it (see ``TransportOverrideURLProtocol``); the session's own
    /// completion, which corelibs reaches only after two more queue hops, then finds it answered.
    /// Without the override, or when the protocol had nothing to hand over (an error before its
    /// fetch, a cancellation), the session's completion answers.
    private func begin(
        _ request: URLRequest, handle: TaskHandle,
        completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>) -> Void
    ) {
        var tagged = request
        tagged.cachePolicy = .reloadIgnoringLocalCacheData
        if let routeValue {
            // Set through the whole table: corelibs' `setValue(_:forHTTPHeaderField:)` capitalizes
            // the name with ICU and lowercases every other name to find a previous value.
            var fields = request.allHTTPHeaderFields ?? [:]
            fields[TransportOverrideURLProtocol.routeHeader] = routeValue
            tagged.allHTTPHeaderFields = fields
        }
        let answer = PendingAnswer(request: request, route: overrideRoute?.route, completion: completion)
        // Through the override, the inner task is the one that goes to the network and reports
        // metrics (``TransportOverrideURLProtocol/innerTaskDelegate()``). This task still needs
        // the delegate on Linux: handed the inner fetch's `401`, corelibs raises the challenge
        // again here, and would otherwise keep the task (and the session) alive for ever.
        let taskDelegate = NetworkTaskDelegate(metrics: sendsItself ? metrics : nil)
        let task = session.dataTask(with: tagged) { data, response, error in
            let (data, response, error) = taskDelegate.settled(data: data, response: response, error: error)
            answer.deliver(Self.result(data: data, response: response, error: error))
        }
        task.delegate = taskDelegate
        if overrideRoute != nil { answer.await(task) }
        if !handle.start(task) {
            // Cancelled before the task existed: it is never resumed, so its handler never runs.
            answer.deliver(.failure(URLError(.cancelled)))
        }
    }

    /// What a data task's completion handler received, as the transport takes it.
    static func result(data: Data?, response: URLResponse?, error: (any Error)?) -> Result<
        (Data, URLResponse), any Error
    > {
        if let error { return .failure(normalized(error)) }
        guard let response else { return .failure(URLError(.badServerResponse)) }
        return .success((data ?? Data(), response))
    }
}

extension URLSessionLoader {
    /// `error`, except that a connection that broke in the middle of an answer is reported as
    /// `URLError(.networkConnectionLost)` on every platform.
    ///
    /// Apple platforms report a body cut short (fewer bytes than its `Content-Length`), a
    /// connection reset while reading, or one closed before any answer, as
    /// `.networkConnectionLost`. swift-corelibs-foundation maps only a reset seen while connecting
    /// to that code; the others arrive as `URLError(.unknown)` (a connection closed before any
    /// answer as `URLError(.badServerResponse)`) carrying libcurl's message as their description.
    /// Those messages are recognised here, so callers, and stale-if-error, see the same code
    /// everywhere. The original error is kept as the underlying error. Any other error is returned
    /// as it is.
    static func normalized(_ error: any Error) -> any Error {
        guard let urlError = error as? URLError, urlError.code == .unknown || urlError.code == .badServerResponse
        else { return error }
        let description = urlError.localizedDescription.lowercased()
        guard connectionLossMessages.contains(where: description.contains) else { return error }
        var userInfo = urlError.userInfo
        userInfo[NSUnderlyingErrorKey] = error as NSError
        return URLError(.networkConnectionLost, userInfo: userInfo)
    }

    /// libcurl's descriptions of a transfer the peer cut off: a partial body (CURLE_PARTIAL_FILE),
    /// a failed read or write on an open connection (CURLE_RECV_ERROR, CURLE_SEND_ERROR), in
    /// the detailed form and in the generic form used when no detail was recorded, and a
    /// connection closed before any answer (CURLE_GOT_NOTHING).
    static let connectionLossMessages = [
        "empty reply from server",
        "transfer closed with",
        "transferred a partial file",
        "recv failure",
        "failure when receiving data from the peer",
        "send failure",
        "failed sending data to the peer",
    ]
}

/// The cancel-versus-start race of one data task.
private final class TaskHandle: NetworkLoad {
    private enum State {
        case idle
        case running(URLSessionDataTask)
        case cancelled
    }

    private let state = Locked(State.idle)
    private let session: URLSession

    init(session: URLSession) {
        self.session = session
    }

    /// Resumes `task` unless the handle was cancelled first.
    /// - Returns: false when cancelled; the task was not resumed.
    func start(_ task: URLSessionDataTask) -> Bool {
        let start = state.withLock { state in
            guard case .idle = state else { return false }
            state = .running(task)
            return true
        }
        if start { task.resume() }
        return start
    }

    /// Passes `priority` to the task as its `priority`, on Apple platforms, where URLSession weighs
    /// it. swift-corelibs-foundation keeps it unused, and its setter waits on the session's work
    /// queue: this may run under the transport's in-flight lock, so on Linux it does nothing.
    func prioritize(_ priority: FetchPriority) {
        #if !canImport(FoundationNetworking)
        let task: URLSessionDataTask? = state.withLock { state in
            if case .running(let task) = state { return task }
            return nil
        }
        task?.priority = priority.taskPriority
        #endif
    }

    func cancel() {
        let task: URLSessionDataTask? = state.withLock { state in
            defer { state = .cancelled }
            if case .running(let task) = state { return task }
            return nil
        }
        // The caller may be an actor's executor or a protocol callback, where `cancel()` must not
        // run; the session's delegate queue is safe, and keeps it from racing the completion.
        task?.cancel(onDelegateQueueOf: session)
    }
}

extension FetchPriority {
    /// The `URLSessionTask.priority` of a task loading at this priority.
    var taskPriority: Float {
        switch self {
        case .veryLow: 0.1
        case .low: URLSessionTask.lowPriority
        case .normal: URLSessionTask.defaultPriority
        case .high: URLSessionTask.highPriority
        case .veryHigh: 1
        }
    }
}
