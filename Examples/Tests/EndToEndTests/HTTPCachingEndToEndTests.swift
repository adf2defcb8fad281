import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache

@Suite("Request directives and HTTP caching over TCP")
struct HTTPCachingEndToEndTests {
    @Test("a request's no-store reaches the origin and leaves the store alone; its no-cache revalidates with a 304")
    func requestDirectives() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let path = "/directives?stable=1"
            let (stored, _) = try await transport.data(from: origin.url(path))
            _ = try await transport.data(for: request(origin.url(path), headers: ["Cache-Control": "no-store"]))
            #expect(await origin.hits(path) == 2)
            #expect(await origin.lastRequestHeader("If-None-Match", for: path) == nil)
            let (data, response) = try await transport.data(
                for: request(origin.url(path), headers: ["Cache-Control": "no-cache"]))
            #expect(data == stored)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(await origin.notModifiedAnswers(path) == 1)
        }
    }

    @Test("following HTTP caching, the origin's no-cache is revalidated every time and max-age is honoured")
    func followsOriginHeaders() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.conformsToHTTPCaching = true
            let transport = CachedTransport(configuration: configuration)

            let noCache = "/http?stable=1"
            let (stored, _) = try await transport.data(from: origin.url(noCache))
            for _ in 0..<3 { #expect(try await transport.data(from: origin.url(noCache)).0 == stored) }
            #expect(await origin.hits(noCache) == 4)
            #expect(await origin.notModifiedAnswers(noCache) == 3)

            let fresh = "/http?stable=1&cc=max-age%3D600"
            _ = try await transport.data(from: origin.url(fresh))
            let (_, response) = try await transport.data(from: origin.url(fresh))
            #expect(await origin.hits(fresh) == 1)
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Age") != nil)
        }
    }
}

@Suite("A private cache's HTTP rules over TCP")
struct HTTPCachingRulesEndToEndTests {
    func transport(clock: ManualCacheClock? = nil, staleIfError: Bool = false) -> CachedTransport {
        var configuration = CachedTransport.Configuration()
        configuration.freshness.conformsToHTTPCaching = true
        configuration.freshness.staleIfError = staleIfError
        if let clock { configuration.clock = clock.cacheClock }
        return CachedTransport(configuration: configuration)
    }

    func status(_ response: URLResponse) -> Int? { (response as? HTTPURLResponse)?.statusCode }

    @Test("a request's own If-None-Match and If-Modified-Since are answered from a fresh entry, never another user's")
    func ownConditions() async throws {
        try await withOrigin { origin in
            let transport = transport()
            let path = "/own-conditions?stable=1&cc=max-age%3D600"
            let alice = ["Authorization": "Bearer alice"]
            let (stored, first) = try await transport.data(for: request(origin.url(path), headers: alice))
            let tag = try #require((first as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag"))
            let lastModified = try #require((first as? HTTPURLResponse)?.value(forHTTPHeaderField: "Last-Modified"))

            let (empty, notModified) = try await transport.data(
                for: request(origin.url(path), headers: alice.merging(["If-None-Match": tag]) { $1 }))
            #expect(status(notModified) == 304)
            #expect(empty.isEmpty)
            #expect((notModified as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag") == tag)
            let since = try await transport.data(
                for: request(origin.url(path), headers: alice.merging(["If-Modified-Since": lastModified]) { $1 }))
            #expect(status(since.1) == 304)
            let other = try await transport.data(
                for: request(origin.url(path), headers: alice.merging(["If-None-Match": "\"other\""]) { $1 }))
            #expect(status(other.1) == 200)
            #expect(other.0 == stored)
            #expect(await origin.hits(path) == 1)

            let bob = try await transport.data(
                for: request(origin.url(path), headers: ["Authorization": "Bearer bob", "If-None-Match": tag]))
            #expect(await origin.hits(path) == 2)
            #expect(bob.0.text.contains("auth=Bearer bob"))
        }
    }

