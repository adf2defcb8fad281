import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Synchronization
import Testing
import TransportCache
import TransportCacheTesting

/// Answers the app writes itself and optimistic updates, against a real origin over TCP: a list
/// shows a new article before the origin has answered its POST, and the update settles on the
/// origin's answer, or rolls back when the write fails.
///
/// The list is `/articles?stable=1`, whose body changes only when a POST to `/articles` changes its
/// version. A POST's answer is held at the origin's gate (`gate=1` in its URL) while the test looks
/// at what the list shows; `status=500` makes the origin refuse it.
@Suite("Local writes against a real origin")
struct LocalWritesEndToEndTests {
    static let listPath = "/articles?stable=1"

    /// The origin's list body at `version` of `/articles`.
    static func originList(version: Int) -> String {
        "path=/articles query=stable=1 version=\(version) auth=-"
    }

    // MARK: - Showing the provisional answer

    @Test(
        "an article posted on one screen shows at once on another, before the origin answers; then the list is refetched"
    )
    func postedArticleShowsAtOnce() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            var changes = transport.changes(for: .url(listURL)).makeAsyncIterator()
            let screen = Screen(transport.values([String].self, for: list, decoder: ArticleListDecoder()))
            defer { screen.close() }
            let original = [Self.originList(version: 0)]
            await screen.waitForShown(1)
            #expect(screen.shown == [original])
            #expect(await origin.hits(Self.listPath) == 1)

            // The editor's provisional list. Its request carries `X-Origin-Query: gate=1`, which is
            // not part of the key: the list's refetch after the POST is held at the gate too.
            let withDraft = original + ["draft"]
            let provisional = try ProvisionalAnswer(
                for: request(listURL, headers: ["X-Origin-Query": "gate=1"]), value: withDraft)
            await origin.closeGate()
            let editor = Task {
                try await transport.optimisticUpdate([provisional]) {
                    let created = try await Self.post("draft", to: origin.url("/articles?gate=1"), on: transport)
                    // The POST has its answer: what comes next, the refetch, waits at the gate.
                    await origin.closeGate()
                    return created
                }
            }
            await origin.waitForHits("/articles?gate=1", count: 1)
            #expect(await origin.hits("/articles?gate=1") == 1)

            // The POST is held at the origin: the list screen shows the draft already, from memory.
            await screen.waitForShown(2)
            #expect(screen.shown.last == withDraft)
            let (shown, _, outcome) = try await transport.response(for: list)
            #expect(shown == provisional.data)
            #expect(outcome.source == .memory(.fresh))
            #expect(await origin.hits(Self.listPath) == 1)
            #expect(await origin.version(of: "/articles") == 0)

            // The POST passes; the refetch reaches the origin and is held. Until its answer
            // arrives, the provisional list stays.
            await origin.openGate()
            await origin.waitForHits(Self.listPath, count: 2)
            #expect(await origin.hits(Self.listPath) == 2)
            #expect(await origin.version(of: "/articles") == 1)
            #expect(try await transport.data(for: list).0 == provisional.data)
            #expect(screen.shown.last == withDraft)

            await origin.openGate()
            #expect(try await editor.value.text == "draft")
            let refetched = [Self.originList(version: 1)]
            await screen.waitForShown(3)
            #expect(screen.shown.last == refetched)
            #expect(screen.shown == [original, withDraft, refetched])
            let (settled, _, settledOutcome) = try await transport.response(for: list)
            #expect(settled.text == Self.originList(version: 1))
            #expect(settledOutcome.source == .memory(.fresh))
            #expect(await origin.hits(Self.listPath) == 2)

