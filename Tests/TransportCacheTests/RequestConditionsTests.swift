import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("A request's own conditions and range, following HTTP caching")
struct RequestConditionsTests {
    let url = "https://api.example.com/doc"

    func setUp(
        httpCaching: Bool = true,
        headers: @escaping @Sendable () -> [String: String] = {
            ["Cache-Control": "max-age=600", "ETag": "\"v1\""]
        }
    ) -> (CachedTransport, ScriptedOrigin, TestClock) {
        let loader = ScriptedOrigin { request, call in
            ScriptedOrigin.Reply(status: 200, headers: headers(), body: Data("0123456789".utf8))
        }
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) {
            $0.freshness.conformsToHTTPCaching = httpCaching
            $0.network.cacheOverride = nil
        }
        return (transport, loader, clock)
    }

    func status(_ response: URLResponse) -> Int? { (response as? HTTPURLResponse)?.statusCode }
    func field(_ name: String, _ response: URLResponse) -> String? {
        (response as? HTTPURLResponse)?.value(forHTTPHeaderField: name)
    }

    @Test(
        "If-None-Match matching a fresh entry by weak comparison answers 304 with its ETag, without the network",
        arguments: ["\"v1\"", "W/\"v1\"", "\"x\", \"v1\"", "*", " \"v1\" "])
    func noneMatchAnswers304(condition: String) async throws {
        let (transport, loader, _) = setUp()
        _ = try await transport.data(for: request(url))
        let (data, response) = try await transport.data(for: request(url, headers: ["If-None-Match": condition]))
        #expect(status(response) == 304)
        #expect(data.isEmpty)
        #expect(field("ETag", response) == "\"v1\"")
        #expect(field("Cache-Control", response) == "max-age=600")
        #expect(field("Age", response) == "0")
        #expect(loader.callCount == 1)
        #expect(response.cacheOutcome?.source == .memory(.fresh))
    }

    @Test(
        "If-None-Match that does not match, or cannot be read, answers the stored 200 without the network",
        arguments: ["\"v2\"", "v1", "w/\"v1\"", "W\\\"v1\"", ""])
    func noneMatchMismatchAnswersStored(condition: String) async throws {
        let (transport, loader, _) = setUp()
        _ = try await transport.data(for: request(url))
        let (data, response) = try await transport.data(for: request(url, headers: ["If-None-Match": condition]))
        #expect(status(response) == 200)
        #expect(data.text == "0123456789")
        #expect(loader.callCount == 1)
    }

    @Test("a weak stored ETag matches If-None-Match, which compares weakly")
    func weakStoredTag() async throws {
        let (transport, loader, _) = setUp { ["Cache-Control": "max-age=600", "ETag": "W/\"v1\""] }
        _ = try await transport.data(for: request(url))
        let (_, response) = try await transport.data(for: request(url, headers: ["If-None-Match": "\"v1\""]))
        #expect(status(response) == 304)
        #expect(loader.callCount == 1)
    }

    @Test("If-Modified-Since answers 304 when the stored Last-Modified is not later, 200 when it is")
    func modifiedSince() async throws {
        let lastModified = httpDate(-3000)
        let (transport, loader, _) = setUp { ["Cache-Control": "max-age=600", "Last-Modified": lastModified] }
        _ = try await transport.data(for: request(url))
        let same = try await transport.data(for: request(url, headers: ["If-Modified-Since": lastModified]))
        #expect(status(same.1) == 304)
        let later = try await transport.data(for: request(url, headers: ["If-Modified-Since": httpDate(-2000)]))
        #expect(status(later.1) == 304)
        let earlier = try await transport.data(for: request(url, headers: ["If-Modified-Since": httpDate(-4000)]))
        #expect(status(earlier.1) == 200)
        #expect(earlier.0.text == "0123456789")
        let unreadable = try await transport.data(for: request(url, headers: ["If-Modified-Since": "yesterday"]))
        #expect(status(unreadable.1) == 200)
        #expect(loader.callCount == 1)
    }

    @Test("without Last-Modified, If-Modified-Since is judged against the stored Date")
    func modifiedSinceAgainstDate() async throws {
        let date = httpDate(-10)
        let (transport, _, _) = setUp { ["Cache-Control": "max-age=600", "Date": date] }
        _ = try await transport.data(for: request(url))
        let (_, response) = try await transport.data(for: request(url, headers: ["If-Modified-Since": httpDate(-5)]))
        #expect(status(response) == 304)
    }

    @Test("If-None-Match takes precedence over If-Modified-Since")
    func noneMatchPrecedence() async throws {
        let (transport, _, _) = setUp {
            ["Cache-Control": "max-age=600", "ETag": "\"v1\"", "Last-Modified": httpDate(-5000)]
        }
        _ = try await transport.data(for: request(url))
        let matching = try await transport.data(
            for: request(url, headers: ["If-None-Match": "\"v1\"", "If-Modified-Since": httpDate(-10000)]))
        #expect(status(matching.1) == 304)
        let other = try await transport.data(
            for: request(url, headers: ["If-None-Match": "\"v2\"", "If-Modified-Since": httpDate()]))
        #expect(status(other.1) == 200)
    }

    @Test("a stale entry leaves the request's conditions to the origin, sent as they are")
    func staleEntryGoesToOrigin() async throws {
        let (transport, loader, clock) = setUp()
        _ = try await transport.data(for: request(url))
        clock.advance(by: .seconds(601))
        _ = try await transport.data(for: request(url, headers: ["If-None-Match": "\"v1\""]))
        #expect(loader.callCount == 2)
        #expect(loader.calls[1].value(forHTTPHeaderField: "If-None-Match") == "\"v1\"")
    }

    @Test(
        "If-Match, If-Unmodified-Since and a request's no-cache go to the origin",
        arguments: [
            ["If-Match": "\"v1\""], ["If-Unmodified-Since": httpDate()],
            ["If-None-Match": "\"v1\"", "Cache-Control": "no-cache"],
        ])
    func originOnlyConditions(headers: [String: String]) async throws {
        let (transport, loader, _) = setUp()
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url, headers: headers))
        #expect(loader.callCount == 2)
    }

    @Test("a condition is never judged against another identity's entry")
    func otherIdentity() async throws {
        let (transport, loader, _) = setUp()
        _ = try await transport.data(for: request(url, headers: ["Authorization": "Bearer alice"]))
        let (_, response) = try await transport.data(
            for: request(url, headers: ["Authorization": "Bearer bob", "If-None-Match": "\"v1\""]))
        #expect(loader.callCount == 2)
        #expect(loader.calls[1].value(forHTTPHeaderField: "Authorization") == "Bearer bob")
        #expect(response.cacheOutcome?.source == .passedThrough(.requestConditions))
    }

    @Test("by default a request's own conditions bypass the store")
    func defaultModeBypasses() async throws {
        let (transport, loader, _) = setUp(httpCaching: false)
        _ = try await transport.data(for: request(url))
        _ = try await transport.data(for: request(url, headers: ["If-None-Match": "\"v1\""]))
        _ = try await transport.data(for: request(url, headers: ["Range": "bytes=0-1"]))
        #expect(loader.callCount == 3)
    }

    @Test(
        "a single Range is answered 206 from a complete fresh entry",
        arguments: [
            ("bytes=0-1", "01", "bytes 0-1/10"), ("bytes=1-", "123456789", "bytes 1-9/10"),
            ("bytes=-1", "9", "bytes 9-9/10"), ("bytes=8-100", "89", "bytes 8-9/10"),
            ("bytes=-20", "0123456789", "bytes 0-9/10"),
        ])
    func rangeAnswered(range: String, body: String, contentRange: String) async throws {
        let (transport, loader, _) = setUp()
        _ = try await transport.data(for: request(url))
        let (data, response) = try await transport.data(for: request(url, headers: ["Range": range]))
        #expect(status(response) == 206)
        #expect(data.text == body)
        #expect(field("Content-Range", response) == contentRange)
        #expect(field("Content-Length", response) == String(body.utf8.count))
        #expect(loader.callCount == 1)
    }

    @Test("a range past the end answers 416 with the length")
    func rangeUnsatisfiable() async throws {
        let (transport, loader, _) = setUp()
        _ = try await transport.data(for: request(url))
        let (data, response) = try await transport.data(for: request(url, headers: ["Range": "bytes=10-"]))
        #expect(status(response) == 416)
        #expect(data.isEmpty)
        #expect(field("Content-Range", response) == "bytes */10")
        #expect(loader.callCount == 1)
    }

    @Test(
        "several ranges, another unit or an unreadable Range answer the whole stored body",
        arguments: ["bytes=0-1,3-4", "items=0-1", "bytes=5-2", "bytes=a-b", "bytes=-", "bytes=0-1, -"])
    func rangeIgnored(range: String) async throws {
        let (transport, loader, _) = setUp()
        _ = try await transport.data(for: request(url))
        let (data, response) = try await transport.data(for: request(url, headers: ["Range": range]))
        #expect(status(response) == 200)
        #expect(data.text == "0123456789")
        #expect(loader.callCount == 1)
    }

    @Test("If-Range applies the range only for a strongly matching ETag")
    func ifRange() async throws {
        let (transport, _, _) = setUp()
        _ = try await transport.data(for: request(url))
        let matching = try await transport.data(
            for: request(url, headers: ["Range": "bytes=0-1", "If-Range": "\"v1\""]))
        #expect(status(matching.1) == 206)
        let other = try await transport.data(for: request(url, headers: ["Range": "bytes=0-1", "If-Range": "\"v2\""]))
        #expect(status(other.1) == 200)
        let weak = try await transport.data(for: request(url, headers: ["Range": "bytes=0-1", "If-Range": "W/\"v1\""]))
        #expect(status(weak.1) == 200)
    }

    @Test("a range over a body the loader may have decoded (Content-Encoding) answers the whole stored body")
    func encodedBodyRange() async throws {
        let (transport, loader, _) = setUp { ["Cache-Control": "max-age=600", "Content-Encoding": "gzip"] }
        _ = try await transport.data(for: request(url))
        let (_, response) = try await transport.data(for: request(url, headers: ["Range": "bytes=0-1"]))
        #expect(status(response) == 200)
        #expect(loader.callCount == 1)
    }
}
