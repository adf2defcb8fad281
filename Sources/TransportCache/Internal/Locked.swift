import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a lock.
///
/// `Synchronization.Mutex` would be the natural choice, but on Linux its lock is invisible to
/// ThreadSanitizer, which then reports every guarded access as a race and would hide real ones
/// among them. On Linux this is an adaptive pthread mutex, which the sanitizer understands and which
/// spins briefly before sleeping (see `init`); elsewhere an `NSLock`. It also keeps the package
/// available before iOS 18 and macOS 15.
///
/// The value lives behind a pointer allocated once rather than in a stored `var`: the lock already
/// makes access exclusive, and a class property would add a dynamic exclusivity check (a
/// thread-local lookup) to every access on the hit path.
///
/// `@unchecked Sendable` is safe here: the value is only read or written inside ``withLock(_:)``, while the lock
/// is held, and the lock and pointer are immutable after `init`.
package final class Locked<Value: Sendable>: @unchecked Sendable {
    // `@unchecked`: `value` is only read or written inside `withLock`, while the lock is held.
    #if canImport(Glibc)
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    #else
    private let lock = NSLock()
    #endif
    private let value: UnsafeMutablePointer<Value>
    /// How many threads are waiting for the lock, guarded by a lock of its own: counted only by a
    /// thread that found the lock taken, so an uncontended `withLock` never touches it.
    private let waiters = WaiterCount()
    #if DEBUG
    /// Its place in the written order of the transport's locks (``LockRank``); nil for a lock
    /// outside it. Debug builds assert that a thread takes a ranked lock only while every ranked
    /// lock it holds comes earlier in the order.
    private let rank: LockRank?
    #endif

    /// - Parameter rank: its place in the transport's lock order, checked in debug builds.
    package init(_ value: Value, rank: LockRank? = nil) {
        #if DEBUG
        self.rank = rank
        #endif
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
        #if canImport(Glibc)
        // An adaptive mutex spins briefly before sleeping: the hit path holds it for about a
        // hundred nanoseconds, far less than a sleep and wake-up costs under contention.
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        #endif
    }

    deinit {
        #if canImport(Glibc)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        #endif
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with exclusive access to the value. Never call back into the same lock from
    /// `body`, and never resume a continuation inside it.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        #if DEBUG
        if let rank { LockRank.enter(rank) }
        defer { if let rank { LockRank.leave(rank) } }
        #endif
        #if canImport(Glibc)
        if pthread_mutex_trylock(mutex) != 0 { lockAfterWaiting() }
        defer { pthread_mutex_unlock(mutex) }
        #else
        if !lock.try() { lockAfterWaiting() }
        defer { lock.unlock() }
        #endif
        return try body(&value.pointee)
    }

    /// Takes the lock another thread holds, counted among the waiters meanwhile.
    @inline(never)
    private func lockAfterWaiting() {
        waiters.add(1)
        #if canImport(Glibc)
        pthread_mutex_lock(mutex)
        #else
        lock.lock()
        #endif
        waiters.add(-1)
    }

    /// Called between two holds of the lock by work that takes it again and again: when threads
    /// are waiting for it, sleeps until they have had it, for at most `limit` nanoseconds.
    ///
    /// A mutex does not queue its waiters: the thread that just released it would take it again
    /// at once, ahead of a waiter woken a few microseconds later, hold after hold, and the waiter
    /// would wait for the whole work after all. Waiting only when someone waits keeps that work
    /// from giving its processor away when no one does. It sleeps rather than yields: a waiter
    /// woken onto the yielding thread's processor can stay behind it there, a scheduler that
    /// finds it has had more than its share picking the yielding thread again, while another
    /// processor idles (traced on Linux: hits kept waiting 2 ms, yield after yield).
    package func handOverToWaiters(forAtMost limit: UInt64) {
        waiters.waitUntilNone(forAtMost: limit)
    }

    /// Returns once at least `count` threads wait for the lock. For tests.
    package func waitForWaiters(_ count: Int) {
        waiters.waitUntil(atLeast: count)
    }
}

