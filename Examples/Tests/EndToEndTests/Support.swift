import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing

/// Runs `body` with a fresh origin, and stops the origin afterwards whatever happens.
func withOrigin(_ body: (LoopbackOrigin) async throws -> Void) async throws {
    let origin = try await LoopbackOrigin.start()
    do {
        try await body(origin)
    } catch {
        await origin.stop()
        throw error
    }
    await origin.stop()
}

/// Waits until `condition` holds, checking between short pauses; records a failure if it does not
/// hold within `timeout`. It waits for a state, never for a guessed amount of time.
func waitUntil(
    timeout: Duration = .seconds(20),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("condition not met within \(timeout)", sourceLocation: sourceLocation)
}

/// The error a throwing async expression threw, or nil when it returned.
func thrownError<T>(_ body: () async throws -> T) async -> (any Error)? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

extension Data {
    var text: String { String(decoding: self, as: UTF8.self) }
}

func request(_ url: URL, method: String = "GET", headers: [String: String] = [:]) -> URLRequest {
    var request = URLRequest(url: url)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    return request
}

/// A completion-handler data task bridged to async (the async `data(for:)` of corelibs 6.3 can
/// deadlock when cancelled), with the task returned through `started` so a test can cancel it.
func load(_ request: URLRequest, with session: URLSession) async -> (Data?, URLResponse?, (any Error)?) {
    await withCheckedContinuation { continuation in
        session.dataTask(with: request) { data, response, error in
            continuation.resume(returning: (data, response, error))
        }.resume()
    }
}
