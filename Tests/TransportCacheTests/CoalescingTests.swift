import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("Coalescing identical requests")
struct CoalescingTests {
    let url = "https://api.example.com/items?page=1"

    /// Starts `count` tasks asking for `request` and returns once every one of them is attached
    /// to the single held fetch.
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    func startCallers(
        _ count: Int,
        _ request: URLRequest,
        on transport: CachedTransport,
        loader: ScriptedOrigin
    ) async -> [Task<(Data, URLResponse), any Error>] {
        let tasks = startCalls(count) { try await transport.data(for: request) }
        #expect(transport.statistics.coalescedJoins == count - 1)
        await loader.waitForCalls(1)
        return tasks
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("200 concurrent identical GETs share one fetch and get identical answers")
    func twoHundredShareOneFetch() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let tasks = await startCallers(200, request(url), on: transport, loader: loader)
        #expect(loader.callCount == 1)
        loader.openGate()
        var bodies = Set<Data>()
        for task in tasks { bodies.insert(try await task.value.0) }
        #expect(bodies.count == 1)
        #expect(loader.callCount == 1)
        let statistics = transport.statistics
        #expect(statistics.networkFetches == 1)
        #expect(statistics.coalescedJoins == 199)
        #expect(statistics.stores == 1)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("different Authorization values never share a fetch, even concurrently")
    func authorizationSplitsFetches() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let alice = startCalls(5) {
            try await transport.data(for: request(url, headers: ["Authorization": "Bearer alice"]))
        }
        let bob = startCalls(5) {
            try await transport.data(for: request(url, headers: ["Authorization": "Bearer bob"]))
        }
        #expect(transport.statistics.coalescedJoins == 8)
        await loader.waitForCalls(2)
        loader.openGate()
        for task in alice { #expect(try await task.value.0.text.contains("auth=Bearer alice")) }
        for task in bob { #expect(try await task.value.0.text.contains("auth=Bearer bob")) }
        #expect(loader.callCount == 2)
        // And the stored entries stay apart too.
        let (stored, _) = try await transport.data(for: request(url, headers: ["Authorization": "Bearer bob"]))
        #expect(stored.text.contains("auth=Bearer bob"))
        #expect(loader.callCount == 2)
    }

    @Test("callers on the main actor share one fetch, sent from a task of its own, and are answered there")
    @MainActor
    func mainActorCallersShareOneFetch() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let tasks = (0..<20).map { _ in
            Task { @MainActor in
                let answer = try await transport.data(for: request(url))
                MainActor.assertIsolated()
                return answer
            }
        }
        await loader.waitForCalls(1)
        loader.openGate()
        var bodies = Set<Data>()
        for task in tasks { bodies.insert(try await task.value.0) }
        #expect(bodies.count == 1)
        #expect(loader.callCount == 1)
        #expect(transport.pendingWork == (0, 0, 0))
    }

    @Test("different Cookie values never share an entry")
    func cookieSplitsEntries() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request(url, headers: ["Cookie": "session=1"]))
        _ = try await transport.data(for: request(url, headers: ["Cookie": "session=2"]))
        _ = try await transport.data(for: request(url))
        #expect(loader.callCount == 3)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("9 of 10 waiters cancelled: they throw at once, the 10th gets the body")
    func nineOfTenCancelled() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let tasks = await startCallers(10, request(url), on: transport, loader: loader)
        for task in tasks.dropLast() { task.cancel() }
        // They return while the fetch is held at the gate, which opens only after: none waits for
        // it (a wall-clock bound here only measured how loaded the machine was).
        for task in tasks.dropLast() {
            let error = await thrownError { try await task.value }
            #expect(error is CancellationError)
        }
        #expect(loader.cancelledCalls == 0)
        loader.openGate()
        let (data, _) = try await tasks.last!.value
        #expect(data.text.contains("call=1"))
        #expect(loader.callCount == 1)
        #expect(transport.statistics.stores == 1)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("all waiters cancelled: the fetch is cancelled, nothing stored, a later request fetches again")
    func allCancelled() async throws {
        let loader = echoOrigin(gated: true)
        let transport = makeTransport(loader: loader)
        let tasks = await startCallers(10, request(url), on: transport, loader: loader)
        for task in tasks { task.cancel() }
        for task in tasks {
            let error = await thrownError { try await task.value }
            #expect(error is CancellationError)
        }
        await loader.waitForCancelledCalls(1)
        #expect(loader.cancelledCalls == 1)
        #expect(transport.statistics.stores == 0)
        loader.openGate()
        let (data, _) = try await transport.data(for: request(url))
        #expect(data.text.contains("call=2"))
        #expect(loader.callCount == 2)
    }

