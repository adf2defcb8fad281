import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Local writes and optimistic updates")
struct LocalWriteTests {
    let url = URL(string: "https://api.example.com/articles")!
    var list: URLRequest { URLRequest(url: url) }

    struct Failed: Error {}

    /// An origin whose list is the current value of `body`.
    static func listOrigin(_ body: Locked<String>, gated: Bool = false) -> ScriptedOrigin {
        ScriptedOrigin(gated: gated) { request, _ in
            if request.httpMethod == "POST" { return .init(status: 201, text: "created") }
            return .init(text: body.withLock { $0 })
        }
    }

    @Test("a stored answer is what requests get from memory, announced once when its bytes change")
    func storeAnswers() async throws {
        let origin = echoOrigin()
        let transport = makeTransport(loader: origin)
        var changes = transport.changes(for: .url(url)).makeAsyncIterator()

        try transport.store(ProvisionalAnswer(for: list, value: ["local"]))
        try transport.store(ProvisionalAnswer(for: list, value: ["local"]))
        let (data, response, outcome) = try await transport.response(for: list)

        #expect(try JSONDecoder().decode([String].self, from: data) == ["local"])
        #expect(response.statusCode == 200)
        #expect(response.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(outcome.source == .memory(.fresh))
        #expect(origin.callCount == 0)
        #expect(await changes.next() == .updated(url))
        transport.invalidateAll()
        #expect(await changes.next() == .cleared)
    }

    @Test("a values stream yields what the app stored")
    func valuesSeeLocalWrites() async throws {
        let body = Locked("[\"a\"]")
        let transport = makeTransport(loader: Self.listOrigin(body))
        var values = transport.values([String].self, for: list).makeAsyncIterator()
        #expect(try await values.next() == ["a"])
        try transport.store(ProvisionalAnswer(for: list, value: ["a", "b"]))
        #expect(try await values.next() == ["a", "b"])
    }

