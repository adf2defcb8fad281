import Dispatch
import Foundation

/// What an operation took out of the store, released once the operation holds no lock.
///
/// Freeing a stored answer frees its body, its response and its request: one to two microseconds
/// each once the store no longer fits the processor's caches, so a whole store of them takes a
/// few hundred milliseconds. Taken out under the store's lock and freed outside it, they never
/// keep a hit waiting for the lock; a large handful goes to ``ReleaseQueue``, so that
/// `invalidateAll()` or a trim returns to its caller (often the main actor) at once, and is freed
/// there a slice at a time, so that the freeing does not keep a hit waiting for a processor
/// either. A few are freed on the caller's thread, so that what an invalidation drops is gone when
/// it returns.
struct Released: Sendable {
    /// More entries than this go to ``ReleaseQueue``: a hundred or so take about as long to free
    /// as the rest of an invalidation of them.
    static let queueThreshold = 128

    private var values: [any ReleasableInSteps & Sendable] = []
    private var count = 0

    init() {}

    /// Adds `value`, standing for `count` stored entries.
    mutating func append(_ value: some ReleasableInSteps & Sendable, count: Int = 1) {
        values.append(value)
        self.count += count
    }

    /// Makes room for `count` values, so that appending them under a lock allocates nothing.
    mutating func reserveCapacity(_ count: Int) {
        values.reserveCapacity(count)
    }

    mutating func append(contentsOf other: consuming Released) {
        values.append(contentsOf: other.values)
        count += other.count
    }

    /// Frees the values: through `queue` when there are many, else here and now. When `atOnce`,
    /// for memory the system wants back now, the queue frees them and everything it still holds
    /// in one go.
    consuming func release(through queue: ReleaseQueue = .shared, atOnce: Bool = false) {
        // Handed over as the only reference: a queue that began while this one still held the
        // values would copy them all on its first change.
        var handed: [any ReleasableInSteps & Sendable] = []
        if count > Self.queueThreshold { swap(&handed, &values) }
        queue.release(consume handed, atOnce: atOnce)
    }
}

/// Something taken out of the store that can be let go of a few entries at a time.
protocol ReleasableInSteps {
    /// Lets go of at most `limit` of the entries it holds.
    /// - Returns: whether it still holds any; when it does not, dropping it frees what is left.
    mutating func releaseSome(_ limit: Int) -> Bool
}

extension Array: ReleasableInSteps {
    mutating func releaseSome(_ limit: Int) -> Bool {
        removeLast(Swift.min(limit, count))
        return !isEmpty
    }
}

/// Frees what operations hand over, on a queue of its own, one slice at a time with a pause after
/// each.
///
/// On a machine with few processors the thread that frees competes for them with the threads that
/// hit: freeing a whole store at once kept a hit from running for milliseconds whenever the
/// scheduler gave the freeing thread the hit's processor for a slice of the scheduler's own.
/// Freed in slices of ``sliceLimit``, with the queue's thread asleep for ``pause`` after each,
/// the freeing takes a processor from a hit for one slice at most, at the price of a store's
/// worth of memory coming back over about two seconds rather than at once (100,000 entries: 2.0
/// to 2.1 s, 0.3 s of it freeing). The thread sleeps rather than waiting on a timer: a timer
/// wakes the dispatch library's own thread as well, which measured as a second contender for the
/// processors. One queue serves every transport.
final class ReleaseQueue: Sendable {
    static let shared = ReleaseQueue()

    /// How long one slice frees for, in nanoseconds: well under the millisecond a hit may wait.
    static let sliceLimit: UInt64 = 200_000
    /// How long the queue's thread sleeps after a slice, in nanoseconds. Longer than Linux's
    /// migration cost (0.5 ms): a processor idle for less does not take a runnable thread from a
    /// busy one, and with pauses of 0.1 ms a hit and an invalidation were traced sharing one
    /// processor for 4 ms while the queue's processor idled between slices.
    static let pause: UInt64 = 1_000_000

    private let queue = DispatchQueue(label: "TransportCache.ReleaseQueue", qos: .utility)
    private let sliceLimit: UInt64
    private let pause: UInt64
    private let progress = Locked(Progress(), rank: .leaf)

    private struct Progress {
        var slices = 0
        /// Handovers not yet freed in full.
        var pending = 0
        /// Whether the pending handovers are to be freed in one go.
        var hurried = false
    }

    /// A queue that frees for `sliceLimit` nanoseconds at a time and sleeps `pause` nanoseconds
    /// after each slice.
    init(sliceLimit: UInt64 = ReleaseQueue.sliceLimit, pause: UInt64 = ReleaseQueue.pause) {
        self.sliceLimit = sliceLimit
        self.pause = pause
    }

    /// How many slices the queue has run.
    var slicesRun: Int { progress.withLock { $0.slices } }

    /// Frees `values`, the last first, a slice at a time. When `atOnce`, for memory the system
    /// wants back now whatever a hit waits meanwhile, frees them and everything handed over
    /// before and not yet freed in one go instead, each at its next turn.
    func release(_ values: consuming [any ReleasableInSteps & Sendable], atOnce: Bool = false) {
        let isEmpty = values.isEmpty
        progress.withLock { progress in
            if !isEmpty { progress.pending += 1 }
            if atOnce && progress.pending > 0 { progress.hurried = true }
        }
        guard !isEmpty else { return }
        let handover = Handover(consume values)
        queue.async { self.runSlice(of: handover) }
    }

    private func runSlice(of handover: Handover) {
        let hurried = progress.withLock { progress -> Bool in
            progress.slices += 1
            return progress.hurried
        }
        var more = false
        if hurried {
            handover.releaseAll()
        } else {
            let deadline = DispatchTime.now().uptimeNanoseconds + sliceLimit
            repeat {
                more = handover.releaseSome(ResponseStore.stepSize)
            } while more && DispatchTime.now().uptimeNanoseconds < deadline
        }
        guard more else {
            progress.withLock { progress in
                progress.pending -= 1
                if progress.pending == 0 { progress.hurried = false }
            }
            return
        }
        if pause > 0 { Thread.sleep(forTimeInterval: Double(pause) / 1e9) }
        // Queued again rather than looped, so that what is handed over meanwhile takes turns
        // with it rather than waiting behind a store's worth of slices.
        queue.async { self.runSlice(of: handover) }
    }
}

/// The values handed to a ``ReleaseQueue``, freed there.
///
/// `@unchecked Sendable` is safe here: `values` is written once in `init`, then only by
/// `releaseSome(_:)` and `releaseAll()`, which run on the queue's serial queue after `async` has
/// handed it over, one slice after another, so no two accesses overlap.
private final class Handover: @unchecked Sendable {
    private var values: [any ReleasableInSteps & Sendable]

    init(_ values: consuming [any ReleasableInSteps & Sendable]) {
        self.values = values
    }

    /// Lets go of every value at once.
    func releaseAll() {
        values = []
    }

    /// Lets go of at most `limit` entries of the last value, and of that value when it holds no
    /// more. - Returns: whether any value is left.
    func releaseSome(_ limit: Int) -> Bool {
        guard !values.isEmpty else { return false }
        if !values[values.count - 1].releaseSome(limit) { values.removeLast() }
        return !values.isEmpty
    }
}
