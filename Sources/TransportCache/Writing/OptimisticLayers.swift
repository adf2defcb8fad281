/// The optimistic updates pending for each key, oldest first, over the base they roll back to:
/// what a key shows while updates are pending, and which answers are newer than that base.
///
/// What is visible is the newest update's entry, or the base when none is left. An update that
/// fails, or settles by a refetch, is taken out wherever it is; one that settles with the origin's
/// answer keeps its place with that answer, and settled updates at the bottom fold into the base.
/// So two updates of one key apply in the order they were made, and the first one failing leaves
/// the second visible.
///
/// Answers are ordered by when the fetch that brought them was sent (``Fetch/order``): while
/// updates are pending, an answer a fetch brings becomes the base instead of the visible entry
/// when it is newer than what brought the base. The entry held when the first update began is
/// older than every fetch still in flight then (a fetch sent before it would have been
/// superseded); an answer the origin confirmed, or the app wrote, is newer than every fetch sent
/// before it. When the last update of a key ends, the fetches in flight older than what the key
/// ended on store nothing (``FetchStateMachine/updatesEnded(for:on:)``). An answer for another
/// variant than the updates' is not theirs: the store takes it as usual.
///
/// An invalidation forgets the key's updates: nothing it dropped comes back. The one made by a
/// successful unsafe request (perhaps the update's own write) spares them: the update settles the
/// key itself.
struct OptimisticLayers: Sendable {
    private struct Layer {
        let id: Int
        var entry: StoredResponse
        /// The order of the newest fetch sent when it settled with the origin's answer; nil while
        /// pending.
        var settledOrder: Int?
    }

    private struct Stack {
        /// The entry held before the first pending update, or what a fetch brought since.
        var base: StoredResponse?
        /// How new the base is: the ``Fetch/order`` of the fetch that brought it, 0 for the entry
        /// held before, the newest fetch's at the time for an answer settled or written by the app.
        var baseOrder = 0
        var layers: [Layer]
        /// Whether a background revalidation of the key has been started while they are pending.
        var revalidatedInBackground = false

        var visible: StoredResponse? { layers.last?.entry ?? base }
    }

    private var stacks: [CacheKey: Stack] = [:]
    private var lastID = 0
    /// How many times a partition was signed out so far: an update notes it when it begins.
    private(set) var signOuts = 0
    /// For each partition signed out, ``signOuts`` after its latest sign-out.
    private var lastSignOut: [String: Int] = [:]

    /// A new update's identifier.
    mutating func nextID() -> Int {
        lastID += 1
        return lastID
    }

    /// Puts update `id`'s provisional `entry` on top of `key`'s updates; `held` (the entry stored
    /// now) becomes their base when none is pending yet.
    mutating func push(_ entry: StoredResponse, id: Int, for key: CacheKey, held: @autoclosure () -> StoredResponse?) {
        if stacks[key] == nil { stacks[key] = Stack(base: held(), layers: []) }
        stacks[key]?.layers.append(Layer(id: id, entry: entry))
    }

    /// What ending an update did to its key.
    struct Ending {
        /// The entry visible before and after.
        let before: StoredResponse?
        let after: StoredResponse?
        /// When no update of the key is left: the order of what the key ended on.
        let endedOn: Int?
    }

    /// Ends update `id` of `key`: with `settled`, the origin's answer (or the provisional one it
    /// keeps), as new as a fetch sent in `newestOrder`; or taken out (`nil`: it failed, or a
    /// refetch brought the answer).
    /// - Returns: nil when the update is not pending (its key was invalidated meanwhile).
    mutating func end(_ id: Int, for key: CacheKey, settled: StoredResponse?, newestOrder: Int) -> Ending? {
        guard var stack = stacks[key], let index = stack.layers.firstIndex(where: { $0.id == id }) else { return nil }
        let before = stack.visible
        if let settled {
            stack.layers[index].entry = settled
            stack.layers[index].settledOrder = newestOrder
        } else {
            stack.layers.remove(at: index)
        }
        while let first = stack.layers.first, let settledOrder = first.settledOrder {
            stack.base = first.entry
            stack.baseOrder = max(stack.baseOrder, settledOrder)
            stack.layers.removeFirst()
        }
        stacks[key] = stack.layers.isEmpty ? nil : stack
        return Ending(before: before, after: stack.visible, endedOn: stack.layers.isEmpty ? stack.baseOrder : nil)
    }

    /// What became of an answer offered as the base of a key's pending updates.
    enum BaseOffer {
        /// No update of the key is pending, or the answer is another variant than theirs: the
        /// store takes it as usual.
        case notUnderUpdate
        /// It is the base now, in place of `previous`.
        case taken(previous: StoredResponse?)
        /// The base is newer than the answer: the answer is dropped.
        case olderThanBase
    }

    /// Offers `entry`, which the fetch sent in `order` (``Fetch/order``) brought, as the base of
    /// `key`'s pending updates.
    mutating func offerBase(_ entry: StoredResponse, for key: CacheKey, order: Int) -> BaseOffer {
        guard let stack = stacks[key], stack.layers.last?.entry.selector == entry.selector else {
            return .notUnderUpdate
        }
        guard order > stack.baseOrder else { return .olderThanBase }
        stacks[key]?.base = entry
        stacks[key]?.baseOrder = order
        return .taken(previous: stack.base)
    }

    /// Makes `entry`, an answer the app wrote, the base of `key`'s pending updates: newer than
    /// what every fetch sent so far (up to `newestOrder`) brings.
    /// - Returns: false when none is pending.
    mutating func setBase(_ entry: StoredResponse, for key: CacheKey, newerThan newestOrder: Int) -> Bool {
        guard stacks[key] != nil else { return false }
        stacks[key]?.base = entry
        stacks[key]?.baseOrder = newestOrder
        return true
    }

    /// Whether a background revalidation of `key` may start: always, but once only while updates
    /// of it are pending (its answer goes under them, leaving the visible entry as stale as before).
    mutating func claimBackgroundRevalidation(of key: CacheKey) -> Bool {
        guard !stacks.isEmpty, let stack = stacks[key] else { return true }
        guard !stack.revalidatedInBackground else { return false }
        stacks[key]?.revalidatedInBackground = true
        return true
    }

    /// The keys with updates pending.
    var pendingKeys: Set<CacheKey> { stacks.isEmpty ? [] : Set(stacks.keys) }

    /// Forgets the pending updates of the keys `matches` selects.
    mutating func forget(where matches: (CacheKey) -> Bool) {
        guard !stacks.isEmpty else { return }
        for key in stacks.keys where matches(key) { stacks[key] = nil }
    }

    /// Forgets the pending updates of `keys`: nothing to look up while none is pending.
    /// - Complexity: O(k) in the keys while updates are pending; O(1) otherwise.
    mutating func forget(_ keys: some Sequence<CacheKey>) {
        guard !stacks.isEmpty else { return }
        for key in keys { stacks[key] = nil }
    }

    /// `partition` was signed out: what an update that began before stores for it is refused
    /// (see ``wasSignedOut(_:since:)``).
    mutating func signOut(_ partition: String) {
        signOuts += 1
        lastSignOut[partition] = signOuts
    }

    /// Whether `key`'s partition was signed out after ``signOuts`` was `count`.
    func wasSignedOut(_ key: CacheKey, since count: Int) -> Bool {
        guard !lastSignOut.isEmpty, let partition = key.partition, let last = lastSignOut[partition] else {
            return false
        }
        return last > count
    }
}