    @Test("bad input is refused before anything is written")
    func badInput() async throws {
        let transport = makeTransport(loader: echoOrigin()) { $0.storage.memoryCapacity = 10_000 }
        var post = list
        post.httpMethod = "POST"
        #expect(throws: LocalWriteError.notCacheable(url)) {
            try transport.store(ProvisionalAnswer(for: post, data: Data()))
        }
        let file = URLRequest(url: URL(string: "file:///tmp/x")!)
        #expect(throws: LocalWriteError.notCacheable(file.url)) {
            try transport.store(ProvisionalAnswer(for: file, data: Data()))
        }
        let huge = ProvisionalAnswer(for: list, data: Data(count: 5_000))
        #expect(throws: LocalWriteError.tooLarge(url)) { try transport.store(huge) }
        await #expect(throws: LocalWriteError.tooLarge(url)) {
            try await transport.optimisticUpdate([huge], write: { Issue.record("the write must not run") })
        }
        #expect(transport.statistics.entries == 0)
        // An empty body is an answer like any other.
        try transport.store(ProvisionalAnswer(for: list, data: Data()))
        #expect(try await transport.data(for: list).0.isEmpty)
    }

    @Test(
        "an answer the app writes is stored exactly when the same answer fetched would be",
        arguments: [
            (200, ["Cache-Control": "no-cache"], true),
            (201, [:], false),
            (500, [:], false),
            (200, ["Set-Cookie": "session=1"], false),
            (200, ["Cache-Control": "no-store"], false),
            (200, ["Vary": "*"], false),
        ])
    func writesAskTheFetchesQuestion(status: Int, headers: [String: String], storable: Bool) async throws {
        // The override off, so that `no-store` and `Vary: *` are taken at their word.
        let origin = ScriptedOrigin { _, _ in .init(status: status, headers: headers, text: "x") }
        let transport = makeTransport(loader: origin) { $0.network.cacheOverride = nil }
        let fetched = try await transport.response(for: list).2
        #expect((fetched.storage == .stored(changedBytes: true)) == storable)
        transport.invalidateAll()

        let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        let answer = ProvisionalAnswer(for: list, data: Data("x".utf8), response: response)
        if storable {
            try transport.store(answer)
            #expect(transport.statistics.entries == 1)
        } else {
            #expect(throws: LocalWriteError.notCacheable(url)) { try transport.store(answer) }
            #expect(transport.statistics.entries == 0)
        }
    }

    @Test("the provisional answer shows at once; the write's confirmed answer replaces it")
    func confirmed() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body)
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(for: list)
        var changes = transport.changes(for: .url(url)).makeAsyncIterator()

        let output = try await transport.optimisticUpdate(
            [ProvisionalAnswer(for: list, value: ["a", "b?"])],
            write: { () async throws -> String in
                let shown = try await transport.data(for: list).0.text
                #expect(shown == "[\"a\",\"b?\"]")
                return "created b"
            },
            confirmed: { _ in [ProvisionalAnswer(for: list, data: Data("[\"a\",\"b\"]".utf8))] })

        #expect(output == "created b")
        #expect(try await transport.data(for: list).0.text == "[\"a\",\"b\"]")
        #expect(await changes.next() == .updated(url))
        #expect(await changes.next() == .updated(url))
        #expect(origin.callCount == 1)
    }

    @Test("while an update is pending, reads within the stale-while-revalidate window start one revalidation at most")
    func oneBackgroundRevalidationUnderAnUpdate() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body)
        let clock = TestClock()
        let transport = makeTransport(loader: origin, clock: clock) {
            $0.freshness.maximumAge = .seconds(60)
            $0.freshness.staleWhileRevalidate = .seconds(600)
        }
        _ = try await transport.data(for: list)
        try await transport.optimisticUpdate(
            [ProvisionalAnswer(for: list, value: ["a", "b?"])],
            write: { () async throws -> Void in
                clock.advance(by: .seconds(120))
                for _ in 0..<3 {
                    let (data, response) = try await transport.data(for: list)
                    #expect(data.text == "[\"a\",\"b?\"]" && response.isStaleAnswer)
                    // The one revalidation has ended before the next read: a later one would
                    // start rather than join it.
                    await origin.waitForDeliveredAnswers(2)
                    #expect(transport.pendingWork.fetches == 0)
                }
                #expect(origin.callCount == 2)
            })
    }

    @Test("without a confirmed answer, the key is refetched and the provisional answer shows until it arrives")
    func refetched() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body)
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(for: list)

        _ = try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["a", "b?"])]) {
            body.withLock { $0 = "[\"a\",\"b\"]" }
        }
        #expect(try await transport.data(for: list).0.text == "[\"a\",\"b\"]")
        #expect(origin.callCount == 2)
    }

    @Test("a refetch that brings nothing storable leaves the provisional answer as the answer")
    func refetchFails() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: url, with: .init(text: "[\"a\"]"), .init(status: 500, text: "down"))
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(for: list)
        // Given twice, the last provisional answer for a key is the one shown.
        _ = try await transport.optimisticUpdate(
            [ProvisionalAnswer(for: list, value: ["x"]), ProvisionalAnswer(for: list, value: ["a", "b"])]
        ) {}
        #expect(origin.callCount == 2)
        #expect(try await transport.data(for: list).0.text == "[\"a\",\"b\"]")
    }

    @Test("the update's own POST to the list's URL does not take the provisional answer away before the refetch")
    func ownWriteSpared() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body)
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(for: list)
        var post = list
        post.httpMethod = "POST"
        _ = try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["a", "b?"])]) {
            _ = try await transport.data(for: post)
            // The POST succeeded: the list's entry would be invalidated, but the update holds it.
            var cached = list
            cached.cachePolicy = .returnCacheDataDontLoad
            #expect(try await transport.data(for: cached).0.text == "[\"a\",\"b?\"]")
            body.withLock { $0 = "[\"a\",\"b\"]" }
        }
        #expect(try await transport.data(for: list).0.text == "[\"a\",\"b\"]")
        // An unsafe request with no update pending still invalidates.
        _ = try await transport.data(for: post)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a failed write rolls back to the exact bytes held before, and rethrows")
    func rollback() async throws {
        let body = Locked("[\"a\"]")
        let transport = makeTransport(loader: Self.listOrigin(body))
        let (before, _) = try await transport.data(for: list)
        var changes = transport.changes(for: .url(url)).makeAsyncIterator()

        await #expect(throws: Failed.self) {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["a", "b?"])]) {
                throw Failed()
            }
        }
        #expect(try await transport.data(for: list).0 == before)
        #expect(await changes.next() == .updated(url))
        #expect(await changes.next() == .updated(url))
    }

    @Test("a rollback of a key that held nothing leaves nothing, announced as an invalidation")
    func rollbackToNothing() async throws {
        let transport = makeTransport(loader: echoOrigin())
        var changes = transport.changes(for: .url(url)).makeAsyncIterator()
        await #expect(throws: Failed.self) {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["b?"])]) { throw Failed() }
        }
        #expect(transport.statistics.entries == 0)
        #expect(await changes.next() == .updated(url))
        #expect(await changes.next() == .invalidated(urls: [url], endpoint: nil))
    }

    @Test("a cancelled write rolls back")
    func cancelledWrite() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body)
        let transport = makeTransport(loader: origin)
        let (before, _) = try await transport.data(for: list)
        origin.closeGate()
        let update = Task {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["b?"])]) {
                var post = URLRequest(url: URL(string: "https://api.example.com/articles/new")!)
                post.httpMethod = "POST"
                return try await transport.data(for: post)
            }
        }
        await origin.waitForCalls(2)
        #expect(try await transport.data(for: list).0.text == "[\"b?\"]")
        update.cancel()
        #expect(await thrownError { try await update.value } is CancellationError)
        #expect(try await transport.data(for: list).0 == before)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test(
        "two updates of one key: the first failing leaves the second visible; the second failing then restores the base"
    )
    func twoUpdatesFirstFails() async throws {
        let body = Locked("[\"a\"]")
        let transport = makeTransport(loader: Self.listOrigin(body))
        let (base, _) = try await transport.data(for: list)
        let firstGate = Gate()
        let secondGate = Gate()
        // An update shows its provisional answer before it first suspends: started at once, it
        // shows when `startCall` returns.
        let first = startCall {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["first"])]) {
                try await firstGate.wait()
                throw Failed()
            }
        }
        #expect(try await transport.data(for: list).0.text == "[\"first\"]")
        let second = startCall {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["second"])]) {
                try await secondGate.wait()
                throw Failed()
            }
        }
        #expect(try await transport.data(for: list).0.text == "[\"second\"]")

        firstGate.open()
        #expect(await thrownError { try await first.value } != nil)
        #expect(try await transport.data(for: list).0.text == "[\"second\"]")
        secondGate.open()
        #expect(await thrownError { try await second.value } != nil)
        #expect(try await transport.data(for: list).0 == base)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a fetch that began before the update never overwrites it; one that ends during it becomes its base")
    func fetchesAndUpdates() async throws {
        let body = Locked("[\"old\"]")
        let origin = Self.listOrigin(body, gated: true)
        let transport = makeTransport(loader: origin)
        let early = Task { try await transport.data(for: list) }
        await origin.waitForCalls(1)
        let gate = Gate()
        let update = startCall {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["mine"])]) {
                try await gate.wait()
                throw Failed()
            }
        }
        // Asked without a request: one would join the fetch the origin holds.
        #expect(transport.statistics.stores == 1)
        origin.openGate()
        #expect(try await early.value.0.text == "[\"old\"]")
        #expect(try await transport.data(for: list).0.text == "[\"mine\"]")

        // A refresh during the update: its answer is what a rollback returns to.
        body.withLock { $0 = "[\"new\"]" }
        #expect(try await transport.refresh(list).0.text == "[\"new\"]")
        #expect(try await transport.data(for: list).0.text == "[\"mine\"]")
        gate.open()
        #expect(await thrownError { try await update.value } != nil)
        #expect(try await transport.data(for: list).0.text == "[\"new\"]")
    }

    @Test("an entry invalidated during the update is not brought back by its rollback")
    func invalidatedNotResurrected() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body)
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(for: list)
        await #expect(throws: Failed.self) {
            try await transport.optimisticUpdate([ProvisionalAnswer(for: list, value: ["b?"])]) {
                transport.invalidate(list)
                throw Failed()
            }
        }
        #expect(transport.statistics.entries == 0)
        _ = try await transport.data(for: list)
        #expect(origin.callCount == 2)
    }
    /// Loads `list` through a gated origin, releasing its call `call`.
    func load(_ transport: CachedTransport, releasing call: Int, of origin: ScriptedOrigin) async throws -> String {
        let task = Task { try await transport.data(for: list) }
        await origin.waitForCalls(call)
        origin.release(call)
        return try await task.value.0.text
    }

    @Test("a refresh in flight when an update fails stores its newer answer after the rollback")
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func refreshOutlivesAFailedUpdate() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body, gated: true)
        let transport = makeTransport(loader: origin)
        #expect(try await load(transport, releasing: 1, of: origin) == "[\"a\"]")
        body.withLock { $0 = "[\"b\"]" }
        let refreshing = startCall { try await transport.refresh(list) }
        await origin.waitForCalls(2)
        await #expect(throws: Failed.self) {
            try await transport.optimisticUpdate(
                [try ProvisionalAnswer(for: list, value: ["provisional"])], write: { throw Failed() })
        }
        #expect(try await transport.data(for: list).0.text == "[\"a\"]")
        origin.release(2)
        #expect(try await refreshing.value.1.cacheOutcome?.storage == .stored(changedBytes: true))
        #expect(try await transport.data(for: list).0.text == "[\"b\"]")
    }

    @Test("a fetch sent during an update that settles with the origin's answer does not overwrite it")
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func confirmedAnswerOutranksAFetchSentDuringTheUpdate() async throws {
        let body = Locked("[\"a\"]")
        let origin = Self.listOrigin(body, gated: true)
        let transport = makeTransport(loader: origin)
        #expect(try await load(transport, releasing: 1, of: origin) == "[\"a\"]")
        let list = self.list
        let refreshing = Locked<Task<(Data, URLResponse), any Error>?>(nil)
        try await transport.optimisticUpdate(
            [try ProvisionalAnswer(for: list, value: ["provisional"])],
            write: {
                refreshing.withLock { $0 = startCall { try await transport.refresh(list) } }
                await origin.waitForCalls(2)
            },
            confirmed: { [try ProvisionalAnswer(for: list, value: ["confirmed"])] })
        #expect(try await transport.data(for: list).0.text == "[\"confirmed\"]")
        origin.release(2)
        let refreshed = try await #require(refreshing.withLock { $0 }).value
        #expect(refreshed.1.cacheOutcome?.storage == .notStored(.supersededInFlight))
        #expect(try await transport.data(for: list).0.text == "[\"confirmed\"]")
    }

    @Test("an update whose key was invalidated, and whose refetch fails, leaves nothing provisional behind")
    func invalidatedThenFailedRefetchShowsNothing() async throws {
        let offline = Locked(false)
        let origin = ScriptedOrigin { _, _ in
            offline.withLock { $0 } ? .failure(.notConnectedToInternet) : .init(text: "[\"a\"]")
        }
        let transport = makeTransport(loader: origin)
        _ = try await transport.data(for: list)
        let list = self.list
        try await transport.optimisticUpdate(
            [try ProvisionalAnswer(for: list, value: ["provisional"])],
            write: {
                transport.invalidate(list)
                offline.withLock { $0 = true }
            })
        await #expect(throws: URLError.self) {
            try await transport.data(for: URLRequest(url: url, cachePolicy: .returnCacheDataDontLoad))
        }
        #expect(transport.statistics.entries == 0)
    }

    @Test("a fetch of another variant in flight during an update is stored as its own variant, not under the update")
    func otherVariantUnderAnUpdate() async throws {
        let origin = ScriptedOrigin(gated: true) { request, _ in
            let language = request.value(forHTTPHeaderField: "X-Variant") ?? "none"
            return .init(headers: ["Vary": "X-Variant"], text: "origin \(language)")
        }
        let transport = makeTransport(loader: origin)
        let english = request(url.absoluteString, headers: ["X-Variant": "en"])
        let french = request(url.absoluteString, headers: ["X-Variant": "fr"])
        let englishLoad = Task { try await transport.data(for: english) }
        await origin.waitForCalls(1)
        origin.release(1)
        #expect(try await englishLoad.value.0.text == "origin en")
        let frenchLoad = Task { try await transport.data(for: french) }
        await origin.waitForCalls(2)
        await #expect(throws: Failed.self) {
            try await transport.optimisticUpdate(
                [
                    ProvisionalAnswer(
                        for: english, data: Data("provisional".utf8),
                        response: HTTPURLResponse(
                            url: url, statusCode: 200, httpVersion: nil, headerFields: ["Vary": "X-Variant"]))
                ],
                write: {
                    origin.release(2)
                    _ = try await frenchLoad.value
                    throw Failed()
                })
        }
        origin.openGate()
        // Both variants answer from memory: the rollback put back the English one.
        #expect(try await transport.data(for: english).0.text == "origin en")
        #expect(try await transport.data(for: french).0.text == "origin fr")
        #expect(origin.callCount == 2)
    }
}
