import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `URLProtocol` that rewrites the headers that stop a response from being cached
/// (`no-cache`, `no-store`, `Pragma`, past `Expires`, `Vary: *` …) into `Cache-Control: max-age=N`.
///
/// Install it first in any session's protocol classes:
///
/// ```swift
/// let configuration = URLSessionConfiguration.default
/// configuration.protocolClasses = [CacheOverrideURLProtocol.self] + (configuration.protocolClasses ?? [])
/// ```
///
/// It applies ``cacheOverride`` (every http(s) response, `max-age=3600`); to narrow it or change
/// the age, subclass and override ``cacheOverride``. Requests outside it are not intercepted.
///
/// Each intercepted request is fetched by an inner session of its own that has no cache, no
/// cookie storage and not this protocol (so it cannot recurse). Request bodies arrive intact; a
/// body stream is read into the request first, because corelibs' URLSession would send it empty.
/// Redirects are followed by the inner session and the final response is delivered
/// (swift-corelibs-foundation cannot take a redirect report from a custom protocol). Errors arrive
/// as the inner session's `URLError`.
///
/// ## Platforms
/// On Apple platforms the session's own `URLCache` then stores the rewritten responses. On Linux,
/// URLSession never writes into a `URLCache`, so the protocol alone caches nothing there: it gives
/// rewritten headers to whoever does the caching. A ``CachedTransport`` does its own caching, and
/// applies the same ``CacheOverride`` to each answer itself.
open class CacheOverrideURLProtocol: URLProtocol {
    /// What this class rewrites. Override in a subclass to narrow it or change the age.
    open class var cacheOverride: CacheOverride { CacheOverride() }

    /// Where one loading stands. `generation` tells a current inner fetch from one a
    /// `stopLoading()` abandoned (a suspended task restarts with a new one).
    private enum Phase {
        case idle
        case fetching(generation: Int, task: URLSessionDataTask?, session: URLSession?)
        /// The inner fetch ended; waiting to hand the outcome to the client on the session's queue.
        case finished(Outcome)
        case stopped
        case delivered
    }

    private struct Outcome {
        var data: Data?
        var response: URLResponse?
        var error: (any Error)?
    }

    private struct Loading {
        var phase = Phase.idle
        var generation = 0
    }

    private let loading = Locked(Loading())

    /// The session that performs intercepted requests when the protocol is installed on its own,
    /// and those of every transport with the default session configuration. Never invalidated.
    static let sharedInnerSession = NetworkQueues.session(innerConfiguration(from: .ephemeral))

    /// A configuration for an inner session: no cache, no cookies, and not this protocol.
    static func innerConfiguration(from base: URLSessionConfiguration) -> URLSessionConfiguration {
        let configuration = base.copy() as! URLSessionConfiguration
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.protocolClasses = configuration.protocolClasses?.filter { !($0 is CacheOverrideURLProtocol.Type) }
        return configuration
    }

    /// The override and the inner session for `request`, or nil to leave it alone. The
    /// transport's own subclass picks its transport's settings here.
    class func route(for request: URLRequest) -> (override: CacheOverride?, session: URLSession)? {
        guard let url = request.url, cacheOverride.applies(to: url) else { return nil }
        return (cacheOverride, sharedInnerSession)
    }

    /// The request the inner session sends for `request`.
    class func outgoingRequest(for request: URLRequest) -> URLRequest {
        request
    }

    /// The override and inner session for this loading: ``route(for:)`` of its request, unless a
    /// subclass knows better.
    func innerRoute() -> (override: CacheOverride?, session: URLSession)? {
        Self.route(for: request)
    }

    /// The request the inner session sends for this loading.
    func innerRequest() -> URLRequest {
        var outgoing = Self.outgoingRequest(for: request)
        outgoing.cachePolicy = .reloadIgnoringLocalCacheData
        return outgoing
    }

    /// The task delegate of an inner fetch (see ``NetworkTaskDelegate``). The transport's own
    /// subclass gives the one that reports metrics to its transport.
    func innerTaskDelegate() -> NetworkTaskDelegate {
        NetworkTaskDelegate(metrics: nil)
    }

    /// Called once when the current inner fetch has ended, with its outcome (the response
    /// rewritten), before the outcome is handed to the client on the session's queue. Runs on the
    /// inner session's delegate queue, never after `stopLoading()`; it must not call the client.
    func innerFetchEnded(data: Data?, response: URLResponse?, error: (any Error)?) {}

    /// Whether the protocol takes `request`: when ``cacheOverride`` applies to its URL (by
    /// default, every http(s) URL).
    open override class func canInit(with request: URLRequest) -> Bool {
        route(for: request) != nil
    }

    /// `request` unchanged: the protocol rewrites responses, never requests.
    open override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    /// Fetches the request with the inner session, rewrites the caching headers of the answer as
    /// the override says and hands it to the client; called by the loading system.
    open override func startLoading() {
        enum Step { case fetch(generation: Int), deliver, ignore }
        let step = loading.withLock { loading -> Step in
            switch loading.phase {
            case .idle, .stopped:
                loading.generation += 1
                loading.phase = .fetching(generation: loading.generation, task: nil, session: nil)
                return .fetch(generation: loading.generation)
            case .finished:
                return .deliver
            case .fetching, .delivered:
                return .ignore
            }
        }
        switch step {
        case .fetch(let generation): fetch(generation: generation)
        case .deliver: deliver()
        case .ignore: break
        }
    }

