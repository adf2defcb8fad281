import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a revalidation did: ``CachedTransport/revalidate(_:)``, ``CachedTransport/revalidateAll()``,
/// ``CachedTransport/revalidateWatched()``.
public struct RevalidationSummary: Sendable, Hashable, CustomStringConvertible {
    /// Entries revalidated: each asked the origin, or shared a fetch of its key already in flight.
    public var revalidated = 0
    /// Of those, the entries whose bytes changed, announced with ``CacheChange/updated(_:)``.
    public var changed = 0
    /// Of those, the entries whose revalidation failed (the error, or a status that is not
    /// stored): they are kept as they were.
    public var failed = 0
    /// Entries skipped: stored or confirmed by the origin within
    /// ``CachedTransport/Configuration/StayingCurrent/minimumRevalidationInterval``.
    public var skipped = 0

    /// A summary with these counts; nothing revalidated by default.
    public init(revalidated: Int = 0, changed: Int = 0, failed: Int = 0, skipped: Int = 0) {
        self.revalidated = revalidated
        self.changed = changed
        self.failed = failed
        self.skipped = skipped
    }

    /// As in `revalidated 12 (2 changed, 0 failed), skipped 3`.
    public var description: String {
        "revalidated \(revalidated) (\(changed) changed, \(failed) failed), skipped \(skipped)"
    }
}

extension CachedTransport {
    /// Asks the origin to confirm the held entries of `endpoint`, and returns when every answer
    /// is in.
    ///
    /// Each entry is revalidated with the request that fetched it (its credentials included: after
    /// a sign-out, invalidate the user's entries), made conditional on its
    /// `ETag` or `Last-Modified` (see ``Configuration/Freshness/usesConditionalRequests``), so an unchanged
    /// entry costs a `304` and no body; an entry whose bytes changed is replaced and announced
    /// with ``CacheChange/updated(_:)`` (its `values` streams yield the new value); an unchanged
    /// one is announced nowhere. An entry with a fetch of its key already in flight shares that
    /// fetch. A failure keeps the entry as it was, after the attempts the
    /// ``Configuration/Network/retryPolicy`` allows.
    ///
    /// At most ``Configuration/StayingCurrent/maximumConcurrentRevalidations`` run at once, counting those of
    /// every call, trigger and poll under way. Entries stored or
    /// confirmed within ``Configuration/StayingCurrent/minimumRevalidationInterval`` are skipped. Cancelling the
    /// calling task stops the revalidations not yet answered (a fetch shared with a caller goes
    /// on for that caller).
    ///
    /// An exact URL, a host or a path prefix finds its entries through the transport's index of
    /// keys, as ``invalidate(_:)-(Endpoint)`` does, without looking at the others; a predicate is
    /// asked about every stored URL.
    @discardableResult
    public nonisolated func revalidate(_ endpoint: Endpoint) async -> RevalidationSummary {
        await revalidate(
            committer.heldEntries(of: [endpoint]),
            skippingConfirmedWithin: configuration.stayingCurrent.minimumRevalidationInterval)
    }

    /// Revalidates every held entry; see ``revalidate(_:)``.
    @discardableResult
    public nonisolated func revalidateAll() async -> RevalidationSummary {
        await revalidate(
            committer.heldEntries(), skippingConfirmedWithin: configuration.stayingCurrent.minimumRevalidationInterval)
    }

    /// Revalidates the held entries that something watches: the endpoints of live
    /// ``changes(for:)`` streams, among them every ``values(_:for:decoder:)`` stream's URL (a
    /// stream of all changes, ``changes()``, watches nothing in particular). See ``revalidate(_:)``.
    ///
    /// Call it from the app's own lifecycle code when it comes back to the foreground or learns
    /// that the network is back; on Apple platforms ``Configuration/StayingCurrent/revalidatesOnForeground`` and
    /// ``Configuration/StayingCurrent/revalidatesOnReconnect`` make the transport call it itself.
    @discardableResult
    public nonisolated func revalidateWatched() async -> RevalidationSummary {
        let watched = broadcaster.watchedEndpoints
        guard !watched.isEmpty else { return RevalidationSummary() }
        return await revalidate(
            committer.heldEntries(of: Array(watched)),
            skippingConfirmedWithin: configuration.stayingCurrent.minimumRevalidationInterval)
    }

