import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Observation
import Testing
import TransportCache
import TransportCacheTesting

// The view model and tests of the article "Testing with a scripted origin", as it shows them.

@MainActor @Observable
final class ArticlesModel {
    struct Article: Decodable, Sendable, Equatable { let title: String }

    private(set) var articles: [Article] = []
    private(set) var failed = false
    private let transport: CachedTransport
    static let url = URL(string: "https://api.example.com/articles")!

    init(transport: CachedTransport) { self.transport = transport }

    func load() async {
        do {
            articles = try await transport.value([Article].self, from: Self.url)
            failed = false
        } catch {
            failed = true
        }
    }

    func refresh() async {
        _ = try? await transport.refresh(URLRequest(url: Self.url))
        await load()
    }
}

@MainActor
@Suite("The article's view model")
struct ArticlesModelTests {
    let origin = ScriptedOrigin()

    @Test func secondLoadComesFromMemory() async {
        origin.respond(to: ArticlesModel.url, with: .init(text: #"[{"title":"Hello"}]"#))
        let model = ArticlesModel(transport: CachedTransport(origin: origin))
        await model.load()
        await model.load()
        #expect(model.articles == [.init(title: "Hello")])
        #expect(origin.callCount(for: ArticlesModel.url) == 1)
    }

    @Test func refreshShowsWhatChanged() async {
        // One answer per call, in order; the last one answers every later call.
        origin.respond(
            to: ArticlesModel.url,
            with: .init(text: #"[{"title":"Hello"}]"#), .init(text: #"[{"title":"Updated"}]"#))
        let model = ArticlesModel(transport: CachedTransport(origin: origin))
        await model.load()
        await model.refresh()
        #expect(model.articles == [.init(title: "Updated")])
    }

    @Test func aFailureIsShownAndNothingIsStored() async {
        origin.respond(to: ArticlesModel.url, with: .failure(.notConnectedToInternet))
        let model = ArticlesModel(transport: CachedTransport(origin: origin))
        await model.load()
        #expect(model.failed)
        #expect(model.articles.isEmpty)
    }

    @Test func screensLoadingAtOnceShareOneFetch() async {
        // Closed, the gate holds every call until the test opens it.
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: ArticlesModel.url, with: .init(text: #"[{"title":"Hello"}]"#))
        let transport = CachedTransport(origin: origin)
        let screens = [ArticlesModel(transport: transport), ArticlesModel(transport: transport)]
        async let first: Void = screens[0].load()
        async let second: Void = screens[1].load()
        await origin.waitForCalls(1)
        origin.openGate()
        _ = await (first, second)
        #expect(origin.callCount == 1)
        #expect(screens.allSatisfy { $0.articles == [.init(title: "Hello")] })
    }
}
