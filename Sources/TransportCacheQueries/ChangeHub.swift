import Foundation
import TransportCache

/// One subscription to a transport's changes for one URL, shared by every query on that URL.
///
/// A query per row of a list, or a thousand queries of one URL, then cost one stream and one task
/// between them: a change wakes one task, which hands it to each query in turn on the main actor.
/// The hub ends its subscription when its last query leaves.
@MainActor
final class ChangeHub {
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

    private static var hubs: [Key: ChangeHub] = [:]
    private static var lastID = 0

    /// Kept so that no other transport takes its address, and with it this hub's key, while the
    /// hub lives.
    private let transport: CachedTransport
    private var members: [Int: @MainActor (CacheChange) -> Void] = [:]
    private var listener: Task<Void, Never>?

    private init(transport: CachedTransport) {
        self.transport = transport
    }

    /// Hands each change of `url` in `transport` to `member`, from now until ``leave(_:)``.
    static func join(
        _ transport: CachedTransport, url: URL, member: @escaping @MainActor (CacheChange) -> Void
    ) -> Membership {
        let key = Key(transport: ObjectIdentifier(transport), url: url)
        let hub = hubs[key] ?? open(key, transport: transport)
        lastID += 1
        hub.members[lastID] = member
        return Membership(key: key, id: lastID)
    }

    /// Takes a member out; the hub ends its subscription when it was the last.
    static func leave(_ membership: Membership) {
        guard let hub = hubs[membership.key] else { return }
        hub.members[membership.id] = nil
        if hub.members.isEmpty {
            hubs[membership.key] = nil
            hub.listener?.cancel()
        }
    }

    private static func open(_ key: Key, transport: CachedTransport) -> ChangeHub {
        let hub = ChangeHub(transport: transport)
        // Registered here, before the first member reads memory, so no change after that is missed.
        let changes = transport.changes(for: .url(key.url))
        hub.listener = Task { [weak hub] in
            for await change in changes {
                guard let hub else { return }
                // A copy: a member may leave, or another join, while the change is handed out.
                for member in Array(hub.members.values) { member(change) }
            }
        }
        hubs[key] = hub
        return hub
    }
}
