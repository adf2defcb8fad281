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
            configuration.conformsToHTTPCaching = true
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