    /// Starts the inner fetch of `request` for loading `generation`.
    private func fetch(generation: Int) {
        guard let route = innerRoute() else {
            loading.withLock { $0.phase = .finished(Outcome(error: URLError(.unsupportedURL))) }
            deliver()
            return
        }
        let outgoing = innerRequest()
        // Creating or resuming a task inside `startLoading()` waits on the session's work queue,
        // which is the queue this runs on: hop off it first, to a queue of its own (see
        // ``NetworkQueues``).
        let instance = Unshared(self)
        NetworkQueues.serial("TransportCache.CacheOverrideURLProtocol.fetch").async {
            var outgoing = outgoing
            if outgoing.httpBody == nil, let stream = outgoing.httpBodyStream {
                // corelibs' URLSession sends an empty body for a data task's body stream; read it
                // here, off the session's queue, so the body reaches the origin on every platform.
                outgoing.httpBodyStream = nil
                outgoing.httpBody = Self.read(stream)
            }
            let taskDelegate = instance.value.innerTaskDelegate()
            let task = route.session.dataTask(with: outgoing) { data, response, error in
                let (data, settled, error) = taskDelegate.settled(data: data, response: response, error: error)
                var response = settled
                if let http = response as? HTTPURLResponse, let override = route.override,
                    let url = http.url, override.applies(to: url)
                {
                    response = override.rewritten(http)
                }
                instance.value.fetched(Outcome(data: data, response: response, error: error), generation: generation)
            }
            task.delegate = taskDelegate
            #if !canImport(FoundationNetworking)
            // The task on the network goes at the priority of the task it loads for.
            if let priority = instance.value.task?.priority { task.priority = priority }
            #endif
            let start = instance.value.loading.withLock { loading in
                guard case .fetching(generation, nil, _) = loading.phase else { return false }
                loading.phase = .fetching(generation: generation, task: task, session: route.session)
                return true
            }
            if start { task.resume() }
        }
    }

    /// Takes the outcome of inner fetch `generation` and has it delivered to the client.
    private func fetched(_ outcome: Outcome, generation: Int) {
        let current = loading.withLock { loading in
            guard case .fetching(generation, _, _) = loading.phase else { return false }
            loading.phase = .finished(outcome)
            return true
        }
        guard current else { return }
        innerFetchEnded(data: outcome.data, response: outcome.response, error: outcome.error)
        #if canImport(FoundationNetworking)
        // swift-corelibs-foundation reads its task registry in every client call without a lock,
        // expecting to run on the session's work queue; called from here (the inner session's
        // delegate queue) that read races with other tasks being added and removed, and crashed.
        // `resume()` on a running task makes corelibs call `startLoading()` again on that queue,
        // where the outcome is delivered.
        if let task, task.state == .running {
            task.resume()
            return
        }
        #endif
        deliver()
    }
    /// Every byte of `stream`.
    static func read(_ stream: InputStream) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        stream.open()
        defer { stream.close() }
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count <= 0 { break }
            data.append(buffer, count: count)
        }
        return data
    }

    /// Cancels the inner fetch; the client hears nothing more from this instance. Called by the
    /// loading system.
    open override func stopLoading() {
        let fetching = loading.withLock { loading -> (URLSessionDataTask, URLSession)? in
            defer { loading.phase = .stopped }
            if case .fetching(_, let task?, let session?) = loading.phase { return (task, session) }
            return nil
        }
        // `cancel()` waits on a session queue, and this runs on one; the inner session's delegate
        // queue is another, and the one that keeps the cancel from racing the task's completion.
        if let fetching { fetching.0.cancel(onDelegateQueueOf: fetching.1) }
    }

    /// Tells the client how the inner fetch ended, unless loading was stopped. The lock is held
    /// across the client calls so that `stopLoading()` cannot slip in between them.
    private func deliver() {
        loading.withLock { loading in
            guard case .finished(let outcome) = loading.phase else { return }
            loading.phase = .delivered
            guard let client else { return }
            if let error = outcome.error {
                client.urlProtocol(self, didFailWithError: error)
                return
            }
            guard let response = outcome.response else {
                client.urlProtocol(self, didFailWithError: URLError(.badServerResponse))
                return
            }
            client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .allowed)
            // One call: on Linux each call replaces what the task holds instead of appending.
            if let data = outcome.data, !data.isEmpty { client.urlProtocol(self, didLoad: data) }
            client.urlProtocolDidFinishLoading(self)
        }
    }
}

/// Carries a protocol instance into the closures of the queue hop and the inner task.
///
/// `@unchecked Sendable` is safe here: `URLProtocol` is not Sendable, but the instance is only used there
/// through `loading` (behind a lock), `innerTaskDelegate()` (which reads only `request`, `task`
/// and locked tables) and `fetched(_:generation:)`, which changes `loading` only
/// under that lock, calls `innerFetchEnded` once per loading, and hands the outcome over in
/// `deliver()`, which holds that lock across its client calls; `request`, `client` and `task` are
/// set by the loading system before `startLoading()` and only read.
private struct Unshared<Value: AnyObject>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
