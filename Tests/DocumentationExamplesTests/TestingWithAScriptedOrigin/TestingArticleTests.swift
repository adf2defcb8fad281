// swift-format-ignore-file
// A block of TestingWithAScriptedOrigin.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TransportCache
import TransportCacheTesting

@MainActor
struct ArticleListModelTests {
    let origin = ScriptedOrigin()

    @Test func secondLoadComesFromMemory() async {
        origin.respond(to: ArticleListModel.url, with: .init(text: #"[{"title":"Hello"}]"#))
        let model = ArticleListModel(transport: CachedTransport(origin: origin))
        await model.load()
        await model.load()
        #expect(model.articles == [.init(title: "Hello")])
        #expect(origin.callCount(for: ArticleListModel.url) == 1)
    }

    @Test func refreshShowsWhatChanged() async {
        // One answer per call, in order; the last one answers every later call.
        origin.respond(
            to: ArticleListModel.url,
            with: .init(text: #"[{"title":"Hello"}]"#), .init(text: #"[{"title":"Updated"}]"#))
        let model = ArticleListModel(transport: CachedTransport(origin: origin))
        await model.load()
        await model.refresh()
        #expect(model.articles == [.init(title: "Updated")])
    }

    @Test(.timeLimit(.minutes(1))) func anotherScreensRefreshReachesThisOne() async {
        origin.respond(
            to: ArticleListModel.url,
            with: .init(text: #"[{"title":"Hello"}]"#), .init(text: #"[{"title":"Updated"}]"#))
        let transport = CachedTransport(origin: origin)
        let shown = ArticleListModel(transport: transport)
        let other = ArticleListModel(transport: transport)
        await shown.load()
        let following = Task { await shown.followChanges() }
        await other.refresh()
        while shown.articles != [.init(title: "Updated")] { await Task.yield() }
        following.cancel()
        #expect(origin.callCount == 2)   // the first load and the refresh; the reload came from memory
    }

    @Test func aFailureIsShownAndNothingIsStored() async {
        origin.respond(to: ArticleListModel.url, with: .failure(.notConnectedToInternet))
        let model = ArticleListModel(transport: CachedTransport(origin: origin))
        await model.load()
        #expect(model.failed)
        #expect(model.articles.isEmpty)
    }

    @Test func screensLoadingAtOnceShareOneFetch() async {
        // Closed, the gate holds every call until the test opens it.
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: ArticleListModel.url, with: .init(text: #"[{"title":"Hello"}]"#))
        let transport = CachedTransport(origin: origin)
        let screens = [ArticleListModel(transport: transport), ArticleListModel(transport: transport)]
        async let first: Void = screens[0].load()
        async let second: Void = screens[1].load()
        await origin.waitForCalls(1)
        origin.openGate()
        _ = await (first, second)
        #expect(origin.callCount == 1)
        #expect(screens.allSatisfy { $0.articles == [.init(title: "Hello")] })
    }
}
