import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One stored answer, with what is needed to decide whether it may be reused.
///
/// A class, so that a hit takes it out of the store with one retain rather than copying each field.
///
/// `@unchecked Sendable` is safe here: every stored property but ``decoded`` and the lazily built
/// stale-window response is an immutable `let` of a Sendable type, and those two are only read or
/// written while the owning ``MemoryURLCache``'s lock is held.
final class StoredResponse: @unchecked Sendable {
    let data: Data
    let response: URLResponse
    /// Headers the response named in `Vary` (beyond the key's own), with the storing request's
    /// values: a later request must carry the same values to reuse this entry.
    let vary: [VaryHeader]
    /// What the entry is charged for its body, URL and headers (decoded values come on top).
    let cost: Int
    let storedAt: ContinuousClock.Instant
    /// When set, the entry is no longer returned as fresh from this instant on.
    let expiresAt: ContinuousClock.Instant?
    /// When set, the entry answers at once, marked stale, until this instant past ``expiresAt``,
    /// while a background revalidation brings it up to date.
    let staleUntil: ContinuousClock.Instant?
    /// The entry's age when it was stored, when the transport follows HTTP caching
    /// (``CachedTransport/Configuration/conformsToHTTPCaching``): answers from it carry an `Age`.
    let initialAge: Duration?
    /// The response said `no-cache` or `must-revalidate` (HTTP caching only): it is never
    /// answered stale.
    let mustRevalidate: Bool
    /// The response's `ETag` and `Last-Modified`, sent back as `If-None-Match` and
    /// `If-Modified-Since` when the entry is revalidated.
    let entityTag: String?
    let lastModified: String?
    /// Values decoded from ``data``, by type and decoder, and decodes in progress. They live and
    /// die with this entry: an invalidated, evicted or replaced entry takes them along, except a
    /// replacement with the same bytes, which carries them over. Guarded by the store's lock.
    var decoded = DecodedValues()
    /// ``response`` marked as a stale-window answer, built on the first such answer. Guarded by
    /// the store's lock.
    private var staleWindowResponse: URLResponse?

    init(
        data: Data,
        response: URLResponse,
        vary: [VaryHeader],
        cost: Int,
        storedAt: ContinuousClock.Instant,
        lifetime: EntryLifetime
    ) {
        self.data = data
        self.response = response
        self.vary = vary
        self.cost = cost
        self.storedAt = storedAt
        let expiresAt = lifetime.freshFor.map { storedAt.advanced(by: $0) }
        self.expiresAt = expiresAt
        staleUntil = lifetime.staleWindow.flatMap { window in expiresAt.map { $0.advanced(by: window) } }
        initialAge = lifetime.initialAge
        mustRevalidate = lifetime.mustRevalidate
        let http = response as? HTTPURLResponse
        entityTag = http?.headerValue("etag")
        lastModified = http?.headerValue("last-modified")
    }

    struct VaryHeader: Sendable, Hashable {
        /// Lowercased header name.
        let name: String
        let value: String?
    }

    /// True when the entry can be revalidated with a conditional request.
    var hasValidators: Bool { entityTag != nil || lastModified != nil }

    /// The bytes charged for this entry and the values decoded from it.
    var totalCost: Int {
        cost + decoded.cost
    }

    /// The response a stale-window answer carries: ``response`` with
    /// ``CachedTransport/staleHeaderField`` set to ``CachedTransport/revalidatingStaleValue``.
    /// Built once per entry. Call with the store's lock held.
    func staleWindowAnswer() -> URLResponse {
        if let staleWindowResponse { return staleWindowResponse }
        let marked = Self.marked(response, value: CachedTransport.revalidatingStaleValue)
        staleWindowResponse = marked
        return marked
    }

    /// `response` with ``CachedTransport/staleHeaderField`` set to `value`.
    static func marked(_ response: URLResponse, value: String) -> URLResponse {
        with(response, field: CachedTransport.staleHeaderField, value: value)
    }

    /// `response` with the header `name` set to `value` (any spelling of the name replaced).
    static func with(_ response: URLResponse, field name: String, value: String) -> URLResponse {
        guard let http = response as? HTTPURLResponse, let url = http.url else { return response }
        var fields = headerFields(of: http)
        for existing in fields.keys where existing.caseInsensitiveCompare(name) == .orderedSame {
            fields[existing] = nil
        }
        fields[name] = value
        return HTTPURLResponse(url: url, statusCode: http.statusCode, httpVersion: "HTTP/1.1", headerFields: fields)
            ?? response
    }

    /// The entry's current age at `instant` (RFC 9111 section 4.2.3), when it keeps one.
    func currentAge(at instant: ContinuousClock.Instant) -> Duration? {
        initialAge.map { $0 + (instant - storedAt) }
    }

    static func headerFields(of response: HTTPURLResponse) -> [String: String] {
        HeaderFields(of: response).fields
    }

    /// The bytes an entry is charged against the budget: the body, the URL and header text, and a
    /// fixed allowance for the bookkeeping around them.
    static func cost(of data: Data, response: URLResponse, key: CacheKey) -> Int {
        var cost = data.count + key.url.utf8.count + fixedOverhead
        for value in key.identity { cost += value?.utf8.count ?? 0 }
        if let http = response as? HTTPURLResponse {
            for field in HeaderFields(of: http).byLowercasedName.values {
                cost += field.name.utf8.count + field.value.utf8.count
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

/// The representations stored for one key: one per combination of values of the request headers
/// the origin names in `Vary`, most recently used first, at most a configured few.
///
/// The store's least-recently-used order and byte budget work per key; this keeps the order
/// among a key's variants, so that callers alternating between header values are each answered
/// from memory.
///
/// `@unchecked Sendable` is safe here: ``all`` is only read or written while the owning ``MemoryURLCache``'s
/// lock is held.
final class StoredVariants: @unchecked Sendable {
    /// Unchecked: every access holds the store's lock already, and a hit would otherwise pay the
    /// runtime's exclusivity check (a thread-local lookup) to read it.
    @exclusivity(unchecked) private(set) var all: [StoredResponse]

    init(_ variants: [StoredResponse]) {
        all = variants
    }

    /// The variant a request with `headers` may reuse, made the most recently used.
    /// - Complexity: O(1) for a key without `Vary`; O(v) in the number of variants otherwise.
    func match(_ headers: [String: String]?) -> StoredResponse? {
        let first = all[0]
        if first.vary.isEmpty || first.matchesVary(of: headers) { return first }
        guard let position = all.indices.dropFirst().first(where: { all[$0].matchesVary(of: headers) }) else {
            return nil
        }
        let found = all.remove(at: position)
        all.insert(found, at: 0)
        return found
    }

    /// The variant a request with `headers` may reuse, leaving the order alone.
    func peek(_ headers: [String: String]?) -> StoredResponse? {
        all.first { $0.vary.isEmpty || $0.matchesVary(of: headers) }
    }

    func contains(_ entry: StoredResponse) -> Bool {
        all.contains { $0 === entry }
    }

    /// Puts `replacement` where `entry` was. - Returns: false when `entry` is not held.
    func replace(_ entry: StoredResponse, with replacement: StoredResponse) -> Bool {
        guard let position = all.firstIndex(where: { $0 === entry }) else { return false }
        all[position] = replacement
        return true
    }

    /// The bytes charged for every variant and its decoded values.
    var totalCost: Int { all.reduce(0) { $0 + $1.totalCost } }
}
