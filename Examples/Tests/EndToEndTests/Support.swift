import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache

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

/// Closes the origin's gate, starts `count` callers of `pathAndQuery` (which must carry `gate=1`),
/// and returns their tasks once the one fetch has reached the origin and every other caller has
/// joined it.
func startHeldCallers(
    _ count: Int,
    of pathAndQuery: String,
    on transport: CachedTransport,
    origin: LoopbackOrigin
) async -> [Task<(Data, URLResponse), any Error>] {
    await origin.closeGate()
    let url = origin.url(pathAndQuery)
    let joinsBefore = transport.statistics.coalescedJoins
    let tasks = (0..<count).map { _ in Task { try await transport.data(from: url) } }
    await origin.waitForHits(pathAndQuery, count: 1)
    await waitUntil { transport.statistics.coalescedJoins - joinsBefore == count - 1 }
    return tasks
}
