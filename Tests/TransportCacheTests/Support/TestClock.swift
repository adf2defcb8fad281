@testable import TransportCache

/// A monotonic clock the test moves by hand.
final class TestClock: Sendable {
    private let start = ContinuousClock.now
    private let offset = Locked(Duration.zero)

    var now: ContinuousClock.Instant { start.advanced(by: offset.withLock { $0 }) }

    func advance(by duration: Duration) {
        offset.withLock { $0 += duration }
    }
}
