import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// A miss through the transport beside a plain URLSession fetch of the same kind of URL from the
// same loopback origin. Every request asks for a URL never asked before, so each one through the
// transport is a real miss: key, lookup, coalescing bookkeeping, the header override's route
// through its inner session, the store. Both sides keep their connection to the origin alive, and
// each miss is timed inside a detached task, off the main actor, so the time of making and
// joining that task is in neither figure.

private let origin = Shared<LoopbackOrigin>()
private let transport = Shared<CachedTransport>()
private let plain = Shared<URLSession>()
private let run = Shared<Int>()

private func nextRequest(_ label: String) -> URLRequest {
    run.value += 1
    return URLRequest(url: origin.value.url("/miss?run=\(label)-\(run.value)"))
}

private func start() async throws {
    origin.value = try await LoopbackOrigin.start()
    run.value = 0
}

private func stop() async throws {
    await origin.value.stop()
    origin.clear()
}

/// Runs `body` in a detached task and times only `body`.
private func measured(_ benchmark: Benchmark, _ body: @escaping @Sendable () async throws -> Void) async throws {
    // The harness reads the measurement after this returns: the task is awaited, so the benchmark
    // is never used from two places at once.
    nonisolated(unsafe) let benchmark = benchmark
    try await Task.detached {
        benchmark.startMeasurement()
        try await body()
        benchmark.stopMeasurement()
    }.value
}

let benchmarks: @Sendable () -> Void = {
    let perMiss = Benchmark.Configuration(
        metrics: [.wallClock],
        maxDuration: .seconds(isSmokeRun ? 1 : 10),
        maxIterations: isSmokeRun ? 5 : 5_000
    )

    Benchmark("Miss: CachedTransport.data(for:), a new URL each time", configuration: perMiss) { benchmark in
        let transport = transport.value
        let request = nextRequest("cached")
        try await measured(benchmark) { blackHole(try await transport.data(for: request)) }
    } setup: {
        try await start()
        let cached = CachedTransport()
        // The first request opens the connection the measured ones reuse.
        _ = try await cached.data(for: nextRequest("cached"))
        transport.value = cached
    } teardown: {
        transport.clear()
        try await stop()
    }

    Benchmark("Miss: URLSession.data(for:), a new URL each time (baseline)", configuration: perMiss) { benchmark in
        let session = plain.value
        let request = nextRequest("plain")
        try await measured(benchmark) { blackHole(try await session.data(for: request)) }
    } setup: {
        try await start()
        let session = URLSession(configuration: .ephemeral)
        _ = try await session.data(for: nextRequest("plain"))
        plain.value = session
    } teardown: {
        plain.value.invalidateAndCancel()
        plain.clear()
        try await stop()
    }
}
