import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Synchronization
import Testing
@testable import TransportCache

/// Mixed load against the real origin while it changes its data.
///
/// Each worker runs a seeded mix of GET, refresh, invalidate, version bumps (through the
/// transport and behind its back), cancelled GETs, cache-only reads, subscribe-and-drop and the
/// occasional clear, over 1,000 keys (half the operations on 50 hot ones) and three identities. Every version bump is followed by an
/// invalidation of its URL, so:
/// - a read that starts after a bump's invalidation returned never sees an older version (checked
///   on every read);
/// - once the run is quiet, every key read through the cache equals the origin's current version.
///
/// The CI run is short; set `TRANSPORTCACHE_STRESS_OPERATIONS` for a long one:
/// `TRANSPORTCACHE_STRESS_OPERATIONS=100000 swift test --package-path Examples --filter Stress`.
@Suite("Stress against a real origin")
struct StressTests {
    static let workers = 16
    static let keys = 1_000
    static let identities: [String?] = [nil, "Bearer alpha", "Bearer beta"]
    static let capacity = 256 * 1024

    static var operations: Int {
        ProcessInfo.processInfo.environment["TRANSPORTCACHE_STRESS_OPERATIONS"].flatMap(Int.init) ?? 4_000
    }

    @Test(
        "16 workers, mixed operations over 1,000 keys while versions change: no stale or foreign read, every caller returns, nothing left registered, bytes within budget"
    )
    func mixedLoad() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.storage.memoryCapacity = Self.capacity
            let session = URLSessionConfiguration.ephemeral
            session.timeoutIntervalForRequest = 30
            session.httpMaximumConnectionsPerHost = 16
            let transport = CachedTransport(configuration: configuration, sessionConfiguration: session)
            let run = StressRun(origin: origin, transport: transport)
            let residentBefore = ResidentMemory.current

            let clock = ContinuousClock()
            let perWorker = Self.operations / Self.workers
            let started = clock.now
            let outcome = await ending(within: .seconds(max(120, perWorker / 10))) {
                await withTaskGroup(of: Int.self) { group in
                    for worker in 0..<Self.workers {
                        group.addTask { await run.work(worker: worker, operations: perWorker) }
                    }
                    return await group.reduce(0, +)
                }
            }
            let elapsed = clock.now - started
            let completed = try #require(try outcome?.get())

            // Every caller returned, and nothing the transport tracks for a caller is left.
            #expect(completed == perWorker * Self.workers)
            let leftover = transport.pendingWork
            #expect(leftover == (0, 0, 0), "fetches, joinable keys, waiters left: \(leftover)")
            #expect(transport.statistics.subscribers == 0)
            #expect(run.peakBytes <= Self.capacity)
            #expect(transport.statistics.bytesHeld <= Self.capacity)
            let failures = run.failures
            #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(5))")

            // Quiet now: every key, for every identity, read through the cache, is the origin's
            // current version (every bump was followed by an invalidation of its URL).
            let mismatches = await Self.verifyAll(origin: origin, transport: transport)
            #expect(
                mismatches.isEmpty, "\(mismatches.count) keys differ from the origin, first: \(mismatches.prefix(5))")
            #expect(transport.pendingWork == (0, 0, 0))

            let statistics = transport.statistics
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let residentAfter = ResidentMemory.current
            print(
                """
                stress: \(completed) operations, \(Self.workers) workers, \(Self.keys) keys, \(String(format: "%.2f", seconds)) s, \
                \(Int(Double(completed) / seconds)) ops/s; origin requests \(await origin.totalHits); \
                fetches \(statistics.networkFetches), memory hits \(statistics.memoryHits), joins \(statistics.coalescedJoins), \
                stores \(statistics.stores), evictions \(statistics.evictions), invalidations \(statistics.invalidations); \
                cancelled \(run.cancelled), bumps \(run.bumps); peak bytes held \(run.peakBytes) of \(Self.capacity); \
                resident memory \(residentBefore.map { "\($0 / 1024) KB" } ?? "?") -> \(residentAfter.map { "\($0 / 1024) KB" } ?? "?")
                """)
        }
    }

    /// Reads every key for every identity, 16 at a time, and returns those that differ from the
    /// origin's current version.
    static func verifyAll(origin: LoopbackOrigin, transport: CachedTransport) async -> [String] {
        await withTaskGroup(of: [String].self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var mismatches: [String] = []
                    for key in stride(from: worker, to: keys, by: workers) {
                        let path = "/k/\(key)"
                        let current = await origin.version(of: path)
                        for identity in identities {
                            do {
                                let body = try await transport.data(
                                    for: StressRun.request(origin.url(path), identity: identity)
                                ).0.text
                                let answer = StressRun.parse(body)
                                if answer?.version != current || answer?.path != path
                                    || answer?.auth != (identity ?? "-")
                                {
                                    mismatches.append("\(path) \(identity ?? "-"): \(body), origin at \(current)")
                                }
                            } catch {
                                mismatches.append("\(path) \(identity ?? "-"): \(error)")
                            }
                        }
                    }
                    return mismatches
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
    }
}

