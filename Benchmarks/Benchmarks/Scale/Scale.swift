import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

// What invalidation costs as the store grows, and whether a hit on another task ever waits for
// it. Each size fills a transport with `store(_:)`: entries of 256 bytes under
// `https://api.example.com/g<0-99>/items/<i>` (group 99 on `other.example.com`), each tagged
// `g<group>`, so that one group is 1% of the store. Every figure is measured from a detached
// task; the hit and its Dictionary baseline read keys spread over the whole store in turn.

private let bodySize = 256
private let groups = 100

private func url(_ index: Int) -> URL {
    let group = index % groups
    let host = group == groups - 1 ? "other.example.com" : "api.example.com"
    return URL(string: "https://\(host)/g\(group)/items/\(index)")!
}

private func request(_ index: Int) -> URLRequest {
    var request = URLRequest(url: url(index))
    // An invalidated key answers at once with an error instead of going to a network.
    request.cachePolicy = .returnCacheDataDontLoad
    return request
}

/// A transport holding `count` entries, each tagged with its group.
private func filledTransport(_ count: Int) async throws -> CachedTransport {
    var configuration = CachedTransport.Configuration()
    configuration.storage.memoryCapacity = 1 << 30
    let transport = CachedTransport(configuration: configuration)
    try await refill(transport, Array(0..<count))
    return transport
}

/// Stores the entries `indices` (again), tagged with their group.
private func refill(_ transport: CachedTransport, _ indices: [Int]) async throws {
    let body = Data(repeating: 0x61, count: bodySize)
    for index in indices {
        try transport.store(ProvisionalAnswer(for: request(index), data: body))
        _ = try await transport.data(for: request(index), tags: ["g\(index % groups)"])
    }
}

/// The indices of group `group` among `count` entries.
private func members(of group: Int, count: Int) -> [Int] {
    Array(stride(from: group, to: count, by: groups))
}

/// The median of `values`.
private func median(_ values: [Duration]) -> Duration {
    values.sorted()[values.count / 2]
}

private func nanoseconds(_ duration: Duration) -> Int {
    Int(duration.components.seconds) * 1_000_000_000 + Int(duration.components.attoseconds / 1_000_000_000)
}

private func microseconds(_ duration: Duration) -> Int {
    nanoseconds(duration) / 1_000
}

/// Times `operation` `repetitions` times from a detached task, running `restore` untimed after
/// each; returns the median.
private func timed(
    _ repetitions: Int, _ operation: @escaping @Sendable (Int) -> Void,
    restore: @escaping @Sendable (Int) async throws -> Void
) async throws -> Duration {
    try await Task.detached {
        var times: [Duration] = []
        let clock = ContinuousClock()
        for repetition in 0..<repetitions {
            times.append(clock.measure { operation(repetition) })
            try await restore(repetition)
        }
        return median(times)
    }.value
}

/// Hits on `hot` in a loop from a detached task while `work` runs on a thread of its own (the
/// invalidations are synchronous calls, as an app makes them); returns the worst latency, the
/// 99.9th percentile, how many took 1 ms or more, and how many there were.
private func hitsDuring(
    _ transport: CachedTransport, hot: URLRequest, _ work: @escaping @Sendable () -> Void
) async throws -> (worst: Duration, p999: Duration, overOneMillisecond: Int, hits: Int) {
    // The hitter never suspends (every hit is answered at once): the work's thread waits for it.
    let worker = OwnThread(work)
    let hitter = Task.detached {
        // Latencies by microsecond, the last bucket for anything longer.
        var histogram = [Int](repeating: 0, count: 100_001)
        var worst = Duration.zero
        let clock = ContinuousClock()
        worker.start()
        while !worker.isDone {
            let start = clock.now
            blackHole(try? await transport.data(for: hot))
            let latency = clock.now - start
            worst = max(worst, latency)
            histogram[min(histogram.count - 1, microseconds(latency))] += 1
        }
        let total = histogram.reduce(0, +)
        var seen = 0
        var p999 = histogram.count - 1
        for (bucket, count) in histogram.enumerated() {
            seen += count
            if seen * 1_000 >= total * 999 {
                p999 = bucket
                break
            }
        }
        return (worst, Duration.microseconds(p999), histogram[1_000...].reduce(0, +), total)
    }
    let result = await hitter.value
    worker.wait()
    return result
}

/// Average time of one hit over `keys` in turn, and of one `Dictionary<String, Data>` lookup of
/// the same number of entries over the same keys.
private func hitAndLookup(_ transport: CachedTransport, count: Int) async throws -> (hit: Duration, lookup: Duration) {
    let sample = Array(stride(from: 0, to: count, by: max(1, count / 1_000))).map(request)
    let rounds = isSmokeRun ? 2 : 20
    let hit = try await Task.detached {
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            for _ in 0..<rounds { for request in sample { blackHole(try await transport.data(for: request)) } }
        }
        return elapsed / (rounds * sample.count)
    }.value
    var table: [String: Data] = [:]
    for index in 0..<count { table[url(index).absoluteString] = Data(repeating: 0x61, count: bodySize) }
    let keys = sample.map { $0.url!.absoluteString }
    let dictionary = table
    let lookup = await Task.detached {
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for _ in 0..<rounds { for key in keys { blackHole(dictionary[key]) } }
        }
        return elapsed / (rounds * keys.count)
    }.value
    return (hit, lookup)
}

