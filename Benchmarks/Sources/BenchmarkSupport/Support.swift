import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import TransportCache

/// True for the short pass CI runs (`BENCHMARK_SMOKE=1`): smaller sizes, so the benchmarks are
/// built and exercised without a full measurement.
public let isSmokeRun = ProcessInfo.processInfo.environment["BENCHMARK_SMOKE"] != nil

/// The priority at which a benchmark runs work spread over the concurrency pool, and the floor it
/// is compared with.
///
/// The harness runs an async benchmark from a worker of the default-priority pool and blocks that
/// worker on a semaphore until the iteration ends (`Benchmark.runAsync`). On Linux that pool has
/// one worker a core and no replacement for a blocked one, so on two cores every default-priority
/// task of the benchmark ran on one thread. The user-initiated pool, at which a screen's requests
/// run, has none of its workers blocked.
public let poolWorkPriority = TaskPriority.userInitiated

/// A value set by a benchmark's setup and read by its iterations.
public final class Shared<Value>: @unchecked Sendable {
    // `@unchecked`: every access goes through `lock`.
    private let lock = NSLock()
    private var stored: Value?

    /// An empty slot; set ``value`` before reading it.
    public init() {}

    /// The value; reading it before it is set stops the benchmark.
    public var value: Value {
        get { lock.withLock { stored! } }
        set { lock.withLock { stored = newValue } }
    }

    /// Empties the slot, releasing the value.
    public func clear() {
        lock.withLock { stored = nil }
    }
}

/// GET requests for `count` distinct keys on `origin`.
public func requests(on origin: LoopbackOrigin, count: Int, path: String = "/items") -> [URLRequest] {
    (0..<count).map {
        URLRequest(
            url: origin.baseURL.appendingPathComponent(path).appending(queryItems: [
                URLQueryItem(name: "id", value: String($0))
            ]))
    }
}

/// Fetches every request once, `width` at a time, so they are stored.
public func prime(_ transport: CachedTransport, with requests: [URLRequest], width: Int = 6) async throws {
    var next = 0
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<width {
            group.addTask {}
        }
        while try await group.next() != nil, next < requests.count {
            let request = requests[next]
            next += 1
            group.addTask { _ = try await transport.data(for: request) }
        }
        try await group.waitForAll()
    }
}

/// A plain URLSession with a memory-only URLCache and the `returnCacheDataElseLoad` policy: the
/// usual answer, for comparison.
public func plainSession(memoryCapacity: Int = 64 * 1024 * 1024, timeout: Duration? = nil) -> (URLSession, URLCache) {
    let cache = URLCache(memoryCapacity: memoryCapacity, diskCapacity: 0, diskPath: nil)
    let configuration = URLSessionConfiguration.ephemeral
    if let timeout {
        let seconds = Double(timeout.components.seconds)
        configuration.timeoutIntervalForRequest = seconds
        configuration.timeoutIntervalForResource = seconds
    }
    configuration.urlCache = cache
    configuration.requestCachePolicy = .returnCacheDataElseLoad
    return (URLSession(configuration: configuration), cache)
}

/// The process's resident memory in bytes (Linux: `/proc/self/statm`; elsewhere 0). Coarse (pages),
/// which is fine for the growth of tens of thousands of entries.
public func residentBytes() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = statm.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Callers parked on bare continuations until `open()`; a caller arriving after that returns at
/// once. The least any coalescing can cost: the Swift runtime's own price for suspending and
/// resuming that many tasks, measured beside the transport as its floor.
public final class ContinuationGate: @unchecked Sendable {
    // `@unchecked`: `parked` and `isOpen` are only touched while `lock` is held.
    private let lock = NSLock()
    private var parked: [CheckedContinuation<Void, Never>] = []
    private var isOpen = false

    /// A closed gate.
    public init() {}

    /// Returns when the gate is open.
    public func pass() async {
        await withCheckedContinuation { continuation in
            let wait = lock.withLock { () -> Bool in
                if !isOpen { parked.append(continuation) }
                return !isOpen
            }
            if !wait { continuation.resume() }
        }
    }

