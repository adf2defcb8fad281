import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TransportCache

/// An in-process network: counts every call, can hold calls at a gate until the test opens it,
/// and answers with whatever `respond` returns.
///
/// The default answer is a 200 whose body names the URL, the `Authorization` value and the call
/// number, so two callers of one fetch get identical bytes and two fetches never do.
final class TestLoader: NetworkLoading {
    typealias Responder = @Sendable (_ request: URLRequest, _ call: Int) throws -> (Data, URLResponse)

    private struct State {
        var calls: [URLRequest] = []
        var gateOpen: Bool
        var held: [Int: CheckedContinuation<Void, any Error>] = [:]
        var cancelledCalls = 0
        var callWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Locked<State>
    private let respond: Responder
    private let holding: @Sendable (URLRequest) -> Bool

    /// - Parameters:
    ///   - gated: hold calls until ``openGate()``.
    ///   - holding: which calls the closed gate holds; others pass at once.
    init(
        gated: Bool = false,
        respond: @escaping Responder = TestLoader.ok(),
        holding: @escaping @Sendable (URLRequest) -> Bool = { _ in true }
    ) {
        state = Locked(State(gateOpen: !gated))
        self.respond = respond
        self.holding = holding
    }

    func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let (call, ready): (Int, [CheckedContinuation<Void, Never>]) = state.withLock { state in
            state.calls.append(request)
            let count = state.calls.count
            let ready = state.callWaiters.filter { $0.count <= count }.map(\.continuation)
            state.callWaiters.removeAll { $0.count <= count }
            return (count, ready)
        }
        for continuation in ready { continuation.resume() }
        if holding(request) { try await passGate(call) }
        return try respond(request, call)
    }

    private func passGate(_ call: Int) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let proceed = state.withLock { state in
                    if state.gateOpen { return true }
                    state.held[call] = continuation
                    return false
                }
                if proceed { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state in
                let continuation = state.held.removeValue(forKey: call)
                if continuation != nil { state.cancelledCalls += 1 }
                return continuation
            }
            continuation?.resume(throwing: URLError(.cancelled))
        }
    }

    /// Lets every held call and every later one through.
    func openGate() {
        let held = state.withLock { state in
            state.gateOpen = true
            defer { state.held.removeAll() }
            return Array(state.held.values)
        }
        for continuation in held { continuation.resume() }
    }

    /// Lets call number `call` through if it is held, leaving the gate closed for the others.
    func release(_ call: Int) {
        let continuation = state.withLock { $0.held.removeValue(forKey: call) }
        continuation?.resume()
    }

    /// Suspends until at least `count` calls have arrived.
    func waitForCalls(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.calls.count >= count { return true }
                state.callWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    var callCount: Int { state.withLock { $0.calls.count } }
    var calls: [URLRequest] { state.withLock { $0.calls } }
    /// Calls that were held at the gate when their task was cancelled.
    var cancelledCalls: Int { state.withLock { $0.cancelledCalls } }

    func callCount(for url: String) -> Int {
        state.withLock { $0.calls.filter { $0.url?.absoluteString == url }.count }
    }

    // MARK: - Responders

    /// 200 with a body that identifies the request and the call, plus `headers`.
    static func ok(headers: [String: String] = [:]) -> Responder {
        { request, call in
            let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
            let body = "\(request.httpMethod ?? "GET") \(request.url!.absoluteString) auth=\(auth) call=\(call)"
            return (Data(body.utf8), response(for: request, status: 200, headers: headers))
        }
    }

    static func status(_ status: Int) -> Responder {
        { request, call in (Data("status \(status) call=\(call)".utf8), response(for: request, status: status)) }
    }

    static func body(size: Int) -> Responder {
        { request, _ in (Data(repeating: 0x61, count: size), response(for: request, status: 200)) }
    }

    static func failing(_ code: URLError.Code) -> Responder {
        { _, _ in throw URLError(code) }
    }

    static func response(for request: URLRequest, status: Int, headers: [String: String] = [:]) -> HTTPURLResponse {
        HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
    }
}
