import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache

@Suite("The cache key")
struct CacheKeyTests {
    let headers = KeyHeaders(extra: ["X-Tenant"])

    func key(_ url: String, _ fields: [String: String]? = nil, method: String = "GET") -> CacheKey? {
        let url = URL(string: url)!
        return CacheKey(method: method, url: url, fields: fields, account: nil, keyHeaders: headers)
    }

    @Test("scheme and host are lowercased, the default port and the fragment dropped")
    func normalisation() {
        #expect(key("HTTPS://API.Example.com:443/Items?b=2&a=1#top")?.url == "https://api.example.com/Items?b=2&a=1")
        #expect(key("http://example.com:80/")?.url == "http://example.com/")
        #expect(key("http://example.com:8080/x")?.url == "http://example.com:8080/x")
        #expect(key("https://example.com:80/x")?.url == "https://example.com:80/x")
    }

    @Test("an already normal URL is used as it is")
    func normalFastPath() {
        #expect(URLNormalization.isNormalized("https://api.example.com/items?page=1"))
        #expect(!URLNormalization.isNormalized("https://API.example.com/items"))
        #expect(!URLNormalization.isNormalized("https://example.com:443/items"))
        #expect(!URLNormalization.isNormalized("https://example.com/items#x"))
        #expect(!URLNormalization.isNormalized("https://user@example.com/items"))
    }

    @Test("the query is part of the key")
    func query() {
        #expect(key("https://example.com/items?page=1") != key("https://example.com/items?page=2"))
    }

    @Test("the method is part of the key")
    func method() {
        #expect(key("https://example.com/a", method: "GET") != key("https://example.com/a", method: "HEAD"))
    }

    @Test("identity headers are part of the key, whatever the case of their names")
    func identityHeaders() {
        let alice = key("https://example.com/me", ["Authorization": "Bearer alice"])
        let bob = key("https://example.com/me", ["authorization": "Bearer bob"])
        let aliceAgain = key("https://example.com/me", ["AUTHORIZATION": "Bearer alice"])
        #expect(alice != bob)
        #expect(alice == aliceAgain)
        #expect(key("https://example.com/me", ["Cookie": "s=1"]) != key("https://example.com/me", ["Cookie": "s=2"]))
        #expect(key("https://example.com/me", ["Accept": "text/html"]) != key("https://example.com/me"))
        #expect(key("https://example.com/me", ["x-tenant": "a"]) != key("https://example.com/me", ["X-Tenant": "b"]))
    }

    @Test("other headers do not split the key")
    func otherHeaders() {
        #expect(key("https://example.com/me", ["User-Agent": "a"]) == key("https://example.com/me"))
    }

    @Test("one header in two spellings is keyed by both values in a stable order")
    func repeatedHeader() {
        let one = key("https://example.com/me", ["Cookie": "a=1", "cookie": "b=2"])
        let other = key("https://example.com/me", ["cookie": "b=2", "Cookie": "a=1"])
        #expect(one == other)
        #expect(one != key("https://example.com/me", ["Cookie": "a=1"]))
    }
}
