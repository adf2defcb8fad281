import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// HTTP revalidation against the loopback origin, each figure beside its baseline in one run:
// - a pull-to-refresh of an unchanged 200 KB body, conditional (a 304) against a full refetch,
//   with the body bytes the origin sent per refresh as the custom metric `bodyBytesReceived`;
// - an answer within the stale-while-revalidate window against a plain hit and against the
//   blocking revalidation the same request costs without a window;
// - `revalidateAll()` over 1,000 unchanged entries, four at once, against the same 1,000
//   conditional GETs sent by URLSession four at once, with the most requests the origin had in
//   flight as the custom metric `maximumInFlight`.
// Measured inside detached tasks, off the main actor.

private let origin = Shared<LoopbackOrigin>()
private let transport = Shared<CachedTransport>()
private let bodySize = 200 * 1024

private func start(query: String = "", _ configure: (inout CachedTransport.Configuration) -> Void = { _ in })
    async throws -> URLRequest
{
    let started = try await LoopbackOrigin.start()
    origin.value = started
    var configuration = CachedTransport.Configuration()
    configure(&configuration)
    let cached = CachedTransport(configuration: configuration)
    transport.value = cached
    let request = URLRequest(url: started.url("/list?size=\(bodySize)\(query)"))
    _ = try await cached.data(for: request)
    return request
}

private func stop() async throws {
    await origin.value.openGate()
    await origin.value.stop()
    origin.clear()
    transport.clear()
}

private let primed = Shared<URLRequest>()

