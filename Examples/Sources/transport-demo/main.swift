import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Observation
import TransportCache
import TransportCacheQueries

// The story of TransportCache in one run, against a real HTTP origin on 127.0.0.1 that answers
// slowly and marks every response `Cache-Control: no-cache`, side by side with the usual answer:
// URLSession with a memory-only URLCache and the returnCacheDataElseLoad policy.

let originDelay = 200  // milliseconds
let clock = ContinuousClock()

func seconds(_ duration: Duration) -> String {
    String(format: "%.2f s", Double(duration.components.attoseconds) / 1e18 + Double(duration.components.seconds))
}

func plainSession() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = URLCache(memoryCapacity: 32 * 1024 * 1024, diskCapacity: 0, diskPath: nil)
    configuration.requestCachePolicy = .returnCacheDataElseLoad
    return URLSession(configuration: configuration)
}

/// A request for `url` with `method` and `headers`.
func request(_ url: URL, method: String = "GET", headers: [String: String] = [:]) -> URLRequest {
    var request = URLRequest(url: url)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    return request
}

extension Data {
    /// The `version=N` part of an origin body.
    var version: String {
        String(decoding: self, as: UTF8.self).split(separator: " ").first { $0.hasPrefix("version=") }.map(String.init)
            ?? "?"
    }
}

/// Runs `count` copies of `body` at once and returns how long they took together.
func concurrently(_ count: Int, _ body: @escaping @Sendable () async throws -> Void) async throws -> Duration {
    try await clock.measure {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<count { group.addTask { try await body() } }
            try await group.waitForAll()
        }
    }
}

let origin = try await LoopbackOrigin.start()
let transport = CachedTransport()
let plain = plainSession()
print(
    """
    TransportCache demo
    origin: \(origin.baseURL) (answers after \(originDelay) ms, every response Cache-Control: no-cache)

    """)

// 1. Many screens, one moment.
let screens = 100
let cachedArticles = origin.url("/articles?delay=\(originDelay)&client=transport")
let plainArticles = origin.url("/articles?delay=\(originDelay)&client=urlsession")
let cachedTime = try await concurrently(screens) { _ = try await transport.data(from: cachedArticles) }
let plainTime = try await concurrently(screens) { _ = try await plain.data(from: plainArticles) }
let cachedHits = await origin.hits("/articles?delay=\(originDelay)&client=transport")
let plainHits = await origin.hits("/articles?delay=\(originDelay)&client=urlsession")
print(
    """
    1. \(screens) screens ask for /articles at the same moment
       CachedTransport         \(String(format: "%4d", cachedHits)) origin hit(s)   \(seconds(cachedTime))
       URLSession + URLCache   \(String(format: "%4d", plainHits)) origin hit(s)   \(seconds(plainTime))

    """)