    /// Opens the gate and resumes every parked caller, in the order they arrived.
    public func open() {
        let released = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            isOpen = true
            defer { parked = [] }
            return parked
        }
        for continuation in released { continuation.resume() }
    }
}

/// One plain fetch with `session` and one miss through `transport`, in the order `plainFirst`
/// says, each timed alone: a miss set beside a plain fetch that the same moment of a shared
/// machine falls on.
///
/// Both calls are made from the caller's isolation (`isolation`, the caller's own by default):
/// from the main actor, the transport's `nonisolated(nonsending)` `data(for:)` then runs there
/// as it would for an app's view model, and URLSession's `data(for:)` hops off it and back.
/// From a detached task both run on the global executor.
public func timedMissPair(
    session: URLSession,
    plain: URLRequest,
    transport: CachedTransport,
    miss: URLRequest,
    plainFirst: Bool,
    isolation: isolated (any Actor)? = #isolation
) async throws -> (plain: Duration, miss: Duration) {
    // No nested async functions: a nonisolated one would leave the caller's isolation.
    let clock = ContinuousClock()
    var plainTime = Duration.zero
    var missTime = Duration.zero
    for plainTurn in plainFirst ? [true, false] : [false, true] {
        let start = clock.now
        if plainTurn {
            _ = try await session.data(for: plain)
            plainTime = clock.now - start
        } else {
            _ = try await transport.data(for: miss)
            missTime = clock.now - start
        }
    }
    return (plainTime, missTime)
}

/// One of the three fetches of ``timedMissRound(session:plain:floorSession:floor:transport:miss:order:isolation:)``.
public enum MissRoundFetch: Sendable {
    /// A plain URLSession fetch.
    case plain
    /// A URLSession fetch through ``CacheOverrideURLProtocol``, what the transport's own fetches go through.
    case floor
    /// A miss through the transport.
    case miss

    /// The six orders of the three, one per round in turn, so that each fetch goes before and right
    /// after each other one equally often. The plain fetch goes before the miss in the even rounds,
    /// as ``timedMissPair(session:plain:transport:miss:plainFirst:isolation:)`` has it.
    public static func order(ofRound round: Int) -> [MissRoundFetch] {
        let orders: [[MissRoundFetch]] = [
            [.plain, .floor, .miss], [.miss, .floor, .plain], [.floor, .plain, .miss],
            [.miss, .plain, .floor], [.plain, .miss, .floor], [.floor, .miss, .plain],
        ]
        return orders[((round % orders.count) + orders.count) % orders.count]
    }
}

/// A session whose configuration has ``CacheOverrideURLProtocol`` first in its protocol classes:
/// each fetch goes through the protocol and its inner session, the route of the transport's own
/// fetches, with nothing of the transport around it. A miss's floor.
public func headerOverrideSession() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.protocolClasses = [CacheOverrideURLProtocol.self] + (configuration.protocolClasses ?? [])
    return URLSession(configuration: configuration)
}

/// A plain fetch with `session`, a fetch with `floorSession` (see ``headerOverrideSession()``) and
/// a miss through `transport`, in `order`, each timed alone: a miss set beside both of its
/// baselines at the same moment of a shared machine. Called as
/// ``timedMissPair(session:plain:transport:miss:plainFirst:isolation:)`` is.
public func timedMissRound(
    session: URLSession,
    plain: URLRequest,
    floorSession: URLSession,
    floor: URLRequest,
    transport: CachedTransport,
    miss: URLRequest,
    order: [MissRoundFetch],
    isolation: isolated (any Actor)? = #isolation
) async throws -> (plain: Duration, floor: Duration, miss: Duration) {
    // No nested async functions: a nonisolated one would leave the caller's isolation.
    let clock = ContinuousClock()
    var plainTime = Duration.zero
    var floorTime = Duration.zero
    var missTime = Duration.zero
    for fetch in order {
        let start = clock.now
        switch fetch {
        case .plain:
            _ = try await session.data(for: plain)
            plainTime = clock.now - start
        case .floor:
            _ = try await floorSession.data(for: floor)
            floorTime = clock.now - start
        case .miss:
            _ = try await transport.data(for: miss)
            missTime = clock.now - start
        }
    }
    return (plainTime, floorTime, missTime)
}

