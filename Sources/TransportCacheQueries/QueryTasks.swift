import Foundation

/// The fetches a query started and its place in the hub of its URL's changes, ended together
/// when it stops or is released.
///
/// A value the query keeps and changes on the main actor. Its `deinit` reaches it too, without
/// the main actor: by then no one else holds the query (its tasks hold it weakly), so no lock is
/// needed.
struct QueryTasks {
    private var fetches: [Int: Task<Void, Never>] = [:]
    private var membership: ChangeHub.Membership?
    private var nextID = 0
    /// Whether the owner has started and not stopped since.
    private(set) var isStarted = false
    /// Counts starts and stops: a task that began under another generation is stale.
    private(set) var generation = 0

    /// The fetches in flight.
    var fetchTasks: [Task<Void, Never>] { Array(fetches.values) }
    /// How many fetches are in flight.
    var fetchCount: Int { fetches.count }

    mutating func begin() {
        isStarted = true
        generation += 1
    }

    /// Keeps the owner's place in the hub of its URL's changes.
    mutating func follow(_ membership: ChangeHub.Membership) {
        self.membership = membership
    }

    /// An identifier for a fetch about to start, which ``keep(_:as:)`` then keeps.
    mutating func reserveID() -> Int {
        nextID += 1
        return nextID
    }

    /// Keeps `task`, a fetch in flight.
    mutating func keep(_ task: Task<Void, Never>, as id: Int) {
        fetches[id] = task
    }

    /// Forgets the fetch `id`, which ended. - Returns: false when it was cancelled by a stop.
    mutating func remove(_ id: Int) -> Bool {
        fetches.removeValue(forKey: id) != nil
    }

    /// Forgets the owner's place in its hub. - Returns: the place, for the owner to leave.
    mutating func stopFollowing() -> ChangeHub.Membership? {
        defer { membership = nil }
        return membership
    }

    /// Cancels every fetch and marks the owner stopped.
    /// - Returns: the owner's place in its hub, for the owner to leave.
    mutating func stop() -> ChangeHub.Membership? {
        for task in fetches.values { task.cancel() }
        fetches = [:]
        isStarted = false
        generation += 1
        return stopFollowing()
    }
}