    /// Revalidates `held` (entries the store held a moment ago), skipping those stored or
    /// confirmed within `interval`, at most ``Configuration/StayingCurrent/maximumConcurrentRevalidations`` at once.
    @discardableResult
    nonisolated func revalidate(
        _ held: [StoredResponse], skippingConfirmedWithin interval: Duration
    ) async -> RevalidationSummary {
        let now = planner.policy.clock.now
        var summary = RevalidationSummary()
        var due: [StoredResponse] = []
        for entry in held {
            if now - entry.storedAt < interval {
                summary.skipped += 1
            } else {
                due.append(entry)
            }
        }
        guard !due.isEmpty else { return summary }
        let limit = max(1, configuration.stayingCurrent.maximumConcurrentRevalidations)
        await withTaskGroup(of: RevalidationSummary.self) { group in
            var remaining = due[...]
            func startNext() {
                guard let entry = remaining.popFirst() else { return }
                group.addTask { await self.revalidate(entry) }
            }
            for _ in 0..<limit { startNext() }
            for await one in group {
                summary.revalidated += one.revalidated
                summary.changed += one.changed
                summary.failed += one.failed
                startNext()
            }
        }
        return summary
    }

    /// Revalidates one held entry through the coalesced fetch path, once one of the transport's
    /// ``Configuration/StayingCurrent/maximumConcurrentRevalidations`` permits is free.
    private nonisolated func revalidate(_ entry: StoredResponse) async -> RevalidationSummary {
        await acquireRevalidationPermit()
        defer { releaseRevalidationPermit() }
        store.record { $0.revalidations += 1 }
        var summary = RevalidationSummary()
        summary.revalidated = 1
        do {
            let (_, response) = try await fetch(planner.revalidation(of: entry))
            switch response.cacheOutcome?.storage {
            case .stored(let changedBytes): summary.changed = changedBytes ? 1 : 0
            case .notStored(let reason) where reason.refusesAnswer:
                summary.failed = 1
            default: break
            }
        } catch {
            summary.failed = 1
        }
        return summary
    }
}

/// The transport's revalidation permits: at most so many revalidations at once, across every call,
/// trigger and poll; the others wait their turn in order. Part of the fetch graph
/// (``FetchStateMachine/revalidationPermits``), behind the in-flight lock.
struct RevalidationPermits {
    private var available: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) {
        available = max(1, count)
    }

    /// Takes a permit when one is free. - Returns: false when none is: `continuation` waits its
    /// turn, resumed by a later ``give()``.
    mutating func take(orQueue continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard available > 0 else {
            waiting.append(continuation)
            return false
        }
        available -= 1
        return true
    }

    /// Returns a permit. - Returns: the longest waiting caller, which it goes to, to resume.
    mutating func give() -> CheckedContinuation<Void, Never>? {
        guard !waiting.isEmpty else {
            available += 1
            return nil
        }
        return waiting.removeFirst()
    }
}

extension CachedTransport {
    /// Takes one of the revalidation permits, waiting for one when none is free. A waiting caller
    /// is not interrupted by cancellation: a permit frees up as soon as a revalidation answers.
    nonisolated func acquireRevalidationPermit() async {
        await withCheckedContinuation { continuation in
            if inFlight.withLock({ $0.revalidationPermits.take(orQueue: continuation) }) { continuation.resume() }
        }
    }

    /// Returns a revalidation permit, handing it to the longest waiting caller if any.
    nonisolated func releaseRevalidationPermit() {
        inFlight.withLock { $0.revalidationPermits.give() }?.resume()
    }
}
