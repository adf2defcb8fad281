import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("What is stored and how the store is bounded")
struct StorageTests {
    @Test("404 and 500 answers reach the caller and are not stored", arguments: [404, 500, 304])
    func errorStatusesAreNotStored(status: Int) async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.status(status))
        let transport = makeTransport(loader: loader)
        let (_, response) = try await transport.data(for: request("https://api.example.com/missing"))
        #expect((response as? HTTPURLResponse)?.statusCode == status)
        _ = try await transport.data(for: request("https://api.example.com/missing"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.stores == 0)
    }

    @Test("the set of storable statuses is configurable")
    func configurableStatuses() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.status(404))
        let transport = makeTransport(loader: loader) { $0.storage.storableStatusCodes = [200, 404] }
        _ = try await transport.data(for: request("https://api.example.com/missing"))
        _ = try await transport.data(for: request("https://api.example.com/missing"))
        #expect(loader.callCount == 1)
    }

    @Test("an entry larger than the allowed share is returned but not stored, and counted")
    func tooLarge() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.body(size: 20_000))
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = 100_000
            $0.storage.maximumEntryShare = 0.1
        }
        let (data, _) = try await transport.data(for: request("https://api.example.com/big"))
        #expect(data.count == 20_000)
        _ = try await transport.data(for: request("https://api.example.com/big"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.rejectedTooLarge == 2)
        #expect(transport.statistics.entries == 0)
    }

    @Test("a zero capacity stores nothing and still answers")
    func zeroCapacity() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader) { $0.storage.memoryCapacity = 0 }
        _ = try await transport.data(for: request("https://api.example.com/a"))
        _ = try await transport.data(for: request("https://api.example.com/a"))
        #expect(loader.callCount == 2)
        #expect(transport.statistics.bytesHeld == 0)
    }

    @Test("eviction takes the least recently used entry, not the oldest")
    func leastRecentlyUsedOrder() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.body(size: 1_000))
        // Room for three entries of about 1.4 KB each, not four.
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = 5_000
            $0.storage.maximumEntryShare = 1
        }
        for name in ["a", "b", "c"] { _ = try await transport.data(for: request("https://example.com/\(name)")) }
        _ = try await transport.data(for: request("https://example.com/a"))  // a is now the most recent
        _ = try await transport.data(for: request("https://example.com/d"))  // evicts b
        #expect(transport.statistics.evictions == 1)
        let before = loader.callCount
        _ = try await transport.data(for: request("https://example.com/a"))
        _ = try await transport.data(for: request("https://example.com/c"))
        _ = try await transport.data(for: request("https://example.com/d"))
        #expect(loader.callCount == before)
        _ = try await transport.data(for: request("https://example.com/b"))
        #expect(loader.callCount == before + 1)
    }

    @Test("the byte budget holds after 10,000 stores")
    func budgetHolds() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.body(size: 500))
        let capacity = 200_000
        let transport = makeTransport(loader: loader) { $0.storage.memoryCapacity = capacity }
        for index in 0..<10_000 {
            _ = try await transport.data(for: request("https://example.com/items/\(index)"))
            if index % 1_000 == 0 { #expect(transport.statistics.bytesHeld <= capacity) }
        }
        let statistics = transport.statistics
        #expect(statistics.bytesHeld <= capacity)
        #expect(statistics.bytesHeld > capacity / 2)
        #expect(statistics.stores == 10_000)
        #expect(statistics.evictions == 10_000 - statistics.entries)
    }

    @Test("a Vary header is honoured: another value of it is a miss, the same value a hit")
    func vary() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Vary": "X-Variant"]))
        let transport = makeTransport(loader: loader)
        let url = "https://api.example.com/greeting"
        _ = try await transport.data(for: request(url, headers: ["X-Variant": "a"]))
        _ = try await transport.data(for: request(url, headers: ["X-Variant": "a"]))
        #expect(loader.callCount == 1)
        _ = try await transport.data(for: request(url, headers: ["X-Variant": "b"]))
        #expect(loader.callCount == 2)
    }

    @Test("with the header override off, a Vary: * answer is not reused")
    func varyStar() async throws {
        let loader = ScriptedOrigin(respond: ScriptedOrigin.ok(headers: ["Vary": "*"]))
        let transport = makeTransport(loader: loader) { $0.network.cacheOverride = nil }
        _ = try await transport.data(for: request("https://api.example.com/random"))
        _ = try await transport.data(for: request("https://api.example.com/random"))
        #expect(loader.callCount == 2)
    }

    @Test("GET and HEAD are stored apart")
    func headIsSeparate() async throws {
        let loader = echoOrigin()
        let transport = makeTransport(loader: loader)
        _ = try await transport.data(for: request("https://api.example.com/a", method: "HEAD"))
        _ = try await transport.data(for: request("https://api.example.com/a"))
        _ = try await transport.data(for: request("https://api.example.com/a", method: "HEAD"))
        #expect(loader.callCount == 2)
    }

    @Test("storing the same key twice replaces the entry and then evicting does not crash")
    func storeTwice() async throws {
        // The sequence that crashes corelibs' own URLCache (capacity 1000: A, A, B, C).
        let loader = ScriptedOrigin(respond: { request, _ in
            let size = request.url!.lastPathComponent == "c" ? 100 : 20
            return ScriptedOrigin.Reply(status: 200, body: Data(count: size))
        })
        let transport = makeTransport(loader: loader) {
            $0.storage.memoryCapacity = 1_000
            $0.storage.maximumEntryShare = 1
        }
        for name in ["a", "a", "b", "c"] {
            _ = try await transport.refresh(request("https://example.com/\(name)"))
        }
        #expect(transport.statistics.bytesHeld <= 1_000)
        _ = try await transport.data(for: request("https://example.com/c"))
        #expect(loader.callCount(for: "https://example.com/c") == 1)
    }

    @Test("no file appears under the user's cache directory")
    func nothingOnDisk() async throws {
        // Foundation's URLCache writes below this folder; the rest of the caches directory belongs
        // to other programs (a package manager running beside the tests writes there too).
        let caches = try FileManager.default.url(
            for: .cachesDirectory, in: .userDomainMask, appropriateFor: nil, create: false
        )
        .appendingPathComponent("org.swift.foundation.URLCache")
        let before = Self.files(under: caches)
        let loader = ScriptedOrigin(respond: ScriptedOrigin.body(size: 4_096))
        let transport = makeTransport(loader: loader)
        for index in 0..<100 { _ = try await transport.data(for: request("https://example.com/\(index)")) }
        #expect(transport.statistics.entries == 100)
        #expect(Self.files(under: caches).subtracting(before).isEmpty)
        #expect(Self.files(under: caches).isEmpty)
    }

    /// Regular files below `directory`.
    static func files(under directory: URL) -> Set<String> {
        guard
            let enumerator = FileManager.default.enumerator(
                at: directory, includingPropertiesForKeys: [.isRegularFileKey])
        else {
            return []
        }
        var files = Set<String>()
        for case let url as URL in enumerator
        where (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true {
            files.insert(url.path)
        }
        return files
    }
}
