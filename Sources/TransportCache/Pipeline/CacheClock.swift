import Foundation

/// The time a ``CachedTransport`` ages its entries by: ``continuous`` in an app, a
/// ``ManualCacheClock`` in its tests.
///
/// ```swift
/// let clock = ManualCacheClock()
/// var configuration = CachedTransport.Configuration()
/// configuration.maximumAge = .seconds(60)
/// configuration.clock = clock.cacheClock
/// let transport = CachedTransport(configuration: configuration)
/// // … load something, then:
/// clock.advance(by: .seconds(61))   // the entry is now past its maximum age
/// ```
public struct CacheClock: Sendable {
    private let readNow: @Sendable () -> ContinuousClock.Instant
    private let readDate: @Sendable () -> Date

    /// A clock that reads `now` for ages and `date` for the wall-clock time HTTP's `Date`,
    /// `Expires` and `Last-Modified` are compared with. The two must advance together. The
    /// transport may read them while it holds its own locks: never call the transport from them.
    public init(
        now: @escaping @Sendable () -> ContinuousClock.Instant,
        date: @escaping @Sendable () -> Date
    ) {
        readNow = now
        readDate = date
    }

    /// The system's clocks: `ContinuousClock` and `Date()`.
    public static let continuous = CacheClock(now: { .now }, date: { Date() })

    /// The current instant, by which stored entries age.
    public var now: ContinuousClock.Instant { readNow() }

    /// The current wall-clock time.
    public var date: Date { readDate() }
}

/// A ``CacheClock`` that moves only when told to, so that tests age entries without sleeping.
public final class ManualCacheClock: Sendable {
    private let start: ContinuousClock.Instant
    private let startDate: Date
    private let offset = Locked(Duration.zero)

    /// A clock that reads `date` as the wall-clock time until it is advanced.
    public init(date: Date = Date()) {
        start = .now
        startDate = date
    }

    /// The current instant: the instant the clock was made, plus every advance.
    public var now: ContinuousClock.Instant { start.advanced(by: offset.withLock { $0 }) }

    /// The current wall-clock time: the date the clock was made with, plus every advance.
    public var date: Date {
        let elapsed = offset.withLock { $0 }.components
        return startDate.addingTimeInterval(Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18)
    }

    /// Moves the clock forward by `duration`.
    public func advance(by duration: Duration) {
        offset.withLock { $0 += max(.zero, duration) }
    }

    /// The clock to put in ``CachedTransport/Configuration/clock``.
    public var cacheClock: CacheClock {
        CacheClock(now: { self.now }, date: { self.date })
    }
}
