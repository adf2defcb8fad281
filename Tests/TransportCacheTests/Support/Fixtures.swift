import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import TransportCache
import TransportCacheTesting

func makeTransport(
    loader: ScriptedOrigin,
    clock: TestClock = TestClock(),
    _ configure: (inout CachedTransport.Configuration) -> Void = { _ in }
) -> CachedTransport {
    var configuration = CachedTransport.Configuration()
    configuration.clock = clock.cacheClock
    configure(&configuration)
    return CachedTransport(configuration: configuration, loader: loader)
}

func request(
    _ string: String,
    method: String = "GET",
    headers: [String: String] = [:],
    policy: URLRequest.CachePolicy = .useProtocolCachePolicy
) -> URLRequest {
    var request = URLRequest(url: URL(string: string)!, cachePolicy: policy)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    return request
}

extension Data {
    var text: String { String(decoding: self, as: UTF8.self) }
}

/// An HTTP date `offset` seconds from now.
func httpDate(_ offset: TimeInterval = 0) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: Date().addingTimeInterval(offset))
}

/// Holds `transport`'s invalidations' lock on a thread of its own, as an invalidation under way
/// holds it, and returns once it is held: signal the semaphore returned to let it go. `released`,
/// when given, is set once it has been let go.
func holdingInvalidations(of transport: CachedTransport, released: Locked<Bool>? = nil) async -> DispatchSemaphore {
    let (holding, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
    let invalidations = await transport.committer.invalidations
    Thread.detachNewThread {
        invalidations.withLock { _ in
            holding.signal()
            release.wait()
            released?.withLock { $0 = true }
        }
    }
    holding.wait()
    return release
}

/// Runs `work` on a thread of its own and returns what it returns, holding no thread of the
/// concurrency pool meanwhile. The pool has one thread per core: work of seconds on one of them
/// (tens of thousands of stores, or a wait for an invalidation of them, under a sanitizer) holds
/// back every test running beside it, and each bounded wait those tests make.
func onAThreadOfItsOwn<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result(catching: work)) }
    }
}
