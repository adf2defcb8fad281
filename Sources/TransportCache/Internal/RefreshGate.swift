#if canImport(Synchronization)
import Synchronization
#endif

/// How many credentials' refreshes run in the process at this moment: while none does, no request
/// can be a refresh's own, and the task-local that says whether it is
/// (``RequestPreparation/isInsideRefresh``) need not be read. Every request with credentials or
/// adapters asks, so the count is one atomic word, not a lock.
///
/// A refresh's own requests run in the refresh's task, after its ``enter()``: they always read a
/// count above zero. Where the atomic word is not available (before macOS 15 and iOS 18), every
/// request reads the task-local, as it would without the gate.
enum RefreshGate {
    /// False only when no refresh runs.
    @inline(__always)
    static var mayBeRunning: Bool {
        #if canImport(Synchronization)
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
            return RunningRefreshes.count.load(ordering: .relaxed) != 0
        }
        #endif
        return true
    }

    /// A refresh begins.
    static func enter() {
        #if canImport(Synchronization)
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
            RunningRefreshes.count.wrappingAdd(1, ordering: .relaxed)
        }
        #endif
    }

    /// A refresh ended.
    static func leave() {
        #if canImport(Synchronization)
        if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
            RunningRefreshes.count.wrappingSubtract(1, ordering: .relaxed)
        }
        #endif
    }
}

#if canImport(Synchronization)
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
private enum RunningRefreshes {
    static let count = Atomic<Int>(0)
}
#endif
