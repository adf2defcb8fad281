import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import CallgrindControl
import LoopbackOrigin
import TransportCache

// The Scale suite's invalidations once, for profilers: `PathWorkload invalidations 100000` fills
// a transport as the suite does, then hits a key no invalidation touches from a detached task
// while a thread of its own runs each kind of invalidation, and prints, for each one, its time
// and the worst hit that began while it ran, then each hit of 1 ms or more. Times are
// CLOCK_MONOTONIC seconds, as `perf record -k CLOCK_MONOTONIC` stamps its events, so a slow hit
// can be found in a trace. With `STEP=<name>` (`STEP=snapshot`), only that step runs, 8 times:
// for a step that leaves the store as it was (`snapshot`, `trim warning`); a removal has nothing
// left to remove after its first time.

private let groups = 100

private func scaleRequest(_ index: Int) -> URLRequest {
    let group = index % groups
    let host = group == groups - 1 ? "other.example.com" : "api.example.com"
    var request = URLRequest(url: URL(string: "https://\(host)/g\(group)/items/\(index)")!)
    request.cachePolicy = .returnCacheDataDontLoad
    return request
}

@Sendable private func monotonicNow() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int(now.tv_sec) * 1_000_000_000 + Int(now.tv_nsec)
}

@inline(never) @Sendable private func keep<Value>(_ value: Value) {
    withExtendedLifetime(value) {}
}

/// A transport holding `count` entries of 256 bytes, each tagged with its group, as the Scale
/// suite fills it; with `configuration`, when given, a memory capacity of 1 GiB set on it.
private func filledTransport(
    count: Int, configuration: CachedTransport.Configuration = CachedTransport.Configuration()
) async throws -> CachedTransport {
    var configuration = configuration
    configuration.storage.memoryCapacity = 1 << 30
    let transport = CachedTransport(configuration: configuration)
    let body = Data(repeating: 0x61, count: 256)
    for index in 0..<count {
        try transport.store(ProvisionalAnswer(for: scaleRequest(index), data: body))
        _ = try await transport.data(for: scaleRequest(index), tags: ["g\(index % groups)"])
    }
    return transport
}

func invalidationsWhileHitting(count: Int) async throws {
    let transport = try await filledTransport(count: count)
    let single = Array(stride(from: 1, to: count, by: max(1, count / 21))).prefix(20).filter { $0 % groups != 3 }
    var steps: [(String, @Sendable () -> Void)] = [
        ("pathPrefix /g11", { transport.invalidate(.pathPrefix("/g11")) }),
        ("pathPrefix /g12", { transport.invalidate(.pathPrefix("/g12")) }),
        ("20 requests", { for index in single { transport.invalidate(scaleRequest(index)) } }),
        ("tag g14", { _ = transport.invalidate(tag: "g14") }),
        ("host other", { transport.invalidate(.host("other.example.com")) }),
        ("predicate /g15/", { transport.invalidate(.matching { $0.path.hasPrefix("/g15/") }) }),
        ("snapshot", { keep(transport.snapshot()) }),
        ("trim warning", { transport.trim(for: .warning) }),
        ("invalidateAll", { transport.invalidateAll() }),
    ]
    if let only = ProcessInfo.processInfo.environment["STEP"] {
        guard let step = steps.first(where: { $0.0 == only }) else {
            fatalError("STEP=\(only): no such step; the steps are \(steps.map(\.0))")
        }
        steps = Array(repeating: step, count: 8)
    }
    let chosen = steps
    let spans = Shared<[(String, Int, Int)]>()
    spans.value = []
    let stepper = OwnThread {
        var recorded: [(String, Int, Int)] = []
        for (name, step) in chosen {
            let start = monotonicNow()
            step()
            recorded.append((name, start, monotonicNow()))
        }
        spans.value = recorded
    }
    let hot = scaleRequest(3)
    let slow = await Task.detached {
        var slow: [(start: Int, latency: Int)] = []
        stepper.start()
        while !stepper.isDone {
            let start = monotonicNow()
            keep(try? await transport.data(for: hot))
            let latency = monotonicNow() - start
            if latency > 100_000 { slow.append((start, latency)) }
        }
        return slow
    }.value
    stepper.wait()
    for (name, start, end) in spans.value {
        let worst = slow.filter { $0.start >= start && $0.start < end }.map(\.latency).max() ?? 0
        print(
            "\(name): \((end - start) / 1_000) µs, worst hit \(worst / 1_000) µs [\(Double(start) / 1e9) - \(Double(end) / 1e9)]"
        )
    }
    print("hits over 100 µs: \(slow.count), over 1 ms: \(slow.filter { $0.latency >= 1_000_000 }.count)")
    for hit in slow where hit.latency >= 1_000_000 {
        print("slow hit at \(Double(hit.start) / 1e9) for \(hit.latency / 1_000) µs")
    }
}

