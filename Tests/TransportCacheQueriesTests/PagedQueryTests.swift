import Foundation
import Testing
import TransportCache
import TransportCacheQueries
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct FeedPage: Codable, Equatable, Sendable {
    var items: [String]
    var next: URL?
}

func pageURL(_ number: Int) -> URL { URL(string: "https://api.example.com/feed?page=\(number)")! }

/// Page `number` of `count`, its items named with `version`.
func pageReply(_ number: Int, of count: Int, version: String = "v1") -> ScriptedOrigin.Reply {
    let page = FeedPage(items: ["\(version) \(number)"], next: number < count ? pageURL(number + 1) : nil)
    return .init(headers: fresh, body: try! JSONEncoder().encode(page))
}

@MainActor
func makeFeed(_ transport: CachedTransport) -> CachedPagedQuery<FeedPage> {
    CachedPagedQuery(FeedPage.self, first: URLRequest(url: pageURL(1)), in: transport) { last in
        last.next.map { URLRequest(url: $0) }
    }
}

@Suite("Paged lists")
@MainActor
struct PagedQueryTests {
    @Test("the next page comes from the last page, on demand, each page its own entry")
    func nextPageOnDemand() async throws {
        let origin = ScriptedOrigin()
        for number in 1...3 { origin.respond(to: pageURL(number), with: pageReply(number, of: 3)) }
        let transport = makeTransport(origin)
        let feed = makeFeed(transport)
        await feed.pageQueries[0].waitForFetches()

        #expect(feed.pages.map(\.items) == [["v1 1"]])
        #expect(feed.hasNextPage)
        await feed.loadNextPage()
        await feed.loadNextPage()
        await feed.loadNextPage()

        #expect(feed.pages.map(\.items) == [["v1 1"], ["v1 2"], ["v1 3"]])
        #expect(!feed.hasNextPage)
        #expect(transport.snapshot().entries.count == 3)
        #expect((2...3).map { origin.callCount(for: pageURL($0)) } == [1, 1])
    }

    @Test("a next page already in memory is shown at once: one change")
    func nextPageFromMemory() async throws {
        let origin = ScriptedOrigin()
        for number in 1...2 { origin.respond(to: pageURL(number), with: pageReply(number, of: 2)) }
        let transport = makeTransport(origin)
        for number in 1...2 { _ = try await transport.data(from: pageURL(number)) }
        let feed = makeFeed(transport)
        let observed = ObservedStates { feed.pages.map(\.items) }

        await feed.loadNextPage()

        #expect(observed.states == [[["v1 1"]], [["v1 1"], ["v1 2"]]])
        #expect(origin.callCount == 2)
    }

    @Test("the next page prefetched ahead of the scroll is shown from memory: one request")
    func nextPagePrefetched() async throws {
        let origin = ScriptedOrigin()
        for number in 1...2 { origin.respond(to: pageURL(number), with: pageReply(number, of: 2)) }
        let transport = makeTransport(origin)
        let feed = makeFeed(transport)
        await feed.pageQueries[0].waitForFetches()

        let prefetch = try #require(try feed.prefetchNextPage())
        guard case .loaded = await prefetch.outcome else {
            Issue.record("the next page was not prefetched")
            return
        }
        await feed.loadNextPage()

        #expect(feed.pages.map(\.items) == [["v1 1"], ["v1 2"]])
        #expect(origin.callCount(for: pageURL(2)) == 1)
        #expect(try feed.prefetchNextPage() == nil)
    }

    @Test("refresh reloads the pages loaded, a bounded number at a time")
    func refreshIsBounded() async throws {
        let origin = ScriptedOrigin(gated: true)
        for number in 1...3 {
            origin.respond(to: pageURL(number), with: pageReply(number, of: 3), pageReply(number, of: 3, version: "v2"))
        }
        for call in 1...3 { origin.release(call) }
        let transport = makeTransport(origin)
        let feed = makeFeed(transport)
        await feed.pageQueries[0].waitForFetches()
        await feed.loadNextPage()
        await feed.loadNextPage()

        let refresh = Task { await feed.refresh() }
        await origin.waitForCalls(5)
        // Two refreshes in flight, held at the gate: the third waits for one of them to end.
        #expect(origin.callCount == 5)
        origin.release(4)
        await origin.waitForCalls(6)
        origin.openGate()
        await refresh.value

        #expect(feed.pages.map(\.items) == [["v2 1"], ["v2 2"], ["v2 3"]])
        #expect(!feed.isFetching)
    }

    @Test("a page whose refresh fails keeps its value and error, and the others are shown")
    func failedPageLeavesTheOthers() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: pageURL(1), with: pageReply(1, of: 2), pageReply(1, of: 2, version: "v2"))
        origin.respond(to: pageURL(2), with: pageReply(2, of: 2), .failure(.networkConnectionLost))
        let transport = makeTransport(origin)
        let feed = makeFeed(transport)
        await feed.pageQueries[0].waitForFetches()
        await feed.loadNextPage()

        await feed.refresh()

        #expect(feed.pages.map(\.items) == [["v2 1"], ["v1 2"]])
        #expect(feed.pageQueries.map(\.status) == [.loaded, .failed])
        #expect((feed.error as? URLError)?.code == .networkConnectionLost)
        #expect(feed.failure == .network(try #require(feed.error as? URLError)))
        #expect(feed.hasNextPage == false)
    }
}
