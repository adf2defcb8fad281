import Foundation
import TransportCache
import TransportCacheQueries
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Article: Codable, Equatable, Sendable {
    var title: String
}

let articlesURL = URL(string: "https://api.example.com/articles")!

func articlesJSON(_ titles: String...) -> Data {
    try! JSONEncoder().encode(titles.map(Article.init(title:)))
}

func articles(_ titles: String...) -> [Article] {
    titles.map(Article.init(title:))
}

/// What a test compares of a query: everything it shows, the error and the outcome by name.
struct Shown: Equatable, CustomStringConvertible {
    var status: QueryStatus
    var value: [Article]?
    var error: String?
    var isFetching: Bool
    var source: CacheOutcome.Source?

    init(
        _ status: QueryStatus, _ value: [Article]?, error: String? = nil, fetching: Bool = false,
        _ source: CacheOutcome.Source?
    ) {
        self.status = status
        self.value = value
        self.error = error
        isFetching = fetching
        self.source = source
    }

    var description: String {
        "\(status) \(value.map { $0.map(\.title) } ?? []) error: \(error ?? "-") fetching: \(isFetching) \(source.map { "\($0)" } ?? "-")"
    }
}

/// The name of an error as the tests compare it.
func errorName(_ error: (any Error)?) -> String? {
    switch error {
    case nil: nil
    case let error as URLError: "URLError \(error.code.rawValue)"
    case let error as ValueDecodingError: "ValueDecodingError \(error.code)"
    case let error?: "\(type(of: error))"
    }
}

@MainActor
func shown(_ query: CachedQuery<[Article]>) -> Shown {
    Shown(
        query.status, query.value, error: errorName(query.error), fetching: query.isFetching, query.outcome?.source)
}

@MainActor
func observe(_ query: CachedQuery<[Article]>) -> ObservedStates<Shown> {
    ObservedStates { shown(query) }
}

/// A transport in front of `origin`, on `clock`, with the rest of its configuration as `configure`
/// leaves it.
func makeTransport(
    _ origin: ScriptedOrigin, clock: ManualCacheClock = ManualCacheClock(),
    configure: (inout CachedTransport.Configuration) -> Void = { _ in }
) -> CachedTransport {
    var configuration = CachedTransport.Configuration()
    configuration.clock = clock.cacheClock
    configure(&configuration)
    return CachedTransport(configuration: configuration, origin: origin)
}

/// A `POST` of `articlesURL`: passed through, unless the transport names the URL a query endpoint.
let articlesPOST: URLRequest = {
    var request = URLRequest(url: articlesURL)
    request.httpMethod = "POST"
    return request
}()

let fresh = ["Cache-Control": "max-age=60"]

/// A scripted origin answering `articlesURL` with the articles "one", fresh for a minute, and a
/// transport in front of it whose memory holds that answer already.
func transportHoldingOne() async throws -> (ScriptedOrigin, CachedTransport) {
    let origin = ScriptedOrigin()
    origin.respond(to: articlesURL, with: .init(headers: fresh, body: articlesJSON("one")))
    let transport = makeTransport(origin)
    _ = try await transport.data(from: articlesURL)
    return (origin, transport)
}
