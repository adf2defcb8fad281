import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
@testable import OpenAPIExample
import OpenAPIRuntime
import Testing
import TransportCache
import TransportCacheOpenAPI
import TransportCacheTesting

@Suite("A generated OpenAPI client over TCP, through CachedClientTransport and URLSessionTransport")
struct GeneratedClientTests {
    @available(macOS 26.0, *)
    @Test(
        "100 concurrent calls of one operation reach the origin once through the cache, once each without it",
        arguments: TransportUnderTest.allCases
    )
    func concurrentCallsCoalesce(_ transport: TransportUnderTest) async throws {
        try await withOrigin { origin in
            let (client, cache) = transport.makeClient(serverURL: origin.baseURL)
            await origin.closeGate()
            // The generated client reaches the transport before it first suspends.
            let calls = startCalls(100) { try await client.listArticles(query: .init(page: 1, gate: 1)) }
            if let cache { #expect(cache.statistics.coalescedJoins == 99) }
            await origin.waitForHits("/articles?page=1&gate=1", count: 1)
            await origin.openGate()
            var bodies = Set<String>()
            for call in calls {
                bodies.insert(try await String(plainText: call.value.ok.body.plainText))
            }
            // Every origin answer names its hit number, so the bodies count the fetches too.
            #expect(bodies.count == transport.expectedHits(calls: 100))
            #expect(await origin.hits("/articles?page=1&gate=1") == transport.expectedHits(calls: 100))
        }
    }

    @Test("path and query parameters select the stored answer", arguments: TransportUnderTest.allCases)
    func parametersKey(_ transport: TransportUnderTest) async throws {
        try await withOrigin { origin in
            let (client, _) = transport.makeClient(serverURL: origin.baseURL)
            let calls: [(itemID: String, page: Int)] = [("a", 1), ("a", 2), ("b", 1)]
            var first: [String] = []
            for call in calls {
                let text = try await client.itemText(call.itemID, page: call.page)
                #expect(text.hasPrefix("path=/items/\(call.itemID) query=page=\(call.page) "))
                first.append(text)
            }
            #expect(Set(first).count == 3)
            for (call, firstText) in zip(calls, first) {
                let again = try await client.itemText(call.itemID, page: call.page)
                #expect((again == firstText) == (transport == .cached))
            }
            #expect(await origin.hits(path: "/items/a") == 2 * transport.expectedHits(calls: 2))
            #expect(await origin.hits(path: "/items/b") == transport.expectedHits(calls: 2))
        }
    }

    @Test(
        "a POST operation passes through with its body and a later GET sees the new version",
        arguments: TransportUnderTest.allCases
    )
    func postPassesThroughAndInvalidates(_ transport: TransportUnderTest) async throws {
        try await withOrigin { origin in
            let (client, cache) = transport.makeClient(serverURL: origin.baseURL)
            #expect(try await client.noteText("7").contains(" version=0 "))
            #expect(try await client.noteText("7").contains(" version=0 "))

            let text = String(repeating: "note ", count: 20_000)
            let update = try await client.updateNote(path: .init(noteID: "7"), body: .plainText(HTTPBody(text))).ok
            #expect(update.headers.xVersion == 1)
            #expect(try await String(plainText: update.body.plainText) == text)

            #expect(try await client.noteText("7").contains(" version=1 "))
            #expect(try await client.noteText("7").contains(" version=1 "))
            // Through the cache: GET, POST, GET; the repeated GETs are memory hits.
            #expect(await origin.hits(path: "/notes/7") == (transport == .cached ? 3 : 5))
            if let cache {
                #expect(cache.statistics.invalidations >= 1)
            }
        }
    }

    @Test("a pull-to-refresh through the transport makes changes() fire, and the other screen reloads from memory")
    func refreshAnnouncesChange() async throws {
        try await withOrigin { origin in
            let cache = CachedTransport()
            let client = Client(serverURL: origin.baseURL, transport: CachedClientTransport(cache))
            let refreshing = Client(
                serverURL: origin.baseURL,
                transport: CachedClientTransport(cache, cachePolicy: .reloadIgnoringLocalCacheData)
            )
            let noteURL = origin.url("/notes/7")
            var changes = cache.changes(for: .pathPrefix("/notes")).makeAsyncIterator()

            let first = try await client.noteText("7")
            #expect(first.contains(" version=0 "))
            #expect(await changes.next() == .updated(noteURL))

            // Another client changes the note; this screen still shows what it loaded.
            await origin.bumpVersion(of: "/notes/7")
            #expect(try await client.noteText("7") == first)

            let pulled = try await refreshing.noteText("7")
            #expect(pulled.contains(" version=1 "))
            #expect(await changes.next() == .updated(noteURL))

            // The screen that heard the change reloads, from memory.
            let reloaded = try await client.noteText("7")
            #expect(reloaded == pulled)
            #expect(await origin.hits(path: "/notes/7") == 2)
        }
    }

    @Test("invalidate(tag:) with an operation ID drops that operation's stored answers, not another operation's")
    func invalidateByOperationID() async throws {
        try await withOrigin { origin in
            let cache = CachedTransport()
            let client = Client(serverURL: origin.baseURL, transport: CachedClientTransport(cache))
            func articles(page: Int) async throws -> String {
                try await String(plainText: client.listArticles(query: .init(page: page)).ok.body.plainText)
            }
            let firstPage = try await articles(page: 1)
            let secondPage = try await articles(page: 2)
            let item = try await client.itemText("a")
            // Stored: asked again, each is answered from memory.
            #expect(try await articles(page: 1) == firstPage)
            #expect(try await articles(page: 2) == secondPage)
            #expect(try await client.itemText("a") == item)
            #expect(await origin.totalHits == 3)
            var changes = cache.changes().makeAsyncIterator()

            // One tag names both pages of listArticles, whatever their query.
            #expect(cache.invalidate(tag: "listArticles") == 2)
            #expect(
                await changes.next()
                    == .invalidated(
                        urls: [origin.url("/articles?page=1"), origin.url("/articles?page=2")], endpoint: nil))
            #expect(cache.invalidate(tag: "listArticles") == 0)

            // Both pages go to the origin again; getItem is still answered from memory.
            #expect(try await articles(page: 1).contains(" hit=2"))
            #expect(try await articles(page: 2).contains(" hit=2"))
            #expect(try await client.itemText("a") == item)
            #expect(await origin.hits("/articles?page=1") == 2)
            #expect(await origin.hits("/articles?page=2") == 2)
            #expect(await origin.hits(path: "/items/a") == 1)

            // And the other way round: getItem goes to the origin, the refetched pages stay.
            #expect(cache.invalidate(tag: "getItem") == 1)
            #expect(try await client.itemText("a").contains(" hit=2"))
            #expect(try await articles(page: 1).contains(" hit=2"))
            #expect(await origin.totalHits == 6)
        }
    }

