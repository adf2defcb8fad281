/// The optimistic updates pending for each key, oldest first, over the base they roll back to:
/// the one place that decides what a key shows while updates are pending.
///
/// What is visible is the newest update's entry, or the base when none is left. An update that
/// fails, or settles by a refetch, is taken out wherever it is; one that settles with the origin's
/// answer keeps its place with that answer, and settled updates at the bottom fold into the base.
/// So two updates of one key apply in the order they were made, and the first one failing leaves
/// the second visible. While updates are pending, what a fetch brings becomes the base instead of
/// the visible entry, when that fetch is newer than what brought the base: a fetch that began
/// before the first update is newer than the entry held then, since it was not superseded. An invalidation forgets the key's updates: nothing it dropped comes back.
/// The one made by a successful unsafe request (perhaps the update's own write) spares them: the
/// update settles the key itself.
struct OptimisticLayers: Sendable {
    private struct Layer {
        let id: Int
        var entry: StoredResponse
        var isSettled = false
    }

    private struct Stack {
        /// The entry held before the first pending update, or what a fetch brought since.
        var base: StoredResponse?
        /// The ``Fetch/order`` of the fetch that brought the base: 0 for the entry held before, the
        /// newest fetch's at the time for an answer the app wrote.
        var baseOrder = 0
        var layers: [Layer]
        /// Whether a background revalidation of the key has been started while they are pending.
        var revalidatedInBackground = false

        var visible: StoredResponse? { layers.last?.entry ?? base }
    }

    private var stacks: [CacheKey: Stack] = [:]
    private var lastID = 0

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

    /// Ends update `id` of `key`: with the origin's `confirmed` answer, or taken out (`nil`: it
    /// failed, or a refetch brought the answer).
    /// - Returns: the entry visible before and after; nil when the update is not pending (its key
    ///   was invalidated meanwhile).
    mutating func end(_ id: Int, for key: CacheKey, confirmed: StoredResponse?)
        -> (before: StoredResponse?, after: StoredResponse?)?
    {
        guard var stack = stacks[key], let index = stack.layers.firstIndex(where: { $0.id == id }) else { return nil }
        let before = stack.visible
        if let confirmed {
            stack.layers[index].entry = confirmed
            stack.layers[index].isSettled = true
        } else {
            stack.layers.remove(at: index)
        }
        while let first = stack.layers.first, first.isSettled {
            stack.base = first.entry
            stack.layers.removeFirst()
        }
        stacks[key] = stack.layers.isEmpty ? nil : stack
        return (before, stack.visible)
    }

    /// What became of an answer offered as the base of a key's pending updates.
    enum BaseOffer {
        /// No update of the key is pending: the answer is the store's to take.
        case noUpdatePending
        /// It is the base now, in place of `previous`.
        case taken(previous: StoredResponse?)
        /// The base came from a newer fetch, or from the app: the answer is older than it.
        case older
    }

    /// Offers `entry`, which the fetch sent in `order` (``Fetch/order``) brought, as the base of
    /// `key`'s pending updates.
    mutating func offerBase(_ entry: StoredResponse, for key: CacheKey, order: Int) -> BaseOffer {
        guard let stack = stacks[key] else { return .noUpdatePending }
        guard order > stack.baseOrder else { return .older }
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

    /// Whether updates of `key` are pending.
    func isPending(_ key: CacheKey) -> Bool { stacks[key] != nil }

    /// The keys with updates pending.
    var pendingKeys: Set<CacheKey> { stacks.isEmpty ? [] : Set(stacks.keys) }

    /// Forgets the pending updates of the keys `matches` selects.
    mutating func forget(where matches: (CacheKey) -> Bool) {
        guard !stacks.isEmpty else { return }
        for key in stacks.keys where matches(key) { stacks[key] = nil }
    }
}
