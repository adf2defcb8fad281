import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// The per-host fetch queue and prefetching, against loopback origins that answer after 200 ms
// (`delay=200`). Every figure is set beside its baseline within the same iteration, so whatever
// else the shared machine does falls on both; every time is a custom metric in microseconds and
// every count a custom metric, read at their p50:
// - a screen's request (`withFetchPriority(.normal)`, the lowest priority a screen has) made while
//   100 prefetches to its host wait in the queue, beside the same request with nothing queued;
//   and the same with the queue off (`maximumFetchesPerHost = Int.max`, every load handed to
//   URLSession at once), where it waits behind the prefetches in URLSession's own line;
// - 100 prefetches alone, all outcomes awaited; 100 screen requests at once; and, as their floor
//   in the same iteration, 100 requests of a plain URLSession, which opens six connections to one
//   host: ceil(100/6) = 17 waves of 200 ms;
// - a queued prefetch joined by a screen's request: the time from the join to its answer, and the
//   origin's requests for that URL;
// - 100 prefetches, 90 of them cancelled once the first have reached the origin: the origin's
//   requests in all;
// - the most requests the origin answered at once in each of those, and a request to a second
//   origin (another port: another host to the queue) while the first host is full;
// - after prefetching ten times the memory budget, the share of the entries a screen read that
//   still answer from memory (this one with an origin that answers at once: latency does not
//   matter to it).
// Each iteration asks for URLs never asked before. Prefetches still queued after a figure is
// taken are cancelled, and the next iteration starts once the origin has answered the ones
// already sent, so no iteration inherits the load of the one before.

private let origin = Shared<LoopbackOrigin>()
private let otherOrigin = Shared<LoopbackOrigin>()
private let transport = Shared<CachedTransport>()
private let plain = Shared<URLSession>()
private let run = Shared<Int>()

/// The origin's latency in milliseconds.
private let delay = isSmokeRun ? 20 : 200
/// How many prefetches each figure queues.
private let prefetchCount = isSmokeRun ? 20 : 100

private func metric(_ name: String) -> BenchmarkMetric {
    BenchmarkMetric.custom(name, useScalingFactor: false)
}

private let screenAlone = metric("screenAloneMicroseconds")
private let screenBehindPrefetches = metric("screenBehindPrefetchesMicroseconds")
private let originMaximumConcurrent = metric("originMaximumConcurrentRequests")
private let prefetchesAll = metric("prefetchesAllMicroseconds")
private let screensAll = metric("screensAllMicroseconds")
private let plainSessionAll = metric("plainSessionAllMicroseconds")
private let prefetchesMaximumConcurrent = metric("prefetchesOriginMaximumConcurrent")
private let screensMaximumConcurrent = metric("screensOriginMaximumConcurrent")
private let joinToAnswer = metric("joinToAnswerMicroseconds")
private let joinedURLHits = metric("originHitsForJoinedURL")
private let joinedPrefetchLoaded = metric("joinedPrefetchLoaded")
private let sentBeforeCancel = metric("originHitsBeforeCancel")
private let originHitsInAll = metric("originHitsInAll")
private let cancelledHits = metric("originHitsOfCancelled")
private let keptLoaded = metric("keptPrefetchesLoaded")
private let cancelledOutcomes = metric("cancelledPrefetchesOutcomeCancelled")
private let otherHostAlone = metric("otherHostAloneMicroseconds")
private let otherHostBehindFullHost = metric("otherHostBehindFullHostMicroseconds")
private let fullHostMaximumConcurrent = metric("fullHostOriginMaximumConcurrent")
private let readEntries = metric("screenReadEntries")
private let stillHitting = metric("screenReadStillHittingPercent")
private let prefetchedHeld = metric("prefetchedEntriesHeld")
private let bytesHeld = metric("bytesHeldPercentOfCapacity")

private func configuration(
    _ metrics: [BenchmarkMetric], maxIterations: Int, maxSeconds: Int
) -> Benchmark.Configuration {
    .init(
        metrics: metrics,
        units: Dictionary(uniqueKeysWithValues: metrics.map { ($0, BenchmarkUnits.count) }),
        warmupIterations: isSmokeRun ? 0 : 1,
        maxDuration: .seconds(isSmokeRun ? 1 : maxSeconds),
        maxIterations: isSmokeRun ? 1 : maxIterations
    )
}