    @Test(
        "a connection reset arrives as the generated client's ClientError wrapping the URLError",
        arguments: TransportUnderTest.allCases
    )
    func transportFailureIsClientError(_ transport: TransportUnderTest) async throws {
        try await withOrigin { origin in
            let (client, _) = transport.makeClient(serverURL: origin.baseURL)
            let error = await thrownError {
                try await client.getItem(path: .init(itemID: "gone"), query: .init(reset: 1))
            }
            let clientError = try #require(error as? ClientError)
            #expect(clientError.operationID == "getItem")
            let urlError = try #require(clientError.underlyingError as? URLError)
            if transport == .cached {
                #expect(urlError.code == .networkConnectionLost)
            }
        }
    }

    @Test(
        "an error status arrives as the operation's output and is never stored",
        arguments: TransportUnderTest.allCases
    )
    func errorStatusIsOutput(_ transport: TransportUnderTest) async throws {
        try await withOrigin { origin in
            let (client, _) = transport.makeClient(serverURL: origin.baseURL)
            for _ in 0..<2 {
                let missing = try await client.getItem(path: .init(itemID: "x"), query: .init(status: 404))
                #expect(try await String(plainText: missing.notFound.body.plainText).hasPrefix("path=/items/x "))
                let failing = try await client.getItem(path: .init(itemID: "y"), query: .init(status: 500))
                guard case .undocumented(statusCode: 500, _) = failing else {
                    Issue.record("expected an undocumented 500, got \(failing)")
                    return
                }
            }
            #expect(await origin.hits(path: "/items/x") == 2)
            #expect(await origin.hits(path: "/items/y") == 2)
        }
    }