let benchmarks: @Sendable () -> Void = {
    let sizes = isSmokeRun ? [1_000] : [1_000, 10_000, 100_000]
    let repetitions = isSmokeRun ? 3 : 21
    for count in sizes {
        Benchmark(
            "Scale: \(count) entries",
            configuration: .init(
                metrics: [
                    "hitNanoseconds", "dictionaryLookupNanoseconds", "invalidateRequestMicroseconds",
                    "invalidateURLMicroseconds", "invalidatePathPrefix1PercentMicroseconds",
                    "invalidatePathPrefix10EntriesMicroseconds", "invalidateHost1PercentMicroseconds",
                    "invalidateTag1PercentMicroseconds", "invalidatePredicate1PercentMicroseconds",
                    "invalidateAllMicroseconds", "snapshotMicroseconds", "worstHitDuringInvalidationMicroseconds",
                    "p999HitDuringInvalidationMicroseconds", "worstHitAloneMicroseconds", "hitsOverOneMillisecondAlone",
                    "hitsAlone", "hitsOverOneMillisecondDuringInvalidation", "hitsDuringInvalidation",
                ].map { .custom($0) },
                maxIterations: 1
            )
        ) { benchmark in
            let transport = try await filledTransport(count)
            func report(_ name: String, _ value: Int) { benchmark.measurement(.custom(name), value) }

            let (hit, lookup) = try await hitAndLookup(transport, count: count)
            report("hitNanoseconds", nanoseconds(hit))
            report("dictionaryLookupNanoseconds", nanoseconds(lookup))

            // One entry, dropped and stored again between the timed calls.
            let single = Array(stride(from: 1, to: count, by: max(1, count / repetitions)))
            report(
                "invalidateRequestMicroseconds",
                microseconds(
                    try await timed(
                        repetitions, { transport.invalidate(request(single[$0 % single.count])) },
                        restore: { try await refill(transport, [single[$0 % single.count]]) })))
            report(
                "invalidateURLMicroseconds",
                microseconds(
                    try await timed(
                        repetitions, { transport.invalidate(.url(url(single[$0 % single.count]))) },
                        restore: { try await refill(transport, [single[$0 % single.count]]) })))

            // 1% of the store: one group, by path prefix, tag, host, and a predicate (which looks
            // at every key by design).
            let group = members(of: 7, count: count)
            let prefixRepetitions = isSmokeRun ? 2 : 5
            let restoreGroup: @Sendable (Int) async throws -> Void = { _ in try await refill(transport, group) }
            report(
                "invalidatePathPrefix1PercentMicroseconds",
                microseconds(
                    try await timed(
                        prefixRepetitions, { _ in transport.invalidate(.pathPrefix("/g7", host: "api.example.com")) },
                        restore: restoreGroup)))
            report(
                "invalidateTag1PercentMicroseconds",
                microseconds(
                    try await timed(
                        prefixRepetitions, { _ in _ = transport.invalidate(tag: "g7") }, restore: restoreGroup)))
            report(
                "invalidatePredicate1PercentMicroseconds",
                microseconds(
                    try await timed(
                        prefixRepetitions, { _ in transport.invalidate(.matching { $0.path.hasPrefix("/g7/") }) },
                        restore: restoreGroup)))
            let otherHost = members(of: groups - 1, count: count)
            report(
                "invalidateHost1PercentMicroseconds",
                microseconds(
                    try await timed(
                        prefixRepetitions, { _ in transport.invalidate(.host("other.example.com")) },
                        restore: { _ in try await refill(transport, otherHost) })))
            // The same ten entries whatever the size: the cost should not move with it.
            let ten = Array(members(of: 8, count: count).prefix(10))
            report(
                "invalidatePathPrefix10EntriesMicroseconds",
                microseconds(
                    try await timed(
                        prefixRepetitions,
                        { _ in for index in ten { transport.invalidate(.pathPrefix("/g8/items/\(index)")) } },
                        restore: { _ in try await refill(transport, ten) })))

            report(
                "snapshotMicroseconds",
                microseconds(
                    try await timed(
                        isSmokeRun ? 1 : 3, { _ in blackHole(transport.snapshot()) }, restore: { _ in })))

            // A hit on another task, on a key no invalidation touches, while invalidations of every
            // kind run; and the same hits with nothing else running, the machine's own noise.
            let hot = request(3)
            let alone = try await hitsDuring(transport, hot: hot) { Thread.sleep(forTimeInterval: 0.3) }
            report("worstHitAloneMicroseconds", microseconds(alone.worst))
            report("hitsOverOneMillisecondAlone", alone.overOneMillisecond)
            report("hitsAlone", alone.hits)
            let during = try await hitsDuring(transport, hot: hot) {
                for prefix in [11, 12, 13] { transport.invalidate(.pathPrefix("/g\(prefix)")) }
                for index in single.prefix(20) where index % groups != 3 { transport.invalidate(request(index)) }
                _ = transport.invalidate(tag: "g14")
                transport.invalidate(.host("other.example.com"))
                transport.invalidate(.matching { $0.path.hasPrefix("/g15/") })
                blackHole(transport.snapshot())
                transport.trim(for: .warning)
            }
            report("worstHitDuringInvalidationMicroseconds", microseconds(during.worst))
            report("p999HitDuringInvalidationMicroseconds", microseconds(during.p999))
            report("hitsOverOneMillisecondDuringInvalidation", during.overOneMillisecond)
            report("hitsDuringInvalidation", during.hits)

            // Last: it empties the store, and releases the entries on a background queue.
            let clock = ContinuousClock()
            let all = await Task.detached { clock.measure { transport.invalidateAll() } }.value
            report("invalidateAllMicroseconds", microseconds(all))
        }
    }
}
