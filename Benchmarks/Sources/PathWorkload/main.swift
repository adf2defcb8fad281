import BenchmarkSupport
import CallgrindControl
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

// Runs one path of the transport many times with nothing else around it, for profilers
// (`perf record -e cpu-clock`, `valgrind --tool=callgrind`), which the harness would drown out.
//
//     PathWorkload hit 100000          100,000 hits, over 1,000 stored entries in turn
//     PathWorkload hit-listening 100000
//                                      the same with one events() listener reading every event
//     PathWorkload hit-adapter 100000  the same through one sending adapter that adds a header
//     PathWorkload hit-keyed-adapter 100000
//                                      the same through one keyed adapter that adds a header
//     PathWorkload hit-keyed-header 100000
//                                      the same through one keyed header (RequestAdapter.header)
//     PathWorkload hit-accounts 100000 the same, requests naming one of three accounts signed in
//     PathWorkload hit-authenticator 100000
//                                      the same with a bearer token's credentials (and
//                                      hit-partitions: in a partition)
//     PathWorkload hit-stale 100000    the same, each entry stale within its stale-while-revalidate
//                                      window and its background revalidation held at the origin
//     PathWorkload dictionary 100000   100,000 Dictionary<String, Data> lookups, the same way
//     PathWorkload hot-hit 100000      100,000 hits on one entry, as the benchmark (and hot-dictionary)
//     PathWorkload hit-from 20000      20,000 hits through data(from:) over the 1,000 entries in turn
//                                      (and hot-hit-from: one entry again and again)
//     PathWorkload miss 2000           2,000 misses, each a new URL
//     PathWorkload plain-miss 2000     2,000 plain URLSession fetches, each a new URL
//     PathWorkload miss-alternating 2000
//                                      2,000 of each in turn, which first alternating, as the
//                                      MissPath benchmark does; prints both medians and the median
//                                      of what each miss added to its plain fetch; with
//                                      PATHWORKLOAD_TIMELINE=FILE, writes when each fetch ran (see
//                                      scripts/miss-profile.sh)
//     PathWorkload slow-miss 40        40 misses of a 50 ms origin, one at a time (and plain-slow-miss)
//     PathWorkload coalesce 10000 5    5 rounds of 10,000 callers sharing one 50 ms fetch (and
//                                      coalesce-warm: one transport for all rounds)
//     PathWorkload floor 10000 5       5 rounds of 10,000 tasks on bare continuations (50 ms)
//                                      The rounds' origin latency is COALESCE_DELAY milliseconds
//                                      (default 50); both print the median round beside the total.
//
// Everything runs in a detached task, off the main actor, as in the benchmarks, and prints the
// time of the measured part. Under `valgrind --tool=callgrind --collect-atstart=no`, `hit` and
// `dictionary` count only their measured loop (see `scripts/hit-instructions.sh`); for the other
// modes, compare two counts: their setup does not depend on the count.

let coalesceDelay = Int(ProcessInfo.processInfo.environment["COALESCE_DELAY"] ?? "50")!
let arguments = CommandLine.arguments.dropFirst()
guard let mode = arguments.first, let count = arguments.dropFirst().first.flatMap(Int.init) else {
    FileHandle.standardError.write(
        Data(
            "usage: PathWorkload hit|hit-listening|hit-adapter|hit-keyed-adapter|hit-keyed-header|hit-accounts|hit-authenticator|hit-partitions|hit-stale|hit-from|hot-hit-from|dictionary|hot-hit|hot-dictionary|miss|plain-miss|miss-alternating|slow-miss|plain-slow-miss|coalesce|coalesce-warm|floor COUNT [ROUNDS]\n"
                .utf8))
    exit(2)
}
let rounds = arguments.dropFirst(2).first.flatMap(Int.init) ?? 1

/// What a hit is asked with: a request (`data(for:)`) or a URL (`data(from:)`, which makes one).
protocol Asked {
    func asked(of transport: CachedTransport) async throws -> (Data, URLResponse)
}

extension URLRequest: Asked {
    @inline(__always)
    func asked(of transport: CachedTransport) async throws -> (Data, URLResponse) {
        try await transport.data(for: self)
    }
}

