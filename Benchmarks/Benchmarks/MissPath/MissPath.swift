import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// A miss through the transport, a plain URLSession fetch and the miss's floor, timed in turn
// within one benchmark against one loopback origin, so that whatever else the shared machine is
// doing falls on all three alike. Each iteration makes one plain fetch, one fetch through the
// floor and one miss, each of a URL never asked before (so the miss is a real one: key, lookup,
// coalescing bookkeeping, the header override's route through its inner session, the store), and
// records five custom metrics:
// - `plainFetchMicroseconds`: `URLSession(configuration: .ephemeral).data(for:)`;
// - `floorFetchMicroseconds`: the same with `CacheOverrideURLProtocol` first in the
//   configuration's `protocolClasses`, the route the transport's own fetches take (an outer
//   URLSession task, the protocol, its inner session's task, the response read through the
//   header override), with nothing of the transport around it: what a miss cannot go below;
// - `transportMissMicroseconds`: `CachedTransport().data(for:)`, the default configuration;
// - `missAddsMicrosecondsPlus1000`: the miss minus the plain fetch of the same iteration, plus
//   1,000, because the harness keeps no negative values (the rare pair whose plain fetch was
//   slower by more than a millisecond is recorded as 0, which keeps its rank, and so the p50, as it
//   was). Its p50 less 1,000 is what a miss adds;
// - `missAddsToFloorMicrosecondsPlus1000`: the miss minus the floor's fetch of the same
//   iteration, plus 1,000 likewise. Its p50 less 1,000 is what the transport itself adds to a
//   miss; the p50 of the miss over the p50 of the floor is the ratio to read against the goal.
// The order of the three goes through all six orders in turn, so each goes before, and right
// after, each other one equally often (a fetch pays part of the one before it); the plain fetch
// still goes before the miss every other iteration, as when the pair ran alone. All three keep
// their connection to the origin alive (the floor's and the transport's inner sessions are the
// one shared by default), and all are timed inside one task, so the time of making and joining
// that task is in no figure.
//
// The pair runs twice: from a detached task, off the main actor, and from the main actor, as an
// app's view model makes its requests. From the main actor the transport's `data(for:)`, being
// `nonisolated(nonsending)`, starts on the main actor, where URLSession's own `data(for:)` hops
// off it; whatever the miss does there beyond what URLSession does is main-thread time in an app.

private let origin = Shared<LoopbackOrigin>()
private let transport = Shared<CachedTransport>()
private let plain = Shared<URLSession>()
private let overrideSession = Shared<URLSession>()
private let run = Shared<Int>()

private let plainFetch = BenchmarkMetric.custom("plainFetchMicroseconds", useScalingFactor: false)
private let floorFetch = BenchmarkMetric.custom("floorFetchMicroseconds", useScalingFactor: false)
private let transportMiss = BenchmarkMetric.custom("transportMissMicroseconds", useScalingFactor: false)
private let missAdds = BenchmarkMetric.custom("missAddsMicrosecondsPlus1000", useScalingFactor: false)
private let missAddsToFloor = BenchmarkMetric.custom("missAddsToFloorMicrosecondsPlus1000", useScalingFactor: false)
/// Added to each difference so that a miss faster than its baseline is still recorded.
private let missAddsOffset = 1_000

/// A new URL on the origin for each of the three, and their order this time.
private func nextRequests() -> (plain: URLRequest, floor: URLRequest, miss: URLRequest, order: [MissRoundFetch]) {
    run.value += 1
    let number = run.value
    return (
        URLRequest(url: origin.value.url("/miss?run=plain-\(number)")),
        URLRequest(url: origin.value.url("/miss?run=floor-\(number)")),
        URLRequest(url: origin.value.url("/miss?run=cached-\(number)")),
        MissRoundFetch.order(ofRound: number)
    )
}

private func microseconds(_ duration: Duration) -> Int {
    Int((duration / .microseconds(1)).rounded())
}

/// One plain fetch, one through the floor and one miss of new URLs, from a detached task or from
/// the main actor.
private func timedRound(fromMainActor: Bool) async throws -> (plain: Duration, floor: Duration, miss: Duration) {
    let requests = nextRequests()
    let session = plain.value
    let floorSession = overrideSession.value
    let transport = transport.value
    if fromMainActor {
        return try await Task { @MainActor in
            try await timedMissRound(
                session: session, plain: requests.plain, floorSession: floorSession, floor: requests.floor,
                transport: transport, miss: requests.miss, order: requests.order)
        }.value
    }
    return try await Task.detached {
        try await timedMissRound(
            session: session, plain: requests.plain, floorSession: floorSession, floor: requests.floor,
            transport: transport, miss: requests.miss, order: requests.order)
    }.value
}

let benchmarks: @Sendable () -> Void = {
    // Counts, not the harness's automatic K/M scaling, so every figure reads in microseconds.
    let configuration = Benchmark.Configuration(
        metrics: [plainFetch, floorFetch, transportMiss, missAdds, missAddsToFloor],
        units: [
            plainFetch: .count, floorFetch: .count, transportMiss: .count, missAdds: .count, missAddsToFloor: .count,
        ],
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
            let times = try await timedRound(fromMainActor: fromMainActor)
            benchmark.measurement(plainFetch, microseconds(times.plain))
            benchmark.measurement(floorFetch, microseconds(times.floor))
            benchmark.measurement(transportMiss, microseconds(times.miss))
            benchmark.measurement(missAdds, max(0, microseconds(times.miss - times.plain) + missAddsOffset))
            benchmark.measurement(missAddsToFloor, max(0, microseconds(times.miss - times.floor) + missAddsOffset))
        } setup: {
            origin.value = try await LoopbackOrigin.start()
            run.value = 0
            // The first request of each opens the connection the measured ones reuse.
            let warm = nextRequests()
            let cached = CachedTransport()
            _ = try await cached.data(for: warm.miss)
            let session = URLSession(configuration: .ephemeral)
            _ = try await session.data(for: warm.plain)
            let floorSession = headerOverrideSession()
            _ = try await floorSession.data(for: warm.floor)
            transport.value = cached
            plain.value = session
            overrideSession.value = floorSession
        } teardown: {
            plain.value.invalidateAndCancel()
            plain.clear()
            overrideSession.value.invalidateAndCancel()
            overrideSession.clear()
            transport.clear()
            await origin.value.stop()
            origin.clear()
        }
    }
}