private func microseconds(_ duration: Duration) -> Int {
    Int((duration / .microseconds(1)).rounded())
}

/// A number for this iteration's paths, so that nothing it asks for was asked before.
private func nextRun() -> Int {
    run.value += 1
    return run.value
}

/// `path` on `origin`, answered after the origin's latency.
private func slowURL(_ origin: LoopbackOrigin, _ path: String, id: Int = 0) -> URL {
    origin.url("\(path)?id=\(id)&delay=\(delay)")
}

/// A transport whose queue lets `fetchesPerHost` loads per host go at once (nil: the session's six).
private func makeTransport(fetchesPerHost: Int? = nil, memoryCapacity: Int? = nil) -> CachedTransport {
    var configuration = CachedTransport.Configuration()
    configuration.network.maximumFetchesPerHost = fetchesPerHost
    if let memoryCapacity { configuration.storage.memoryCapacity = memoryCapacity }
    return CachedTransport(configuration: configuration)
}

/// One screen's request, from a detached task, timed inside it.
private func timedScreenRequest(_ transport: CachedTransport, _ url: URL) async throws -> Duration {
    try await Task.detached {
        let clock = ContinuousClock()
        let start = clock.now
        _ = try await withFetchPriority(.normal) { try await transport.data(from: url) }
        return clock.now - start
    }.value
}

/// `count` prefetches of `path` on `origin`, ids 0 to count - 1, queued in that order.
private func prefetches(_ transport: CachedTransport, on origin: LoopbackOrigin, _ path: String, count: Int) throws
    -> [Prefetch]
{
    try (0..<count).map { try transport.prefetch(URLRequest(url: slowURL(origin, path, id: $0))) }
}

/// Suspends until `count` requests for `path` have reached `origin`, polling; gives up after ten
/// seconds so that a queue that never sends them stops the figure instead of the run.
private func waitForArrivals(_ origin: LoopbackOrigin, path: String, count: Int) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while await origin.hits(path: path) < count {
        guard ContinuousClock.now < deadline else {
            throw BenchmarkFailure("\(count) requests for \(path) never reached the origin")
        }
        try await Task.sleep(for: .milliseconds(2))
    }
}

private struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Cancels `prefetches`, waits for their outcomes, then for the origin to have answered what was
/// already sent, so the next iteration starts with nothing in flight.
private func cancelAndSettle(_ prefetches: [Prefetch]) async throws {
    for prefetch in prefetches { prefetch.cancel() }
    for prefetch in prefetches { _ = await prefetch.outcome }
    try await Task.sleep(for: .milliseconds(delay + 50))
}

/// Makes `count` requests at once from tasks of a group and waits for all of them: `body(i)` is
/// the i-th.
private func allAtOnce(_ count: Int, _ body: @escaping @Sendable (Int) async throws -> Void) async throws -> Duration {
    try await Task.detached {
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count { group.addTask { try await body(index) } }
            try await group.waitForAll()
        }
        return clock.now - start
    }.value
}

/// Starts both origins and a transport with the default queue, whose connections to the first
/// origin are opened.
private func start(fetchesPerHost: Int? = nil) async throws {
    origin.value = try await LoopbackOrigin.start()
    otherOrigin.value = try await LoopbackOrigin.start()
    run.value = 0
    let cached = makeTransport(fetchesPerHost: fetchesPerHost)
    _ = try await allAtOnce(6) { index in
        _ = try await cached.data(from: origin.value.url("/warm?id=\(index)"))
    }
    transport.value = cached
}

private func stop() async {
    transport.clear()
    await origin.value.stop()
    origin.clear()
    await otherOrigin.value.stop()
    otherOrigin.clear()
}

