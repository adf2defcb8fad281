import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

/// Tags, which drop entries together across URLs, and query `POST`s, which are keyed by their body
/// and stored like `GET`s, against a real origin over TCP.
@Suite("Tags and query POSTs against a real origin")
struct TagsAndQueriesEndToEndTests {
    /// A transport whose `POST`s under `/graphql` are queries.
    static func queryTransport(_ configure: (inout CachedTransport.Configuration) -> Void = { _ in }) -> CachedTransport
    {
        var configuration = CachedTransport.Configuration()
        configuration.network.queryEndpoints = [.pathPrefix("/graphql")]
        configure(&configuration)
        return CachedTransport(configuration: configuration)
    }

    /// A `POST` of `body` to `url`.
    static func post(_ url: URL, body: String) -> URLRequest {
        var post = request(url, method: "POST")
        post.httpBody = Data(body.utf8)
        return post
    }

    static let articlesQuery = #"{"query":"{ articles { id title } }"}"#
    static let usersQuery = #"{"query":"{ users { id name } }"}"#

    // MARK: - Tags

    @Test("invalidate(tag:) drops exactly the entries given the tag, across URLs, and announces them")
    func invalidateByTag() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let articles = origin.url("/articles?stable=1")
            let userArticles = origin.url("/users/1/articles?stable=1")
            let user = origin.url("/users/1?stable=1")
            let untagged = origin.url("/about?stable=1")
            _ = try await transport.data(for: request(articles), tags: ["articles"])
            _ = try await transport.data(for: request(userArticles), tags: ["articles", "user:1"])
            _ = try await transport.data(for: request(user), tags: ["user:1"])
            _ = try await transport.data(from: untagged)
            var changes = transport.changes().makeAsyncIterator()

            #expect(transport.invalidate(tag: "articles") == 2)
            // The tag is spent, and a tag that names nothing changes nothing.
            #expect(transport.invalidate(tag: "articles") == 0)
            #expect(transport.invalidate(tag: "nothing") == 0)
            #expect(transport.statistics.entries == 2)
            #expect(await changes.next() == .invalidated(urls: [articles, userArticles], endpoint: nil))

