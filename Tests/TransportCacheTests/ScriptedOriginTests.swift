import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TransportCache
import TransportCacheTesting

@Suite("Scripted origin")
struct ScriptedOriginTests {
    let url = URL(string: "https://api.example.com/feed")!

    @Test("scripted replies answer in order, the last one repeating; unscripted requests get 404")
    func script() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: url, with: .init(status: 503, text: "busy"), .init(text: "one"), .init(text: "two"))
        var answers: [String] = []
        for _ in 0..<4 {
            let (data, response) = try await origin.load(URLRequest(url: url))
            answers.append("\((response as? HTTPURLResponse)?.statusCode ?? 0) \(data.text)")
        }
        #expect(answers == ["503 busy", "200 one", "200 two", "200 two"])
        let (_, missing) = try await origin.load(URLRequest(url: url.appending(path: "other")))
        #expect((missing as? HTTPURLResponse)?.statusCode == 404)
        #expect(origin.callCount == 5)
        #expect(origin.callCount(for: url) == 4)
        #expect(origin.callCount(for: url, method: "POST") == 0)
    }

    @Test("a script is per method; a failure reply throws its error")
    func methodsAndFailures() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: url, method: "POST", with: .failure(.timedOut))
        origin.respond(to: url, with: .init(text: "get"))
        var post = URLRequest(url: url)
        post.httpMethod = "POST"
        await #expect(throws: URLError(.timedOut)) { try await origin.load(post) }
        #expect(try await origin.load(URLRequest(url: url)).0.text == "get")
    }

    @Test("a transport made with the origin coalesces held callers into one call and then answers from memory")
    func drivesATransport() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: url, with: .init(headers: ["Cache-Control": "no-cache"], text: "feed"))
        let transport = CachedTransport(origin: origin)
        let callers = (0..<10).map { _ in Task { try await transport.data(from: url) } }
        await origin.waitForCalls(1)
        origin.openGate()
        for caller in callers { #expect(try await caller.value.0.text == "feed") }
        let (_, response) = try await transport.data(from: url)
        #expect(response.cacheOutcome?.isFromMemory == true)
        #expect(origin.callCount == 1)
    }

    @Test("a call cancelled at the gate is counted and ends with URLError.cancelled")
    func cancelledAtTheGate() async throws {
        let origin = ScriptedOrigin(gated: true)
        let call = Task { try await origin.load(URLRequest(url: url)) }
        await origin.waitForCalls(1)
        call.cancel()
        await #expect(throws: URLError(.cancelled)) { try await call.value }
        #expect(origin.cancelledCalls == 1)
    }

    @Test("a call released before it arrives passes the closed gate when it does")
    func releasedEarly() async throws {
        let origin = ScriptedOrigin(gated: true)
        origin.respond(to: url, with: .init(text: "early"))
        origin.release(1)
        #expect(try await origin.load(URLRequest(url: url)).0.text == "early")
    }

    @Test("a reply's delay holds its answer for that long")
    func delay() async throws {
        let origin = ScriptedOrigin()
        origin.respond(to: url, with: .init(text: "late", delay: .milliseconds(50)))
        let elapsed = try await ContinuousClock().measure { _ = try await origin.load(URLRequest(url: url)) }
        #expect(elapsed >= .milliseconds(50))
    }
}
