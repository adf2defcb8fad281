import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("The tag index forgets keys that left")
struct TagPruningTests {
    @Test("past its bound, the tag index keeps only keys still held or about to be stored")
    func pruning() throws {
        let transport = makeTransport(loader: echoOrigin())
        func key(_ url: String) -> CacheKey {
            CacheKey(URLRequest(url: URL(string: url)!), keyHeaders: .init(extra: []))!
        }
        let held = (0..<3).map { "https://api.example.com/held/\($0)" }
        for url in held {
            try transport.store(ProvisionalAnswer(for: request(url), data: Data(url.utf8)))
            _ = transport.store.tag(key(url), with: ["feed"])
        }
        let pending = key("https://api.example.com/in-flight")
        _ = transport.store.tag(pending, with: ["feed"])
        // Keys that left, or were never stored, until the index asks to be pruned.
        var index = 0
        while !transport.store.tag(key("https://api.example.com/gone/\(index)"), with: ["feed"]) { index += 1 }
        #expect(index > 1_000)
        transport.store.pruneTags(keeping: [pending])
        #expect(transport.store.keys(taggedWith: "feed") == Set(held.map(key)).union([pending]))
    }
}