extension URL: Asked {
    @inline(__always)
    func asked(of transport: CachedTransport) async throws -> (Data, URLResponse) {
        try await transport.data(from: self)
    }
}

@inline(never)
func hits(_ transport: CachedTransport, _ asked: [some Asked], count: Int) async throws {
    // A first round resolves symbols and fills caches, so the counted ones are all alike.
    for one in asked { blackHole(try await one.asked(of: transport)) }
    callgrind_toggle_collect()
    for index in 0..<count { blackHole(try await asked[index % asked.count].asked(of: transport)) }
    callgrind_toggle_collect()
}

@inline(never)
func lookups(_ table: [String: Data], _ keys: [String], count: Int) async {
    for key in keys { blackHole(table[key]) }
    callgrind_toggle_collect()
    for index in 0..<count { blackHole(table[keys[index % keys.count]]) }
    callgrind_toggle_collect()
}

@inline(never)
func misses(
    _ load: (URLRequest) async throws -> (Data, URLResponse), on origin: LoopbackOrigin, label: String, count: Int
) async throws {
    for index in 0..<count {
        blackHole(try await load(URLRequest(url: origin.url("/miss?run=\(label)-\(index)"))))
    }
}

@inline(never)
func blackHole<Value>(_ value: Value) {
    withExtendedLifetime(value) {}
}

/// The loopback origin's base URL, or `PATHWORKLOAD_ORIGIN` for the coalescing modes: an origin
/// in another process does not share this process's tasks and threads.
func originBase(_ origin: LoopbackOrigin) -> String {
    ProcessInfo.processInfo.environment["PATHWORKLOAD_ORIGIN"] ?? origin.baseURL.absoluteString
}

/// Nanoseconds of `CLOCK_MONOTONIC`, the clock `perf record -k CLOCK_MONOTONIC` stamps samples with.
func monotonicNanoseconds() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int(now.tv_sec) * 1_000_000_000 + Int(now.tv_nsec)
}

func concurrently(_ count: Int, _ body: @escaping @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<count { group.addTask { try await body() } }
        try await group.waitForAll()
    }
}

// The main thread waits on a semaphore rather than in top-level `await`: parked there, it sits in
// libdispatch's `sigsuspend`, where valgrind 3.19 crashes.
let finished = DispatchSemaphore(value: 0)
Task.detached {
    do {
        try await run()
    } catch {
        FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
        exit(1)
    }
    finished.signal()
}
finished.wait()