            // The tagged URLs go to the origin again; the others are still answered from memory.
            for url in [articles, userArticles] {
                let (_, _, outcome) = try await transport.response(for: request(url))
                #expect(outcome.source == .network(.invalidated), "\(url)")
            }
            for url in [user, untagged] {
                let (_, _, outcome) = try await transport.response(for: request(url))
                #expect(outcome.source == .memory(.fresh), "\(url)")
            }
            #expect(await origin.hits("/articles?stable=1") == 2)
            #expect(await origin.hits("/users/1/articles?stable=1") == 2)
            #expect(await origin.hits("/users/1?stable=1") == 1)
            #expect(await origin.hits("/about?stable=1") == 1)
            // The calls that dropped nothing announced nothing: next come the two refetches.
            #expect(await changes.next() == .updated(articles))
            #expect(await changes.next() == .updated(userArticles))
        }
    }

    @Test("a tag stays in the app: neither a header nor the URL the origin receives carries it")
    func tagNeverReachesOrigin() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let tag = "articles-tag"
            let tagged = request(origin.url("/tagged?stable=1"), headers: ["X-Screen": "articles"])
            let (data, _) = try await transport.data(for: tagged, tags: [tag])
            #expect(data.text == "path=/tagged query=stable=1 version=0 auth=-")
            // The origin recorded the request's headers: the request's own arrived.
            #expect(await origin.lastRequestHeader("X-Screen", for: "/tagged?stable=1") == "articles")
            for name in ["Tag", "Tags", "X-Tag", "X-Tags", "Cache-Tag", "X-Cache-Tag", "X-Cache-Tags", "Surrogate-Key"]
            {
                #expect(await origin.lastRequestHeader(name, for: "/tagged?stable=1") == nil, "\(name)")
            }
            #expect(await origin.totalHits == 1)
            #expect(transport.invalidate(tag: tag) == 1)
        }
    }

    @Test("a tagged fetch held at the origin and invalidated by its tag answers its caller and stores nothing")
    func tagInFlight() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/slow?gate=1"
            await origin.closeGate()
            let loading = Task { try await transport.data(for: request(origin.url(path)), tags: ["slow"]) }
            await origin.waitForHits(path, count: 1)
            // The key is tagged when the request is made; nothing is stored yet, so nothing is dropped.
            #expect(transport.invalidate(tag: "slow") == 0)
            await origin.openGate()
            #expect(try await loading.value.0.text.hasSuffix("hit=1"))
            #expect(transport.statistics.entries == 0)
            _ = try await transport.data(from: origin.url(path))
            #expect(await origin.hits(path) == 2)
        }
    }

    // MARK: - Query POSTs

    @available(macOS 26.0, *)
    @Test("50 identical query POSTs at once reach the origin once and all get its answer; the next is from memory")
    func concurrentQueriesCoalesce() async throws {
        try await withOrigin { origin in
            let transport = Self.queryTransport()
            let path = "/graphql?gate=1"
            let query = Self.post(origin.url(path), body: Self.articlesQuery)
            await origin.closeGate()
            let callers = startCalls(50) { try await transport.data(for: query) }
            #expect(transport.statistics.coalescedJoins == 49)
            await origin.waitForHits(path, count: 1)
            await origin.openGate()

            var bodies = Set<String>()
            for caller in callers {
                let (data, response) = try await caller.value
                #expect((response as? HTTPURLResponse)?.statusCode == 200)
                bodies.insert(data.text)
            }
            // The origin echoes a POST's body: the one request carried it.
            #expect(bodies == [Self.articlesQuery])
            #expect(await origin.hits(path) == 1)
            #expect(await origin.version(of: "/graphql") == 1)
            #expect(transport.statistics.stores == 1)

            let (data, _, outcome) = try await transport.response(for: query)
            #expect(outcome.source == .memory(.fresh))
            #expect(data.text == Self.articlesQuery)
            #expect(await origin.hits(path) == 1)
        }
    }

    @Test("a query POST with another body is its own request; each is then answered from memory")
    func otherBodyIsOtherKey() async throws {
        try await withOrigin { origin in
            let transport = Self.queryTransport()
            let url = origin.url("/graphql")
            let articles = Self.post(url, body: Self.articlesQuery)
            let users = Self.post(url, body: Self.usersQuery)
            #expect(try await transport.data(for: articles).0.text == Self.articlesQuery)
            let (usersData, _, usersOutcome) = try await transport.response(for: users)
            #expect(usersOutcome.source == .network(.noEntry))
            #expect(usersData.text == Self.usersQuery)
            #expect(await origin.hits("/graphql") == 2)

            for (query, body) in [(articles, Self.articlesQuery), (users, Self.usersQuery)] {
                let (data, _, outcome) = try await transport.response(for: query)
                #expect(outcome.source == .memory(.fresh))
                #expect(data.text == body)
            }
            // The same body with other credentials is another identity, so another key.
            var signedIn = articles
            signedIn.setValue("Bearer other", forHTTPHeaderField: "Authorization")
            #expect(try await transport.response(for: signedIn).2.source == .network(.noEntry))
            #expect(await origin.hits("/graphql") == 3)
        }
    }

    @Test("a query POST invalidates nothing; a POST to another path still invalidates its URL")
    func otherPostsInvalidate() async throws {
        try await withOrigin { origin in
            let transport = Self.queryTransport()
            let graphql = origin.url("/graphql?stable=1")
            let articles = origin.url("/articles?stable=1")
            _ = try await transport.data(from: graphql)
            _ = try await transport.data(from: articles)
            var changes = transport.changes().makeAsyncIterator()

            // The query is stored (an update), and the GET of its URL stays.
            _ = try await transport.data(for: Self.post(graphql, body: Self.articlesQuery))
            #expect(await changes.next() == .updated(graphql))
            #expect(try await transport.response(for: request(graphql)).2.source == .memory(.fresh))

            let write = Self.post(articles, body: "title=New")
            let (echo, _, outcome) = try await transport.response(for: write)
            #expect(outcome.source == .passedThrough(.unsafeMethod))
            #expect(echo.text == "title=New")
            #expect(await changes.next() == .invalidated(urls: [articles], endpoint: nil))
            let (list, _, listOutcome) = try await transport.response(for: request(articles))
            #expect(listOutcome.source == .network(.invalidated))
            #expect(list.text == "path=/articles query=stable=1 version=1 auth=-")

            // Never stored: the same POST goes to the origin again.
            #expect(try await transport.response(for: write).2.source == .passedThrough(.unsafeMethod))
            #expect(await origin.hits("/articles?stable=1") == 4)
        }
    }

    @Test(
        "a query body over maximumQueryBodySize passes through each time and invalidates nothing; one at it is stored")
    func oversizedQueryPassesThrough() async throws {
        try await withOrigin { origin in
            let transport = Self.queryTransport()
            let limit = CachedTransport.Configuration().network.maximumQueryBodySize
            let url = origin.url("/graphql?stable=1")
            let small = Self.post(url, body: Self.articlesQuery)
            _ = try await transport.data(from: url)
            _ = try await transport.data(for: small)
            let invalidationsBefore = transport.statistics.invalidations
            var changes = transport.changes().makeAsyncIterator()

            let large = Self.post(url, body: String(repeating: "q", count: limit + 1))
            for _ in 0..<2 {
                let (data, _, outcome) = try await transport.response(for: large)
                #expect(outcome.source == .passedThrough(.queryBodyTooLarge))
                #expect(data.count == limit + 1)
            }
            #expect(await origin.hits("/graphql?stable=1") == 4)
            #expect(transport.statistics.invalidations == invalidationsBefore)
            for held in [request(url), small] {
                #expect(try await transport.response(for: held).2.source == .memory(.fresh))
            }

            // A body of exactly the bound is keyed, stored and answered from memory.
            let atLimit = Self.post(url, body: String(repeating: "q", count: limit))
            #expect(try await transport.response(for: atLimit).2.source == .network(.noEntry))
            let (data, _, outcome) = try await transport.response(for: atLimit)
            #expect(outcome.source == .memory(.fresh))
            #expect(data.count == limit)
            #expect(await origin.hits("/graphql?stable=1") == 5)

            // Nothing was announced before the stored query: the passed-through POSTs dropped nothing.
            #expect(await changes.next() == .updated(url))
        }
    }

    @Test("a tag given to a query POST drops it with the tag, and the next identical POST goes to the origin")
    func taggedQuery() async throws {
        try await withOrigin { origin in
            let transport = Self.queryTransport()
            let query = Self.post(origin.url("/graphql"), body: Self.articlesQuery)
            _ = try await transport.data(for: query, tags: ["articles"])
            #expect(try await transport.response(for: query).2.source == .memory(.fresh))
            #expect(transport.invalidate(tag: "articles") == 1)
            let (data, _, outcome) = try await transport.response(for: query)
            #expect(outcome.source == .network(.invalidated))
            #expect(data.text == Self.articlesQuery)
            #expect(await origin.hits("/graphql") == 2)
        }
    }
}
