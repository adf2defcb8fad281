import Foundation
import TransportCache

/// What a transport does, as its `events()` stream tells it, kept for a test to
/// read and to wait on: `await log.wait(for: 3) { $0.kind.name == "stored" }`.
///
/// It registers its stream when it is made, so it hears every event of a request planned after
/// that, and stops listening when it goes away.
///
/// An event is reported once its effect has happened: when a `stored` event arrives, the entry is
/// stored and counted in `statistics` (a `304` that confirmed it too, in `notModified`). A
/// `fetchEnded` event comes before the fetch's answer is taken in: to wait for that, use
/// ``ScriptedOrigin/waitForDeliveredAnswers(_:)``.
///
/// The stream is bounded (`stayingCurrent.changeBufferLimit` undelivered events): a burst larger than that may
/// drop events the log then never sees. Wait for events of which there are few.
public final class CacheEventLog: Sendable {
    private struct Waiter {
        let count: Int
        var matched: Int
        let matches: @Sendable (CacheEvent) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var events: [CacheEvent] = []
        var waiters: [Waiter] = []
    }

    private let state = Locked(State())
    private let listening: Task<Void, Never>

    /// Starts listening to `transport`'s events.
    public init(_ transport: CachedTransport) {
        let stream = transport.events()
        let state = state
        listening = Task {
            for await event in stream {
                let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.events.append(event)
                    var ready: [CheckedContinuation<Void, Never>] = []
                    state.waiters = state.waiters.compactMap { waiter in
                        var waiter = waiter
                        if waiter.matches(event) { waiter.matched += 1 }
                        guard waiter.matched >= waiter.count else { return waiter }
                        ready.append(waiter.continuation)
                        return nil
                    }
                    return ready
                }
                for continuation in ready { continuation.resume() }
            }
        }
    }

    deinit {
        listening.cancel()
    }

    /// The events heard so far, in the order the transport reported them.
    public var events: [CacheEvent] { state.withLock { $0.events } }

    /// Suspends until at least `count` events heard (so far or later) satisfy `matches`. It waits
    /// as long as it takes: start what reports them first.
    public func wait(for count: Int = 1, where matches: @escaping @Sendable (CacheEvent) -> Bool) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                let matched = state.events.count(where: matches)
                if matched >= count { return true }
                state.waiters.append(
                    Waiter(count: count, matched: matched, matches: matches, continuation: continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Suspends until at least `count` events of the kind named `kind` (`CacheEvent.Kind.name`:
    /// `"stored"`, `"fetchEnded"` …) have been heard, for `url` when given.
    public func wait(for count: Int = 1, _ kind: String, url: URL? = nil) async {
        await wait(for: count) { event in
            event.kind.name == kind && (url == nil || event.url.absoluteString == url?.absoluteString)
        }
    }
}
