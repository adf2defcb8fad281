import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One origin fetch and the callers waiting for it.
///
/// A class, so that adding the ten-thousandth waiter mutates its table in place instead of
/// copying a struct that holds it (which made joins quadratic).
final class Fetch {
    let key: CacheKey
    /// The request that started it; the one sent to the origin.
    let request: URLRequest
    /// Started by a reload (`refresh`, or a policy that ignores the cache): ordinary requests may
    /// join it, and a later reload may too.
    let isReload: Bool
    /// Cleared when the key is invalidated or a newer reload starts while this fetch is in flight:
    /// its answer still reaches its callers but is not written into the store.
    var storesResult = true
    var waiters: [Int: Waiter]
    var task: Task<Void, Never>?

    init(key: CacheKey, request: URLRequest, isReload: Bool, waiters: [Int: Waiter]) {
        self.key = key
        self.request = request
        self.isReload = isReload
        self.waiters = waiters
    }
}

/// A caller suspended until a fetch answers.
struct Waiter {
    let id: Int
    let request: URLRequest
    let continuation: CheckedContinuation<(Data, URLResponse), any Error>
}