            transport.invalidate(list)
            let announced = await Self.changes(&changes, until: .invalidated(urls: [listURL], endpoint: nil))
            #expect(announced == [.updated(listURL), .updated(listURL), .updated(listURL)])
        }
    }

    @available(macOS 26.0, *)
    @Test("two updates of one list: the first one's write fails, the second's list stays, then the origin's answer")
    func firstOfTwoUpdatesFails() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            var changes = transport.changes(for: .url(listURL)).makeAsyncIterator()
            _ = try await transport.data(for: list)
            let original = Self.originList(version: 0)

            // The first update's POST waits in the app until the test lets it go; the origin refuses it.
            let first = try ProvisionalAnswer(for: list, value: [original, "first"])
            let (firstMayPost, letFirstPost) = AsyncStream.makeStream(of: Void.self)
            // An update shows its provisional answer before it first suspends.
            let firstUpdate = startCall {
                try await transport.optimisticUpdate([first]) {
                    for await _ in firstMayPost {}
                    return try await Self.post("first", to: origin.url("/articles?status=500"), on: transport)
                }
            }
            #expect(try await transport.data(for: list).0 == first.data)

            // The second update's POST is held at the origin.
            let second = try ProvisionalAnswer(for: list, value: [original, "first", "second"])
            await origin.closeGate()
            let secondUpdate = Task {
                try await transport.optimisticUpdate([second]) {
                    try await Self.post("second", to: origin.url("/articles?gate=1"), on: transport)
                }
            }
            await origin.waitForHits("/articles?gate=1", count: 1)
            #expect(await origin.hits("/articles?gate=1") == 1)
            #expect(try await transport.data(for: list).0 == second.data)

            letFirstPost.finish()
            let failure = await thrownError { try await firstUpdate.value }
            #expect(failure as? RefusedWrite == RefusedWrite(status: 500))
            #expect(await origin.hits("/articles?status=500") == 1)
            // The first one is taken out under the second, which still shows.
            let (shown, _, outcome) = try await transport.response(for: list)
            #expect(shown == second.data)
            #expect(outcome.source == .memory(.fresh))

            await origin.openGate()
            _ = try await secondUpdate.value
            // The origin counts both POSTs, the refused one too.
            #expect(await origin.version(of: "/articles") == 2)
            #expect(try await transport.data(for: list).0.text == Self.originList(version: 2))
            #expect(await origin.hits(Self.listPath) == 2)

            transport.invalidate(list)
            let announced = await Self.changes(&changes, until: .invalidated(urls: [listURL], endpoint: nil))
            // Stored, the first's list, the second's list, the origin's: the first's failure
            // changed nothing visible.
            #expect(announced == Array(repeating: .updated(listURL), count: 4))
        }
    }

    // MARK: - Rolling back

    @Test("a write the origin refuses rolls back to the exact bytes held before, announced")
    func refusedWriteRollsBack() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            var changes = transport.changes(for: .url(listURL)).makeAsyncIterator()
            let (before, beforeResponse) = try await transport.data(for: list)
            let provisional = try ProvisionalAnswer(for: list, value: [Self.originList(version: 0), "draft"])

            let failure = await thrownError {
                try await transport.optimisticUpdate([provisional]) {
                    let (shown, _, outcome) = try await transport.response(for: list)
                    #expect(shown == provisional.data)
                    #expect(outcome.source == .memory(.fresh))
                    return try await Self.post("draft", to: origin.url("/articles?status=500"), on: transport)
                }
            }
            #expect(failure as? RefusedWrite == RefusedWrite(status: 500))

            let (after, afterResponse, outcome) = try await transport.response(for: list)
            #expect(after == before)
            #expect(afterResponse.value(forHTTPHeaderField: "ETag") == Self.field("ETag", of: beforeResponse))
            #expect(outcome.source == .memory(.fresh))
            // The origin's list has changed since: these bytes are what was held, not a refetch.
            #expect(await origin.version(of: "/articles") == 1)
            #expect(await origin.hits(Self.listPath) == 1)

            transport.invalidate(list)
            let announced = await Self.changes(&changes, until: .invalidated(urls: [listURL], endpoint: nil))
            // Stored, the provisional list, the rollback.
            #expect(announced == [.updated(listURL), .updated(listURL), .updated(listURL)])
        }
    }

    @Test("a write cancelled while its POST is held at the origin rolls back")
    func cancelledWriteRollsBack() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            var changes = transport.changes(for: .url(listURL)).makeAsyncIterator()
            let (before, _) = try await transport.data(for: list)
            let provisional = try ProvisionalAnswer(for: list, value: [Self.originList(version: 0), "draft"])

            await origin.closeGate()
            let update = Task {
                try await transport.optimisticUpdate([provisional]) {
                    try await Self.post("draft", to: origin.url("/articles?gate=1"), on: transport)
                }
            }
            await origin.waitForHits("/articles?gate=1", count: 1)
            #expect(await origin.hits("/articles?gate=1") == 1)
            #expect(try await transport.data(for: list).0 == provisional.data)

            update.cancel()
            let ended = await ending(within: .seconds(20)) {
                await thrownError { try await update.value } is CancellationError
            }
            #expect((try? ended?.get()) == true)
            let (after, _, outcome) = try await transport.response(for: list)
            #expect(after == before)
            #expect(outcome.source == .memory(.fresh))
            #expect(await origin.hits(Self.listPath) == 1)
            await origin.openGate()

            transport.invalidate(list)
            let announced = await Self.changes(&changes, until: .invalidated(urls: [listURL], endpoint: nil))
            #expect(announced == [.updated(listURL), .updated(listURL), .updated(listURL)])
        }
    }

    // MARK: - Fetches and invalidations meanwhile

    @Test("a GET that began before the update and ends while it is pending does not overwrite it")
    func earlierGetEndsDuringUpdate() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            await origin.closeGate()
            // The same key: `X-Origin-Query` is not part of it.
            let early = Task { try await transport.data(for: request(listURL, headers: ["X-Origin-Query": "gate=1"])) }
            await origin.waitForHits(Self.listPath, count: 1)
            #expect(await origin.hits(Self.listPath) == 1)

            let provisional = try ProvisionalAnswer(for: list, value: ["mine"])
            let confirmed = try ProvisionalAnswer(for: list, value: ["mine", "confirmed"])
            let earlyAnswer = try await transport.optimisticUpdate(
                [provisional],
                write: { () async throws -> Data in
                    // The GET gets the origin's answer while the update is pending.
                    await origin.openGate()
                    let (data, _) = try await early.value
                    let (shown, _, outcome) = try await transport.response(for: list)
                    #expect(shown == provisional.data)
                    #expect(outcome.source == .memory(.fresh))
                    return data
                },
                confirmed: { _ in [confirmed] })

            // Its caller got the origin's answer; the store did not take it.
            #expect(earlyAnswer.text == Self.originList(version: 0))
            let (shown, _, outcome) = try await transport.response(for: list)
            #expect(shown == confirmed.data)
            #expect(outcome.source == .memory(.fresh))
            #expect(await origin.hits(Self.listPath) == 1)
        }
    }

    @Test("a GET that began before the update and ends after it settled does not overwrite what it settled on")
    func earlierGetEndsAfterUpdate() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            await origin.closeGate()
            let early = Task { try await transport.data(for: request(listURL, headers: ["X-Origin-Query": "gate=1"])) }
            await origin.waitForHits(Self.listPath, count: 1)
            #expect(await origin.hits(Self.listPath) == 1)

            let provisional = try ProvisionalAnswer(for: list, value: ["mine"])
            let confirmed = try ProvisionalAnswer(for: list, value: ["mine", "confirmed"])
            let created = try await transport.optimisticUpdate(
                [provisional],
                write: { try await Self.post("mine", to: origin.url("/articles"), on: transport) },
                confirmed: { _ in [confirmed] })
            #expect(created.text == "mine")
            #expect(try await transport.data(for: list).0 == confirmed.data)

            await origin.openGate()
            let (earlyData, _) = try await early.value
            #expect(earlyData.text == Self.originList(version: 1))
            let (shown, _, outcome) = try await transport.response(for: list)
            #expect(shown == confirmed.data)
            #expect(outcome.source == .memory(.fresh))
            #expect(await origin.hits(Self.listPath) == 1)
        }
    }

    @Test("an entry invalidated while the update is pending is not brought back by its rollback")
    func invalidationDuringUpdate() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            let markerURL = origin.url("/marker")
            // Stored, so that its invalidation is announced: the end of what the test collects.
            try transport.store(ProvisionalAnswer(for: URLRequest(url: markerURL), data: Data("marker".utf8)))
            var changes = transport.changes().makeAsyncIterator()
            _ = try await transport.data(for: list)
            let provisional = try ProvisionalAnswer(for: list, value: [Self.originList(version: 0), "draft"])

            await origin.closeGate()
            let update = Task {
                try await transport.optimisticUpdate([provisional]) {
                    try await Self.post("draft", to: origin.url("/articles?gate=1&status=500"), on: transport)
                }
            }
            await origin.waitForHits("/articles?gate=1&status=500", count: 1)
            #expect(await origin.hits("/articles?gate=1&status=500") == 1)
            #expect(try await transport.data(for: list).0 == provisional.data)
            // Another screen drops the list while the POST is held.
            transport.invalidate(list)
            #expect(transport.statistics.entries == 1)  // the marker

            await origin.openGate()
            let failure = await thrownError { try await update.value }
            #expect(failure as? RefusedWrite == RefusedWrite(status: 500))
            #expect(transport.statistics.entries == 1)  // the marker
            transport.invalidate(URLRequest(url: markerURL))
            let announced = await Self.changes(&changes, until: .invalidated(urls: [markerURL], endpoint: nil))
            #expect(
                announced == [.updated(listURL), .updated(listURL), .invalidated(urls: [listURL], endpoint: nil)])

            // The next GET goes to the origin.
            let (data, _, outcome) = try await transport.response(for: list)
            #expect(outcome.source == .network(.invalidated))
            #expect(data.text == Self.originList(version: 1))
            #expect(await origin.hits(Self.listPath) == 2)
        }
    }

    // MARK: - Bad input

    @Test("an update of a key that held nothing rolls back to nothing, announced as an invalidation")
    func rollbackToNothing() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            let markerURL = origin.url("/marker")
            // Stored, so that its invalidation is announced: the end of what the test collects.
            try transport.store(ProvisionalAnswer(for: URLRequest(url: markerURL), data: Data("marker".utf8)))
            var changes = transport.changes().makeAsyncIterator()
            let provisional = try ProvisionalAnswer(for: list, value: ["draft"])

            let failure = await thrownError {
                try await transport.optimisticUpdate([provisional]) {
                    let (shown, _, outcome) = try await transport.response(for: list)
                    #expect(shown == provisional.data)
                    #expect(outcome.source == .memory(.fresh))
                    return try await Self.post("draft", to: origin.url("/articles?status=500"), on: transport)
                }
            }
            #expect(failure as? RefusedWrite == RefusedWrite(status: 500))
            #expect(transport.statistics.entries == 1)  // the marker
            transport.invalidate(URLRequest(url: markerURL))
            let announced = await Self.changes(&changes, until: .invalidated(urls: [markerURL], endpoint: nil))
            #expect(announced == [.updated(listURL), .invalidated(urls: [listURL], endpoint: nil)])

            #expect(await origin.hits(Self.listPath) == 0)
            let (data, _, outcome) = try await transport.response(for: list)
            #expect(!outcome.isFromMemory)
            #expect(data.text == Self.originList(version: 1))
            #expect(await origin.hits(Self.listPath) == 1)
        }
    }

    @Test("an empty provisional body is an answer like any other: stored, served from memory")
    func emptyProvisionalBody() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            let empty = ProvisionalAnswer(for: list, data: Data())

            await origin.closeGate()
            let update = Task {
                try await transport.optimisticUpdate([empty]) {
                    try await Self.post("", to: origin.url("/articles?gate=1"), on: transport)
                }
            }
            await origin.waitForHits("/articles?gate=1", count: 1)
            #expect(await origin.hits("/articles?gate=1") == 1)
            let (shown, response, outcome) = try await transport.response(for: list)
            #expect(shown.isEmpty)
            #expect(response.statusCode == 200)
            #expect(outcome.source == .memory(.fresh))
            #expect(await origin.hits(Self.listPath) == 0)

            await origin.openGate()
            #expect(try await update.value.isEmpty)
            #expect(try await transport.data(for: list).0.text == Self.originList(version: 1))
            #expect(await origin.hits(Self.listPath) == 1)

            // Stored directly, too.
            let other = URLRequest(url: origin.url("/drafts"))
            try transport.store(ProvisionalAnswer(for: other, data: Data()))
            let (stored, _, storedOutcome) = try await transport.response(for: other)
            #expect(stored.isEmpty)
            #expect(storedOutcome.source == .memory(.fresh))
            #expect(await origin.hits(path: "/drafts") == 0)
        }
    }

    @Test("a provisional answer too large for the store is refused: the write never runs, nothing changes")
    func tooLargeProvisionalAnswer() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            // Entries of at most 1,000 bytes.
            configuration.storage.memoryCapacity = 10_000
            let transport = CachedTransport(configuration: configuration)
            let listURL = origin.url(Self.listPath)
            let list = URLRequest(url: listURL)
            var changes = transport.changes(for: .url(listURL)).makeAsyncIterator()
            let (before, _) = try await transport.data(for: list)

            let huge = try ProvisionalAnswer(for: list, value: Array(repeating: "article", count: 1_000))
            let small = try ProvisionalAnswer(for: URLRequest(url: origin.url("/drafts")), value: ["draft"])
            #expect(throws: LocalWriteError.tooLarge(listURL)) { try transport.store(huge) }
            await #expect(throws: LocalWriteError.tooLarge(listURL)) {
                try await transport.optimisticUpdate([small, huge]) {
                    Issue.record("the write must not run")
                    return try await Self.post("draft", to: origin.url("/articles"), on: transport)
                }
            }

            #expect(await origin.hits(path: "/articles") == 1)
            #expect(await origin.version(of: "/articles") == 0)
            #expect(transport.statistics.entries == 1)
            #expect(transport.statistics.stores == 1)
            let (after, _, outcome) = try await transport.response(for: list)
            #expect(after == before)
            #expect(outcome.source == .memory(.fresh))
            transport.invalidate(list)
            let announced = await Self.changes(&changes, until: .invalidated(urls: [listURL], endpoint: nil))
            #expect(announced == [.updated(listURL)])
        }
    }

    @Test("a POST request is no key to answer: refused as not cacheable, and the write never runs")
    func postRequestAsKey() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let listURL = origin.url(Self.listPath)
            let posting = request(listURL, method: "POST")

            #expect(throws: LocalWriteError.notCacheable(listURL)) {
                try transport.store(ProvisionalAnswer(for: posting, value: ["draft"]))
            }
            await #expect(throws: LocalWriteError.notCacheable(listURL)) {
                try await transport.optimisticUpdate([try ProvisionalAnswer(for: posting, value: ["draft"])]) {
                    Issue.record("the write must not run")
                    return try await Self.post("draft", to: origin.url("/articles"), on: transport)
                }
            }
            #expect(transport.statistics.entries == 0)
            #expect(await origin.totalHits == 0)
            // A GET of the URL goes to the origin.
            let (data, _, outcome) = try await transport.response(for: URLRequest(url: listURL))
            #expect(!outcome.isFromMemory)
            #expect(data.text == Self.originList(version: 0))
        }
    }

    // MARK: - Helpers

    /// A POST the origin answered with another status than 2xx.
    struct RefusedWrite: Error, Equatable {
        let status: Int
    }

    /// Posts `body` to `url` through `transport`, as an app's write does.
    /// - Throws: ``RefusedWrite`` when the origin's status is not 2xx.
    static func post(_ body: String, to url: URL, on transport: CachedTransport) async throws -> Data {
        var posting = request(url, method: "POST", headers: ["Content-Type": "text/plain"])
        posting.httpBody = Data(body.utf8)
        let (data, response) = try await transport.data(for: posting)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else { throw RefusedWrite(status: status) }
        return data
    }

    /// What `iterator` delivers before `marker`, once `marker` has arrived.
    static func changes(
        _ iterator: inout AsyncStream<CacheChange>.Iterator, until marker: CacheChange
    ) async -> [CacheChange] {
        var seen: [CacheChange] = []
        while let change = await iterator.next(), change != marker { seen.append(change) }
        return seen
    }

    /// The value of the header field `name` of `response`.
    static func field(_ name: String, of response: URLResponse) -> String? {
        (response as? HTTPURLResponse)?.value(forHTTPHeaderField: name)
    }
}