// 2. The no-cache header.
let profile = origin.url("/profile")
let plainProfile = origin.url("/profile?client=urlsession")
_ = try await transport.data(from: profile)
let hitTime = try await clock.measure {
    for _ in 0..<10_000 { _ = try await transport.data(from: profile) }
}
_ = try await plain.data(from: plainProfile)
_ = try await plain.data(from: plainProfile)
let (_, cachedResponse) = try await transport.data(from: profile)
let original = (cachedResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Original-Cache-Control") ?? "-"
print(
    """
    2. /profile (Cache-Control: no-cache) asked 10,001 times by CachedTransport, twice by URLSession
       CachedTransport         \(String(format: "%4d", await origin.hits("/profile"))) origin hit(s)   \
    a memory hit takes \(String(format: "%.2f", Double(hitTime.components.attoseconds) / 1e12 / 10_000 + Double(hitTime.components.seconds) * 1e6 / 10_000)) µs in this debug build \
    (original header kept: X-Original-Cache-Control: \(original))
       URLSession + URLCache   \(String(format: "%4d", await origin.hits("/profile?client=urlsession"))) origin hit(s)   \
    (no-cache keeps it out of the cache; on Linux URLSession never stores at all)

    """)

// 3. Pull to refresh: screen A refreshes, screen B hears it.
let feed = origin.url("/feed")
let screenB = try await transport.data(from: feed).0
let plainFeed = origin.url("/feed?client=urlsession")
let plainScreenB = try await plain.data(from: plainFeed).0
let feedChanges = transport.changes(for: .url(feed))
let heard = Task {
    for await change in feedChanges {
        if case .updated = change { return try await transport.data(from: feed).0 }
    }
    return Data()
}
// The server's data changes (another device posted), then screen A pulls to refresh.
_ = try await URLSession.shared.data(
    for: {
        var post = URLRequest(url: origin.url("/feed"))
        post.httpMethod = "POST"
        return post
    }())
_ = try await transport.refresh(URLRequest(url: feed))
let screenBNow = try await heard.value
print(
    """
    3. Pull to refresh on screen A, after the data changed on the server
       CachedTransport         screen B showed \(screenB.version), heard .updated and reloaded from memory: \(screenBNow.version)
       URLSession + URLCache   nothing tells screen B; it keeps what it loaded: \(plainScreenB.version)

    """)

// 4. Why: every answer says where it came from and why (`response(for:)`, or `response.cacheOutcome`).
let comments = origin.url("/comments")
let steps = [
    ("GET /comments", request(comments)),
    ("GET /comments again", request(comments)),
    ("GET /comments, Cache-Control: no-cache", request(comments, headers: ["Cache-Control": "no-cache"])),
    ("POST /comments", request(comments, method: "POST")),
    ("GET /comments after the POST", request(comments)),
    ("GET /feed after its refresh", request(feed)),
]
print("4. Why each answer came from memory or the network")
for (label, request) in steps {
    let (_, _, outcome) = try await transport.response(for: request)
    print("   \(label.padding(toLength: 40, withPad: " ", startingAt: 0))\(outcome)")
}
print()

// 5. An optimistic update: screen A posts an article, screen B shows it before the origin answers.
let news = origin.url("/news?stable=1")
let newsList = try await transport.data(from: news).0
let newsChanges = transport.changes(for: .url(news))
let postedAt = clock.now
let screenBShows = Task {
    var shown: [(at: Duration, list: Data)] = []
    for await change in newsChanges {
        guard case .updated = change else { continue }
        shown.append((clock.now - postedAt, try await transport.data(from: news).0))
        if shown.count == 2 { break }
    }
    return shown
}
let title = "Caching at the edge"
let postArticle = {
    var post = request(origin.url("/news?delay=300"), method: "POST")
    post.httpBody = Data(title.utf8)
    return post
}()
let postAnswered = try await transport.optimisticUpdate(
    [ProvisionalAnswer(for: URLRequest(url: news), data: newsList + Data("\n+ \(title)".utf8))],
    write: {
        _ = try await transport.data(for: postArticle)
        return clock.now - postedAt
    })
let shown = try await screenBShows.value
func onScreen(_ list: Data) -> String {
    String(decoding: list, as: UTF8.self).contains(title)
        ? "\(list.version) + \"\(title)\", provisional" : "\(list.version), the origin's list"
}
print(
    """
    5. Screen A posts an article, which the origin answers after 300 ms; screen B watches the list
       CachedTransport         screen B showed \(newsList.version); screen A posts at 0.00 s
                               \(seconds(shown[0].at))  screen B shows \(onScreen(shown[0].list))
                               \(seconds(postAnswered))  the POST is answered; the list is refetched
                               \(seconds(shown[1].at))  screen B shows \(onScreen(shown[1].list))

    """)

// 6. The app's credentials: the token expires while twenty screens load, then the user signs out.
let tokens = OriginTokens(tokenURL: origin.url("/token"))
let credentials = Credentials(
    tokens, credential: OriginAccount(name: "ada", token: await origin.currentToken), partition: { $0.name })
var accountConfiguration = CachedTransport.Configuration()
accountConfiguration.identity.authenticate(with: credentials)
let accountTransport = CachedTransport(configuration: accountConfiguration)
tokens.use(accountTransport)
let inbox = origin.url("/inbox?token=1&stable=1")
_ = try await accountTransport.data(from: inbox)
await origin.expireToken()
let requestsBefore = await origin.totalHits
let screensLoaded = try await concurrently(20) { @Sendable in
    _ = try await accountTransport.data(from: origin.url("/screen/\(Int.random(in: 0..<1_000_000))?token=1"))
}
let inboxAgain = try await accountTransport.response(for: URLRequest(url: inbox)).2
let screenRequests = await origin.totalHits - requestsBefore
// The user signs out while a request of theirs is still on its way; the next user signs in.
await origin.closeGate()
let late = Task { try await accountTransport.data(from: origin.url("/inbox?token=1&gate=1")) }
await origin.waitForHits("/inbox?token=1&gate=1", count: 1)
credentials.credential = OriginAccount(name: "grace", token: await origin.currentToken)
accountTransport.signOut(partition: "ada")
await origin.openGate()
let lateOutcome: String
do {
    _ = try await late.value
    lateOutcome = "answered"
} catch {
    lateOutcome = "\(error)"
}
let adasEntriesLeft = accountTransport.snapshot().entries.count
let gracesInbox = try await accountTransport.response(for: URLRequest(url: inbox))
print(
    """
    6. Twenty screens load while the token has expired; then ada signs out with a request in flight
       CachedTransport         \(tokens.refreshes) refresh, 20 answers in \(seconds(screensLoaded)) \
    (\(screenRequests) origin requests, the refresh's included); ada's inbox after the new token: \(inboxAgain)
                               ada's request in flight: \(lateOutcome)
                               grace's inbox: \(gracesInbox.2), \
    \(String(decoding: gracesInbox.0, as: UTF8.self).contains("path=/inbox") ? "her own" : "?"); \
    ada's entries left: \(adasEntriesLeft)

    """)

// 7. Two screens' queries on one URL (TransportCacheQueries): screen B's query starts from memory
// in its initialiser, and screen A's pull-to-refresh updates it.
/// Decodes a body as its text.
final class BodyText: ResponseDecoding {
    struct NotText: Error {}

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        guard let text = String(decoding: data, as: UTF8.self) as? Value else { throw NotText() }
        return text
    }
}
let board = URLRequest(url: origin.url("/board?stable=1&cc=max-age=60"))
let bodyText = BodyText()  // one decoder for both queries, so they share decoded values
let screenAQuery = CachedQuery(String.self, for: board, in: transport, decoder: bodyText)
let screenAFirst = screenAQuery.status
await screenAQuery.waitForFetches()
let screenALoaded = screenAQuery.value.map { Data($0.utf8).version } ?? "nothing"
let screenBQuery = CachedQuery(String.self, for: board, in: transport, decoder: bodyText)
let screenBFirst = (screenBQuery.status, screenBQuery.value.map { Data($0.utf8).version } ?? "nothing")
let (screenBChanges, screenBChanged) = AsyncStream<Void>.makeStream()
withObservationTracking {
    _ = screenBQuery.value
} onChange: {
    screenBChanged.yield()
    screenBChanged.finish()
}
_ = await origin.bumpVersion(of: "/board")
let refreshedAt = clock.now
await screenAQuery.refresh()
for await _ in screenBChanges { break }
let screenBHeard = clock.now - refreshedAt
print(
    """
    7. Two queries on one URL: screen A's query, then screen B's, then screen A pulls to refresh
       screen A's query        first frame: \(screenAFirst); loaded \(screenALoaded) after its fetch
       screen B's query        first frame: \(screenBFirst.0), \(screenBFirst.1), from memory in its initialiser
       after A's refresh       screen B shows \(screenBQuery.value.map { Data($0.utf8).version } ?? "nothing") \(seconds(screenBHeard)) after the refresh began, decoded once for both

    """)