/// A configuration whose one sending adapter adds a header that is not part of the key, as an app
/// adding its version to every request would: it runs only on requests that go out.
public func adapterConfiguration() -> CachedTransport.Configuration {
    var configuration = CachedTransport.Configuration()
    configuration.identity.requestAdapters = [
        RequestAdapter { request in
            var request = request
            request.setValue("4.2", forHTTPHeaderField: "X-App-Version")
            return request
        }
    ]
    return configuration
}

/// A configuration whose one keyed adapter adds a header, which runs on every call, a hit included.
public func keyedAdapterConfiguration() -> CachedTransport.Configuration {
    var configuration = CachedTransport.Configuration()
    configuration.identity.requestAdapters = [.keyed { $0.setValue("4.2", forHTTPHeaderField: "X-App-Version") }]
    return configuration
}

/// A configuration whose one keyed header (``RequestAdapter/header(_:value:)``) gives a header's
/// value on every call, a hit included.
public func keyedHeaderConfiguration() -> CachedTransport.Configuration {
    var configuration = CachedTransport.Configuration()
    configuration.identity.requestAdapters = [.header("X-App-Version") { _ in "4.2" }]
    return configuration
}

/// A configuration with several accounts signed in at once, "user" among them: requests name
/// "user" (``Foundation/URLRequest/account``).
public func accountsConfiguration() -> CachedTransport.Configuration {
    let accounts = Accounts(BearerAuthenticator())
    for name in ["user", "other", "third"] { try? accounts.setCredential("\(name)-1", for: name) }
    var configuration = CachedTransport.Configuration()
    configuration.identity.authenticate(with: accounts)
    return configuration
}

/// A configuration with a bearer token's credentials, in the user's partition when `partitioned`.
public func credentialsConfiguration(partitioned: Bool) -> CachedTransport.Configuration {
    var configuration = CachedTransport.Configuration()
    configuration.identity.authenticate(
        with: Credentials(
            BearerAuthenticator(), credential: "user-1",
            partition: partitioned ? { @Sendable _ in "user" } : nil))
    return configuration
}

/// Puts `Authorization: Bearer <token>` on requests; a refresh keeps the token.
public struct BearerAuthenticator: Authenticator {
    /// An authenticator with nothing to configure.
    public init() {}

    /// Sets `Authorization: Bearer <token>`.
    public func apply(_ token: String, to request: inout URLRequest) {
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    }

    /// The same token: the hit benchmarks never refresh.
    public func refresh(_ token: String) async throws -> String { token }

    /// Whether `request` carries `token`.
    public func isRequest(_ request: URLRequest, authenticatedWith token: String) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(token)"
    }
}

/// Work that runs once on a thread of its own, outside the concurrency pool, beside a task that
/// measures what it does to other calls (synchronous calls, as an app makes them): the task starts
/// it, reads whether it is done between its calls, and waits for its end. The thread starts
/// first and waits for the task: a task that never suspends may hold the only thread the
/// cooperative pool has left.
public final class OwnThread: Sendable {
    private let go = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let done = Shared<Bool>()

    /// Starts the thread, which waits for ``start()`` to run `body`.
    public init(_ body: @escaping @Sendable () -> Void) {
        done.value = false
        Thread.detachNewThread { [go, finished, done] in
            go.wait()
            body()
            done.value = true
            finished.signal()
        }
    }

    /// Lets the work begin.
    public func start() { go.signal() }

    /// Whether the work has ended.
    public var isDone: Bool { done.value }

    /// Returns once the work has ended.
    public func wait() { finished.wait() }
}
