import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Revalidation with ETag, Last-Modified and 304")
struct RevalidationTests {
    let url = "https://api.example.com/list"

    @Test("a refresh of an unchanged entry sends If-None-Match and gets the stored body with status 200, no updated")
    func refreshUnchangedWithEntityTag() async throws {
        let origin = ValidatingOrigin(validators: .entityTag)
        let loader = ScriptedOrigin(respond: origin.responder)
        let transport = makeTransport(loader: loader)
        let (stored, _) = try await transport.data(for: request(url))
        var changes = transport.changes().makeAsyncIterator()

        let (data, response) = try await transport.refresh(request(url))

        #expect(loader.calls.last?.value(forHTTPHeaderField: "If-None-Match") == ValidatingOrigin.entityTag(version: 1))
        #expect(data == stored)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.notModifiedAnswers == 1)
        #expect(transport.statistics.notModified == 1)
        #expect(transport.statistics.conditionalRequests == 1)
        // The next change is the invalidation below, not an update from the refresh.
        transport.invalidate(request(url))
        #expect(await changes.next() == .invalidated(urls: [URL(string: url)!], endpoint: nil))
    }

    @Test(
        "a 304 that now says no-store answers its callers, drops the entry and announces that it left",
        .timeLimit(.minutes(1)))
    func notModifiedNoStore() async throws {
        let calls = Locked(0)
        let loader = ScriptedOrigin { _, _ in
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            return call == 1
                ? .init(headers: ["ETag": "\"1\""], text: "body")
                : .init(status: 304, headers: ["ETag": "\"1\"", "Cache-Control": "no-store"])
        }
        // The override off, so that the 304's no-store is taken at its word.
        let transport = makeTransport(loader: loader) { $0.network.cacheOverride = nil }
        _ = try await transport.data(for: request(url))
        var changes = transport.changes().makeAsyncIterator()

        let (data, response) = try await transport.refresh(request(url))

        #expect(data.text == "body")
        #expect(response.cacheOutcome?.storage == .notStored(.noStore))
        #expect(transport.statistics.entries == 0)
        #expect(await changes.next() == .invalidated(urls: [URL(string: url)!], endpoint: nil))
    }

    @Test("a refresh of a changed entry gets the new body and one updated")
    func refreshChanged() async throws {
        let origin = ValidatingOrigin(validators: .entityTag)
        let transport = makeTransport(loader: ScriptedOrigin(respond: origin.responder))
        _ = try await transport.data(for: request(url))
        var changes = transport.changes().makeAsyncIterator()
        origin.bump()

        let (data, response) = try await transport.refresh(request(url))

        #expect(data == ValidatingOrigin.body(version: 2))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.notModifiedAnswers == 0)
        #expect(await changes.next() == .updated(URL(string: url)!))
        #expect(try await transport.data(for: request(url)).0 == ValidatingOrigin.body(version: 2))
        #expect(transport.statistics.notModified == 0)
    }

    @Test("with Last-Modified only, a refresh sends If-Modified-Since: unchanged is a 304, changed is the new body")
    func lastModified() async throws {
        let origin = ValidatingOrigin(validators: .lastModified)
        let loader = ScriptedOrigin(respond: origin.responder)
        let transport = makeTransport(loader: loader)
        let (stored, _) = try await transport.data(for: request(url))
        var changes = transport.changes().makeAsyncIterator()

        let unchanged = try await transport.refresh(request(url))
        #expect(
            loader.calls.last?.value(forHTTPHeaderField: "If-Modified-Since")
                == ValidatingOrigin.lastModified(version: 1))
        #expect(loader.calls.last?.value(forHTTPHeaderField: "If-None-Match") == nil)
        #expect(unchanged.0 == stored)
        #expect((unchanged.1 as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.notModifiedAnswers == 1)

