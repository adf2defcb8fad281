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
/// rewritten headers to whoever does the caching. ``CachedTransport`` applies the same
/// ``CacheOverride`` rule to its own fetches.
open class CacheOverrideURLProtocol: URLProtocol {
    /// What this class rewrites. Override in a subclass to narrow it or change the age.
    open class var cacheOverride: CacheOverride { CacheOverride() }

    private struct Loading: Sendable {
        var stopped = false
        var task: URLSessionDataTask?
    }

    private let loading = Locked(Loading())

    /// The session that performs intercepted requests when the protocol is installed on its own.
    private static let sharedInnerSession = URLSession(configuration: innerConfiguration(from: .ephemeral))

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

    /// The override and the inner session for `request`, or nil to leave it alone.
    class func route(for request: URLRequest) -> (override: CacheOverride?, session: URLSession)? {
        guard let url = request.url, cacheOverride.applies(to: url) else { return nil }
        return (cacheOverride, sharedInnerSession)
    }

    open override class func canInit(with request: URLRequest) -> Bool {
        route(for: request) != nil
    }

    open override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    open override func startLoading() {
        let request = self.request
        guard let route = Self.route(for: request) else {
            finish(data: nil, response: nil, error: URLError(.unsupportedURL))
            return
        }
        var outgoingRequest = request
        outgoingRequest.cachePolicy = .reloadIgnoringLocalCacheData
        let outgoing = outgoingRequest
        // Creating or resuming a task inside `startLoading()` waits on the session's work queue,
        // which is the queue this runs on: hop off it first.
        let instance = Unshared(self)
        DispatchQueue.global().async {
            var outgoing = outgoing
            if outgoing.httpBody == nil, let stream = outgoing.httpBodyStream {
                // corelibs' URLSession sends an empty body for a data task's body stream; read it
                // here, off the session's queue, so the body reaches the origin on every platform.
                outgoing.httpBodyStream = nil
                outgoing.httpBody = Self.read(stream)
            }
            let task = route.session.dataTask(with: outgoing) { data, response, error in
                instance.value.finish(data: data, response: response, error: error, override: route.override)
            }
            let start = instance.value.loading.withLock { loading in
                guard !loading.stopped else { return false }
                loading.task = task
                return true
            }
            if start { task.resume() }
        }
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

    open override func stopLoading() {
        let task = loading.withLock { loading in
            loading.stopped = true
            defer { loading.task = nil }
            return loading.task
        }
        // `cancel()` waits on a session queue; this runs on one.
        if let task { DispatchQueue.global().async { task.cancel() } }
    }

    /// Tells the client how the inner fetch ended, unless loading was stopped. The lock is held
    /// across the client calls so that `stopLoading()` cannot slip in between them.
    private func finish(data: Data?, response: URLResponse?, error: (any Error)?, override: CacheOverride? = nil) {
        loading.withLock { loading in
            guard !loading.stopped else { return }
            loading.stopped = true
            loading.task = nil
            guard let client else { return }
            if let error {
                client.urlProtocol(self, didFailWithError: error)
                return
            }
            guard var response else {
                client.urlProtocol(self, didFailWithError: URLError(.badServerResponse))
                return
            }
            if let http = response as? HTTPURLResponse, let override, let url = http.url, override.applies(to: url) {
                response = override.rewritten(http)
            }
            client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .allowed)
            // One call: on Linux each call replaces what the task holds instead of appending.
            if let data, !data.isEmpty { client.urlProtocol(self, didLoad: data) }
            client.urlProtocolDidFinishLoading(self)
        }
    }
}

/// Carries a protocol instance into the closures of the queue hop and the inner task.
///
/// `@unchecked Sendable`: `URLProtocol` is not Sendable, but the instance is only used there
/// through `loading` (behind a lock) and `finish`, which holds that lock across its client calls;
/// `request` and `client` are set by the loading system before `startLoading()` and only read.
private struct Unshared<Value: AnyObject>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