/// A count of waiting threads, and a wait until there are none.
///
/// `@unchecked Sendable` is safe here: `value` and `emptied` are only read or written while
/// `condition` is held.
private final class WaiterCount: @unchecked Sendable {
    private let condition = NSCondition()
    private var value = 0
    /// How many times the count has dropped to zero: a sleeper woken by one drop returns even if
    /// another thread began to wait before it woke.
    private var emptied = 0

    func add(_ amount: Int) {
        condition.lock()
        value += amount
        if value == 0 { emptied &+= 1 }
        condition.broadcast()
        condition.unlock()
    }

    /// Returns once at least `count` threads are counted.
    func waitUntil(atLeast count: Int) {
        condition.lock()
        defer { condition.unlock() }
        while value < count { condition.wait() }
    }

    /// Returns once the threads counted now are no longer waiting, or after `limit` nanoseconds.
    func waitUntilNone(forAtMost limit: UInt64) {
        condition.lock()
        defer { condition.unlock() }
        guard value > 0 else { return }
        let drops = emptied
        let deadline = Date(timeIntervalSinceNow: Double(limit) / 1e9)
        while emptied == drops && condition.wait(until: deadline) {}
    }
}

/// A place in the written order of the transport's locks (see ``CachedTransport/inFlight``): a
/// thread holding a ranked lock takes another only of a later rank, never one of the same rank or
/// an earlier one. Debug builds assert it on every ``Locked/withLock(_:)`` of a ranked lock.
package enum LockRank: Int, Sendable {
    /// The one each invalidation holds throughout (``Committer``).
    case invalidation
    /// The in-flight lock.
    case inFlight
    /// A stream registry's (``StreamSubscribers``).
    case streamRegistry
    /// The store's entries, its index and its tags, each taken alone.
    case store
    /// A prepared load's own (``PreparedLoad``): when it records its queued load, a priority the
    /// fetch moved to meanwhile is passed on under it, which takes the queue's lock, a leaf.
    case preparedLoad
    /// The queues' and a load's own: nothing is taken while one is held.
    case leaf

    #if DEBUG
    /// The ranks of the locks this thread holds, innermost last.
    private final class Held {
        var ranks: [LockRank] = []
    }

    #if canImport(Glibc)
    /// Each thread's ``Held``, read on every ranked `withLock`: a thread-specific value rather than
    /// the thread's dictionary, which would cost a debug build's hit several times over.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in pointer.map { Unmanaged<Held>.fromOpaque($0).release() } }
        return key
    }()

    private static var held: Held {
        if let pointer = pthread_getspecific(key) { return Unmanaged<Held>.fromOpaque(pointer).takeUnretainedValue() }
        let held = Held()
        pthread_setspecific(key, Unmanaged.passRetained(held).toOpaque())
        return held
    }
    #else
    private static var held: Held {
        let key = "TransportCache.LockRank.held"
        if let held = Thread.current.threadDictionary[key] as? Held { return held }
        let held = Held()
        Thread.current.threadDictionary[key] = held
        return held
    }
    #endif

    /// Whether this thread holds any lock of the order: the app's code (a clock, an endpoint's
    /// predicate) is never called then.
    package static var isHoldingAny: Bool { !held.ranks.isEmpty }

    static func enter(_ rank: LockRank) {
        let held = Self.held
        if let innermost = held.ranks.last {
            assert(
                innermost.rawValue < rank.rawValue,
                "lock order: a lock of rank \(rank) taken while one of rank \(innermost) is held")
        }
        held.ranks.append(rank)
    }

    static func leave(_ rank: LockRank) {
        let held = Self.held
        assert(held.ranks.last == rank, "lock order: locks released out of order")
        held.ranks.removeLast()
    }
    #endif
}
