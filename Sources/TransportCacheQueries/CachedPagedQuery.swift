import Foundation
import Observation
import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A list loaded a page at a time, each page its own request and stored entry, for an endless
/// scroll: the next page on demand, pull-to-refresh for the pages loaded.
///
/// ```swift
/// let feed = CachedPagedQuery(FeedPage.self, first: firstPageRequest, in: transport) { last in
///     last.next.map { URLRequest(url: $0) }
/// }
/// // feed.pages, feed.hasNextPage; at the bottom of the list:
/// await feed.loadNextPage()
/// ```
///
/// Each page is a ``CachedQuery``: it starts from memory when it can, and follows the changes of
/// its own URL. ``refresh()`` reloads the pages loaded, at most ``maximumConcurrentRefreshes`` at
/// a time; a page whose refresh fails keeps its last good value and shows its error, and the
/// others are shown as they come.
@MainActor
@Observable
public final class CachedPagedQuery<Page: Decodable & Sendable> {
    /// The query of each page loaded, in order, the first page's first.
    public private(set) var pageQueries: [CachedQuery<Page>]

    /// The value of each page that has one, in order.
    public var pages: [Page] { pageQueries.compactMap(\.value) }
    /// The first page's status: the list's own until it has something to show.
    public var status: QueryStatus { pageQueries[0].status }
    /// The error of the first page that shows one, if any.
    public var error: (any Error)? { pageQueries.lazy.compactMap(\.error).first }
    /// The failure of the first page that shows one, if any, as a screen tells it apart: see
    /// ``QueryFailure``.
    public var failure: QueryFailure? { pageQueries.lazy.compactMap(\.failure).first }
    /// Whether a page is being fetched.
    public var isFetching: Bool { pageQueries.contains { $0.isFetching } }
    /// Whether the last page is loaded and says there is a page after it.
    public var hasNextPage: Bool { nextPageRequest() != nil }

    /// The transport the pages load through.
    public let transport: CachedTransport
    /// How many pages ``refresh()`` reloads at a time.
    public let maximumConcurrentRefreshes: Int
    @ObservationIgnored private let decoder: any ResponseDecoding
    @ObservationIgnored private let nextRequest: @MainActor (Page) -> URLRequest?

    /// Makes a list whose first page is `first`, starting from memory when it can.
    ///
    /// - Parameters:
    ///   - type: the type each page decodes to.
    ///   - first: the first page's request.
    ///   - transport: the transport to load through.
    ///   - decoder: the decoder of every page.
    ///   - maximumConcurrentRefreshes: how many pages ``refresh()`` reloads at a time; at least 1.
    ///   - nextRequest: the request of the page after `page`, or nil when it is the last.
    public init(
        _ type: Page.Type = Page.self,
        first: URLRequest,
        in transport: CachedTransport,
        decoder: any ResponseDecoding = defaultQueryDecoder,
        maximumConcurrentRefreshes: Int = 2,
        nextRequest: @escaping @MainActor (_ page: Page) -> URLRequest?
    ) {
        self.transport = transport
        self.decoder = decoder
        self.maximumConcurrentRefreshes = max(1, maximumConcurrentRefreshes)
        self.nextRequest = nextRequest
        pageQueries = [CachedQuery(type, for: first, in: transport, decoder: decoder)]
    }

    /// Loads the page after the last one, when the last one is loaded and names a next page, and
    /// returns once it shows its first answer (at once when memory holds it). Does nothing
    /// otherwise, and while the last page's first fetch is under way.
    public func loadNextPage() async {
        guard let request = nextPageRequest() else { return }
        let query = CachedQuery(Page.self, for: request, in: transport, decoder: decoder)
        pageQueries.append(query)
        await query.waitForFetches()
    }

    /// Fetches the page after the last one ahead of the scroll, with `CachedTransport.prefetch(_:priority:)`,
    /// when the last one is loaded and names a next page: ``loadNextPage()`` then shows it from
    /// memory, or joins its fetch still in flight. Cancel the prefetch when the user scrolls away.
    ///
    /// ```swift
    /// // Two rows before the end of the list:
    /// nextPagePrefetch = try feed.prefetchNextPage()
    /// ```
    ///
    /// - Returns: the prefetch, or nil when there is no next page (yet).
    /// - Throws: what `CachedTransport.prefetch(_:priority:)` throws for the next page's request.
    @discardableResult
    public func prefetchNextPage(priority: FetchPriority = .low) throws -> Prefetch? {
        guard let request = nextPageRequest() else { return nil }
        return try transport.prefetch(request, priority: priority)
    }

    /// Reloads every page loaded with `CachedTransport.refresh(_:)`, at most
    /// ``maximumConcurrentRefreshes`` at a time, and returns when they are all shown. A page that
    /// fails keeps its value and shows its error; the others are shown as they come.
    public func refresh() async {
        let queries = pageQueries
        await withTaskGroup(of: Void.self) { group in
            var next = queries.startIndex
            while next < queries.endIndex, next < maximumConcurrentRefreshes {
                let query = queries[next]
                group.addTask { await query.refresh() }
                next += 1
            }
            while await group.next() != nil, next < queries.endIndex {
                let query = queries[next]
                group.addTask { await query.refresh() }
                next += 1
            }
        }
    }

    /// The request of the page after the last, when the last page is loaded and names one.
    private func nextPageRequest() -> URLRequest? {
        guard let last = pageQueries.last, last.status == .loaded || last.status == .failed, let value = last.value
        else { return nil }
        return nextRequest(value)
    }
}
