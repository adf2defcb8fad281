import Foundation

/// The fetches a query started and its place in the hub of its URL's changes, ended together
/// when it stops or is released.
///
/// Its owner works on the main actor, but its `deinit` does not: the lock lets `deinit` cancel
/// what is in flight. `@unchecked Sendable` is safe here: every stored property is guarded by
/// `lock`.
final class QueryTasks: @unchecked Sendable {
    private let lock = NSLock()
    private var fetches: [Int: Task<Void, Never>] = [:]
    private var membership: ChangeHub.Membership?
    private var nextID = 0
    private var started = false
    private var currentGeneration = 0

    /// Whether the owner has started and not stopped since.
    var isStarted: Bool { lock.withLock { started } }
    /// Counts starts and stops: a task that began under another generation is stale.
    var generation: Int { lock.withLock { currentGeneration } }
    /// The fetches in flight.
    var fetchTasks: [Task<Void, Never>] { lock.withLock { Array(fetches.values) } }
    /// How many fetches are in flight.
    var fetchCount: Int { lock.withLock { fetches.count } }

    func begin() {
        lock.withLock {
            started = true
            currentGeneration += 1
        }
    }

    /// Keeps the owner's place in the hub of its URL's changes.
    func follow(_ membership: ChangeHub.Membership) {
        lock.withLock { self.membership = membership }
    }

    /// An identifier for a fetch about to start, which ``keep(_:as:)`` then keeps.
    func reserveID() -> Int {
        lock.withLock {
            nextID += 1
            return nextID
        }
    }

    /// Keeps `task`, a fetch in flight, unless the owner stopped since its identifier was made.
    func keep(_ task: Task<Void, Never>, as id: Int) {
        lock.withLock { fetches[id] = task }
    }

    /// Forgets the fetch `id`, which ended. - Returns: false when it was cancelled by a stop.
    func remove(_ id: Int) -> Bool {
        lock.withLock { fetches.removeValue(forKey: id) != nil }
    }

    /// Forgets the owner's place in its hub. - Returns: the place, for the owner to leave.
    func stopFollowing() -> ChangeHub.Membership? {
        lock.withLock {
            defer { membership = nil }
            return membership
        }
    }

    /// Cancels every fetch and marks the owner stopped.
    /// - Returns: the owner's place in its hub, for the owner to leave on the main actor.
    func stop() -> ChangeHub.Membership? {
        lock.lock()
        let cancelled = Array(fetches.values)
        let left = membership
        fetches = [:]
        membership = nil
        started = false
        currentGeneration += 1
        lock.unlock()
        for task in cancelled { task.cancel() }
        return left
    }
}