// 8. A list prefetches its 100 rows' details from a slow origin, then the user taps a row that is
// not among them. With the queue (the default), prefetches take at most one place less than the
// host's limit, so the screen's request starts at once; without it, every prefetch is handed to
// URLSession at once, which keeps its own limit per host (httpMaximumConnectionsPerHost) and
// sends in the order given: the screen's request waits behind the prefetches.
/// Prefetches 100 items through `transport`, times a screen's request made right after them, and
/// waits until every prefetch has ended.
func screenBehindPrefetches(
    _ transport: CachedTransport, client: String
) async throws -> (screen: Duration, prefetches: Duration, mostHeld: Int) {
    await origin.resetMaximumConcurrentRequests()
    let started = clock.now
    let prefetches = try (0..<100).map { item in
        try transport.prefetch(URLRequest(url: origin.url("/item/\(item)?delay=\(originDelay)&client=\(client)")))
    }
    let screen = try await clock.measure {
        _ = try await transport.data(from: origin.url("/detail?delay=\(originDelay)&client=\(client)"))
    }
    for prefetch in prefetches { _ = await prefetch.outcome }
    return (screen, clock.now - started, await origin.maximumConcurrentRequests)
}
let queued = try await screenBehindPrefetches(CachedTransport(), client: "queue")
var unqueuedConfiguration = CachedTransport.Configuration()
unqueuedConfiguration.network.maximumFetchesPerHost = Int.max
let unqueued = try await screenBehindPrefetches(
    CachedTransport(configuration: unqueuedConfiguration), client: "no-queue")
print(
    """
    8. A screen's request while 100 prefetches are queued to the origin (each answer takes \(originDelay) ms)
       queue (the default)     screen answered in \(seconds(queued.screen)); 100 prefetches loaded in \
    \(seconds(queued.prefetches)); origin held at most \(queued.mostHeld) at once
       no queue (Int.max)      screen answered in \(seconds(unqueued.screen)); 100 prefetches loaded in \
    \(seconds(unqueued.prefetches)); origin held at most \(unqueued.mostHeld) at once

    """)

let statistics = transport.statistics
print(
    """
    CachedTransport statistics: \(statistics.requests) requests, \(statistics.memoryHits) memory hits, \
    \(statistics.networkFetches) network fetches, \(statistics.coalescedJoins) coalesced joins, \(statistics.stores) stores
    """)
print(
    """

    What the transport holds now (transport.snapshot()):
    \(transport.snapshot())
    """)
plain.invalidateAndCancel()
await origin.stop()