/// The shared state of one stress run: the versions each key is known to have reached, the
/// failures seen, and a few counters.
final class StressRun: Sendable {
    let origin: LoopbackOrigin
    let transport: CachedTransport

    private struct State {
        /// Per key: a version the origin has reached and whose invalidation has returned. A read
        /// that starts later must not see an older one.
        var floors = [Int](repeating: 0, count: StressTests.keys)
        var failures: [String] = []
        var peakBytes = 0
        var cancelled = 0
        var bumps = 0
    }

    private let state = Mutex(State())

    init(origin: LoopbackOrigin, transport: CachedTransport) {
        self.origin = origin
        self.transport = transport
    }

    var failures: [String] { state.withLock { $0.failures } }
    var peakBytes: Int { state.withLock { $0.peakBytes } }
    var cancelled: Int { state.withLock { $0.cancelled } }
    var bumps: Int { state.withLock { $0.bumps } }

    func fail(_ message: String) { state.withLock { $0.failures.append(message) } }

    func floor(of key: Int) -> Int { state.withLock { $0.floors[key] } }

    func raiseFloor(of key: Int, to version: Int) {
        state.withLock {
            $0.floors[key] = max($0.floors[key], version)
            $0.bumps += 1
        }
    }

    /// Runs `operations` seeded operations; returns how many ended (all of them, unless it hangs).
    func work(worker: Int, operations: Int) async -> Int {
        var random = SplitMix64(seed: UInt64(worker + 1))
        for _ in 0..<operations {
            // Half the operations go to 50 hot keys, so callers meet on the same key often.
            let key =
                random.next() % 2 == 0
                ? Int(random.next() % 50)
                : Int(random.next() % UInt64(StressTests.keys))
            let identity = StressTests.identities[Int(random.next() % UInt64(StressTests.identities.count))]
            let url = origin.url("/k/\(key)")
            let roll = Int(random.next() % 1_000)
            switch roll {
            case 0..<450:
                await read(key: key, url: url, identity: identity, policy: .useProtocolCachePolicy)
            case 450..<550:
                await read(key: key, url: url, identity: identity, policy: .reloadIgnoringLocalCacheData)
            case 550..<620:
                transport.invalidate(Self.request(url, identity: identity))
            case 620..<670:
                await bumpThroughTransport(key: key, url: url)
            case 670..<700:
                let version = await origin.bumpVersion(of: "/k/\(key)")
                transport.invalidate(.url(url))
                raiseFloor(of: key, to: version)
            case 700..<850:
                await cancelledRead(key: key, url: url, identity: identity, yields: Int(random.next() % 4))
            case 850..<900:
                await read(key: key, url: url, identity: identity, policy: .returnCacheDataDontLoad)
            case 900..<998:
                await subscribeAndDrop(url: url, listen: random.next() % 2 == 0)
            default:
                transport.invalidateAll()
            }
            let held = transport.statistics.bytesHeld
            state.withLock { $0.peakBytes = max($0.peakBytes, held) }
        }
        return operations
    }

