import Foundation

/// The work a query started (fetches, and waits for values decoded elsewhere) and its place in
/// the hub of its URL's changes, ended together when it stops or is released.
///
/// A value the query keeps and changes on the main actor. Its `deinit` reaches it too, without
/// the main actor: by then no one else holds the query (its tasks hold it weakly), so no lock is
/// needed.
struct QueryTasks {
    /// The work under way: fetches, and waits for a value another caller decodes.
    private var work: [Int: (task: Task<Void, Never>, isFetch: Bool)] = [:]
    private var membership: ChangeHub.Membership?
    private var nextID = 0
    /// Whether the owner has started and not stopped since.
    private(set) var isStarted = false
    /// Counts starts and stops: a task that began under another generation is stale.
    private(set) var generation = 0

    /// The work under way.
    var workTasks: [Task<Void, Never>] { work.values.map(\.task) }
    /// How many pieces of work are under way.
    var workCount: Int { work.count }
    /// How many fetches are in flight, which the owner shows.
    var fetchCount: Int { work.values.reduce(0) { $0 + ($1.isFetch ? 1 : 0) } }

    mutating func begin() {
        isStarted = true
        generation += 1
    }

    /// Keeps the owner's place in the hub of its URL's changes.
    mutating func follow(_ membership: ChangeHub.Membership) {
        self.membership = membership
    }

    /// An identifier for work about to start, which ``keep(_:as:isFetch:)`` then keeps.
    mutating func reserveID() -> Int {
        nextID += 1
        return nextID
    }

    /// Keeps `task`, work under way, a fetch or not.
    mutating func keep(_ task: Task<Void, Never>, as id: Int, isFetch: Bool) {
        work[id] = (task, isFetch)
    }

    /// Forgets the work `id`, which ended. - Returns: false when it was cancelled by a stop.
    mutating func remove(_ id: Int) -> Bool {
        work.removeValue(forKey: id) != nil
    }

    /// Forgets the owner's place in its hub. - Returns: the place, for the owner to leave.
    mutating func stopFollowing() -> ChangeHub.Membership? {
        defer { membership = nil }
        return membership
    }

    /// Cancels all the work under way and marks the owner stopped.
    /// - Returns: the owner's place in its hub, for the owner to leave.
    mutating func stop() -> ChangeHub.Membership? {
        for piece in work.values { piece.task.cancel() }
        work = [:]
        isStarted = false
        generation += 1
        return stopFollowing()
    }
}
