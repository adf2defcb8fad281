import Foundation
import TransportCache

/// One subscription to a transport's changes for one URL, shared by every query on that URL.
///
/// A query per row of a list, or a thousand queries of one URL, then cost one stream and one task
/// between them: a change wakes one task, which hands it to each query in turn on the main actor.
/// The hub ends its subscription on the main actor's next turn after its last query left, unless
/// another joined meanwhile: a screen that replaces a query of a URL by another (a view made
/// again, a row scrolled back) keeps the subscription rather than ending it and opening another.
///
/// Joining and leaving are synchronous, under one lock: a query leaves from its `deinit`, on
/// whatever thread releases it, without waiting for the main actor. `@unchecked Sendable` is safe
/// here: the hubs, their members, their listeners and `isClosing` are touched only under `lock`.
final class ChangeHub: @unchecked Sendable {
    /// Which hub: a transport and a URL.
    struct Key: Hashable, Sendable {
        let transport: ObjectIdentifier
        let url: URL
    }

    /// A query's place in a hub, to leave it by.
    struct Membership: Sendable {
        let hub: ChangeHub
        let id: Int
    }

    private static let lock = NSLock()
    // Unsafe only to the compiler: both are read and written with `lock` held, and nowhere else.
    nonisolated(unsafe) private static var hubs: [Key: ChangeHub] = [:]
    nonisolated(unsafe) private static var lastID = 0

    /// Kept so that no other transport takes its address, and with it this hub's key, while the
    /// hub lives.
    private let transport: CachedTransport
    private let key: Key
    private var members: [Int: @MainActor (CacheChange) -> Void] = [:]
    private var listener: Task<Void, Never>?
    /// Whether the end of the subscription is looked at on the main actor's next turn.
    private var isClosing = false

    private init(transport: CachedTransport, key: Key) {
        self.transport = transport
        self.key = key
    }

    /// Hands each change of `url` in `transport` to `member`, from now until ``leave(_:)``.
    @MainActor
    static func join(
        _ transport: CachedTransport, url: URL, member: @escaping @MainActor (CacheChange) -> Void
    ) -> Membership {
        let key = Key(transport: ObjectIdentifier(transport), url: url)
        let (hub, id, isNew) = lock.withLock { () -> (ChangeHub, Int, Bool) in
            lastID += 1
            if let hub = hubs[key] {
                hub.members[lastID] = member
                return (hub, lastID, false)
            }
            let hub = ChangeHub(transport: transport, key: key)
            hub.members[lastID] = member
            hubs[key] = hub
            return (hub, lastID, true)
        }
        // Registered here, before the first member reads memory, so no change after that is missed.
        if isNew { hub.listen(to: transport.changes(for: .url(url))) }
        return Membership(hub: hub, id: id)
    }

    /// Takes a member out, from any thread. When it was the last, the hub ends its subscription on
    /// the main actor's next turn, unless another member joined by then.
    static func leave(_ membership: Membership) {
        let hub = membership.hub
        let closes = lock.withLock { () -> Bool in
            hub.members[membership.id] = nil
            guard hub.members.isEmpty, !hub.isClosing, hubs[hub.key] === hub else { return false }
            hub.isClosing = true
            return true
        }
        if closes { Task { @MainActor in hub.closeIfUnused() } }
    }

    @MainActor
    private func listen(to changes: AsyncStream<CacheChange>) {
        let task = Task { [weak self] in
            for await change in changes {
                guard let self else { return }
                // A copy: a member may leave, or another join, while the change is handed out.
                let current = Self.lock.withLock { Array(self.members.values) }
                for member in current { member(change) }
            }
        }
        // Ended meanwhile (a member that joined and left at once): the task ends with it.
        let isOpen = Self.lock.withLock { () -> Bool in
            guard Self.hubs[self.key] === self else { return false }
            listener = task
            return true
        }
        if !isOpen { task.cancel() }
    }

    /// Ends the subscription when no member joined since the last left.
    @MainActor
    private func closeIfUnused() {
        let ended = Self.lock.withLock { () -> Task<Void, Never>? in
            isClosing = false
            guard members.isEmpty, Self.hubs[key] === self else { return nil }
            Self.hubs[key] = nil
            return listener
        }
        ended?.cancel()
    }
}