/// Fills a transport with `count` entries as the Scale suite does, then runs one invalidation,
/// the only part callgrind counts (`--collect-atstart=no`).
func oneInvalidation(_ kind: String, count: Int) async throws {
    let transport = try await filledTransport(count: count)
    let start = monotonicNow()
    callgrind_toggle_collect()
    switch kind {
    case "all": transport.invalidateAll()
    case "prefix": transport.invalidate(.pathPrefix("/g7", host: "api.example.com"))
    case "tag": _ = transport.invalidate(tag: "g7")
    case "request": transport.invalidate(scaleRequest(7))
    case "snapshot": keep(transport.snapshot())
    case "trim": transport.trim(for: .warning)
    default: print("unknown kind \(kind)")
    }
    callgrind_toggle_collect()
    print("\(kind) with \(count) entries: \((monotonicNow() - start) / 1_000) µs")
}

/// A decoded value that counts itself freed, and signals `done` when the last of `expected` goes.
private final class FreedSentinel: Decodable, Sendable {
    static let freed = Shared<Int>()
    static let expected = Shared<Int>()
    static let done = DispatchSemaphore(value: 0)
    static let lock = NSLock()

    init(from decoder: any Decoder) throws {}

    deinit {
        let last = Self.lock.withLock {
            Self.freed.value += 1
            return Self.freed.value == Self.expected.value
        }
        if last { Self.done.signal() }
    }
}

/// Fills a transport with `count` entries under the Scale suite's URLs, each holding the body `{}`
/// and its decoded value, which counts itself freed; calls `invalidateAll()` and waits until the
/// last value is freed: how long the release queue takes to free a store's worth of entries, a
/// slice at a time, after the call returned.
func timeUntilFreed(count: Int) async throws {
    var configuration = CachedTransport.Configuration()
    configuration.storage.memoryCapacity = 1 << 30
    let transport = CachedTransport(configuration: configuration)
    FreedSentinel.freed.value = 0
    FreedSentinel.expected.value = count
    for index in 0..<count {
        try transport.store(ProvisionalAnswer(for: scaleRequest(index), data: Data("{}".utf8)))
        _ = try await transport.value(FreedSentinel.self, for: scaleRequest(index))
    }
    guard FreedSentinel.freed.value == 0 else {
        print("only \(count - FreedSentinel.freed.value) of \(count) decoded values were kept")
        return
    }
    let start = monotonicNow()
    transport.invalidateAll()
    let returned = monotonicNow()
    FreedSentinel.done.wait()
    print(
        "invalidateAll with \(count) entries returned after \((returned - start) / 1_000) µs; "
            + "the last entry was freed \((monotonicNow() - start) / 1_000_000) ms after the call began"
    )
}