        origin.bump()
        let changed = try await transport.refresh(request(url))
        #expect(changed.0 == ValidatingOrigin.body(version: 2))
        #expect(await changes.next() == .updated(URL(string: url)!))
    }

    @Test("an expired entry revalidates with a 304, and its age restarts")
    func expiredEntryRevalidates() async throws {
        let origin = ValidatingOrigin()
        let loader = ScriptedOrigin(respond: origin.responder)
        let clock = TestClock()
        let transport = makeTransport(loader: loader, clock: clock) { $0.freshness.maximumAge = .seconds(60) }
        let (stored, _) = try await transport.data(for: request(url))

        clock.advance(by: .seconds(61))
        let (data, response) = try await transport.data(for: request(url))
        #expect(data == stored)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.notModifiedAnswers == 1)
        #expect(loader.callCount == 2)

        // 61 s after the first store, 40 s after the revalidation: fresh again, from memory.
        clock.advance(by: .seconds(40))
        #expect(try await transport.data(for: request(url)).0 == stored)
        #expect(loader.callCount == 2)
        clock.advance(by: .seconds(21))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 3)
    }

    @Test("a 304 updates the stored headers and keeps the stored status")
    func notModifiedUpdatesHeaders() async throws {
        let origin = ValidatingOrigin()
        let transport = makeTransport(loader: ScriptedOrigin(respond: origin.responder))
        _ = try await transport.data(for: request(url))
        origin.setHeader("X-Generation", "2")
        let (_, refreshed) = try await transport.refresh(request(url))
        let (_, later) = try await transport.data(for: request(url))
        for response in [refreshed, later] {
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200)
            #expect(http.value(forHTTPHeaderField: "X-Generation") == "2")
            #expect(http.value(forHTTPHeaderField: "ETag") == ValidatingOrigin.entityTag(version: 1))
        }
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("20 coalesced callers of one conditional fetch all get status 200 and the stored body")
    func coalescedCallersOfA304() async throws {
        let origin = ValidatingOrigin()
        let loader = ScriptedOrigin(
            gated: true, respond: origin.responder, holding: { $0.value(forHTTPHeaderField: "If-None-Match") != nil })
        let transport = makeTransport(loader: loader)
        let (stored, _) = try await transport.data(for: request(url))
        let reload = request(url, policy: .reloadIgnoringLocalCacheData)
        let tasks = startCalls(20) { try await transport.data(for: reload) }
        #expect(transport.statistics.coalescedJoins == 19)
        await loader.waitForCalls(2)
        loader.openGate()
        for task in tasks {
            let (data, response) = try await task.value
            #expect(data == stored)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
        }
        #expect(loader.callCount == 2)
        #expect(origin.notModifiedAnswers == 1)
    }

    @Test("usesConditionalRequests = false sends no conditions")
    func conditionsSwitchedOff() async throws {
        let origin = ValidatingOrigin()
        let loader = ScriptedOrigin(respond: origin.responder)
        let transport = makeTransport(loader: loader) { $0.freshness.usesConditionalRequests = false }
        _ = try await transport.data(for: request(url))
        _ = try await transport.refresh(request(url))
        for call in loader.calls {
            #expect(call.value(forHTTPHeaderField: "If-None-Match") == nil)
            #expect(call.value(forHTTPHeaderField: "If-Modified-Since") == nil)
        }
        #expect(origin.notModifiedAnswers == 0)
        #expect(origin.fullAnswers == 2)
        #expect(transport.statistics.conditionalRequests == 0)
    }

    @Test("an entry without validators is fetched without conditions")
    func noValidators() async throws {
        let origin = ValidatingOrigin(validators: .none)
        let loader = ScriptedOrigin(respond: origin.responder)
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url))
        _ = try await transport.refresh(request(url))
        #expect(
            loader.calls.allSatisfy {
                $0.value(forHTTPHeaderField: "If-None-Match") == nil
                    && $0.value(forHTTPHeaderField: "If-Modified-Since") == nil
            })
    }

    @Test("a 304 racing an invalidation never yields an empty body: the fetch goes again without conditions")
    func notModifiedAfterInvalidation() async throws {
        let origin = ValidatingOrigin()
        let loader = ScriptedOrigin(
            gated: true, respond: origin.responder, holding: { $0.value(forHTTPHeaderField: "If-None-Match") != nil })
        let transport = makeTransport(loader: loader)
        let (stored, _) = try await transport.data(for: request(url))
        let refresh = Task { try await transport.refresh(request(url)) }
        await loader.waitForCalls(2)
        transport.invalidate(request(url))
        loader.openGate()

        let (data, response) = try await refresh.value
        #expect(data == stored)
        #expect(!data.isEmpty)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(loader.callCount == 3)
        #expect(loader.calls[2].value(forHTTPHeaderField: "If-None-Match") == nil)
        #expect(origin.notModifiedAnswers == 1)
        // Detached by the invalidation: the answer reached its caller but was not stored.
        #expect(transport.statistics.entries == 0)
    }

    @Test("a 304 for an entry evicted while in flight fetches again without conditions")
    func notModifiedAfterEviction() async throws {
        let origin = ValidatingOrigin()
        let loader = ScriptedOrigin(
            gated: true, respond: origin.responder, holding: { $0.value(forHTTPHeaderField: "If-None-Match") != nil })
        let transport = makeTransport(loader: loader)
        let (stored, _) = try await transport.data(for: request(url))
        let refresh = Task { try await transport.refresh(request(url)) }
        await loader.waitForCalls(2)
        transport.trim(for: .critical)
        loader.openGate()
        let (data, _) = try await refresh.value
        #expect(data == stored)
        #expect(loader.callCount == 3)
    }

    @Test("a 304 keeps the values decoded from the entry")
    func notModifiedKeepsDecodedValues() async throws {
        struct Resource: Decodable, Sendable { let text: String }
        let origin = ValidatingOrigin()
        let transport = makeTransport(
            loader: ScriptedOrigin { request, call in
                var reply = try origin.responder(request, call)
                if !reply.body.isEmpty { reply.body = Data(#"{"text":"\#(reply.body.text)"}"#.utf8) }
                return reply
            })
        _ = try await transport.value(Resource.self, for: request(url))
        _ = try await transport.refresh(request(url))
        _ = try await transport.value(Resource.self, for: request(url))
        #expect(transport.statistics.notModified == 1)
        #expect(transport.statistics.decodes == 1)
    }

    @Test("a 304 the transport did not ask for reaches the caller as it is and is not stored")
    func unaskedNotModified() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.status(304))
        let transport = makeTransport(loader: loader)
        let (_, response) = try await transport.data(for: request(url))
        #expect((response as? HTTPURLResponse)?.statusCode == 304)
        #expect(transport.statistics.entries == 0)
        #expect(transport.statistics.notModified == 0)
    }
}