    @Test("a task cancelled before it asks never reaches the network")
    func cancelledBeforeAsking() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await transport.data(for: request(url))
        }
        let error = await thrownError { try await task.value }
        #expect(error is CancellationError)
        #expect(loader.callCount == 0)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a failing fetch reaches every waiter, is not stored, and the next request tries again")
    func failureReachesEveryWaiter() async throws {
        let failing = ScriptedOrigin(gated: true) { request, call in
            if call == 1 { throw URLError(.networkConnectionLost) }
            return try ScriptedOrigin.ok()(request, call)
        }
        let transport = makeTransport(loader: failing)
        let tasks = await startCallers(5, request(url), on: transport, loader: failing)
        failing.openGate()
        for task in tasks {
            let error = await thrownError { try await task.value }
            #expect((error as? URLError)?.code == .networkConnectionLost)
        }
        #expect(transport.statistics.stores == 0)
        let (data, _) = try await transport.data(for: request(url))
        #expect(data.text.contains("call=2"))
    }

    @Test("distinct queries are distinct fetches and distinct entries")
    func distinctQueries() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        let one = try await transport.data(for: request("https://api.example.com/items?page=1")).0
        let two = try await transport.data(for: request("https://api.example.com/items?page=2")).0
        #expect(one != two)
        #expect(try await transport.data(for: request("https://api.example.com/items?page=1")).0 == one)
        #expect(try await transport.data(for: request("https://api.example.com/items?page=2")).0 == two)
        #expect(loader.callCount == 2)
        #expect(transport.statistics.entries == 2)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a joined caller whose Vary header differs from the fetch's gets its own representation")
    func varyAcrossCoalescedCallers() async throws {
        let loader = ScriptedOrigin(gated: true) { request, call in
            let language = request.value(forHTTPHeaderField: "X-Variant") ?? "none"
            return ScriptedOrigin.Reply(
                status: 200, headers: ["Vary": "X-Variant"], body: Data("variant=\(language) call=\(call)".utf8))
        }
        let transport = makeTransport(loader: loader)
        let first = Task { try await transport.data(for: request(url, headers: ["X-Variant": "a"])) }
        await loader.waitForCalls(1)
        let second = startCall { try await transport.data(for: request(url, headers: ["X-Variant": "b"])) }
        #expect(transport.statistics.coalescedJoins == 1)
        loader.openGate()
        #expect(try await first.value.0.text.hasPrefix("variant=a"))
        #expect(try await second.value.0.text.hasPrefix("variant=b"))
        #expect(loader.callCount == 2)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("joined callers that the answer's Vary does not serve share one fetch per set of values, and each is stored")
    func varyGroups() async throws {
        let loader = ScriptedOrigin(gated: true) { request, call in
            let variant = request.value(forHTTPHeaderField: "X-Variant") ?? "none"
            return ScriptedOrigin.Reply(
                status: 200, headers: ["Vary": "X-Variant"], body: Data("variant=\(variant) call=\(call)".utf8))
        }
        let transport = makeTransport(loader: loader)
        let first = Task { try await transport.data(for: request(url, headers: ["X-Variant": "a"])) }
        await loader.waitForCalls(1)
        let joined = ["b", "c", "b", "c", "b"].map { variant in
            startCall { try await transport.data(for: request(url, headers: ["X-Variant": variant])).0.text }
        }
        #expect(transport.statistics.coalescedJoins == 5)
        // Only the first answer goes out: the "b" and "c" fetches must both start while the
        // other is still held, not one after the other's answer.
        loader.release(1)
        #expect(try await first.value.0.text.hasPrefix("variant=a"))
        await loader.waitForCalls(3)
        loader.openGate()
        var bodies: [String] = []
        for task in joined { bodies.append(try await task.value) }
        // One fetch for "b" and one for "c": three in all.
        #expect(loader.callCount == 3)
        #expect(Set(bodies.filter { $0.hasPrefix("variant=b") }).count == 1)
        #expect(Set(bodies.filter { $0.hasPrefix("variant=c") }).count == 1)
        #expect(bodies.filter { $0.hasPrefix("variant=b") }.count == 3)
        // Neither representation's fetch kept the other from being stored.
        for variant in ["a", "b", "c"] {
            _ = try await transport.data(for: request(url, headers: ["X-Variant": variant]))
        }
        #expect(loader.callCount == 3)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test("a Vary: * answer serves only the caller that started the fetch; each joined caller fetches for itself")
    func varyAnything() async throws {
        let loader = ScriptedOrigin(gated: true) { request, call in
            ScriptedOrigin.Reply(status: 200, headers: ["Vary": "*"], body: Data("call=\(call)".utf8))
        }
        let transport = makeTransport(loader: loader) { $0.network.cacheOverride = nil }
        let tasks = startCalls(4) { try await transport.data(for: request(url)).0.text }
        #expect(transport.statistics.coalescedJoins == 3)
        await loader.waitForCalls(1)
        // Only the first answer goes out; the three joined callers' fetches start together.
        loader.release(1)
        await loader.waitForCalls(4)
        loader.openGate()
        var bodies = Set<String>()
        for task in tasks { bodies.insert(try await task.value) }
        #expect(bodies.count == 4)
        #expect(loader.callCount == 4)
        #expect(transport.statistics.entries == 0)
    }
}
