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

    /// The rules of a normal URL, byte by byte, as plainly as they can be written: what the
    /// transport's one scan (eight bytes at a time where it can) must agree with.
    static func isNormalByTheRules(_ string: String) -> Bool {
        let bytes = Array(string.utf8)
        let schemeBytes = Set("abcdefghijklmnopqrstuvwxyz0123456789+-.".utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
            bytes[..<colon].allSatisfy(schemeBytes.contains), colon + 3 <= bytes.count,
            bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        else { return false }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self)
        var index = colon + 3
        var portStart: Int?
        while index < bytes.count, !"/?#".utf8.contains(bytes[index]) {
            switch bytes[index] {
            case UInt8(ascii: ":"): portStart = index + 1
            case UInt8(ascii: "]"): portStart = nil
            case UInt8(ascii: "@"), UInt8(ascii: "A")...UInt8(ascii: "Z"): return false
            default: break
            }
            index += 1
        }
        guard index > colon + 3 else { return false }
        if let portStart {
            let port = String(decoding: bytes[portStart..<index], as: UTF8.self)
            if port.isEmpty || (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
                return false
            }
        }
        return !bytes[index...].contains(UInt8(ascii: "#"))
    }

    @Test(
        "a URL's normal form is judged, and its key digested, in one scan that agrees with the rules; as written, it keys alike only when normal"
    )
    func oneScanAgreesWithTheRules() {
        var random = SeededGenerator(seed: 49)
        let prefixes = ["http://", "https://", "HTTP://", "ftp://", "https:/", "h", "", "http://user@"]
        // Long runs of plain bytes, so that whole words are skipped, among every byte that
        // needs a look: capitals, "@", ":", "]", "[", "#", "/", "?", "%", and bytes above 127.
        let pieces = [
            "a", "example", "0123456789", ".", "-", "Q", "@", ":", "]", "[", "#", "/", "?", "%", "é", ":80",
            ":443", ":8080", "abcdefghijklmnop",
        ]
        var checked = 0
        for _ in 0..<20_000 {
            var string = prefixes.randomElement(using: &random)!
            for _ in 0..<Int.random(in: 0...8, using: &random) { string += pieces.randomElement(using: &random)! }
            #expect(URLNormalization.isNormalized(string) == Self.isNormalByTheRules(string), "\(string)")
            guard let url = URL(string: string), let key = key(string) else { continue }
            // The key made from the URL in one scan equals, and hashes as, the key made from its
            // normal form digested apart.
            let apart = CacheKey(method: "GET", url: key.url, identity: [])
            #expect(key == apart && key.hashValue == apart.hashValue, "\(url)")
            // Every key's URL is the URL's normal form, the fragment dropped; a normal URL (as
            // Foundation spells it) is its own.
            #expect(key.url == URLNormalization.normalized(url, httpOnly: true), "\(url)")
            if Self.isNormalByTheRules(url.absoluteString) { #expect(key.url == url.absoluteString) }
            // The key of the URL as written is that key exactly when the URL is its normal form,
            // and the key of the normal form as written is always that key.
            let written = CacheKey(method: "GET", writtenURL: url, values: [], account: nil, keyHeaders: headers)
            #expect((written == key) == (url.absoluteString == key.url), "\(url)")
            let normal = CacheKey(
                method: "GET", writtenURL: URL(string: key.url)!, values: [], account: nil, keyHeaders: headers)
            #expect(normal == key && normal.hashValue == key.hashValue, "\(url)")
            checked += 1
        }
        #expect(checked > 1_000)
        #expect(key("https://example.com/items#x")?.url == "https://example.com/items")
    }

    @Test("every byte, in every place of an eight-byte word, is judged as the rules judge it")
    func everyByteInEveryPlace() {
        for byte in 0...255 {
            for place in 0..<8 {
                var host = Array("abcdefghijklmnop".utf8)
                host[place] = UInt8(byte)
                let string = String(decoding: Array("https://".utf8) + host + Array("/x".utf8), as: UTF8.self)
                #expect(
                    URLNormalization.isNormalized(string) == Self.isNormalByTheRules(string), "byte \(byte) at \(place)"
                )
            }
        }
    }

    @Test("a digest finds a byte among any number of bytes, at any place")
    func digestFindsAByte() {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<5_000 {
            let count = Int.random(in: 0...40, using: &random)
            let bytes = (0..<count).map { _ in
                [0x23, 0x22, 0x24, 0x00, 0xA3, 0x61].randomElement(using: &random)! as UInt8
            }
            var digest = KeyDigest()
            let found = bytes.withUnsafeBytes { digest.add($0, finding: 0x23) }
            #expect(found == bytes.contains(0x23), "\(bytes)")
            // What is looked for changes nothing of the digest.
            var plain = KeyDigest()
            _ = bytes.withUnsafeBytes { plain.add($0, finding: 0x61) }
            #expect(plain.value == digest.value)
            var unsearched = KeyDigest()
            bytes.withUnsafeBytes { unsearched.add($0) }
            #expect(unsearched.value == digest.value)
        }
    }
}
