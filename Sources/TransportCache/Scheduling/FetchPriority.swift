/// How soon a fetch goes to the network when its host already has as many fetches in flight as
/// ``CachedTransport/Configuration/Network/maximumFetchesPerHost`` allows.
///
/// A caller's priority is its task's (``init(_:)``) unless it names one with
/// ``withFetchPriority(_:isolation:operation:)``; a prefetch's is ``low`` unless given. A fetch
/// shared by several callers takes the highest of theirs while they wait: it rises at once when a
/// higher caller joins and falls back when that caller leaves. A hit never waits, whatever its
/// priority.
public enum FetchPriority: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// Below a prefetch's default: work nobody waits for.
    case veryLow
    /// What ``CachedTransport/prefetch(_:priority:)`` asks for unless told otherwise, and what a
    /// task of `.utility` or `.low` priority gets.
    case low
    /// What a task of `.medium` priority gets, and a task with none.
    case normal
    /// What a task of `.high` or `.userInitiated` priority gets (the main actor's).
    case high
    /// Named only: no task priority maps to it.
    case veryHigh

    /// The priority of a caller running at `priority`: `.background` is ``veryLow``, `.utility`
    /// ``low``, `.medium` ``normal``, `.userInitiated` and `.high` ``high``.
    public init(_ priority: TaskPriority) {
        switch priority.rawValue {
        case ..<TaskPriority.utility.rawValue: self = .veryLow
        case ..<TaskPriority.medium.rawValue: self = .low
        case ..<TaskPriority.high.rawValue: self = .normal
        default: self = .high
        }
    }

    /// Whether `lhs` goes after `rhs`.
    public static func < (lhs: FetchPriority, rhs: FetchPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The priority in words: "very low" … "very high".
    public var description: String {
        switch self {
        case .veryLow: "very low"
        case .low: "low"
        case .normal: "normal"
        case .high: "high"
        case .veryHigh: "very high"
        }
    }

    /// Whether a fetch at this priority yields to screens' requests: below ``normal``. Such fetches
    /// take at most all but one of a host's places (see
    /// ``CachedTransport/Configuration/Network/maximumFetchesPerHost``).
    var yieldsToScreens: Bool { self < .normal }

    /// The priority named for the calls in this task, if any.
    @TaskLocal static var named: FetchPriority?

    /// The priority of a caller arriving now: the one named, else its task's.
    static var current: FetchPriority { named ?? FetchPriority(Task.currentPriority) }
}

/// Runs `operation` with every fetch the transport makes for its calls at `priority`, whatever the
/// task's own priority: a screen's request named ``FetchPriority/veryHigh``, a batch of background
/// work ``FetchPriority/veryLow``.
///
/// ```swift
/// let (data, _) = try await withFetchPriority(.veryHigh) {
///     try await transport.data(for: request)
/// }
/// ```
///
/// The priority holds for the calls `operation` makes, in its task and in the child tasks it
/// creates (a task-local value); it is read when a call arrives at the transport.
public func withFetchPriority<Result>(
    _ priority: FetchPriority, isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Result
) async rethrows -> Result {
    try await FetchPriority.$named.withValue(priority, operation: operation, isolation: isolation)
}
