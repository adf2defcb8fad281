import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache

/// A request's fields are read once for the key, the directives and the account: each reading
/// must agree with what the separate readers give, and a key's identity digested ahead of time
/// with the one digested where the key is made.
@Suite("One reading of a request's fields")
struct RequestFieldsTests {
    let keyHeaders = KeyHeaders(extra: ["X-Tenant", "X-App-Version"])

    /// Names a request may carry, in the spellings apps use: key headers, directives,
    /// conditions, the account's header, and others.
    static let names = [
        "Accept", "accept-language", "Authorization", "Cookie", "X-Tenant", "x-app-version", "Cache-Control",
        "cache-control", "Pragma", "If-None-Match", "Range", "If-Modified-Since", AccountDirectory.header,
        "X-Request-ID", "User-Agent", "Content-Type",
    ]
    static let values = [
        "no-cache", "max-age=0", "no-store", "max-age=60", "only-if-cached", "application/json", "en, fr",
        "Bearer a", "alice", "\"v1\"", "bytes=0-1", "4.2",
    ]

    @Test(
        "for 2,000 seeded sets of fields, the one reading gives the key values, directives and account of the separate readers"
    )
    func agreesWithSeparateReaders() {
        var generator = SeededGenerator(seed: 0x6669_656C_6473)
        for round in 0..<2_000 {
            var fields: [String: String] = [:]
            for _ in 0..<Int.random(in: 0...5, using: &generator) {
                fields[Self.names.randomElement(using: &generator)!] = Self.values.randomElement(using: &generator)!
            }
            var accountName: String?
            let read = RequestFields(fields, keyHeaders: keyHeaders, readsAccount: true, accountName: &accountName)
            let separate = RequestDirectives(fields)
            #expect(read.keyValues == keyHeaders.values(in: fields), "round \(round): \(fields)")
            #expect(read.directives.bypass == separate.bypass, "round \(round): \(fields)")
            #expect(read.directives.revalidates == separate.revalidates, "round \(round): \(fields)")
            #expect(read.directives.cacheControl == separate.cacheControl, "round \(round): \(fields)")
            #expect(accountName == fields[AccountDirectory.header], "round \(round): \(fields)")
            #expect(
                keyHeaders.carriesAuthorization(read.keyValues) == (fields["Authorization"] != nil),
                "round \(round): \(fields)")
            var unreadName: String?
            _ = RequestFields(fields, keyHeaders: keyHeaders, readsAccount: false, accountName: &unreadName)
            #expect(unreadName == nil)
        }
    }

    @Test("a request without fields reads as empty, with nothing to revalidate or bypass")
    func empty() {
        for fields in [nil, [:]] as [[String: String]?] {
            var accountName: String?
            let read = RequestFields(fields, keyHeaders: keyHeaders, readsAccount: true, accountName: &accountName)
            #expect(read.keyValues.isEmpty)
            #expect(
                read.directives.bypass == nil && !read.directives.revalidates && read.directives.cacheControl == nil)
            #expect(accountName == nil)
        }
    }

    @Test("a key made with an identity digested ahead of time equals, and hashes as, the key made from its values")
    func predigestedIdentity() {
        let identities: [[String?]] = [
            [], ["\u{0}partition alice"], [nil, nil, "Bearer a", nil, nil, nil],
            ["application/json", nil, nil, nil, "4.2", nil],
        ]
        for values in identities {
            let made = CacheKey(method: "GET", url: "https://api.example.com/items", identity: values)
            let predigested = CacheKey(
                method: "GET", url: "https://api.example.com/items", identity: KeyIdentity(values))
            #expect(made == predigested)
            #expect(made.hashValue == predigested.hashValue)
            #expect(made.identity == values)
        }
        let account = AccountIdentity("\u{0}partition alice")
        let alone = CacheKey(method: "GET", url: "https://api.example.com/items", identity: account.alone)
        #expect(alone == CacheKey(method: "GET", url: "https://api.example.com/items", identity: [account.marker]))
        #expect(alone != CacheKey(method: "GET", url: "https://api.example.com/items", identity: []))
    }
}
