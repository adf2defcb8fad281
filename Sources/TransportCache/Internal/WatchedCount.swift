/// A count, and the tests waiting until it satisfies a condition: kept beside the state it counts,
/// under that state's lock, so counting costs a check of an empty list while no test watches.
struct WatchedCount {
    /// Tests to resume once the lock is released.
    typealias Watchers = [CheckedContinuation<Void, Never>]

    private(set) var value = 0
    private var watchers: [(reached: @Sendable (Int) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []

    /// Counts one more. - Returns: the watchers whose condition it met.
    mutating func count() -> Watchers {
        set(value + 1)
    }

    /// Sets the count. - Returns: the watchers whose condition it met, taken out.
    mutating func set(_ newValue: Int) -> Watchers {
        value = newValue
        guard !watchers.isEmpty else { return [] }
        let reached = watchers.filter { $0.reached(newValue) }.map(\.continuation)
        watchers.removeAll { $0.reached(newValue) }
        return reached
    }

    /// Registers `continuation` to be resumed once the count satisfies `reached`.
    /// - Returns: false when it does already: resume it at once.
    mutating func watch(
        until reached: @escaping @Sendable (Int) -> Bool, _ continuation: CheckedContinuation<Void, Never>
    ) -> Bool {
        guard !reached(value) else { return false }
        watchers.append((reached, continuation))
        return true
    }
}
