import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

// A screen reading a list it already holds: a decoded value from `value(_:for:)`, with the
// shared default decoder and with a new `JSONDecoder()` per call, against the bytes from
// `data(for:)` decoded again on every call. Measured inside a detached task, off the
// main actor, like the other suites.

struct Article: Codable, Sendable {
    let id: Int
    let title: String
    let author: String
    let published: String
    let tags: [String]
    let summary: String
}

/// Twenty articles as JSON, about 5 KB: a typical list screen's payload.
let articlesJSON: Data = {
    let articles = (1...20).map { id in
        Article(
            id: id,
            title: "Article number \(id) about caching at the transport layer",
            author: "Author \(id % 5)",
            published: "2026-11-\(10 + id % 18)T09:30:00Z",
            tags: ["swift", "networking", "cache"],
            summary: "A short summary of article \(id), long enough to look like a real one in a list."
        )
    }
    return try! JSONEncoder().encode(articles)
}()

/// Answers every request with `articlesJSON`, in process: the suite measures hits, and its one
/// fetch needs no origin. The body is delivered in one call, from `startLoading()` on the
/// session's own queue.
final class ArticlesProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let response = HTTPURLResponse(
            url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
            headerFields: ["Content-Type": "application/json"]
        )!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: articlesJSON)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

private let transport = Shared<CachedTransport>()
private let articlesRequest = URLRequest(url: URL(string: "https://api.example.com/articles?page=1")!)

private func makeTransport() async throws {
    var configuration = CachedTransport.Configuration()
    configuration.network.cacheOverride = nil
    let session = URLSessionConfiguration.ephemeral
    session.protocolClasses = [ArticlesProtocol.self]
    let cached = CachedTransport(configuration: configuration, sessionConfiguration: session)
    // Stored and decoded once, before measuring.
    _ = try await cached.value([Article].self, for: articlesRequest)
    transport.value = cached
}

let benchmarks: @Sendable () -> Void = {
    let perCall = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        scalingFactor: .kilo,
        maxDuration: .seconds(isSmokeRun ? 1 : 5),
        maxIterations: isSmokeRun ? 5 : 1_000
    )

    Benchmark("Values: CachedTransport.value(_:for:) hit, 20 articles", configuration: perCall) { benchmark in
        let transport = transport.value
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        try await Task.detached {
            for _ in iterations { blackHole(try await transport.value([Article].self, for: articlesRequest)) }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        try await makeTransport()
    } teardown: {
        transport.clear()
    }

    // The idiom most code writes: a new decoder on every call. Decoders with equal settings
    // share the decoded value, so this is a hit too, plus making the decoder and reading its
    // settings.
    Benchmark(
        "Values: value(_:for:decoder: JSONDecoder()) hit, new decoder per call, 20 articles", configuration: perCall
    ) { benchmark in
        let transport = transport.value
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        try await Task.detached {
            for _ in iterations {
                blackHole(try await transport.value([Article].self, for: articlesRequest, decoder: JSONDecoder()))
            }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        try await makeTransport()
    } teardown: {
        transport.clear()
    }

    Benchmark("Values: data(for:) hit + JSONDecoder().decode, 20 articles", configuration: perCall) { benchmark in
        let transport = transport.value
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        try await Task.detached {
            for _ in iterations {
                let (data, _) = try await transport.data(for: articlesRequest)
                blackHole(try JSONDecoder().decode([Article].self, from: data))
            }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        try await makeTransport()
    } teardown: {
        transport.clear()
    }

    Benchmark("Values: data(for:) hit + shared JSONDecoder, 20 articles", configuration: perCall) { benchmark in
        let transport = transport.value
        let decoder = JSONDecoder()
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        try await Task.detached {
            for _ in iterations {
                let (data, _) = try await transport.data(for: articlesRequest)
                blackHole(try decoder.decode([Article].self, from: data))
            }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        try await makeTransport()
    } teardown: {
        transport.clear()
    }
}