/// A screen's request made while `prefetchCount` prefetches wait for its host, beside the same
/// request with nothing queued, in the order the iteration's number says.
private func screenBehindPrefetchesRound(_ benchmark: Benchmark, queueOn: Bool) async throws {
    let number = nextRun()
    let origin = origin.value
    let transport = transport.value
    var alone = Duration.zero
    for behind in number.isMultiple(of: 2) ? [false, true] : [true, false] {
        if !behind {
            alone = try await timedScreenRequest(transport, slowURL(origin, "/alone\(number)"))
            continue
        }
        await origin.resetMaximumConcurrentRequests()
        let queued = try prefetches(transport, on: origin, "/queued\(number)", count: prefetchCount)
        // The host is full of prefetches (five with the queue, six in URLSession without it).
        try await waitForArrivals(origin, path: "/queued\(number)", count: queueOn ? 5 : 6)
        let time = try await timedScreenRequest(transport, slowURL(origin, "/screen\(number)"))
        benchmark.measurement(screenBehindPrefetches, microseconds(time))
        benchmark.measurement(originMaximumConcurrent, await origin.maximumConcurrentRequests)
        try await cancelAndSettle(queued)
    }
    benchmark.measurement(screenAlone, microseconds(alone))
}

let benchmarks: @Sendable () -> Void = {
    Benchmark(
        "Prefetching: a screen's request behind \(prefetchCount) queued prefetches, and with nothing queued",
        configuration: configuration(
            [screenAlone, screenBehindPrefetches, originMaximumConcurrent], maxIterations: 20, maxSeconds: 20)
    ) { benchmark in
        try await screenBehindPrefetchesRound(benchmark, queueOn: true)
    } setup: {
        try await start()
    } teardown: {
        await stop()
    }

    Benchmark(
        "Prefetching: a screen's request behind \(prefetchCount) prefetches with the queue off (maximumFetchesPerHost = Int.max), and with nothing queued",
        configuration: configuration(
            [screenAlone, screenBehindPrefetches, originMaximumConcurrent], maxIterations: 5, maxSeconds: 30)
    ) { benchmark in
        try await screenBehindPrefetchesRound(benchmark, queueOn: false)
    } setup: {
        try await start(fetchesPerHost: Int.max)
    } teardown: {
        await stop()
    }

    Benchmark(
        "Prefetching: \(prefetchCount) prefetches, \(prefetchCount) screen requests and \(prefetchCount) plain URLSession requests at once, in turn",
        configuration: configuration(
            [prefetchesAll, screensAll, plainSessionAll, prefetchesMaximumConcurrent, screensMaximumConcurrent],
            maxIterations: 5, maxSeconds: 60)
    ) { benchmark in
        let number = nextRun()
        let origin = origin.value
        let transport = transport.value
        let session = plain.value
        // The plain session first: its connections are its own, and it is the floor.
        let plainTime = try await allAtOnce(prefetchCount) { index in
            _ = try await session.data(from: slowURL(origin, "/plain\(number)", id: index))
        }
        benchmark.measurement(plainSessionAll, microseconds(plainTime))
        try await Task.sleep(for: .milliseconds(50))

        await origin.resetMaximumConcurrentRequests()
        let clock = ContinuousClock()
        let start = clock.now
        let queued = try prefetches(transport, on: origin, "/prefetched\(number)", count: prefetchCount)
        var loaded = 0
        for prefetch in queued {
            if case .loaded = await prefetch.outcome { loaded += 1 }
        }
        benchmark.measurement(prefetchesAll, microseconds(clock.now - start))
        benchmark.measurement(prefetchesMaximumConcurrent, await origin.maximumConcurrentRequests)
        guard loaded == prefetchCount else {
            throw BenchmarkFailure("\(prefetchCount - loaded) of \(prefetchCount) prefetches did not load")
        }
        try await Task.sleep(for: .milliseconds(50))

        await origin.resetMaximumConcurrentRequests()
        let screensTime = try await allAtOnce(prefetchCount) { index in
            _ = try await withFetchPriority(.normal) {
                try await transport.data(from: slowURL(origin, "/screens\(number)", id: index))
            }
        }
        benchmark.measurement(screensAll, microseconds(screensTime))
        benchmark.measurement(screensMaximumConcurrent, await origin.maximumConcurrentRequests)
    } setup: {
        try await start()
        let session = URLSession(configuration: .ephemeral)
        _ = try await allAtOnce(6) { index in
            _ = try await session.data(from: origin.value.url("/warm-plain?id=\(index)"))
        }
        plain.value = session
        // What a plain task's request gets when it names no priority.
        let taskPriority = await Task.detached { Task.currentPriority }.value
        let groupPriority = await Task.detached {
            await withTaskGroup(of: TaskPriority.self) { group in
                group.addTask { Task.currentPriority }
                return await group.next()!
            }
        }.value
        print(
            "Prefetching: a detached task runs at \(taskPriority) (fetch priority \(FetchPriority(taskPriority))), "
                + "a child of one at \(groupPriority) (fetch priority \(FetchPriority(groupPriority)))")
    } teardown: {
        plain.value.invalidateAndCancel()
        plain.clear()
        await stop()
    }

    Benchmark(
        "Prefetching: a queued prefetch joined by a screen's request, and a screen's request with nothing queued",
        configuration: configuration(
            [screenAlone, joinToAnswer, joinedURLHits, joinedPrefetchLoaded], maxIterations: 20, maxSeconds: 20)
    ) { benchmark in
        let number = nextRun()
        let origin = origin.value
        let transport = transport.value
        let alone = try await timedScreenRequest(transport, slowURL(origin, "/alone\(number)"))
        benchmark.measurement(screenAlone, microseconds(alone))

        // The joined one sits in the middle of the line, behind half of the others.
        let joinedIndex = prefetchCount / 2
        var queued = try prefetches(transport, on: origin, "/queued\(number)", count: joinedIndex)
        let joinedURL = slowURL(origin, "/joined\(number)")
        let joined = try transport.prefetch(URLRequest(url: joinedURL))
        queued += try (joinedIndex + 1..<prefetchCount).map {
            try transport.prefetch(URLRequest(url: slowURL(origin, "/queued\(number)", id: $0)))
        }
        try await waitForArrivals(origin, path: "/queued\(number)", count: 5)
        let time = try await timedScreenRequest(transport, joinedURL)
        benchmark.measurement(joinToAnswer, microseconds(time))
        let outcome = await joined.outcome
        benchmark.measurement(joinedPrefetchLoaded, { if case .loaded = outcome { 1 } else { 0 } }())
        benchmark.measurement(joinedURLHits, await origin.hits(path: "/joined\(number)"))
        try await cancelAndSettle(queued)
    } setup: {
        try await start()
    } teardown: {
        await stop()
    }

    Benchmark(
        "Prefetching: \(prefetchCount) prefetches, all but every tenth cancelled once the first have reached the origin",
        configuration: configuration(
            [sentBeforeCancel, originHitsInAll, cancelledHits, keptLoaded, cancelledOutcomes], maxIterations: 20,
            maxSeconds: 20)
    ) { benchmark in
        let number = nextRun()
        let origin = origin.value
        let transport = transport.value
        let path = "/cancelled\(number)"
        let queued = try prefetches(transport, on: origin, path, count: prefetchCount)
        try await waitForArrivals(origin, path: path, count: 5)
        benchmark.measurement(sentBeforeCancel, await origin.hits(path: path))
        let kept = Set(stride(from: 0, to: prefetchCount, by: 10))
        for (index, prefetch) in queued.enumerated() where !kept.contains(index) { prefetch.cancel() }
        var loaded = 0
        var cancelled = 0
        for (index, prefetch) in queued.enumerated() {
            switch await prefetch.outcome {
            case .loaded where kept.contains(index): loaded += 1
            case .cancelled where !kept.contains(index): cancelled += 1
            default: break
            }
        }
        // Whatever was sent has arrived by now; let the origin answer it before counting and
        // before the next iteration.
        try await Task.sleep(for: .milliseconds(delay + 50))
        var keptHits = 0
        for index in kept { keptHits += await origin.hits("\(path)?id=\(index)&delay=\(delay)") }
        let all = await origin.hits(path: path)
        benchmark.measurement(originHitsInAll, all)
        benchmark.measurement(cancelledHits, all - keptHits)
        benchmark.measurement(keptLoaded, loaded)
        benchmark.measurement(cancelledOutcomes, cancelled)
    } setup: {
        try await start()
    } teardown: {
        await stop()
    }

    Benchmark(
        "Prefetching: a request to another host while the first is full, and with nothing queued",
        configuration: configuration(
            [otherHostAlone, otherHostBehindFullHost, fullHostMaximumConcurrent], maxIterations: 20, maxSeconds: 20)
    ) { benchmark in
        let number = nextRun()
        let origin = origin.value
        let other = otherOrigin.value
        let transport = transport.value
        let alone = try await timedScreenRequest(transport, slowURL(other, "/alone\(number)"))
        benchmark.measurement(otherHostAlone, microseconds(alone))

        await origin.resetMaximumConcurrentRequests()
        // Every place of the first host taken, by prefetches and screens, with more of both waiting.
        let queued = try prefetches(transport, on: origin, "/queued\(number)", count: prefetchCount)
        let screens = (0..<10).map { index in
            Task.detached {
                _ = try await withFetchPriority(.normal) {
                    try await transport.data(from: slowURL(origin, "/screens\(number)", id: index))
                }
            }
        }
        try await waitForArrivals(origin, path: "/queued\(number)", count: 5)
        try await waitForArrivals(origin, path: "/screens\(number)", count: 1)
        let time = try await timedScreenRequest(transport, slowURL(other, "/behind\(number)"))
        benchmark.measurement(otherHostBehindFullHost, microseconds(time))
        for screen in screens { screen.cancel() }
        for screen in screens { _ = await screen.result }
        benchmark.measurement(fullHostMaximumConcurrent, await origin.maximumConcurrentRequests)
        try await cancelAndSettle(queued)
    } setup: {
        try await start()
        _ = try await transport.value.data(from: otherOrigin.value.url("/warm"))
    } teardown: {
        await stop()
    }

    // The memory budget: entries a screen read fill it (or half of it), then ten times the budget
    // is prefetched; each entry the screen read is asked for again with `returnCacheDataDontLoad`,
    // which answers from memory or fails without loading.
    let capacity = isSmokeRun ? 256 * 1024 : 1024 * 1024
    let bodySize = 8 * 1024
    for (label, readShare) in [("fill the budget", 1.25), ("fill half the budget", 0.5)] {
        Benchmark(
            "Prefetching: entries a screen read still answering from memory after prefetching ten times the budget, reads that \(label)",
            configuration: configuration(
                [readEntries, stillHitting, prefetchedHeld, bytesHeld], maxIterations: 1, maxSeconds: 60)
        ) { benchmark in
            let number = nextRun()
            let origin = origin.value
            let transport = makeTransport(memoryCapacity: capacity)
            let read = (0..<Int(Double(capacity / bodySize) * readShare)).map {
                URLRequest(url: origin.url("/read\(number)?id=\($0)&size=\(bodySize)"))
            }
            try await prime(transport, with: read)
            let readHeld = try await Task.detached { try await answeredFromMemory(transport, read) }.value

            let prefetched = try (0..<(10 * capacity / bodySize)).map {
                try transport.prefetch(URLRequest(url: origin.url("/prefetched\(number)?id=\($0)&size=\(bodySize)")))
            }
            for prefetch in prefetched { _ = await prefetch.outcome }

            let stillHeld = try await Task.detached { try await answeredFromMemory(transport, readHeld) }.value
            let prefetchedStillHeld = try await Task.detached {
                try await answeredFromMemory(transport, prefetched.map(\.request))
            }.value
            benchmark.measurement(readEntries, readHeld.count)
            benchmark.measurement(stillHitting, stillHeld.count * 100 / max(1, readHeld.count))
            benchmark.measurement(prefetchedHeld, prefetchedStillHeld.count)
            benchmark.measurement(bytesHeld, transport.statistics.bytesHeld * 100 / capacity)
        } setup: {
            origin.value = try await LoopbackOrigin.start()
            run.value = 0
        } teardown: {
            await origin.value.stop()
            origin.clear()
        }
    }
}

/// Those of `requests` that `transport` answers from memory, asked for in turn with
/// `returnCacheDataDontLoad` (which fails instead of loading).
private func answeredFromMemory(_ transport: CachedTransport, _ requests: [URLRequest]) async throws -> [URLRequest] {
    var held: [URLRequest] = []
    for request in requests {
        var cacheOnly = request
        cacheOnly.cachePolicy = .returnCacheDataDontLoad
        do {
            _ = try await transport.data(for: cacheOnly)
            held.append(request)
        } catch let error as URLError where error.code == .resourceUnavailable {
            continue
        }
    }
    return held
}
