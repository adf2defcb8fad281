import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// A miss through the transport and a plain URLSession fetch, timed in turn within one benchmark
// against one loopback origin, so that whatever else the shared machine is doing falls on both
// alike. Each iteration makes one plain fetch and one miss, each of a URL never asked before (so
// the miss is a real one: key, lookup, coalescing bookkeeping, the header override's route
// through its inner session, the store), and records three custom metrics:
// - `plainFetchMicroseconds`: `URLSession(configuration: .ephemeral).data(for:)`;
// - `transportMissMicroseconds`: `CachedTransport().data(for:)`, the default configuration;
// - `missAddsMicrosecondsPlus1000`: the miss minus the plain fetch of the same iteration, plus
//   1,000, because the harness keeps no negative values (the rare pair whose plain fetch was
//   slower by more than a millisecond is recorded as 0, which keeps its rank, and so the p50, as it
//   was). Its p50 less 1,000 is what a miss adds.
// Which of the two goes first alternates from one iteration to the next. Both keep their
// connection to the origin alive, and both are timed inside one task, so the time of making and
// joining that task is in neither figure.
//
// The pair runs twice: from a detached task, off the main actor, and from the main actor, as an
// app's view model makes its requests. From the main actor the transport's `data(for:)`, being
// `nonisolated(nonsending)`, starts on the main actor, where URLSession's own `data(for:)` hops
// off it; whatever the miss does there beyond what URLSession does is main-thread time in an app.

private let origin = Shared<LoopbackOrigin>()
private let transport = Shared<CachedTransport>()
private let plain = Shared<URLSession>()
private let run = Shared<Int>()

private let plainFetch = BenchmarkMetric.custom("plainFetchMicroseconds", useScalingFactor: false)
private let transportMiss = BenchmarkMetric.custom("transportMissMicroseconds", useScalingFactor: false)
private let missAdds = BenchmarkMetric.custom("missAddsMicrosecondsPlus1000", useScalingFactor: false)
/// Added to each difference so that a miss faster than its plain fetch is still recorded.
private let missAddsOffset = 1_000

/// A new URL on the origin for each side, and whether the plain fetch goes first this time.
private func nextRequests() -> (plain: URLRequest, miss: URLRequest, plainFirst: Bool) {
    run.value += 1
    let number = run.value
    return (
        URLRequest(url: origin.value.url("/miss?run=plain-\(number)")),
        URLRequest(url: origin.value.url("/miss?run=cached-\(number)")),
        number.isMultiple(of: 2)
    )
}

private func microseconds(_ duration: Duration) -> Int {
    Int((duration / .microseconds(1)).rounded())
}

/// One plain fetch and one miss of new URLs, from a detached task or from the main actor.
private func timedPair(fromMainActor: Bool) async throws -> (plain: Duration, miss: Duration) {
    let requests = nextRequests()
    let session = plain.value
    let transport = transport.value
    if fromMainActor {
        return try await Task { @MainActor in
            try await timedMissPair(
                session: session, plain: requests.plain, transport: transport, miss: requests.miss,
                plainFirst: requests.plainFirst)
        }.value
    }
    return try await Task.detached {
        try await timedMissPair(
            session: session, plain: requests.plain, transport: transport, miss: requests.miss,
            plainFirst: requests.plainFirst)
    }.value
}

let benchmarks: @Sendable () -> Void = {
    // Counts, not the harness's automatic K/M scaling, so every figure reads in microseconds.
    let configuration = Benchmark.Configuration(
        metrics: [plainFetch, transportMiss, missAdds],
        units: [plainFetch: .count, transportMiss: .count, missAdds: .count],
        maxDuration: .seconds(isSmokeRun ? 1 : 20),
        maxIterations: isSmokeRun ? 5 : 5_000
    )

    for (name, fromMainActor) in [
        ("Miss: CachedTransport.data(for:) and URLSession.data(for:) in turn, a new URL each time", false),
        (
            "Miss from the main actor: CachedTransport.data(for:) and URLSession.data(for:) in turn, a new URL each time",
            true
        ),
    ] {
        Benchmark(name, configuration: configuration) { benchmark in
            let times = try await timedPair(fromMainActor: fromMainActor)
            benchmark.measurement(plainFetch, microseconds(times.plain))
            benchmark.measurement(transportMiss, microseconds(times.miss))
            benchmark.measurement(missAdds, max(0, microseconds(times.miss - times.plain) + missAddsOffset))
        } setup: {
            origin.value = try await LoopbackOrigin.start()
            run.value = 0
            // The first request of each opens the connection the measured ones reuse.
            let warm = nextRequests()
            let cached = CachedTransport()
            _ = try await cached.data(for: warm.miss)
            let session = URLSession(configuration: .ephemeral)
            _ = try await session.data(for: warm.plain)
            transport.value = cached
            plain.value = session
        } teardown: {
            plain.value.invalidateAndCancel()
            plain.clear()
            transport.clear()
            await origin.value.stop()
            origin.clear()
        }
    }
}