func run() async throws {
    let origin = try await LoopbackOrigin.start()
    let clock = ContinuousClock()
    var elapsed = Duration.zero
    // Each round's time, where a mode has rounds: the median is printed beside the total.
    var roundTimes: [Duration] = []
    switch mode {
    case "hit", "hit-listening", "hit-adapter", "hit-keyed-adapter", "hit-keyed-header", "hit-accounts",
        "hit-authenticator", "hit-partitions":
        // As in the benchmark, 1,000 stored entries; each is asked for in turn, so that the count
        // does not depend on how one key's hash happens to fall (the origin's port changes it).
        let configuration =
            switch mode {
            case "hit-adapter": adapterConfiguration()
            case "hit-keyed-adapter": keyedAdapterConfiguration()
            case "hit-keyed-header": keyedHeaderConfiguration()
            case "hit-accounts": accountsConfiguration()
            case "hit-authenticator": credentialsConfiguration(partitioned: false)
            case "hit-partitions": credentialsConfiguration(partitioned: true)
            default: CachedTransport.Configuration()
            }
        let transport = CachedTransport(configuration: configuration)
        var all = requests(on: origin, count: 1_000)
        if mode == "hit-accounts" {
            for index in all.indices { all[index].account = "user" }
        }
        try await prime(transport, with: all)
        // Hits need no origin; stopped, its timers do not run during the count.
        await origin.stop()
        // A listener that reads every event, as a log would: its own work is counted too. The
        // stream is registered here, before the hits, not whenever its task first runs.
        let events = mode == "hit-listening" ? transport.events() : nil
        let listener = events.map { events in Task.detached { for await event in events { blackHole(event) } } }
        elapsed = try await clock.measure { try await hits(transport, all, count: count) }
        listener?.cancel()
    case "hit-stale":
        // As the Revalidation suite's stale window, over the 1,000 entries in turn: every answer is
        // stale within the window while its entry's background revalidation is in flight, held at
        // the origin's gate (started by the first round of `hits`, which is not counted).
        var configuration = CachedTransport.Configuration()
        configuration.freshness.maximumAge = .nanoseconds(1)
        configuration.freshness.staleWhileRevalidate = .seconds(3_600)
        let transport = CachedTransport(configuration: configuration)
        // The gate is named in the URL's query: a header would add its reading to each answer.
        var all = requests(on: origin, count: 1_000)
        let gate = URLQueryItem(name: "gate", value: "1")
        for index in all.indices { all[index].url = all[index].url!.appending(queryItems: [gate]) }
        try await prime(transport, with: all)
        await origin.closeGate()
        elapsed = try await clock.measure { try await hits(transport, all, count: count) }
        await origin.openGate()
    case "hot-hit":
        // As in the benchmark: one of 1,000 stored entries asked for again and again.
        let transport = CachedTransport()
        let all = requests(on: origin, count: 1_000)
        try await prime(transport, with: all)
        await origin.stop()
        elapsed = try await clock.measure { try await hits(transport, [all[7]], count: count) }
    case "hit-from", "hot-hit-from":
        // Hits through data(from:), which makes the request: over the 1,000 stored URLs in turn,
        // or one of them again and again.
        let transport = CachedTransport()
        let all = requests(on: origin, count: 1_000)
        try await prime(transport, with: all)
        await origin.stop()
        let urls = mode == "hit-from" ? all.map { $0.url! } : [all[7].url!]
        elapsed = try await clock.measure { try await hits(transport, urls, count: count) }
    case "hot-dictionary":
        let keys = requests(on: origin, count: 1_000).map { $0.url!.absoluteString }
        let table = Dictionary(uniqueKeysWithValues: keys.map { ($0, Data(count: 64)) })
        await origin.stop()
        elapsed = await clock.measure { await lookups(table, [keys[7]], count: count) }
    case "dictionary":
        // As in the benchmark, 1,000 URLs as keys; each is looked up in turn.
        let keys = requests(on: origin, count: 1_000).map { $0.url!.absoluteString }
        let table = Dictionary(uniqueKeysWithValues: keys.map { ($0, Data(count: 64)) })
        await origin.stop()
        elapsed = await clock.measure { await lookups(table, keys, count: count) }
    case "miss":
        let transport = CachedTransport()
        _ = try await transport.data(for: URLRequest(url: origin.url("/miss?run=warm")))
        elapsed = try await clock.measure {
            try await misses(transport.data(for:), on: origin, label: "cached", count: count)
        }
    case "plain-miss":
        let session = URLSession(configuration: .ephemeral)
        _ = try await session.data(for: URLRequest(url: origin.url("/miss?run=warm")))
        elapsed = try await clock.measure {
            try await misses({ try await session.data(for: $0) }, on: origin, label: "plain", count: count)
        }
    case "miss-alternating":
        // Both against the same origin and on warm connections, so both see the same machine.
        let transport = CachedTransport()
        let session = URLSession(configuration: .ephemeral)
        _ = try await transport.data(for: URLRequest(url: origin.url("/miss?run=warm-cached")))
        _ = try await session.data(for: URLRequest(url: origin.url("/miss?run=warm-plain")))
        var plain: [Duration] = []
        var cached: [Duration] = []
        var added: [Duration] = []
        // Each fetch's start and end, so that a profiler's samples can be told apart by the fetch
        // that was running: the two follow each other, so the first one's end is the other's start.
        var timeline = ""
        let start = clock.now
        for index in 0..<count {
            let plainFirst = index.isMultiple(of: 2)
            let pairStart = monotonicNanoseconds()
            let times = try await timedMissPair(
                session: session, plain: URLRequest(url: origin.url("/miss?run=plain-\(index)")),
                transport: transport, miss: URLRequest(url: origin.url("/miss?run=cached-\(index)")),
                plainFirst: plainFirst, isolation: nil)
            plain.append(times.plain)
            cached.append(times.miss)
            added.append(times.miss - times.plain)
            let plainNanoseconds = Int(times.plain / .nanoseconds(1))
            let missNanoseconds = Int(times.miss / .nanoseconds(1))
            let (plainStart, missStart) =
                plainFirst ? (pairStart, pairStart + plainNanoseconds) : (pairStart + missNanoseconds, pairStart)
            timeline += "plain \(plainStart) \(plainStart + plainNanoseconds)\n"
            timeline += "miss \(missStart) \(missStart + missNanoseconds)\n"
        }
        elapsed = clock.now - start
        if let path = ProcessInfo.processInfo.environment["PATHWORKLOAD_TIMELINE"] {
            try timeline.write(toFile: path, atomically: true, encoding: .utf8)
        }
        func median(_ durations: [Duration]) -> Duration { durations.sorted()[durations.count / 2] }
        func microseconds(_ duration: Duration) -> String {
            (duration / .microseconds(1)).formatted(.number.precision(.fractionLength(1)))
        }
        let ratio = (median(cached) / median(plain)).formatted(.number.precision(.fractionLength(3)))
        FileHandle.standardError.write(
            Data(
                ("median plain fetch \(microseconds(median(plain))) µs, miss \(microseconds(median(cached))) µs "
                    + "(\(ratio)x); median a miss adds \(microseconds(median(added))) µs\n").utf8))
    case "slow-miss", "plain-slow-miss":
        // One request at a time to a 50 ms origin: what the process spends while it waits.
        let transport = CachedTransport()
        let session = URLSession(configuration: .ephemeral)
        for index in 0..<count {
            let request = URLRequest(url: origin.url("/slow?delay=50&run=\(index)"))
            elapsed += try await clock.measure {
                if mode == "slow-miss" {
                    blackHole(try await transport.data(for: request))
                } else {
                    blackHole(try await session.data(for: request))
                }
            }
        }
    case "coalesce", "coalesce-warm":
        // `coalesce` makes a transport per round, as the benchmark does; `coalesce-warm` keeps one,
        // whose connection to the origin is then open before each round.
        let warm = CachedTransport()
        if mode == "coalesce-warm" { _ = try await warm.data(for: URLRequest(url: origin.url("/coalesce?run=warm"))) }
        for round in 0..<rounds {
            let transport = mode == "coalesce-warm" ? warm : CachedTransport()
            let url = URL(string: originBase(origin) + "/coalesce?delay=\(coalesceDelay)&run=\(round)")!
            let round = try await clock.measure {
                try await concurrently(count) { _ = try await transport.data(from: url) }
            }
            elapsed += round
            roundTimes.append(round)
        }
    case "invalidations":
        try await invalidationsWhileHitting(count: count)
    case "misses-during-invalidation", "misses-during-sign-out", "misses-during-watched-invalidation":
        try await missesDuringRemoval(
            signingOut: mode == "misses-during-sign-out", watched: mode == "misses-during-watched-invalidation",
            count: count, origin: origin)
    case "invalidate-all", "invalidate-prefix", "invalidate-tag", "invalidate-request", "invalidate-snapshot",
        "invalidate-trim":
        try await oneInvalidation(String(mode.dropFirst("invalidate-".count)), count: count)
    case "invalidate-freed":
        try await timeUntilFreed(count: count)
    case "floor":
        for _ in 0..<rounds {
            let round = try await clock.measure {
                let gate = ContinuationGate()
                let opener = Task.detached {
                    try await Task.sleep(for: .milliseconds(coalesceDelay))
                    gate.open()
                }
                try await concurrently(count) { await gate.pass() }
                try await opener.value
            }
            elapsed += round
            roundTimes.append(round)
        }
    default:
        FileHandle.standardError.write(Data("unknown mode \(mode)\n".utf8))
        exit(2)
    }
    if !mode.hasSuffix("hit") && !mode.hasSuffix("dictionary") { await origin.stop() }
    let median = roundTimes.isEmpty ? "" : ", median round \(roundTimes.sorted()[roundTimes.count / 2])"
    FileHandle.standardError.write(Data("\(mode) \(count) x \(rounds): \(elapsed)\(median)\n".utf8))
}
