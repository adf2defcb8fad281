import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// Every figure is measured inside a detached task: off the main actor, as an app's view model
// would call from a task, since a hop to the main queue (about 10 us on Linux) would hide the
// transport's own cost.

private let origin = Shared<LoopbackOrigin>()
private let transport = Shared<CachedTransport>()
/// A transport whose one sending adapter adds a header to every request that goes out, primed
/// with the same entries.
private let adapted = Shared<CachedTransport>()
/// A transport whose one keyed adapter adds a header on every call, primed with the same entries.
private let keyedAdapted = Shared<CachedTransport>()
/// A transport whose one keyed header gives a header's value on every call, primed with the same
/// entries.
private let keyedHeader = Shared<CachedTransport>()
/// A transport with a bearer token's credentials in a partition, primed with the same entries.
private let partitioned = Shared<CachedTransport>()
/// A transport with three accounts signed in at once, primed with the same entries for one of
/// them, which ``accountRequests`` name.
private let severalAccounts = Shared<CachedTransport>()
private let hotRequests = Shared<[URLRequest]>()
private let accountRequests = Shared<[URLRequest]>()
private let plain = Shared<URLSession>()

private let keyCount = 1_000

private func startOrigin() async throws {
    let started = try await LoopbackOrigin.start()
    origin.value = started
    let cached = CachedTransport()
    let all = requests(on: started, count: keyCount)
    try await prime(cached, with: all)
    transport.value = cached
    let withAdapter = CachedTransport(configuration: adapterConfiguration())
    try await prime(withAdapter, with: all)
    adapted.value = withAdapter
    let withKeyedAdapter = CachedTransport(configuration: keyedAdapterConfiguration())
    try await prime(withKeyedAdapter, with: all)
    keyedAdapted.value = withKeyedAdapter
    let withPartitions = CachedTransport(configuration: credentialsConfiguration(partitioned: true))
    try await prime(withPartitions, with: all)
    partitioned.value = withPartitions
    let withKeyedHeader = CachedTransport(configuration: keyedHeaderConfiguration())
    try await prime(withKeyedHeader, with: all)
    keyedHeader.value = withKeyedHeader
    let named = all.map { request in
        var request = request
        request.account = "user"
        return request
    }
    let withAccounts = CachedTransport(configuration: accountsConfiguration())
    try await prime(withAccounts, with: named)
    severalAccounts.value = withAccounts
    accountRequests.value = named
    hotRequests.value = all
}

private func stopOrigin() async throws {
    await origin.value.stop()
    origin.clear()
    transport.clear()
    adapted.clear()
    keyedAdapted.clear()
    keyedHeader.clear()
    partitioned.clear()
    severalAccounts.clear()
}

/// Times `benchmark`'s iterations of a hit on one of the stored entries, from a detached task.
private func measureHits(
    _ benchmark: Benchmark, on other: CachedTransport? = nil, requests: [URLRequest]? = nil
) async throws {
    let request = (requests ?? hotRequests.value)[7]
    let transport = other ?? transport.value
    let iterations = benchmark.scaledIterations
    benchmark.startMeasurement()
    try await Task.detached {
        for _ in iterations { blackHole(try await transport.data(for: request)) }
    }.value
    benchmark.stopMeasurement()
}

let benchmarks: @Sendable () -> Void = {
    let perHit = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        scalingFactor: .kilo,
        maxDuration: .seconds(isSmokeRun ? 1 : 5),
        maxIterations: isSmokeRun ? 5 : 2_000
    )

    Benchmark("Hit: CachedTransport.data(for:)", configuration: perHit) { benchmark in
        try await measureHits(benchmark)
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark("Hit: CachedTransport.data(for:) with one events() listener", configuration: perHit) { benchmark in
        // A listener that reads every event, as a log would; its own work runs beside the hits.
        // The stream is registered here, before the hits, not whenever its task first runs.
        let events = transport.value.events()
        let listener = Task.detached { for await event in events { blackHole(event) } }
        try await measureHits(benchmark)
        listener.cancel()
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark("Hit: CachedTransport.data(for:) with one adapter adding a header", configuration: perHit) { benchmark in
        try await measureHits(benchmark, on: adapted.value)
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark("Hit: CachedTransport.data(for:) with one keyed adapter adding a header", configuration: perHit) {
        benchmark in
        try await measureHits(benchmark, on: keyedAdapted.value)
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark("Hit: CachedTransport.data(for:) with one keyed header", configuration: perHit) { benchmark in
        try await measureHits(benchmark, on: keyedHeader.value)
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark("Hit: CachedTransport.data(for:) of one of several accounts", configuration: perHit) { benchmark in
        try await measureHits(benchmark, on: severalAccounts.value, requests: accountRequests.value)
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark("Hit: CachedTransport.data(for:) with credentials in a partition", configuration: perHit) { benchmark in
        try await measureHits(benchmark, on: partitioned.value)
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark("Hit: Dictionary<String, Data> lookup", configuration: perHit) { benchmark in
        let keys = hotRequests.value.map { $0.url!.absoluteString }
        var dictionary: [String: Data] = [:]
        for key in keys { dictionary[key] = Data(count: 64) }
        let key = keys[7]
        let table = dictionary
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        await Task.detached {
            for _ in iterations { blackHole(table[key]) }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }

    Benchmark(
        "Hit: URLSession.data(for:) from URLCache",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal],
            maxDuration: .seconds(isSmokeRun ? 1 : 5),
            maxIterations: isSmokeRun ? 20 : 5_000
        )
    ) { benchmark in
        let request = hotRequests.value[7]
        let session = plain.value
        try await Task.detached { blackHole(try await session.data(for: request)) }.value
    } setup: {
        try await startOrigin()
        let (session, cache) = plainSession()
        // URLSession on Linux never writes into its URLCache: store the answer by hand, as the
        // URLCache approach would have it stored on Apple platforms.
        let request = hotRequests.value[7]
        let (data, response) = try await transport.value.data(for: request)
        cache.storeCachedResponse(CachedURLResponse(response: response, data: data), for: request)
        plain.value = session
    } teardown: {
        plain.value.invalidateAndCancel()
        try await stopOrigin()
    }

    Benchmark(
        "Hit throughput: 64 tasks x 1,000 keys",
        configuration: .init(
            metrics: [.wallClock],
            maxDuration: .seconds(isSmokeRun ? 1 : 10),
            maxIterations: isSmokeRun ? 3 : 20
        )
    ) { benchmark in
        // One iteration: 64 tasks, each doing 1,000 hits spread over the 1,000 keys.
        let requests = hotRequests.value
        let transport = transport.value
        benchmark.startMeasurement()
        try await Task.detached(priority: poolWorkPriority) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<64 {
                    group.addTask {
                        for index in 0..<1_000 {
                            blackHole(try await transport.data(for: requests[(index &* 7 &+ task) % requests.count]))
                        }
                    }
                }
                try await group.waitForAll()
            }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        try await startOrigin()
    } teardown: {
        try await stopOrigin()
    }
}
