import Observation

/// Counts every observed change of what `read` reads, with `withObservationTracking`, and keeps
/// the state before each change: `states` is the initial state, then the state after each change.
///
/// Tracking is registered again inside each change notification, before the change is made, so
/// every later mutation is heard: two property writes in one transition count as two changes.
@MainActor
final class ObservedStates<Snapshot: Equatable> {
    private let read: @MainActor () -> Snapshot
    private var before: [Snapshot] = []
    private var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    init(_ read: @escaping @MainActor () -> Snapshot) {
        self.read = read
        track()
    }

    /// How many changes were observed.
    var changes: Int { before.count }

    /// The initial state, then the state after each observed change.
    var states: [Snapshot] { before + [read()] }

    /// Returns once `count` changes have been observed.
    func waitForChanges(_ count: Int) async {
        if changes >= count { return }
        await withCheckedContinuation { waiters.append((count, $0)) }
    }

    private func track() {
        withObservationTracking {
            _ = read()
        } onChange: { [weak self] in
            MainActor.assumeIsolated { self?.changed() }
        }
    }

    private func changed() {
        before.append(read())
        track()
        let count = changes
        let due = waiters.filter { $0.count <= count }
        waiters.removeAll { $0.count <= count }
        for waiter in due { waiter.continuation.resume() }
    }
}
