import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What identifies one stored response: the method, the normalised URL (query included) and the
/// values of the request headers that select a representation.
///
/// Requests that differ in any identity header (`Authorization`, `Cookie`, `Accept`,
/// `Accept-Language` and the configured extras) get different keys, so they never share an entry
/// or an in-flight fetch. Headers a stored response names in `Vary` are checked on top of the key
/// by the store, against the request that stored it.
struct CacheKey: Hashable, Sendable {
    /// `GET` or `HEAD`, or `POST` for a query (``CachedTransport/Configuration/queryEndpoints``).
    let method: String
    /// The URL with scheme and host lowercased, the default port and the fragment dropped.
    let url: String
    /// One value per name in ``KeyHeaders/names`` (nil where absent); empty when all are absent,
    /// so the common request without identity headers allocates nothing here. A query `POST`'s
    /// body follows them.
    let identity: [String?]
    /// The three above folded into one word when the key is made (see ``KeyDigest``).
    private let digest: UInt64

    init(method: String, url: String, identity: [String?]) {
        self.method = method
        self.url = url
        self.identity = identity
        var digest = KeyDigest()
        digest.add(url)
        digest.add(method)
        for value in identity { digest.add(value) }
        self.digest = digest.value
    }

    /// The account the request belongs to (``CachedTransport/Configuration/partition``), kept in
    /// ``identity`` in place of its `Authorization` and `Cookie` values; nil without one.
    var partition: String? {
        for case let value? in identity where value.hasPrefix(KeyHeaders.partitionPrefix) {
            return String(value.dropFirst(KeyHeaders.partitionPrefix.count))
        }
        return nil
    }

    /// Feeds `Hasher` one word instead of every byte of the URL: SipHash over the URL cost more
    /// than the rest of a hit.
    func hash(into hasher: inout Hasher) {
        hasher.combine(digest)
    }

    static func == (left: CacheKey, right: CacheKey) -> Bool {
        left.digest == right.digest && left.url == right.url && left.method == right.method
            && left.identity == right.identity
    }
}

/// A fast 64-bit digest of a key's strings, eight bytes per multiplication.
///
/// It only spreads keys before `Hasher` (SipHash, seeded per process) hashes the digest, so what
/// it must do is make equal digests rare: it starts from a per-process seed taken from `Hasher`
/// (fixed when `SWIFT_DETERMINISTIC_HASHING` is set), so colliding keys cannot be prepared in
/// advance, and keys whose digests do collide still compare unequal.
struct KeyDigest {
    private static let seed: UInt64 = {
        var hasher = Hasher()
        hasher.combine(0x7472_616E_7370_6F72 as UInt64)
        return UInt64(truncatingIfNeeded: hasher.finalize())
    }()

    private(set) var value = KeyDigest.seed

    mutating func add(_ string: String?) {
        guard let string else {
            value = Self.mix(value, 0x6E6F_6E65)
            return
        }
        // Borrowed where the string stores its bytes contiguously (any native string); a copy of
        // the string, as `withUTF8` makes, would cost a retain and a release.
        if string.utf8.withContiguousStorageIfAvailable({ add(UnsafeRawBufferPointer($0)) }) == nil {
            var copy = string
            copy.withUTF8 { add(UnsafeRawBufferPointer($0)) }
        }
    }

    private mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var state = Self.mix(value, UInt64(bytes.count))
        var offset = 0
        while offset + 8 <= bytes.count {
            state = Self.mix(state, bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            offset += 8
        }
        if offset < bytes.count {
            var tail: UInt64 = 0
            for index in offset..<bytes.count { tail = tail << 8 | UInt64(bytes[index]) }
            state = Self.mix(state, tail)
        }
        value = state
    }

    /// One round: the two halves of a full-width product, as wyhash mixes.
    private static func mix(_ state: UInt64, _ word: UInt64) -> UInt64 {
        let product = (state ^ word ^ 0xA076_1D64_78BD_642F).multipliedFullWidth(by: 0xE703_7ED1_A0B4_28DB)
        return product.high ^ product.low
    }
}

/// The request headers that join the key, lowercased and sorted so keys are stable, and the
/// partition that replaces the credentials among them.
struct KeyHeaders: Sendable {
    static let standard = ["accept", "accept-language", "authorization", "cookie"]
    /// The headers a partition stands for.
    static let credentials = ["authorization", "cookie"]

    let names: [String]
    /// ``CachedTransport/Configuration/partition``.
    let partition: (@Sendable (URLRequest) -> String?)?

    init(extra: some Sequence<String>, partition: (@Sendable (URLRequest) -> String?)? = nil) {
        var all = Set(Self.standard)
        for name in extra { all.insert(name.lowercased()) }
        names = all.sorted()
        self.partition = partition
    }

    /// What marks a partition among the identity values: a header value holds no control
    /// character, so no header's value can pass for a partition.
    static let partitionPrefix = "\u{0}partition "

    /// The identity of `request`, whose header fields are `fields`: the values of the key headers,
    /// and, when the request has a partition, that partition in place of its credentials' values.
    @inline(__always)
    func identity(of request: URLRequest, fields: [String: String]?) -> [String?] {
        guard let partition else { return values(in: fields) }
        return identity(of: request, fields: fields, partition: partition)
    }

    @inline(never)
    private func identity(
        of request: URLRequest, fields: [String: String]?, partition: (URLRequest) -> String?
    ) -> [String?] {
        var values = values(in: fields)
        guard let declared = partition(request) else { return values }
        if values.isEmpty { values = Array(repeating: nil, count: names.count) }
        for (position, name) in names.enumerated() where Self.credentials.contains(name) { values[position] = nil }
        return values + [Self.partitionPrefix + declared]
    }

    /// The values of the key headers in `fields`, aligned with ``names``; empty when none is set.
    ///
    /// Header names compare without regard to case, and values are normalised as `Vary` selects
    /// (``Vary/normalized(_:lowercasedName:)``). When a dictionary holds the same name in two
    /// spellings, their values are joined in sorted order, so the key does not depend on
    /// dictionary order.
    func values(in fields: [String: String]?) -> [String?] {
        guard let fields, !fields.isEmpty else { return [] }
        var values: [String?] = []
        for (field, value) in fields {
            guard let position = names.firstIndex(where: { ASCII.equalsIgnoringCase($0, field) }) else {
                continue
            }
            if values.isEmpty { values = Array(repeating: nil, count: names.count) }
            let value = Vary.normalized(value, lowercasedName: names[position])
            if let existing = values[position] {
                values[position] = [existing, value].sorted().joined(separator: ", ")
            } else {
                values[position] = value
            }
        }
        return values
    }
}

extension CacheKey {
    /// The key of `request`, sent with `method` to `url` with header fields `fields`, or nil for
    /// another scheme or a URL that cannot be normalised. Every key of a request is made here.
    init?(_ request: URLRequest, method: String, url: URL, fields: [String: String]?, keyHeaders: KeyHeaders) {
        guard let normalized = URLNormalization.normalized(url, httpOnly: true) else { return nil }
        self.init(method: method, url: normalized, identity: keyHeaders.identity(of: request, fields: fields))
    }

    /// The key of `request`; see ``init(_:method:url:fields:keyHeaders:)``.
    init?(_ request: URLRequest, keyHeaders: KeyHeaders) {
        guard let url = request.url else { return nil }
        self.init(
            request, method: request.httpMethod ?? "GET", url: url, fields: request.allHTTPHeaderFields,
            keyHeaders: keyHeaders)
    }
}