let benchmarks: @Sendable () -> Void = {
    let refresh = Benchmark.Configuration(
        metrics: [.wallClock, .custom("bodyBytesReceived")],
        maxDuration: .seconds(isSmokeRun ? 1 : 5),
        maxIterations: isSmokeRun ? 3 : 500
    )

    // On loopback the link costs nothing; the same refreshes over a paced 10 Mbit/s link show what
    // a phone on a slow network waits for.
    let slowLink = Benchmark.Configuration(
        metrics: [.wallClock, .custom("bodyBytesReceived")],
        maxDuration: .seconds(isSmokeRun ? 1 : 10),
        maxIterations: isSmokeRun ? 2 : 30
    )
    for (link, query, configuration) in [("", "", refresh), (" over a 10 Mbit/s link", "&kbps=10000", slowLink)] {
        for conditional in [true, false] {
            let label = conditional ? "conditional (304)" : "full refetch"
            Benchmark("Refresh: unchanged 200 KB body\(link), \(label)", configuration: configuration) { benchmark in
                let request = primed.value
                let transport = transport.value
                let before = await origin.value.bodyBytesSent
                benchmark.startMeasurement()
                let (data, _) = try await Task.detached { try await transport.refresh(request) }.value
                benchmark.stopMeasurement()
                precondition(data.count == bodySize)
                benchmark.measurement(.custom("bodyBytesReceived"), await origin.value.bodyBytesSent - before)
            } setup: {
                primed.value = try await start(query: query) { $0.freshness.usesConditionalRequests = conditional }
            } teardown: {
                try await stop()
            }
        }
    }

    let perAnswer = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(isSmokeRun ? 1 : 5),
        maxIterations: isSmokeRun ? 5 : 2_000
    )

    // Entries are past their maximum age at once and stay in the window for an hour. The origin
    // holds the one background revalidation at its gate, so every measured answer is what a
    // screen gets while a revalidation is in flight. The gate is named in the URL's query, and the
    // plain hit asks for the same URL: the two requests differ only in how fresh their entry is.
    // (Named in a request header instead, the gate made the window's request cost a header's
    // reading, which the plain hit's request did not carry.)
    Benchmark("Stale window: answer while revalidating", configuration: perAnswer) { benchmark in
        let request = primed.value
        let transport = transport.value
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        try await Task.detached {
            for _ in iterations { blackHole(try await transport.data(for: request)) }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        let request = try await start(query: "&gate=1") {
            $0.freshness.maximumAge = .nanoseconds(1)
            $0.freshness.staleWhileRevalidate = .seconds(3_600)
        }
        await origin.value.closeGate()
        let (_, response) = try await transport.value.data(for: request)
        precondition(response.isRevalidatingAnswer)
        primed.value = request
    } teardown: {
        try await stop()
    }

    Benchmark("Stale window baseline: plain hit", configuration: perAnswer) { benchmark in
        let request = primed.value
        let transport = transport.value
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        try await Task.detached {
            for _ in iterations { blackHole(try await transport.data(for: request)) }
        }.value
        benchmark.stopMeasurement()
    } setup: {
        primed.value = try await start(query: "&gate=1") { $0.freshness.maximumAge = .seconds(3_600) }
    } teardown: {
        try await stop()
    }

    Benchmark(
        "Stale window baseline: blocking revalidation (no window)",
        configuration: .init(
            metrics: [.wallClock],
            maxDuration: .seconds(isSmokeRun ? 1 : 5),
            maxIterations: isSmokeRun ? 3 : 1_000
        )
    ) { benchmark in
        let request = primed.value
        let transport = transport.value
        benchmark.startMeasurement()
        blackHole(try await Task.detached { try await transport.data(for: request) }.value)
        benchmark.stopMeasurement()
    } setup: {
        primed.value = try await start { $0.freshness.maximumAge = .nanoseconds(1) }
    } teardown: {
        try await stop()
    }

    let sweep = Benchmark.Configuration(
        metrics: [.wallClock, .custom("maximumInFlight")],
        maxDuration: .seconds(isSmokeRun ? 1 : 20),
        maxIterations: isSmokeRun ? 1 : 10
    )

    Benchmark("Revalidate all: 1,000 unchanged entries, 4 at once", configuration: sweep) { benchmark in
        let transport = transport.value
        await origin.value.resetMaximumConcurrentRequests()
        benchmark.startMeasurement()
        let summary = await Task.detached { await transport.revalidateAll() }.value
        benchmark.stopMeasurement()
        precondition(summary == RevalidationSummary(revalidated: sweepSize), "\(summary)")
        benchmark.measurement(.custom("maximumInFlight"), await origin.value.maximumConcurrentRequests)
    } setup: {
        let started = try await LoopbackOrigin.start()
        origin.value = started
        var configuration = CachedTransport.Configuration()
        configuration.stayingCurrent.minimumRevalidationInterval = .zero
        configuration.stayingCurrent.maximumConcurrentRevalidations = 4
        let cached = CachedTransport(configuration: configuration)
        transport.value = cached
        for index in 0..<sweepSize { _ = try await cached.data(from: started.url("/sweep/\(index)?stable=1")) }
    } teardown: {
        try await stop()
    }

    Benchmark("Revalidate all baseline: 1,000 conditional GETs by URLSession, 4 at once", configuration: sweep) {
        benchmark in
        let requests = conditionalRequests.value
        await origin.value.resetMaximumConcurrentRequests()
        benchmark.startMeasurement()
        try await Task.detached {
            try await withThrowingTaskGroup(of: Int.self) { group in
                var remaining = requests[...]
                func startNext() {
                    guard let request = remaining.popFirst() else { return }
                    group.addTask {
                        let (_, response) = try await URLSession.shared.data(for: request)
                        return (response as? HTTPURLResponse)?.statusCode ?? 0
                    }
                }
                for _ in 0..<4 { startNext() }
                for try await status in group {
                    precondition(status == 304, "status \(status)")
                    startNext()
                }
            }
        }.value
        benchmark.stopMeasurement()
        benchmark.measurement(.custom("maximumInFlight"), await origin.value.maximumConcurrentRequests)
    } setup: {
        let started = try await LoopbackOrigin.start()
        origin.value = started
        var requests: [URLRequest] = []
        for index in 0..<sweepSize {
            var request = URLRequest(
                url: started.url("/sweep/\(index)?stable=1"), cachePolicy: .reloadIgnoringLocalCacheData)
            let (_, response) = try await URLSession.shared.data(for: request)
            let tag = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag")
            request.setValue(tag, forHTTPHeaderField: "If-None-Match")
            requests.append(request)
        }
        conditionalRequests.value = requests
    } teardown: {
        try await stop()
    }
}

private let sweepSize = 1_000
private let conditionalRequests = Shared<[URLRequest]>()
