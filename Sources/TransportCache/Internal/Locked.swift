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

    package init(_ value: Value) {
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
