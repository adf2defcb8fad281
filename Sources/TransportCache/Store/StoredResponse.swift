import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One stored answer, with what is needed to decide whether it may be reused. Made by the
/// ``Committer``; read by the ``RequestPlanner`` and the ``FreshnessPolicy``.
///
/// A class, so that a hit takes it out of the store with one retain rather than copying each field.
///
/// `@unchecked Sendable` is safe here: every stored property but ``decoded``, ``hits`` and the
/// marked responses is an immutable `let` of a Sendable type, and those are only read or written
/// while the owning ``ResponseStore``'s lock is held.
final class StoredResponse: @unchecked Sendable {
    /// The key it is stored under.
    let key: CacheKey
    let data: Data
    /// The response, carrying the outcome of a fresh answer from memory, which a hit hands over
    /// as it is.
    let response: URLResponse
    /// The request field values it was fetched with that a later request must share.
    let selector: VariantSelector
    /// The request it was fetched with, which a revalidation sends again (made conditional):
    /// every header the app set, not only those in the key. Held, not copied: the fetch's own.
    let request: URLRequest
    /// What the entry is charged for its body, URL and headers (decoded values come on top).
    let cost: Int
    let storedAt: ContinuousClock.Instant
    /// When set, the entry is no longer fresh from this instant on.
    let expiresAt: ContinuousClock.Instant?
    /// When set, the entry answers at once, marked stale, until this instant past ``expiresAt``,
    /// while a background revalidation brings it up to date.
    let staleUntil: ContinuousClock.Instant?
    /// The entry's age when it was stored, when the transport follows HTTP caching: answers from
    /// it carry an `Age`.
    let initialAge: Duration?
    /// Never answered stale, not even when the network fails.
    let mustRevalidate: Bool
    /// The validators sent back as `If-None-Match` and `If-Modified-Since` to revalidate it.
    let entityTag: String?
    let lastModified: String?
    /// Values decoded from ``data``, by type and decoder, and decodes in progress. They live and
    /// die with this entry: an invalidated, evicted or replaced entry takes them along, except a
    /// replacement with the same bytes, which carries them over. Guarded by the store's lock.
    var decoded = DecodedValues()
    /// ``response`` marked as a stale-window answer, made on the first such answer and kept.
    /// Guarded by the store's lock.
    var staleWindowResponse: URLResponse?
    /// ``response`` carrying the outcome of a stale answer the request accepted, made on the first
    /// such answer and kept. Guarded by the store's lock.
    var staleAcceptedResponse: URLResponse?
    /// The requests it answered. Guarded by the store's lock; unchecked for the reason given on
    /// ``StoredVariants/all``.
    @exclusivity(unchecked) var hits = 0

    init(
        key: CacheKey,
        data: Data,
        response: URLResponse,
        selector: VariantSelector,
        request: URLRequest,
        cost: Int,
        storedAt: ContinuousClock.Instant,
        lifetime: EntryLifetime,
        entityTag: String?,
        lastModified: String?
    ) {
        self.key = key
        self.data = data
        self.response = response
        self.selector = selector
        self.request = request
        self.cost = cost
        self.storedAt = storedAt
        let expiresAt = lifetime.freshFor.map { storedAt.advanced(by: $0) }
        self.expiresAt = expiresAt
        staleUntil = lifetime.staleWindow.flatMap { window in expiresAt.map { $0.advanced(by: window) } }
        initialAge = lifetime.initialAge
        mustRevalidate = lifetime.mustRevalidate
        self.entityTag = entityTag
        self.lastModified = lastModified
    }

    /// True when the entry can be revalidated with a conditional request.
    var hasValidators: Bool { entityTag != nil || lastModified != nil }

    /// The bytes charged for this entry and the values decoded from it.
    var totalCost: Int { cost + decoded.cost }

    /// The entry's age at `instant` (RFC 9111 section 4.2.3), when it keeps one.
    func currentAge(at instant: ContinuousClock.Instant) -> Duration? {
        initialAge.map { $0 + (instant - storedAt) }
    }

    /// The allowance per entry for the key, the response object and the store's own bookkeeping.
    static let fixedOverhead = 256
}

/// The request field values a stored variant was fetched with, for the fields its response
/// selects on beyond the key's own: a later request must carry the same values to be answered by
/// it. Empty for a response that selects on nothing more.
struct VariantSelector: Sendable, Hashable {
    struct Field: Sendable, Hashable {
        /// Lowercased field name.
        let name: String
        let value: String?
    }

    let fields: [Field]

    /// The field names, in order.
    var names: [String] { fields.map(\.name) }

    /// Whether a request with `requestFields` carries the same values, once normalised
    /// (``Vary/normalized(_:lowercasedName:)``; the stored ones are).
    func selects(_ requestFields: [String: String]?) -> Bool {
        fields.allSatisfy { field in
            let value = HeaderFields.value(named: field.name, in: requestFields)
            return field.value == value || field.value == value.map { Vary.normalized($0, lowercasedName: field.name) }
        }
    }
}

/// The representations stored for one key, most recently used first: one per selector.
///
/// The store's least-recently-used order and byte budget work per key; this keeps the order
/// among a key's variants, so that callers alternating between field values are each answered
/// from memory.
///
/// `@unchecked Sendable` is safe here: ``all`` is only read or written while the owning
/// ``ResponseStore``'s lock is held.
final class StoredVariants: @unchecked Sendable {
    /// Unchecked: every access holds the store's lock already, and a hit would otherwise pay the
    /// runtime's exclusivity check (a thread-local lookup) to read it.
    @exclusivity(unchecked) private(set) var all: [StoredResponse]

    init(_ variants: [StoredResponse]) {
        all = variants
    }

    /// The variant a request with `requestFields` may be answered from.
    /// - Complexity: O(1) for a key whose responses select on nothing; O(v) in the variants otherwise.
    func selected(by requestFields: [String: String]?) -> StoredResponse? {
        selection(by: requestFields)?.variant
    }

    /// ``selected(by:)`` with the variant's place, which ``markUsed(at:)`` takes.
    @inline(__always)
    func selection(by requestFields: [String: String]?) -> (place: Int, variant: StoredResponse)? {
        let first = all[0]
        if first.selector.fields.isEmpty || first.selector.selects(requestFields) { return (0, first) }
        return selection(among: requestFields)
    }

    @inline(never)
    private func selection(among requestFields: [String: String]?) -> (place: Int, variant: StoredResponse)? {
        guard let place = all.indices.dropFirst().first(where: { all[$0].selector.selects(requestFields) }) else {
            return nil
        }
        return (place, all[place])
    }

    /// Makes the variant at `place` (``selection(by:)``) the most recently used.
    func markUsed(at place: Int) {
        guard place > 0 else { return }
        all.insert(all.remove(at: place), at: 0)
    }

    func contains(_ entry: StoredResponse) -> Bool {
        all.contains { $0 === entry }
    }

    /// The bytes charged for every variant and its decoded values.
    var totalCost: Int { all.reduce(0) { $0 + $1.totalCost } }
}

extension StoredVariants: ReleasableInSteps {
    /// A key's variants are let go of whole, when dropped.
    func releaseSome(_ limit: Int) -> Bool { false }
}
