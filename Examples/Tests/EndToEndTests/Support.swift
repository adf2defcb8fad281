import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

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
@available(macOS 26.0, *)
func startHeldCallers(
    _ count: Int,
    of pathAndQuery: String,
    on transport: CachedTransport,
    origin: LoopbackOrigin
) async -> [Task<(Data, URLResponse), any Error>] {
    await origin.closeGate()
    let url = origin.url(pathAndQuery)
    let joinsBefore = transport.statistics.coalescedJoins
    let tasks = startCalls(count) { try await transport.data(from: url) }
    #expect(transport.statistics.coalescedJoins - joinsBefore == count - 1)
    await origin.waitForHits(pathAndQuery, count: 1)
    return tasks
}
