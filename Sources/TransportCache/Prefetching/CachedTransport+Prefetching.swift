import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// Fetches `request` ahead of the screen that will show it, at `priority`, and stores the
    /// answer as a screen's fetch would. Returns at once, with the handle that cancels it.
    ///
    /// ```swift
    /// // A row is about to appear:
    /// let prefetch = try transport.prefetch(URLRequest(url: detailURL))
    /// // It scrolled away before the user tapped it:
    /// prefetch.cancel()
    /// ```
    ///
    /// - A request whose fresh answer is stored sends nothing (``Prefetch/Outcome/alreadyStored``),
    ///   and leaves the entry as it was: a prefetch does not count as reading it.
    /// - A request whose fetch is in flight joins it: the origin is asked once, however many
    ///   prefetches and screens ask.
    /// - Otherwise its fetch waits in the host's queue at `priority`, behind the screens'
    ///   requests (``Configuration/Network/maximumFetchesPerHost``). A screen asking for the same
    ///   request joins the fetch, which then goes at the screen's priority, and reads the answer
    ///   from memory once it is stored.
    /// - An answer fetched for prefetches only is stored as not read yet: it is evicted before
    ///   anything a screen read, and takes at most ``Configuration/Storage/prefetchShare`` of the
    ///   memory from what screens read. A screen reading it makes it an ordinary entry.
    ///
    /// The request is keyed and prepared as ``data(for:)`` prepares it: the adapters, the
    /// credential, the partition.
    ///
    /// - Throws: ``PrefetchError/neverStored(_:)`` for a request the transport never stores (a
    ///   `POST`, another scheme, its own conditions), ``PrefetchError/cacheOnly`` for a cache-only
    ///   policy, `URLError(.badURL)` without a URL, and what a keyed adapter throws. Nothing is
    ///   sent then.
    @discardableResult
    public nonisolated func prefetch(_ request: URLRequest, priority: FetchPriority = .low) throws -> Prefetch {
        let keyed = try keyed(request)
        let plan = try planner.prefetchPlan(keyed.request, account: keyed.account)
        switch plan {
        case .memory:
            return Prefetch(request: request, priority: priority, outcome: .alreadyStored)
        case .send(let send):
            throw PrefetchError.neverStored(send.reason)
        case .conditional:
            throw PrefetchError.neverStored(.requestConditions)
        case .unavailable, .gatewayTimeout:
            throw PrefetchError.cacheOnly
        case .fetch(let fetchPlan):
            let prefetch = Prefetch(request: request, priority: priority)
            let waiter = Waiter(
                request: fetchPlan.request, reason: fetchPlan.reason, priority: priority, prefetch: prefetch)
            prefetch.attach(waiter, to: self)
            arrive(fetchPlan, waiter: waiter)
            return prefetch
        }
    }

    /// `waiter`'s caller now asks for `priority`.
    nonisolated func reprioritize(_ waiter: Waiter, to priority: FetchPriority) {
        _ = changingFetches { $0.reprioritize(waiter, to: priority) }
    }
}
