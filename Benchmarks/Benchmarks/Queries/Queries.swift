import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Observation
import TransportCache
import TransportCacheQueries
import TransportCacheTesting

// Observable queries on the main actor, where SwiftUI uses them: making a query whose value memory
// holds, beside a plain `value(_:for:)` hit from the main actor; one change delivered to 1,000
// queries on one URL; and the memory an idle query holds. The list is stored with a local write,
// so no network is involved.

struct Article: Codable, Sendable {
    let id: Int
    let title: String
}

private let articlesRequest = URLRequest(url: URL(string: "https://api.example.com/articles")!)

/// Twenty articles, titled with `version` so that each version's bytes differ.
private func articles(_ version: Int) -> [Article] {
    (1...20).map { Article(id: $0, title: "Article \($0), version \(version)") }
}

/// A transport holding the list, decoded once.
private func makeTransport() async throws -> CachedTransport {
    let transport = CachedTransport()
    try transport.store(ProvisionalAnswer(for: articlesRequest, value: articles(0)))
    _ = try await transport.value([Article].self, for: articlesRequest)
    return transport
}

/// Counts observed changes down to zero; the benchmark waits for zero.
@MainActor
private final class Countdown {
    private var remaining = 0
    private var waiter: CheckedContinuation<Void, Never>?

    /// Ticks once at the next change of `query`'s value.
    func watch(_ query: CachedQuery<[Article]>) {
        remaining += 1
        withObservationTracking {
            _ = query.value
        } onChange: {
            MainActor.assumeIsolated { self.tick() }
        }
    }

    private func tick() {
        remaining -= 1
        if remaining == 0, let waiter {
            self.waiter = nil
            waiter.resume()
        }
    }

    func wait() async {
        if remaining == 0 { return }
        await withCheckedContinuation { waiter = $0 }
    }
}

let benchmarks: @Sendable () -> Void = {
    let perCall = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        scalingFactor: .kilo,
        maxDuration: .seconds(isSmokeRun ? 1 : 5),
        maxIterations: isSmokeRun ? 5 : 1_000
    )

    Benchmark("Queries: value(_:for:) hit from the main actor, 20 articles", configuration: perCall) { benchmark in
        let transport = try await makeTransport()
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        try await Task { @MainActor in
            for _ in iterations { blackHole(try await transport.value([Article].self, for: articlesRequest)) }
        }.value
        benchmark.stopMeasurement()
    }

    // Made and released: the synchronous read from memory, the subscription to the URL's
    // changes, the listener task, and their cancellation, counted until every subscription is
    // gone.
    Benchmark("Queries: make a CachedQuery whose value memory holds, 20 articles", configuration: perCall) {
        benchmark in
        let transport = try await makeTransport()
        let iterations = benchmark.scaledIterations
        benchmark.startMeasurement()
        await Task { @MainActor in
            for _ in iterations {
                let query = CachedQuery([Article].self, for: articlesRequest, in: transport)
                blackHole(query.value)
            }
        }.value
        await transport.waitForChangeSubscribers(0)
        benchmark.stopMeasurement()
    }

    // The same while another query of the URL is held, as in a list whose rows share a URL: the
    // subscription already exists, and each new query joins it.
    Benchmark(
        "Queries: make a CachedQuery whose value memory holds, another query on the URL held, 20 articles",
        configuration: perCall
    ) { benchmark in
        let transport = try await makeTransport()
        let iterations = benchmark.scaledIterations
        let held = await Task { @MainActor in CachedQuery([Article].self, for: articlesRequest, in: transport) }.value
        benchmark.startMeasurement()
        await Task { @MainActor in
            for _ in iterations {
                let query = CachedQuery([Article].self, for: articlesRequest, in: transport)
                blackHole(query.value)
            }
            // The releases leave the subscription on the main actor, after this loop.
            await Task.yield()
        }.value
        benchmark.stopMeasurement()
        blackHole(held)
    }

    let queryCount = 1_000
    Benchmark(
        "Queries: one change to \(queryCount) queries on one URL",
        configuration: .init(
            metrics: [.wallClock], maxDuration: .seconds(isSmokeRun ? 1 : 10), maxIterations: isSmokeRun ? 3 : 200)
    ) { benchmark in
        let transport = try await makeTransport()
        let next = try ProvisionalAnswer(for: articlesRequest, value: articles(1))
        let (queries, countdown) = await Task { @MainActor in
            let queries = (0..<queryCount).map { _ in CachedQuery([Article].self, for: articlesRequest, in: transport) }
            let countdown = Countdown()
            for query in queries { countdown.watch(query) }
            return (queries, countdown)
        }.value
        benchmark.startMeasurement()
        try transport.store(next)
        await countdown.wait()
        benchmark.stopMeasurement()
        blackHole(queries)
    }

    // Resident memory grown by 10,000 idle queries of one stored list, each holding its value
    // (shared, decoded once), its subscription and its listener task.
    let idleCount = 10_000
    Benchmark(
        "Queries: \(idleCount) idle queries held",
        configuration: .init(
            metrics: [.peakMemoryResidentDelta, .mallocCountTotal], maxDuration: .seconds(isSmokeRun ? 1 : 10),
            maxIterations: isSmokeRun ? 2 : 20)
    ) { benchmark in
        let transport = try await makeTransport()
        benchmark.startMeasurement()
        await Task { @MainActor in
            let queries = (0..<idleCount).map { _ in CachedQuery([Article].self, for: articlesRequest, in: transport) }
            blackHole(queries)
        }.value
        benchmark.stopMeasurement()
    }
}