    /// A read whose answer must be this key's, this identity's, and no older than the floor the
    /// key had when the read began.
    private func read(key: Int, url: URL, identity: String?, policy: URLRequest.CachePolicy) async {
        let floor = floor(of: key)
        var request = Self.request(url, identity: identity)
        request.cachePolicy = policy
        do {
            let body = try await transport.data(for: request).0.text
            check(body, key: key, identity: identity, floor: floor)
        } catch let error as URLError where policy == .returnCacheDataDontLoad && error.code == .resourceUnavailable {
            // Nothing stored for it: the right answer for a cache-only read.
        } catch {
            fail("read /k/\(key) \(identity ?? "-") \(policy.rawValue): \(error)")
        }
    }

    /// A GET cancelled after `yields` suspensions: it ends with CancellationError or a right answer.
    private func cancelledRead(key: Int, url: URL, identity: String?, yields: Int) async {
        let floor = floor(of: key)
        let transport = self.transport
        let task = Task { try await transport.data(for: Self.request(url, identity: identity)).0 }
        for _ in 0..<yields { await Task.yield() }
        task.cancel()
        switch await task.result {
        case .success(let data):
            check(data.text, key: key, identity: identity, floor: floor)
        case .failure(is CancellationError):
            state.withLock { $0.cancelled += 1 }
        case .failure(let error):
            fail("cancelled read /k/\(key): \(error)")
        }
    }

    /// A POST bumps the key's version at the origin; the transport invalidates the URL on the 2xx.
    private func bumpThroughTransport(key: Int, url: URL) async {
        var post = URLRequest(url: url)
        post.httpMethod = "POST"
        post.httpBody = Data("bump".utf8)
        do {
            let (_, response) = try await transport.data(for: post)
            guard let version = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Version").flatMap(Int.init)
            else {
                fail("POST /k/\(key): no X-Version")
                return
            }
            raiseFloor(of: key, to: version)
        } catch {
            fail("POST /k/\(key): \(error)")
        }
    }

    /// Subscribes, sometimes waits for a change in a task that is then cancelled, and drops the
    /// stream; its registration must go with it.
    private func subscribeAndDrop(url: URL, listen: Bool) async {
        let stream = listen ? transport.changes() : transport.changes(for: .url(url))
        guard listen else { return }
        let listener = Task {
            var changes = stream.makeAsyncIterator()
            _ = await changes.next()
        }
        await Task.yield()
        listener.cancel()
        await listener.value
    }

    private func check(_ body: String, key: Int, identity: String?, floor: Int) {
        guard let answer = Self.parse(body) else {
            fail("unreadable body for /k/\(key): \(body)")
            return
        }
        if answer.path != "/k/\(key)" { fail("foreign path for /k/\(key): \(body)") }
        if answer.auth != (identity ?? "-") { fail("foreign identity for /k/\(key) \(identity ?? "-"): \(body)") }
        if answer.version < floor { fail("stale /k/\(key): version \(answer.version) after \(floor) was invalidated") }
    }

    static func request(_ url: URL, identity: String?) -> URLRequest {
        var request = URLRequest(url: url)
        if let identity { request.setValue(identity, forHTTPHeaderField: "Authorization") }
        return request
    }

    /// The path, version and `Authorization` an origin body names.
    static func parse(_ body: String) -> (path: String, version: Int, auth: String)? {
        var fields: [Substring: Substring] = [:]
        for part in body.split(separator: " ") {
            guard let equals = part.firstIndex(of: "=") else { continue }
            fields[part[..<equals]] = part[part.index(after: equals)...]
        }
        guard let path = fields["path"], let version = fields["version"].flatMap({ Int($0) }),
            let authStart = body.range(of: " auth="), let hitStart = body.range(of: " hit=")
        else { return nil }
        return (String(path), version, String(body[authStart.upperBound..<hitStart.lowerBound]))
    }
}

/// A small seeded generator, so a failing run can be repeated.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The process's resident memory, where the platform reports it.
enum ResidentMemory {
    static var current: Int? {
        #if os(Linux)
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return kilobytes * 1024
        #else
        return nil
        #endif
    }
}
