import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache

@Suite("Revalidation, stale-while-revalidate, bypass and Vary over TCP")
struct HTTPSemanticsEndToEndTests {
    @Test("a refresh of an unchanged entry sends If-None-Match, takes one 304 and answers 200 with the stored body")
    func refreshUnchanged() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/list?stable=1"
            let (stored, first) = try await transport.data(from: origin.url(path))
            let entityTag = try #require((first as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag"))
            // The header override rewrote no-cache and left the validators alone.
            #expect((first as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Original-Cache-Control") == "no-cache")
            #expect((first as? HTTPURLResponse)?.value(forHTTPHeaderField: "Last-Modified") != nil)
            var changes = transport.changes().makeAsyncIterator()

            let (data, response) = try await transport.refresh(URLRequest(url: origin.url(path)))

            #expect(await origin.lastRequestHeader("If-None-Match", for: path) == entityTag)
            #expect(data == stored)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(await origin.notModifiedAnswers(path) == 1)
            #expect(transport.statistics.notModified == 1)
            transport.invalidate(URLRequest(url: origin.url(path)))
            #expect(await changes.next() == .invalidated(urls: [origin.url(path)], endpoint: nil))
        }
    }

    @Test("a refresh of a changed entry gets the new body and one updated")
    func refreshChanged() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/list?stable=1"
            _ = try await transport.data(from: origin.url(path))
            var changes = transport.changes().makeAsyncIterator()
            await origin.bumpVersion(of: "/list")
            let (data, response) = try await transport.refresh(URLRequest(url: origin.url(path)))
            #expect(data.text.contains("version=1"))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(await changes.next() == .updated(origin.url(path)))
            #expect(await origin.notModifiedAnswers(path) == 0)
        }
    }

    @Test(
        "with Last-Modified only, a refresh sends If-Modified-Since: a 304 while unchanged, the new body after a change"
    )
    func lastModified() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/dated?stable=1&validators=last-modified"
            let (stored, first) = try await transport.data(from: origin.url(path))
            let lastModified = (first as? HTTPURLResponse)?.value(forHTTPHeaderField: "Last-Modified")
            #expect(lastModified != nil)
            let unchanged = try await transport.refresh(URLRequest(url: origin.url(path)))
            #expect(await origin.lastRequestHeader("If-Modified-Since", for: path) == lastModified)
            #expect(await origin.lastRequestHeader("If-None-Match", for: path) == nil)
            #expect(unchanged.0 == stored)
            #expect((unchanged.1 as? HTTPURLResponse)?.statusCode == 200)
            #expect(await origin.notModifiedAnswers(path) == 1)

            await origin.bumpVersion(of: "/dated")
            let changed = try await transport.refresh(URLRequest(url: origin.url(path)))
            #expect(changed.0.text.contains("version=1"))
            #expect(await origin.notModifiedAnswers(path) == 1)
        }
    }

    @Test("an expired entry revalidates with a 304, and its age restarts")
    func expiredEntryRevalidates() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .seconds(2)
            configuration.clock = clock.cacheClock
            let transport = CachedTransport(configuration: configuration)
            let path = "/aging?stable=1"
            let (stored, _) = try await transport.data(from: origin.url(path))
            clock.advance(by: .seconds(3))
            let (data, response) = try await transport.data(from: origin.url(path))
            #expect(data == stored)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(await origin.notModifiedAnswers(path) == 1)
            #expect(await origin.hits(path) == 2)
            // Fresh again: answered from memory.
            #expect(try await transport.data(from: origin.url(path)).0 == stored)
            #expect(await origin.hits(path) == 2)
        }
    }

    @Test(
        "20 concurrent requests in the stale window return while the origin is held, cause one background fetch, then updated"
    )
    func staleWindow() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .seconds(60)
            configuration.freshness.staleWhileRevalidate = .seconds(60)
            configuration.clock = clock.cacheClock
            let transport = CachedTransport(configuration: configuration)
            let path = "/feed?stable=1"
            let (stored, _) = try await transport.data(from: origin.url(path))
            var changes = transport.changes().makeAsyncIterator()
            clock.advance(by: .seconds(61))

            // The same key, but the origin holds whatever reaches it until the gate opens.
            await origin.closeGate()
            let slow = request(origin.url(path), headers: ["X-Origin-Query": "gate=1"])
            let answers = try await withThrowingTaskGroup(of: (Data, URLResponse).self) { group in
                for _ in 0..<20 { group.addTask { try await transport.data(for: slow) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 20)
            #expect(answers.allSatisfy { $0.0 == stored && $0.1.isRevalidatingAnswer })
            await origin.waitForHits(path, count: 2)
            #expect(transport.statistics.backgroundRevalidations == 1)

            await origin.bumpVersion(of: "/feed")
            await origin.openGate()
            #expect(await changes.next() == .updated(origin.url(path)))
            let (fresh, response) = try await transport.data(from: origin.url(path))
            #expect(fresh.text.contains("version=1"))
            #expect(!response.isStaleAnswer)
            #expect(await origin.hits(path) == 2)
        }
    }

    @Test("past the stale window a request waits for the new body")
    func pastTheWindow() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            var configuration = CachedTransport.Configuration()
            configuration.freshness.maximumAge = .seconds(60)
            configuration.freshness.staleWhileRevalidate = .seconds(60)
            configuration.clock = clock.cacheClock
            let transport = CachedTransport(configuration: configuration)
            let path = "/feed?stable=1"
            _ = try await transport.data(from: origin.url(path))
            clock.advance(by: .seconds(121))
            await origin.closeGate()
            let waiting = Task {
                try await transport.data(for: request(origin.url(path), headers: ["X-Origin-Query": "gate=1"]))
            }
            await origin.waitForHits(path, count: 2)
            await origin.bumpVersion(of: "/feed")
            await origin.openGate()
            let (data, response) = try await waiting.value
            #expect(data.text.contains("version=1"))
            #expect(!response.isStaleAnswer)
            #expect(transport.statistics.staleWindowAnswers == 0)
        }
    }

    @Test("a caller's own If-None-Match gets the origin's 304 and stores nothing")
    func callersOwnCondition() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/own?stable=1"
            let (stored, first) = try await transport.data(from: origin.url(path))
            let entityTag = try #require((first as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag"))
            let (data, response) = try await transport.data(
                for: request(origin.url(path), headers: ["If-None-Match": entityTag]))
            #expect((response as? HTTPURLResponse)?.statusCode == 304)
            #expect(data.isEmpty)
            #expect(await origin.hits(path) == 2)
            #expect(transport.statistics.entries == 1)
            #expect(try await transport.data(from: origin.url(path)).0 == stored)
            #expect(await origin.hits(path) == 2)
        }
    }

    @Test("a Range request gets its 206, and a later plain GET gets the whole body from the origin")
    func rangeThenPlain() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/blob?size=1000"
            let (part, partial) = try await transport.data(
                for: request(origin.url(path), headers: ["Range": "bytes=0-9"]))
            #expect((partial as? HTTPURLResponse)?.statusCode == 206)
            #expect(part.count == 10)
            let (whole, response) = try await transport.data(from: origin.url(path))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(whole.count == 1_000)
            #expect(await origin.hits(path) == 2)
        }
    }

    @Test("three Vary variants alternated 30 times cost three origin fetches")
    func varyVariants() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/greeting?vary=X-Flavor"
            let flavors = ["plain", "salted", "sweet"]
            var bodies: [String: Data] = [:]
            for round in 0..<30 {
                let flavor = flavors[round % 3]
                let (data, _) = try await transport.data(for: request(origin.url(path), headers: ["X-Flavor": flavor]))
                if let earlier = bodies[flavor] { #expect(data == earlier) }
                bodies[flavor] = data
            }
            #expect(Set(bodies.values).count == 3)
            #expect(await origin.hits(path) == 3)
        }
    }

    @Test("usesConditionalRequests = false sends no conditions")
    func conditionsSwitchedOff() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.usesConditionalRequests = false
            let transport = CachedTransport(configuration: configuration)
            let path = "/list?stable=1"
            _ = try await transport.data(from: origin.url(path))
            let (data, _) = try await transport.refresh(URLRequest(url: origin.url(path)))
            #expect(!data.isEmpty)
            #expect(await origin.lastRequestHeader("If-None-Match", for: path) == nil)
            #expect(await origin.lastRequestHeader("If-Modified-Since", for: path) == nil)
            #expect(await origin.notModifiedAnswers(path) == 0)
        }
    }

    @Test("a 304 racing an invalidation never yields an empty body")
    func notModifiedRacingInvalidation() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/race?stable=1"
            let (stored, _) = try await transport.data(from: origin.url(path))
            await origin.closeGate()
            let refresh = Task {
                try await transport.refresh(request(origin.url(path), headers: ["X-Origin-Query": "gate=1"]))
            }
            await origin.waitForHits(path, count: 2)
            transport.invalidate(URLRequest(url: origin.url(path)))
            await origin.openGate()
            let (data, response) = try await refresh.value
            #expect(data == stored)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(await origin.notModifiedAnswers(path) == 1)
            #expect(await origin.hits(path) == 3)
            #expect(await origin.lastRequestHeader("If-None-Match", for: path) == nil)
        }
    }
}