    @Test("a single Range is answered 206 from a complete fresh entry; several ranges get the whole body")
    func ownRange() async throws {
        try await withOrigin { origin in
            let transport = transport()
            let path = "/own-range?stable=1&cc=max-age%3D600"
            let (whole, _) = try await transport.data(from: origin.url(path))
            let (part, partial) = try await transport.data(
                for: request(origin.url(path), headers: ["Range": "bytes=0-3"]))
            #expect(status(partial) == 206)
            #expect(part.text == "path")
            #expect(
                (partial as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Range") == "bytes 0-3/\(whole.count)")
            let several = try await transport.data(
                for: request(origin.url(path), headers: ["Range": "bytes=0-1,4-5"]))
            #expect(status(several.1) == 200)
            #expect(several.0 == whole)
            let past = try await transport.data(
                for: request(origin.url(path), headers: ["Range": "bytes=\(whole.count)-"]))
            #expect(status(past.1) == 416)
            #expect(await origin.hits(path) == 1)

            // By default a request's own Range goes to the origin as it is.
            let plain = CachedTransport()
            _ = try await plain.data(from: origin.url(path))
            let sent = try await plain.data(for: request(origin.url(path), headers: ["Range": "bytes=0-3"]))
            #expect(status(sent.1) == 206)
            #expect(await origin.hits(path) == 3)
        }
    }

    @Test("Cache-Control by its grammar, must-understand, and heuristic freshness for a 404")
    func headerRules() async throws {
        try await withOrigin { origin in
            let transport = transport()
            let spaced = "/rules?validators=etag&cc=max-age%20%3D600"
            let mustUnderstand = "/rules?cc=max-age%3D600%2C%20no-store%2C%20must-understand"
            let notFound = "/rules?status=404&cc=none&modifiedago=86400"
            for path in [spaced, mustUnderstand, notFound] {
                _ = try await transport.data(from: origin.url(path))
                _ = try await transport.data(from: origin.url(path))
            }
            #expect(await origin.hits(spaced) == 2)
            #expect(await origin.hits(mustUnderstand) == 1)
            #expect(await origin.hits(notFound) == 1)
        }
    }

    @Test("a response's own stale-if-error answers stale when the origin then fails with a 503 or a reset")
    func ownStaleIfError() async throws {
        try await withOrigin { origin in
            let clock = ManualCacheClock()
            let transport = transport(clock: clock)
            let path = "/sie?stable=1&cc=max-age%3D1%2C%20stale-if-error%3D60"
            let (stored, _) = try await transport.data(from: origin.url(path))
            clock.advance(by: .seconds(5))
            for fault in ["status=503&cc=none", "reset=1"] {
                let (data, response) = try await transport.data(
                    for: request(origin.url(path), headers: ["X-Origin-Query": fault]))
                #expect(data == stored)
                #expect(response.isStaleAnswer)
            }
            let revalidating = "/sie?stable=1&cc=max-age%3D1%2C%20must-revalidate"
            let strict = self.transport(clock: clock, staleIfError: true)
            _ = try await strict.data(from: origin.url(revalidating))
            clock.advance(by: .seconds(5))
            let (_, refused) = try await strict.data(
                for: request(origin.url(revalidating), headers: ["X-Origin-Query": "status=503&cc=none"]))
            #expect(status(refused) == 503)
        }
    }
}

@Suite("Selecting values over TCP")
struct VaryNormalisationEndToEndTests {
    @Test("Accept-Language in another order, case or spacing is answered by the same stored representation")
    func acceptLanguage() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.freshness.conformsToHTTPCaching = true
            let transport = CachedTransport(configuration: configuration)
            let path = "/languages?stable=1&vary=Accept-Language&cc=max-age%3D600"
            for language in ["en, de", "De,EN", " en ,  de "] {
                _ = try await transport.data(for: request(origin.url(path), headers: ["Accept-Language": language]))
            }
            #expect(await origin.hits(path) == 1)
            _ = try await transport.data(for: request(origin.url(path), headers: ["Accept-Language": "fr"]))
            #expect(await origin.hits(path) == 2)
        }
    }
}