/// A list screen: keeps every list its stream yields, in order, until it is closed.
private final class Screen: Sendable {
    private let values: ShownValues
    private let watching: Task<Void, Never>

    init(_ stream: AsyncThrowingStream<[String], any Error>) {
        let values = ShownValues()
        self.values = values
        watching = Task {
            do {
                for try await value in stream { values.append(value) }
            } catch {
                values.fail(error)
            }
        }
    }

    /// Every list shown so far.
    var shown: [[String]] { values.all }

    /// Returns once at least `count` lists have been shown.
    func waitForShown(_ count: Int) async { await values.waitFor(count) }

    func close() { watching.cancel() }
}

private final class ShownValues: Sendable {
    private struct State {
        var shown: [[String]] = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    var all: [[String]] { state.withLock { $0.shown } }

    func append(_ value: [String]) {
        let ready = state.withLock { state in
            state.shown.append(value)
            let count = state.shown.count
            defer { state.waiters.removeAll { $0.count <= count } }
            return state.waiters.filter { $0.count <= count }.map(\.continuation)
        }
        for waiter in ready { waiter.resume() }
    }

    func waitFor(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                guard state.shown.count < count else { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    func fail(_ error: any Error) { Issue.record(error, "the list screen's stream failed") }
}

/// Reads a list: a JSON array of strings (what the app writes), or the origin's plain text, one
/// line of which is a list of one article.
private final class ArticleListDecoder: ResponseDecoding {
    struct Unsupported: Error {}

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        let list = (try? JSONDecoder().decode([String].self, from: data)) ?? [data.text]
        guard let value = list as? Value else { throw Unsupported() }
        return value
    }
}
