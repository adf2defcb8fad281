import Foundation
import TransportCache

/// One subscription to a transport's changes for one URL, shared by every query on that URL.
///
/// A query per row of a list, or a thousand queries of one URL, then cost one stream and one task
/// between them: a change wakes one task, which hands it to each query in turn on the main actor.
/// The hub ends its subscription when its last query leaves.
///
/// Joining and leaving are synchronous, under one lock: a query leaves from its `deinit`, on
/// whatever thread releases it, without a task or a hop to the main actor. `@unchecked Sendable`
/// is safe here: the hubs, their members and their listeners are touched only under `lock`.
final class ChangeHub: @unchecked Sendable {
    /// Which hub: a transport and a URL.
    struct Key: Hashable, Sendable {
        let transport: ObjectIdentifier
        let url: URL
    }

    /// A query's place in a hub, to leave it by.
    struct Membership: Sendable {
        let key: Key
        let id: Int
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var hubs: [Key: ChangeHub] = [:]
    nonisolated(unsafe) private static var lastID = 0

    /// Kept so that no other transport takes its address, and with it this hub's key, while the
    /// hub lives.
    private let transport: CachedTransport
    private var members: [Int: @MainActor (CacheChange) -> Void] = [:]
    private var listener: Task<Void, Never>?

    private init(transport: CachedTransport) {
        self.transport = transport
    }

    /// Hands each change of `url` in `transport` to `member`, from now until ``leave(_:)``.
    @MainActor
    static func join(
        _ transport: CachedTransport, url: URL, member: @escaping @MainActor (CacheChange) -> Void
    ) -> Membership {
        let key = Key(transport: ObjectIdentifier(transport), url: url)
        let (id, opened) = lock.withLock { () -> (Int, ChangeHub?) in
            lastID += 1
            if let hub = hubs[key] {
                hub.members[lastID] = member
                return (lastID, nil)
            }
            let hub = ChangeHub(transport: transport)
            hub.members[lastID] = member
            hubs[key] = hub
            return (lastID, hub)
        }
        // Registered here, before the first member reads memory, so no change after that is missed.
        if let opened { opened.listen(to: transport.changes(for: .url(url)), key: key) }
        return Membership(key: key, id: id)
    }

    /// Takes a member out; the hub ends its subscription when it was the last. From any thread.
    static func leave(_ membership: Membership) {
        let ended = lock.withLock { () -> ChangeHub? in
            guard let hub = hubs[membership.key] else { return nil }
            hub.members[membership.id] = nil
            guard hub.members.isEmpty else { return nil }
            hubs[membership.key] = nil
            return hub
        }
        ended?.end()
    }

    @MainActor
    private func listen(to changes: AsyncStream<CacheChange>, key: Key) {
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
            guard Self.hubs[key] === self else { return false }
            listener = task
            return true
        }
        if !isOpen { task.cancel() }
    }

    private func end() {
        Self.lock.withLock { listener }?.cancel()
    }
}