/// How long a miss waits while a large invalidation runs: `PathWorkload misses-during-invalidation
/// 100000` fills a transport as the Scale suite does, then, from a detached task, sends misses to
/// the loopback origin one after another (a new URL each) while a thread of its own invalidates
/// the host that holds 99 % of the entries. It prints the invalidation's time, the misses' p50 and
/// p99 alone (before it), and the worst miss that overlapped it; then the same misses beside a
/// thread that only keeps a processor busy for as long, touching no transport: the worst a miss
/// takes when it waits for no lock but shares the machine the same way. Meanwhile a third thread
/// reads `statistics` every 100 µs, which takes the in-flight lock a join and a fetch's completion
/// take: the worst of those reads is the longest that lock kept a caller waiting.
///
/// `PathWorkload misses-during-sign-out 100000` does the same with a transport whose credentials
/// are partitioned by token: the entries are stored as one account, the misses go out as another,
/// and the thread signs the first account out (``CachedTransport/signOut(partition:)``).
///
/// `PathWorkload misses-during-watched-invalidation 100000` does the invalidation while a
/// `changes()` stream and an `events()` stream are read, as an app's queries and its logging
/// read them: what is announced of the keys removed is made too.
func missesDuringRemoval(signingOut: Bool, watched: Bool = false, count: Int, origin: LoopbackOrigin) async throws {
    let transport: CachedTransport
    let removal: @Sendable () -> Void
    if signingOut {
        let credentials = Credentials(
            BearerAuthenticator(), credential: "alice", partition: { @Sendable token in token })
        var configuration = CachedTransport.Configuration()
        configuration.identity.authenticate(with: credentials)
        transport = try await filledTransport(count: count, configuration: configuration)
        credentials.credential = "bob"
        removal = { transport.signOut(partition: "alice") }
    } else {
        transport = try await filledTransport(count: count)
        removal = { transport.invalidate(.host("api.example.com")) }
    }
    let readers =
        watched
        ? [
            Task.detached { for await change in transport.changes() { keep(change) } },
            Task.detached { for await event in transport.events() { keep(event) } },
        ] : []
    defer { for reader in readers { reader.cancel() } }
    var alone: [Int] = []
    for index in 0..<200 {
        let start = monotonicNow()
        keep(try await transport.data(for: URLRequest(url: origin.url("/miss?run=alone-\(index)"))))
        alone.append(monotonicNow() - start)
    }
    alone.sort()
    let during = await misses(whileRunning: removal, on: transport, origin: origin, label: "during")
    // The same span of one busy processor, with no lock in common with the misses.
    let length = during.end - during.start
    let beside = await misses(
        whileRunning: {
            let start = monotonicNow()
            var spin = 0
            while monotonicNow() - start < length { spin &+= 1 }
            keep(spin)
        }, on: transport, origin: origin, label: "busy")
    let (overlapping, lockDuring, besideBusy, lockBeside) = (during.misses, during.lock, beside.misses, beside.lock)
    print(
        """
        \(signingOut ? "signOut(partition:) of \(count)" : "invalidate(.host) of \(count / 100 * 99)") entries: \(length / 1_000) µs
        misses alone: p50 \(alone[alone.count / 2] / 1_000) µs, p99 \(alone[alone.count * 99 / 100] / 1_000) µs
        misses during it: \(overlapping.count), worst \((overlapping.max() ?? 0) / 1_000) µs
        the in-flight lock during it (statistics read every 100 µs): \(lockDuring.reads) reads, p99 \(lockDuring.p99 / 1_000) µs, worst \(lockDuring.worst / 1_000) µs
        misses beside a busy processor as long: \(besideBusy.count), worst \((besideBusy.max() ?? 0) / 1_000) µs
        the in-flight lock beside it: \(lockBeside.reads) reads, p99 \(lockBeside.p99 / 1_000) µs, worst \(lockBeside.worst / 1_000) µs
        """)
}

/// Runs `work` on a thread of its own while a detached task sends misses to `origin`, a new URL
/// each, one after another, and a ``LockProbe`` times the in-flight lock.
/// - Returns: when the work began and ended, the latencies of the misses that overlapped it, and
///   the probe's reads.
private func misses(
    whileRunning work: @escaping @Sendable () -> Void, on transport: CachedTransport, origin: LoopbackOrigin,
    label: String
) async -> (start: Int, end: Int, misses: [Int], lock: (reads: Int, p99: Int, worst: Int)) {
    let span = Shared<(Int, Int)>()
    span.value = (0, 0)
    let thread = OwnThread {
        let start = monotonicNow()
        work()
        span.value = (start, monotonicNow())
    }
    let probe = LockProbe(transport, until: thread)
    let all = await Task.detached {
        var misses: [(start: Int, latency: Int)] = []
        var index = 0
        thread.start()
        probe.start()
        while !thread.isDone {
            let start = monotonicNow()
            keep(try? await transport.data(for: URLRequest(url: origin.url("/miss?run=\(label)-\(index)"))))
            misses.append((start, monotonicNow() - start))
            index += 1
        }
        return misses
    }.value
    thread.wait()
    let lock = probe.worst()
    let (start, end) = span.value
    let overlapping = all.filter { $0.start < end && $0.start + $0.latency > start }.map(\.latency)
    return (start, end, overlapping, lock)
}

/// Reads a transport's `statistics`, which takes the in-flight lock, every 100 µs on a thread of
/// its own while `work` runs, timing each read.
private final class LockProbe: Sendable {
    private let thread: OwnThread
    private let result = Shared<[Int]>()

    init(_ transport: CachedTransport, until work: OwnThread) {
        result.value = []
        thread = OwnThread { [result] in
            var reads: [Int] = []
            while !work.isDone {
                let start = monotonicNow()
                keep(transport.statistics)
                reads.append(monotonicNow() - start)
                usleep(100)
            }
            result.value = reads.sorted()
        }
    }

    func start() { thread.start() }

    /// How many reads it made, their 99th percentile and the longest, once the work has ended.
    func worst() -> (reads: Int, p99: Int, worst: Int) {
        thread.wait()
        let reads = result.value
        return (reads.count, reads.isEmpty ? 0 : reads[reads.count * 99 / 100], reads.last ?? 0)
    }
}
