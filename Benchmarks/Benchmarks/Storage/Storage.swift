import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// What a stored entry costs beyond its body, and whether the byte budget holds when many more
// distinct keys pass through than fit.

private let origin = Shared<LoopbackOrigin>()

private func start() async throws {
    origin.value = try await LoopbackOrigin.start()
}

private func stop() async throws {
    await origin.value.stop()
    origin.clear()
}

let benchmarks: @Sendable () -> Void = {
    let entryCount = isSmokeRun ? 500 : 20_000
    let bodySize = 256

    Benchmark(
        "Storage: memory per stored entry beyond the body",
        configuration: .init(metrics: [.custom("overheadBytesPerEntry")], maxIterations: 1)
    ) { benchmark in
        var configuration = CachedTransport.Configuration()
        configuration.storage.memoryCapacity = 1 << 30
        let transport = CachedTransport(configuration: configuration)
        let all = requests(on: origin.value, count: entryCount, path: "/entries")
            .map { request -> URLRequest in
                var request = request
                request.url = request.url!.appending(queryItems: [URLQueryItem(name: "size", value: String(bodySize))])
                return request
            }
        // Warm the session and the store's tables so their one-time costs are not counted.
        try await prime(transport, with: Array(all.prefix(50)))
        let before = residentBytes()
        try await prime(transport, with: Array(all.dropFirst(50)))
        let after = residentBytes()
        let stored = entryCount - 50
        benchmark.measurement(.custom("overheadBytesPerEntry"), (after - before) / stored - bodySize)
        blackHole(transport)
    } setup: {
        try await start()
    } teardown: {
        try await stop()
    }

    Benchmark(
        "Storage: byte budget under \(isSmokeRun ? 1_000 : 100_000) distinct keys",
        configuration: .init(metrics: [.custom("bytesHeldPercentOfCapacity"), .custom("evictions")], maxIterations: 1)
    ) { benchmark in
        var configuration = CachedTransport.Configuration()
        configuration.storage.memoryCapacity = 1 << 20
        let transport = CachedTransport(configuration: configuration)
        let keys = isSmokeRun ? 1_000 : 100_000
        try await prime(transport, with: requests(on: origin.value, count: keys, path: "/budget"), width: 12)
        let statistics = transport.statistics
        benchmark.measurement(
            .custom("bytesHeldPercentOfCapacity"), statistics.bytesHeld * 100 / configuration.storage.memoryCapacity)
        benchmark.measurement(.custom("evictions"), statistics.evictions)
    } setup: {
        try await start()
    } teardown: {
        try await stop()
    }
}
