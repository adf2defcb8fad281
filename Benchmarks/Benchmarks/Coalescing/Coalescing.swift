import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// N identical GETs started at once against an origin that answers in 50 ms. Each iteration asks
// for a new URL, so nothing is stored before it starts. The custom metric `originHits` counts the
// requests that reached the origin.

private let origin = Shared<LoopbackOrigin>()
private let run = Shared<Int>()
private let originLatencyMilliseconds = 50

private func nextURL(_ label: String) -> URL {
    run.value += 1
    return origin.value.baseURL.appendingPathComponent("coalesce").appending(queryItems: [
        URLQueryItem(name: "delay", value: String(originLatencyMilliseconds)),
        URLQueryItem(name: "run", value: "\(label)-\(run.value)"),
    ])
}

private func start() async throws {
    origin.value = try await LoopbackOrigin.start()
    run.value = 0
}

private func stop() async throws {
    await origin.value.stop()
    origin.clear()
}

/// Starts `count` identical requests at once with `load` and waits for all of them, at
/// ``poolWorkPriority``: on a pool none of whose threads the harness holds.
private func concurrently(
    _ count: Int,
    _ load: @escaping @Sendable () async throws -> Void
) async throws {
    try await Task.detached(priority: poolWorkPriority) {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<count { group.addTask { try await load() } }
            try await group.waitForAll()
        }
    }.value
}

let benchmarks: @Sendable () -> Void = {
    let sizes = isSmokeRun ? [10, 100] : [10, 1_000, 10_000]
    for size in sizes {
        Benchmark(
            "Coalescing: \(size) identical GETs, CachedTransport",
            configuration: .init(
                metrics: [.wallClock, .custom("originHits")],
                maxDuration: .seconds(isSmokeRun ? 1 : 10),
                maxIterations: isSmokeRun ? 2 : 20
            )
        ) { benchmark in
            let transport = CachedTransport()
            let url = nextURL("cached-\(size)")
            let before = await origin.value.hits(path: "/coalesce")
            benchmark.startMeasurement()
            try await concurrently(size) { _ = try await transport.data(from: url) }
            benchmark.stopMeasurement()
            benchmark.measurement(.custom("originHits"), await origin.value.hits(path: "/coalesce") - before)
        } setup: {
            try await start()
        } teardown: {
            try await stop()
        }
    }

    // The floor: the same number of tasks, each parked on a bare continuation and resumed 50 ms
    // after the start, as an origin of that latency would answer them. No transport is faster
    // than the runtime's own suspend and resume. Its opener wakes at the callers' priority, as the
    // transport's answer resumes them at theirs.
    for size in sizes {
        Benchmark(
            "Coalescing: \(size) tasks on bare continuations resumed after 50 ms (runtime floor)",
            configuration: .init(
                metrics: [.wallClock],
                maxDuration: .seconds(isSmokeRun ? 1 : 10),
                maxIterations: isSmokeRun ? 2 : 20
            )
        ) { benchmark in
            let gate = ContinuationGate()
            benchmark.startMeasurement()
            let opener = Task.detached(priority: poolWorkPriority) {
                try await Task.sleep(for: .milliseconds(originLatencyMilliseconds))
                gate.open()
            }
            try await concurrently(size) { await gate.pass() }
            try await opener.value
            benchmark.stopMeasurement()
        }
    }

    // A plain URLSession makes one origin fetch per request, at most six at a time per host:
    // 10,000 take well over a minute, so that size runs once, with timeouts long enough for the
    // last request in the queue.
    for size in sizes {
        Benchmark(
            "Coalescing: \(size) identical GETs, URLSession + URLCache",
            configuration: .init(
                metrics: [.wallClock, .custom("originHits")],
                maxDuration: .seconds(isSmokeRun ? 1 : 20),
                maxIterations: isSmokeRun || size >= 10_000 ? 1 : 5
            )
        ) { benchmark in
            let (session, _) = plainSession(timeout: .seconds(600))
            defer { session.invalidateAndCancel() }
            let url = nextURL("plain-\(size)")
            let before = await origin.value.hits(path: "/coalesce")
            benchmark.startMeasurement()
            try await concurrently(size) { _ = try await session.data(from: url) }
            benchmark.stopMeasurement()
            benchmark.measurement(.custom("originHits"), await origin.value.hits(path: "/coalesce") - before)
        } setup: {
            try await start()
        } teardown: {
            try await stop()
        }
    }

    // Twenty screens whose token expired meanwhile, each asking for its own URL at once: every one
    // is refused, one refresh gets a new token from the origin's /token, and each is sent again.
    // `originHits` counts every request the origin received, the refresh's own included.
    Benchmark(
        "Credentials: 20 concurrent 401s, one refresh",
        configuration: .init(
            metrics: [.wallClock, .custom("originHits"), .custom("refreshes")],
            maxDuration: .seconds(isSmokeRun ? 1 : 10),
            maxIterations: isSmokeRun ? 2 : 20
        )
    ) { benchmark in
        let origin = origin.value
        let tokens = OriginTokens(tokenURL: origin.url("/token"))
        var configuration = CachedTransport.Configuration()
        configuration.identity.authenticate(
            with: Credentials(tokens, credential: OriginAccount(name: "me", token: await origin.currentToken)))
        let transport = CachedTransport(configuration: configuration)
        tokens.use(transport)
        await origin.expireToken()
        let urls = (0..<20).map { _ in nextURL("credentials").appending(queryItems: [.init(name: "token", value: "1")])
        }
        let before = await origin.totalHits
        benchmark.startMeasurement()
        try await Task.detached {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for url in urls { group.addTask { _ = try await transport.data(from: url) } }
                try await group.waitForAll()
            }
        }.value
        benchmark.stopMeasurement()
        benchmark.measurement(.custom("originHits"), await origin.totalHits - before)
        benchmark.measurement(.custom("refreshes"), tokens.refreshes)
    } setup: {
        try await start()
    } teardown: {
        try await stop()
    }
}