    @available(macOS 26.0, *)
    @Test("a cancelled call ends at once with ClientError wrapping CancellationError; the others get the answer")
    func cancelledCall() async throws {
        try await withOrigin { origin in
            let cache = CachedTransport()
            let client = Client(serverURL: origin.baseURL, transport: CachedClientTransport(cache))
            await origin.closeGate()
            let calls = startCalls(10) { try await client.listArticles(query: .init(page: 3, gate: 1)) }
            #expect(cache.statistics.coalescedJoins == 9)
            await origin.waitForHits("/articles?page=3&gate=1", count: 1)
            for call in calls.dropLast() { call.cancel() }
            for call in calls.dropLast() {
                let error = await thrownError { try await call.value }
                let clientError = try #require(error as? ClientError)
                #expect(clientError.underlyingError is CancellationError)
            }
            await origin.openGate()
            let text = try await String(plainText: calls.last!.value.ok.body.plainText)
            #expect(text.contains(" hit=1"))
            #expect(await origin.hits("/articles?page=3&gate=1") == 1)
        }
    }

    @Test("a server URL with a path keeps it in front of the operation's path", arguments: TransportUnderTest.allCases)
    func serverURLPath(_ transport: TransportUnderTest) async throws {
        try await withOrigin { origin in
            let (client, _) = transport.makeClient(serverURL: origin.url("/v1"))
            let text = try await client.itemText("a", page: 2)
            #expect(text.hasPrefix("path=/v1/items/a query=page=2 "))
        }
    }

    @Test("a server URL ending in a slash does not double it")
    func serverURLTrailingSlash() async throws {
        try await withOrigin { origin in
            let client = Client(serverURL: origin.url("/v1/"), transport: CachedClientTransport(CachedTransport()))
            let text = try await client.itemText("a")
            #expect(text.hasPrefix("path=/v1/items/a query= "))
        }
    }

    @Test("a request body over the limit is refused before anything is sent")
    func requestBodyLimit() async throws {
        try await withOrigin { origin in
            let transport = CachedClientTransport(CachedTransport(), maximumRequestBodySize: 10)
            let client = Client(serverURL: origin.baseURL, transport: transport)
            // One body says how long it is, the other does not and is counted as it arrives.
            let streamed = AsyncStream { continuation in
                continuation.yield(ArraySlice("six b ".utf8))
                continuation.yield(ArraySlice("five.".utf8))
                continuation.finish()
            }
            let bodies = [HTTPBody("eleven byte"), HTTPBody(streamed, length: .unknown)]
            for body in bodies {
                let error = await thrownError {
                    try await client.updateNote(path: .init(noteID: "7"), body: .plainText(body))
                }
                let clientError = try #require(error as? ClientError)
                #expect(clientError.underlyingError as? CachedClientTransportError == .requestBodyTooLarge)
            }
            let fits = try await client.updateNote(path: .init(noteID: "7"), body: .plainText("ten bytes."))
            #expect(try await String(plainText: fits.ok.body.plainText) == "ten bytes.")
            #expect(await origin.totalHits == 1)
        }
    }
}
