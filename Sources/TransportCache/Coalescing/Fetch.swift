import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One origin fetch and the callers waiting for it.
///
/// A class, so that adding the ten-thousandth waiter mutates its table in place instead of
/// copying a struct that holds it (which made joins quadratic).
///
/// `@unchecked Sendable`: a fetch is only reached through ``InFlight``, and so only read or
/// written while the transport's in-flight lock is held.
final class Fetch: @unchecked Sendable {
    let key: CacheKey
    /// The request that started it; the one sent to the origin.
    let request: URLRequest
    /// Started by a reload (`refresh`, or a policy that ignores the cache): ordinary requests may
    /// join it, and a later reload may too.
    let isReload: Bool
    /// Started by a stale-window answer, with no caller of its own: it runs to its end even when
    /// every caller that joined it leaves, and its failure reaches nobody but the callers that
    /// joined.
    let isBackground: Bool
    /// The stored entry this fetch asked the origin to confirm (`If-None-Match` /
    /// `If-Modified-Since`), when it was sent conditionally.
    var revalidating: StoredResponse?
    /// Cleared when the key is invalidated or a newer reload starts while this fetch is in flight:
    /// its answer still reaches its callers but is not written into the store.
    var storesResult = true
    /// The origin fetch, once started; cancelled when the last caller leaves.
    var load: (any NetworkLoad)?
    /// When the fetch started: the request time of HTTP's age calculation.
    let requestTime = Date()

    /// Waiters in the order they joined, with a hole where one left. Callers are resumed in that
    /// order: the Swift runtime removes a finished child from its task group by walking a list,
    /// so resuming ten thousand callers in hash order made the callers' own task group quadratic.
    private var ordered: [Waiter?] = []
    private var positions: [Int: Int] = [:]

    init(key: CacheKey, request: URLRequest, isReload: Bool, isBackground: Bool = false, first: Waiter?) {
        self.key = key
        self.request = request
        self.isReload = isReload
        self.isBackground = isBackground
        if let first { add(first) }
    }

    func add(_ waiter: Waiter) {
        positions[waiter.id] = ordered.count
        ordered.append(waiter)
    }

    /// Removes and returns the waiter `id`. - Complexity: O(1).
    func remove(_ id: Int) -> Waiter? {
        guard let position = positions.removeValue(forKey: id) else { return nil }
        defer { ordered[position] = nil }
        return ordered[position]
    }

    var hasWaiters: Bool { !positions.isEmpty }

    /// The waiters still attached, in the order they joined.
    var waiters: [Waiter] { ordered.compactMap { $0 } }
}

/// A caller suspended until a fetch answers.
struct Waiter: Sendable {
    let id: Int
    let request: URLRequest
    let continuation: CheckedContinuation<(Data, URLResponse), any Error>
}
