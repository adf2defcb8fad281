import Foundation

/// The time a ``CachedTransport`` ages its entries by: ``continuous`` in an app, a
/// ``ManualCacheClock`` in its tests.
///
/// ```swift
/// let clock = ManualCacheClock()
/// var configuration = CachedTransport.Configuration()
/// configuration.freshness.maximumAge = .seconds(60)
/// configuration.clock = clock.cacheClock
/// let transport = CachedTransport(configuration: configuration)
/// // … load something, then:
/// clock.advance(by: .seconds(61))   // the entry is now past its maximum age
/// ```
public struct CacheClock: Sendable {
    private let readNow: @Sendable () -> ContinuousClock.Instant
    private let readDate: @Sendable () -> Date
    private let sleepFor: @Sendable (Duration) async throws -> Void

    /// A clock that reads `now` and `date`, and waits with `sleep`. The three must advance
    /// together. The transport reads them with none of its locks held.
    ///
    /// - Parameters:
    ///   - now: the instant entries age by.
    ///   - date: the wall-clock time HTTP's `Date`, `Expires`, `Last-Modified` and `Retry-After`
    ///     are compared with.
    ///   - sleep: waits for the duration given, throwing `CancellationError` when the waiting task
    ///     is cancelled: the delay before a retry (``RetryPolicy``) and between polls
    ///     (``CachedTransport/Configuration/StayingCurrent/refreshIntervals``). Default: `Task.sleep(for:)` on the
    ///     continuous clock.
    public init(
        now: @escaping @Sendable () -> ContinuousClock.Instant,
        date: @escaping @Sendable () -> Date,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        readNow = now
        readDate = date
        sleepFor = sleep
    }

    /// The system's clocks: `ContinuousClock` and `Date()`.
    public static let continuous = CacheClock(now: { .now }, date: { Date() })

    /// The current instant, by which stored entries age.
    public var now: ContinuousClock.Instant {
        #if DEBUG
        assert(!LockRank.isHoldingAny, "the clock is read with none of the transport's locks held")
        #endif
        return readNow()
    }

    /// The current wall-clock time.
    public var date: Date {
        #if DEBUG
        assert(!LockRank.isHoldingAny, "the clock is read with none of the transport's locks held")
        #endif
        return readDate()
    }

    /// Both readings, taken together: what the transport reads before it takes a lock, so that
    /// the app's clock is never read under one.
    var reading: ClockReading { ClockReading(now: now, date: date) }

    /// Waits for `duration` by this clock.
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func sleep(for duration: Duration) async throws {
        try await sleepFor(duration)
    }
}

/// A ``CacheClock``'s two readings, taken once before the transport takes a lock
/// (``CacheClock/reading``) and passed to what decides under it.
struct ClockReading: Sendable {
    /// The instant entries age by.
    let now: ContinuousClock.Instant
    /// The wall-clock time.
    let date: Date
}

/// A ``CacheClock`` that moves only when told to, so that tests age entries, and let retries and
/// polls fall due, without sleeping.
///
/// A sleep on it ends when the clock has been advanced past its deadline; a test waits for the
/// transport to be asleep with ``waitForSleepers(_:)`` before it advances the clock.
public final class ManualCacheClock: Sendable {
    private struct Sleeper {
        let id: Int
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var offset = Duration.zero
        var sleepers: [Sleeper] = []
        var lastID = 0
        /// Tests waiting until this many sleepers are asleep.
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        /// Takes the watchers whose count is reached now.
        mutating func satisfiedWatchers() -> [CheckedContinuation<Void, Never>] {
            let ready = watchers.filter { $0.count <= sleepers.count }
            watchers.removeAll { $0.count <= sleepers.count }
            return ready.map(\.continuation)
        }
    }

    private let start: ContinuousClock.Instant
    private let startDate: Date
    private let state = Locked(State(), rank: .leaf)

    /// A clock that reads `date` as the wall-clock time until it is advanced.
    public init(date: Date = Date()) {
        start = .now
        startDate = date
    }

    /// The current instant: the instant the clock was made, plus every advance.
    public var now: ContinuousClock.Instant { start.advanced(by: state.withLock { $0.offset }) }

    /// The current wall-clock time: the date the clock was made with, plus every advance.
    public var date: Date {
        let elapsed = state.withLock { $0.offset }.components
        return startDate.addingTimeInterval(Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18)
    }

    /// Moves the clock forward by `duration`, waking every sleep whose deadline it reaches.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.offset += max(.zero, duration)
            let offset = state.offset
            let due = state.sleepers.filter { $0.deadline <= offset }
            state.sleepers.removeAll { $0.deadline <= offset }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Waits for `duration` of this clock: until it has been advanced that far.
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func sleep(for duration: Duration) async throws {
        let id = state.withLock { state in
            state.lastID += 1
            return state.lastID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (now, watchers) = state.withLock {
                    state -> (Result<Void, any Error>?, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled { return (.failure(CancellationError()), []) }
                    guard duration > .zero else { return (.success(()), []) }
                    state.sleepers.append(
                        Sleeper(id: id, deadline: state.offset + duration, continuation: continuation))
                    return (nil, state.satisfiedWatchers())
                }
                if let now { continuation.resume(with: now) }
                for watcher in watchers { watcher.resume() }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }

    /// The sleeps waiting for the clock to advance.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// Returns once at least `count` sleeps wait for the clock to advance: the transport has
    /// reached the wait a test means to end with ``advance(by:)``. It waits as long as it takes,
    /// and cancelling the waiting task does not end it: start what sleeps first.
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                guard state.sleepers.count < count else { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// The clock to put in ``CachedTransport/Configuration/clock``.
    public var cacheClock: CacheClock {
        CacheClock(now: { self.now }, date: { self.date }, sleep: { try await self.sleep(for: $0) })
    }
}
