#if canImport(Darwin)
import Foundation
#if canImport(Network)
import Network
#endif

/// Revalidates what a transport's streams watch (``CachedTransport/revalidateWatched()``) when the
/// app becomes active and when the network path becomes satisfied after it was not, as
/// ``CachedTransport/Configuration/StayingCurrent/revalidatesOnForeground`` and
/// ``CachedTransport/Configuration/StayingCurrent/revalidatesOnReconnect`` ask, for as long as it lives.
///
/// Apple platforms only. The did-become-active notification is observed by name, so that the
/// library imports no UI framework; Linux has neither it nor `NWPathMonitor`, and an app there
/// calls ``CachedTransport/revalidateWatched()`` itself.
///
/// `@unchecked Sendable` is safe here: the observer and the monitor are set up in `init` and
/// only cancelled in `deinit`; the transport is read and written under `target`'s lock.
final class RevalidationTriggers: @unchecked Sendable {
    private struct Target: Sendable {
        weak var transport: CachedTransport?
    }

    private let target: Locked<Target>
    private let observer: (any NSObjectProtocol)?
    #if canImport(Network)
    private let monitor: NWPathMonitor?
    #endif

    init(onForeground: Bool, onReconnect: Bool) {
        let target = Locked(Target())
        self.target = target
        let revalidate: @Sendable () -> Void = {
            guard let transport = target.withLock({ $0.transport }) else { return }
            Task { await transport.revalidateWatched() }
        }
        observer =
            onForeground
            ? NotificationCenter.default.addObserver(forName: Self.didBecomeActive, object: nil, queue: nil) { _ in
                revalidate()
            } : nil
        #if canImport(Network)
        if onReconnect {
            let monitor = NWPathMonitor()
            let wasSatisfied = Locked<Bool?>(nil)
            monitor.pathUpdateHandler = { path in
                let isSatisfied = path.status == .satisfied
                let wasSatisfiedBefore = wasSatisfied.withLock { state -> Bool? in
                    defer { state = isSatisfied }
                    return state
                }
                // The first update says how the path is now; only a return to satisfied triggers.
                if isSatisfied, wasSatisfiedBefore == false { revalidate() }
            }
            monitor.start(queue: DispatchQueue(label: "TransportCache.RevalidationTriggers"))
            self.monitor = monitor
        } else {
            monitor = nil
        }
        #endif
    }

    /// Points the triggers at `transport`, held weakly.
    func attach(to transport: CachedTransport) {
        target.withLock { $0.transport = transport }
    }

    /// The platform's did-become-active notification, by name.
    private static var didBecomeActive: Notification.Name {
        #if os(macOS)
        Notification.Name("NSApplicationDidBecomeActiveNotification")
        #elseif os(watchOS)
        Notification.Name("WKApplicationDidBecomeActiveNotification")
        #else
        Notification.Name("UIApplicationDidBecomeActiveNotification")
        #endif
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
        #if canImport(Network)
        monitor?.cancel()
        #endif
    }
}
#endif
