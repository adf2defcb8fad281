import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import TransportCache
import TransportCacheTesting

/// Bearer tokens named `<account>-<n>`: a request carries `Authorization: Bearer <token>` and
/// `X-Account: <account>`, which a partition reads. Each refresh is counted and runs `refreshed`.
final class TokenAuthenticator: Authenticator {
    let refreshed: @Sendable (_ token: String, _ refresh: Int) async throws -> String
    private let count = Locked(0)

    init(
        refreshed: @escaping @Sendable (_ token: String, _ refresh: Int) async throws -> String = { token, refresh in
            "\(TokenAuthenticator.account(of: token))-\(refresh + 1)"
        }
    ) {
        self.refreshed = refreshed
    }

    var refreshes: Int { count.withLock { $0 } }

    static func account(of token: String) -> String { String(token.prefix { $0 != "-" }) }

    func apply(_ token: String, to request: inout URLRequest) {
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue(Self.account(of: token), forHTTPHeaderField: "X-Account")
    }

    func refresh(_ token: String) async throws -> String {
        let refresh = count.withLock { count in
            count += 1
            return count
        }
        return try await refreshed(token, refresh)
    }

    func isRequest(_ request: URLRequest, authenticatedWith token: String) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(token)"
    }
}

/// Holds whoever waits until it opens; counts those that left because their task was cancelled.
final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var waiting: [Int: CheckedContinuation<Void, any Error>] = [:]
        var next = 0
        var cancelled = 0
        var arrivals = WatchedCount()
        var cancellations = WatchedCount()
    }

    private let state = Locked(State())

    var cancelled: Int { state.withLock { $0.cancelled } }

    func open() {
        let waiting = state.withLock { state in
            state.isOpen = true
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once `count` callers have arrived at the gate, held or let through.
    func waitForArrivals(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let watching = state.withLock { $0.arrivals.watch(until: { $0 >= count }, continuation) }
            if !watching { continuation.resume() }
        }
    }

    /// Returns once `count` waiters have left because their task was cancelled.
    func waitForCancellations(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let watching = state.withLock { $0.cancellations.watch(until: { $0 >= count }, continuation) }
            if !watching { continuation.resume() }
        }
    }

    func wait() async throws {
        let id = state.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (pass, arrived) = state.withLock { state in
                    let arrived = state.arrivals.count()
                    if state.isOpen { return (true, arrived) }
                    state.waiting[id] = continuation
                    return (false, arrived)
                }
                for waiter in arrived { waiter.resume() }
                if pass { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state in
                let continuation = state.waiting.removeValue(forKey: id)
                var watchers: WatchedCount.Watchers = []
                if continuation != nil {
                    state.cancelled += 1
                    watchers = state.cancellations.count()
                }
                return (continuation, watchers)
            }
            continuation.0?.resume(throwing: CancellationError())
            for watcher in continuation.1 { watcher.resume() }
        }
    }
}

/// An origin that answers `200` with the `Authorization` it was sent, or `401` for any
/// credential outside `accepted`.
func authenticatingOrigin(accepting accepted: Locked<Set<String>>, gated: Bool = false) -> ScriptedOrigin {
    ScriptedOrigin(gated: gated) { request, call in
        let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
        guard accepted.withLock({ $0.contains(auth) }) else { return .init(status: 401, text: "refused") }
        return .init(text: "\(request.url!.path) auth=\(auth) call=\(call)")
    }
}
