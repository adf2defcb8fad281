import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One stored answer, with what is needed to decide whether it may be reused.
///
/// A class, so that a hit takes it out of the store with one retain rather than copying each field.
///
/// `@unchecked Sendable`: every stored property but ``decoded`` is an immutable `let` of a Sendable
/// type, and ``decoded`` is only read or written while the owning ``MemoryURLCache``'s lock is
/// held.
final class StoredResponse: @unchecked Sendable {
    let data: Data
    let response: URLResponse
    /// Headers the response named in `Vary` (beyond the key's own), with the storing request's
    /// values: a later request must carry the same values to reuse this entry.
    let vary: [VaryHeader]
    let storedAt: ContinuousClock.Instant
    /// When set, the entry is no longer returned by `returnCacheDataElseLoad` from this instant on.
    let expiresAt: ContinuousClock.Instant?
    /// Values decoded from ``data``, by type and decoder, and decodes in progress. They live and
    /// die with this entry: an invalidated, evicted or replaced entry takes them along, except a
    /// replacement with the same bytes, which carries them over. Guarded by the store's lock.
    var decoded = DecodedValues()

    init(data: Data, response: URLResponse, vary: [VaryHeader], storedAt: ContinuousClock.Instant, expiresAt: ContinuousClock.Instant?) {
        self.data = data
        self.response = response
        self.vary = vary
        self.storedAt = storedAt
        self.expiresAt = expiresAt
    }

    struct VaryHeader: Sendable, Hashable {
        /// Lowercased header name.
        let name: String
        let value: String?
    }

    /// The bytes an entry is charged against the budget: the body, the URL and header text, and a
    /// fixed allowance for the bookkeeping around them.
    static func cost(of data: Data, response: URLResponse, key: CacheKey) -> Int {
        var cost = data.count + key.url.utf8.count + fixedOverhead
        for value in key.identity { cost += value?.utf8.count ?? 0 }
        if let http = response as? HTTPURLResponse {
            for (name, value) in http.allHeaderFields {
                cost += String(describing: name).utf8.count + String(describing: value).utf8.count
            }
        }
        return cost
    }

    /// The allowance per entry for the key, the response object and the store's own bookkeeping.
    static let fixedOverhead = 256

    func matchesVary(of headers: [String: String]?) -> Bool {
        vary.allSatisfy { $0.value == Self.value(named: $0.name, in: headers) }
    }

    /// The value of the header `lowercasedName` in `headers`, ignoring case.
    static func value(named lowercasedName: String, in headers: [String: String]?) -> String? {
        guard let headers else { return nil }
        for (field, value) in headers where ASCII.equalsIgnoringCase(lowercasedName, field) {
            return value
        }
        return nil
    }
}
