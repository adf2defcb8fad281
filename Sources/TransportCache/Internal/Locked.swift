import Foundation
#if canImport(Glibc)
import Glibc
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
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        #else
        lock.lock()
        defer { lock.unlock() }
        #endif
        return try body(&value.pointee)
    }
}
