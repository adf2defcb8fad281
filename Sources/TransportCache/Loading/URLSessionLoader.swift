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
final class URLSessionLoader: NetworkLoading {
    let session: URLSession
    /// Where the header override sends this loader's requests, when it is on.
    private let overrideRoute: (id: Int, session: URLSession)?

    /// - Parameter cacheOverride: when set, requests go through ``TransportOverrideURLProtocol``,
    ///   which fetches them with an inner session made from `configuration` and rewrites their
    ///   caching headers.
    init(configuration: URLSessionConfiguration, cacheOverride: CacheOverride?) {
        let configuration = CacheOverrideURLProtocol.innerConfiguration(from: configuration)
        if let cacheOverride {
            let inner = URLSession(configuration: configuration)
            let id = TransportOverrideURLProtocol.register(.init(override: cacheOverride, session: inner))
            overrideRoute = (id, inner)
            configuration.protocolClasses = [TransportOverrideURLProtocol.self] + (configuration.protocolClasses ?? [])
        } else {
            overrideRoute = nil
        }
        session = URLSession(configuration: configuration)
    }

    /// The value this loader's requests carry in ``TransportOverrideURLProtocol/routeHeader``.
    var routeValue: String? { overrideRoute.map { String($0.id) } }

    deinit {
        session.finishTasksAndInvalidate()
        if let overrideRoute {
            TransportOverrideURLProtocol.unregister(overrideRoute.id)
            overrideRoute.session.finishTasksAndInvalidate()
        }
    }

    func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
        var request = request
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let routeValue {
            request.setValue(routeValue, forHTTPHeaderField: TransportOverrideURLProtocol.routeHeader)
        }
        let handle = TaskHandle(session: session)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: Self.normalized(error))
                    } else if let response {
                        continuation.resume(returning: (data ?? Data(), response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                if !handle.start(task) {
                    // Cancelled before the task existed: it is never resumed, so its handler never
                    // runs, and the continuation is resumed here instead.
                    continuation.resume(throwing: URLError(.cancelled))
                }
            }
        } onCancel: {
            handle.cancel()
        }
    }
}

extension URLSessionLoader {
    /// `error`, except that a connection that broke in the middle of an answer is reported as
    /// `URLError(.networkConnectionLost)` on every platform.
    ///
    /// Apple platforms report a body cut short (fewer bytes than its `Content-Length`) or a
    /// connection reset while reading as `.networkConnectionLost`. swift-corelibs-foundation maps
    /// only a reset seen while connecting to that code; the others arrive as `URLError(.unknown)`
    /// carrying libcurl's message as their description. Those messages are recognised here, so
    /// callers, and stale-if-error, see the same code everywhere. The original error is kept as
    /// the underlying error. Any other error is returned as it is.
    static func normalized(_ error: any Error) -> any Error {
        guard let urlError = error as? URLError, urlError.code == .unknown else { return error }
        let description = urlError.localizedDescription.lowercased()
        guard connectionLossMessages.contains(where: description.contains) else { return error }
        var userInfo = urlError.userInfo
        userInfo[NSUnderlyingErrorKey] = error as NSError
        return URLError(.networkConnectionLost, userInfo: userInfo)
    }

    /// libcurl's descriptions of a transfer the peer cut off: a partial body (CURLE_PARTIAL_FILE)
    /// and a failed read or write on an open connection (CURLE_RECV_ERROR, CURLE_SEND_ERROR), in
    /// the detailed form and in the generic form used when no detail was recorded.
    static let connectionLossMessages = [
        "transfer closed with",
        "transferred a partial file",
        "recv failure",
        "failure when receiving data from the peer",
        "send failure",
        "failed sending data to the peer",
    ]
}

/// The cancel-versus-start race of one data task.
private final class TaskHandle: Sendable {
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
