import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

@Suite("CachedTransport against a real origin over TCP")
struct TransportEndToEndTests {
    @available(macOS 26.0, *)
    @Test("1,000 concurrent GETs reach the origin once")
    func thousandCoalesced() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/items?gate=1")
            let tasks = await startHeldCallers(1_000, of: "/items?gate=1", on: transport, origin: origin)
            await origin.openGate()
            var bodies = Set<Data>()
            for task in tasks { bodies.insert(try await task.value.0) }
            #expect(bodies.count == 1)
            #expect(await origin.hits("/items?gate=1") == 1)
            _ = try await transport.data(from: url)
            #expect(await origin.hits("/items?gate=1") == 1)
        }
    }

    @Test("transports made and dropped while 8 tasks each load through them: every body is right")
    func transportsMadeAndDropped() async throws {
        // Each transport's fetches go through its header-override protocol; making and dropping
        // transports under load is what once crashed inside corelibs.
        try await withOrigin { origin in
            for round in 0..<12 {
                let transport = CachedTransport()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for worker in 0..<8 {
                        group.addTask {
                            for index in 0..<20 {
                                let path = "/t?r=\(round)&w=\(worker)&i=\(index)"
                                let (data, response) = try await transport.data(from: origin.url(path))
                                #expect(data.text.contains("query=r=\(round)&w=\(worker)&i=\(index) "))
                                #expect(
                                    (response as? HTTPURLResponse)?.value(
                                        forHTTPHeaderField: "X-Original-Cache-Control") == "no-cache")
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                #expect(transport.statistics.networkFetches == 8 * 20)
            }
            #expect(await origin.hits(path: "/t") == 12 * 8 * 20)
        }
    }

    @Test("queries are separate entries")
    func queries() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let one = try await transport.data(from: origin.url("/items?page=1")).0
            let two = try await transport.data(from: origin.url("/items?page=2")).0
            #expect(one != two)
            #expect(try await transport.data(from: origin.url("/items?page=1")).0 == one)
            #expect(try await transport.data(from: origin.url("/items?page=2")).0 == two)
            #expect(await origin.hits(path: "/items") == 2)
        }
    }

    @available(macOS 26.0, *)
    @Test("Authorization values never cross, even concurrently")
    func authorizationIsolation() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/me?gate=1")
            await origin.closeGate()
            let alice = startCalls(50) {
                try await transport.data(for: request(url, headers: ["Authorization": "Bearer alice"]))
            }
            let bob = startCalls(50) {
                try await transport.data(for: request(url, headers: ["Authorization": "Bearer bob"]))
            }
            #expect(transport.statistics.coalescedJoins == 98)
            await origin.waitForHits("/me?gate=1", count: 2)
            await origin.openGate()
            for task in alice {
                let body = try await task.value.0
                #expect(body.text.contains("auth=Bearer alice"))
            }
            for task in bob {
                let body = try await task.value.0
                #expect(body.text.contains("auth=Bearer bob"))
            }
            #expect(await origin.hits("/me?gate=1") == 2)
        }
    }

    @available(macOS 26.0, *)
    @Test("cancelled callers throw at once while the last one gets the body")
    func someCancelled() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let tasks = await startHeldCallers(10, of: "/slow?gate=1", on: transport, origin: origin)
            for task in tasks.dropLast() { task.cancel() }
            for task in tasks.dropLast() {
                let error = await thrownError { try await task.value }
                #expect(error is CancellationError)
            }
            await origin.openGate()
            let last = try await tasks.last!.value.0
            #expect(last.text.contains("hit=1"))
            #expect(await origin.hits("/slow?gate=1") == 1)
        }
    }

    @available(macOS 26.0, *)
    @Test("when every caller is cancelled the fetch stops, nothing is stored, and the next request fetches again")
    func allCancelled() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/slow?gate=1")
            let tasks = await startHeldCallers(10, of: "/slow?gate=1", on: transport, origin: origin)
            for task in tasks { task.cancel() }
            for task in tasks {
                let error = await thrownError { try await task.value }
                #expect(error is CancellationError)
            }
            await origin.openGate()
            let (data, _) = try await transport.data(from: url)
            #expect(data.text.contains("hit=2"))
            #expect(transport.statistics.stores == 1)
        }
    }

    @available(macOS 26.0, *)
    @Test("a connection dropped mid-body reaches every waiter as an error and nothing is stored")
    func droppedConnection() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/broken?drop=1&gate=1")
            let tasks = await startHeldCallers(5, of: "/broken?drop=1&gate=1", on: transport, origin: origin)
            await origin.openGate()
            for task in tasks {
                let error = await thrownError { try await task.value }
                #expect(error is URLError)
            }
            #expect(transport.statistics.stores == 0)
            _ = await thrownError { try await transport.data(from: url) }
            #expect(await origin.hits("/broken?drop=1&gate=1") == 2)
        }
    }

    @Test("a POST body arrives intact and invalidates the stored GET")
    func postBody() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/notes")
            let before = try await transport.data(from: url).0
            #expect(before.text.contains("version=0"))
            var post = request(url, method: "POST")
            post.httpBody = Data((0..<100_000).map { _ in UInt8.random(in: 0...255) })
            let (echo, response) = try await transport.data(for: post)
            #expect(echo == post.httpBody)
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Version") == "1")
            let after = try await transport.data(from: url).0
            #expect(after.text.contains("version=1"))
            #expect(await origin.hits(path: "/notes") == 3)
        }
    }

    @Test("a no-cache response is cached anyway, its original header readable")
    func noCacheIsCached() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            _ = try await transport.data(from: origin.url("/plain"))
            let (_, response) = try await transport.data(from: origin.url("/plain"))
            #expect(await origin.hits("/plain") == 1)
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.value(forHTTPHeaderField: "X-Original-Cache-Control") == "no-cache")
            #expect(http.value(forHTTPHeaderField: "Cache-Control") == "max-age=3600")
        }
    }

    @Test("with the override off, a no-store response is not stored")
    func noStoreWithoutOverride() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.network.cacheOverride = nil
            let transport = CachedTransport(configuration: configuration)
            _ = try await transport.data(from: origin.url("/secret?cc=no-store"))
            _ = try await transport.data(from: origin.url("/secret?cc=no-store"))
            #expect(await origin.hits("/secret?cc=no-store") == 2)
        }
    }

    @Test("a 500 is not stored")
    func serverErrorNotStored() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let (_, response) = try await transport.data(from: origin.url("/fail?status=500"))
            #expect((response as? HTTPURLResponse)?.statusCode == 500)
            _ = try await transport.data(from: origin.url("/fail?status=500"))
            #expect(await origin.hits("/fail?status=500") == 2)
        }
    }

    @Test("pull to refresh: another screen hears the change and reloads from memory")
    func pullToRefresh() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/feed")
            let screenB = try await transport.data(from: url).0
            #expect(screenB.text.contains("version=0"))
            var changes = transport.changes(for: .pathPrefix("/feed")).makeAsyncIterator()
            _ = try await transport.data(for: request(origin.url("/feed"), method: "PUT"))
            #expect(await changes.next() == .invalidated(urls: [url], endpoint: nil))
            let refreshed = try await transport.refresh(URLRequest(url: url)).0
            #expect(refreshed.text.contains("version=1"))
            #expect(await changes.next() == .updated(url))
            let reloaded = try await transport.data(from: url).0
            #expect(reloaded == refreshed)
            #expect(await origin.hits(path: "/feed") == 3)
        }
    }

    @Test("a fetch in flight across an invalidation answers but does not refill the store")
    func inFlightAcrossInvalidation() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/items?gate=1")
            await origin.closeGate()
            let early = Task { try await transport.data(from: url) }
            await origin.waitForHits("/items?gate=1", count: 1)
            transport.invalidate(URLRequest(url: url))
            await origin.openGate()
            let earlyBody = try await early.value.0
            #expect(earlyBody.text.contains("hit=1"))
            let later = try await transport.data(from: url).0
            #expect(later.text.contains("hit=2"))
        }
    }
}
