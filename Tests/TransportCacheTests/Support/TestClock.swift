import TransportCache

/// The tests age entries with the clock the library offers apps for the same purpose.
typealias TestClock = ManualCacheClock
