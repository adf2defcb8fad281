import Foundation
#if canImport(Glibc)
import Synchronization
#endif

/// A value that every call reads and few write, read without taking a lock.
///
/// Each write publishes a new copy; a read borrows whichever copy is current as it begins. A copy
/// a write replaced is freed once no read is under way, checked at each later write: reads count
/// themselves in and out, and a read that began before the replacement has counted itself out
/// when the count is seen at zero. Replaced copies wait while reads never pause, at most one per
/// write, until the value itself goes.
///
/// On Linux a read costs two atomic additions and a load, where ``Locked`` costs a mutex's lock
/// and unlock (about a hundred instructions on a hit). Elsewhere it is a ``Locked``: the atomics
/// it needs come with macOS 15 and iOS 18, after the package's oldest platforms.
///
/// Write only with short, pure code: writes are serialised by a lock of their own, taken while the
/// caller's locks are held.
///
/// `@unchecked Sendable` is safe here: a published copy is never written again, the pointer to it
/// and the count of reads are atomic, and replaced copies are only touched under the write lock.
final class ReadMostly<Value: Sendable>: @unchecked Sendable {
    #if canImport(Glibc)
    private final class Copy: Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    /// The current copy, retained once by this pointer.
    private let current: Atomic<UnsafeMutableRawPointer>
    /// How many reads are under way.
    private let readers = Atomic<Int>(0)
    /// Serialises writes; holds the copies replaced while a read may still borrow them.
    private let writes = Locked([Unmanaged<Copy>]())

    init(_ value: Value) {
        current = Atomic(Unmanaged.passRetained(Copy(value)).toOpaque())
    }

    deinit {
        Unmanaged<Copy>.fromOpaque(current.load(ordering: .sequentiallyConsistent)).release()
        writes.withLock { replaced in for copy in replaced { copy.release() } }
    }

    /// `body`'s answer about the value as it is now.
    @inline(__always)
    func read<Result>(_ body: (borrowing Value) throws -> Result) rethrows -> Result {
        readers.wrappingAdd(1, ordering: .sequentiallyConsistent)
        defer { readers.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        return try Unmanaged<Copy>.fromOpaque(current.load(ordering: .sequentiallyConsistent))
            ._withUnsafeGuaranteedRef { try body($0.value) }
    }

    /// Replaces the value with what `body` makes of it; reads that begin from now on see it.
    func write<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try writes.withLock { replaced in
            var value = Unmanaged<Copy>.fromOpaque(current.load(ordering: .sequentiallyConsistent))
                .takeUnretainedValue().value
            let result = try body(&value)
            let published = Unmanaged.passRetained(Copy(value)).toOpaque()
            replaced.append(Unmanaged.fromOpaque(current.exchange(published, ordering: .sequentiallyConsistent)))
            // A read that borrows a replaced copy counted itself in before it loaded the pointer,
            // which was before the exchange: at zero, none is left.
            if readers.load(ordering: .sequentiallyConsistent) == 0 {
                for copy in replaced { copy.release() }
                replaced.removeAll()
            }
            return result
        }
    }
    #else
    private let locked: Locked<Value>

    init(_ value: Value) { locked = Locked(value) }

    /// `body`'s answer about the value as it is now.
    @inline(__always)
    func read<Result>(_ body: (borrowing Value) throws -> Result) rethrows -> Result {
        try locked.withLock { try body($0) }
    }

    /// Replaces the value with what `body` makes of it; reads that begin from now on see it.
    func write<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try locked.withLock(body)
    }
    #endif
}
