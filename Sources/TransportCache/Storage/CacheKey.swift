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
    /// `GET` or `HEAD`.
    let method: String
    /// The URL with scheme and host lowercased, the default port and the fragment dropped.
    let url: String
    /// One value per name in ``KeyHeaders/names`` (nil where absent); empty when all are absent,
    /// so the common request without identity headers allocates nothing here.
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

/// The request headers that join the key, lowercased and sorted so keys are stable.
struct KeyHeaders: Sendable {
    static let standard = ["accept", "accept-language", "authorization", "cookie"]

    let names: [String]

    init(extra: some Sequence<String>) {
        var all = Set(Self.standard)
        for name in extra { all.insert(name.lowercased()) }
        names = all.sorted()
    }

    /// The values of the key headers in `fields`, aligned with ``names``; empty when none is set.
    ///
    /// Header names compare without regard to case. When a dictionary holds the same name in two
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
    /// The key of a request to an http(s) URL, or nil for another scheme or a URL that cannot be
    /// normalised.
    init?(method: String, url: URL, headers: [String: String]?, keyHeaders: KeyHeaders) {
        guard let normalized = URLNormalization.normalized(url, httpOnly: true) else { return nil }
        self.init(method: method, url: normalized, identity: keyHeaders.values(in: headers))
    }
}

enum ASCII {
    /// `string` with its ASCII capitals lowercased, other characters left alone; `string` itself
    /// when it has none, which is the common case for header names and costs one scan.
    static func lowercased(_ string: String) -> String {
        let utf8 = string.utf8
        guard utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return string }
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            var count = 0
            for byte in utf8 {
                buffer[count] = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
                count += 1
            }
            return count
        }
    }

    /// The comma-separated elements of a header field value (`Cache-Control`, `Vary`, `Pragma`),
    /// each without surrounding spaces and tabs and with ASCII capitals lowercased; empty
    /// elements are left out.
    static func lowercasedElements(_ value: String) -> [String] {
        var elements: [String] = []
        for element in value.utf8.split(separator: UInt8(ascii: ",")) {
            var trimmed = element[...]
            while let first = trimmed.first, first == 0x20 || first == 0x09 { trimmed = trimmed.dropFirst() }
            while let last = trimmed.last, last == 0x20 || last == 0x09 { trimmed = trimmed.dropLast() }
            if trimmed.isEmpty { continue }
            elements.append(lowercased(String(decoding: trimmed, as: UTF8.self)))
        }
        return elements
    }

    /// Case-insensitive equality for header names without allocating lowercased copies.
    /// `lowercase` must already be lowercase ASCII.
    static func equalsIgnoringCase(_ lowercase: String, _ other: String) -> Bool {
        var left = lowercase.utf8.makeIterator()
        var right = other.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil):
                return true
            case let (a?, b?):
                let folded = (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
                if a != folded { return false }
            default:
                return false
            }
        }
    }
}

/// URL normalisation for keys: scheme and host lowercased, the default port and the fragment
/// dropped, the query kept. Already-normal URLs (nearly all of them) are recognised with one scan
/// of `absoluteString` and used as they are.
enum URLNormalization {
    /// - Parameter httpOnly: return nil unless the scheme is http or https.
    static func normalized(_ url: URL, httpOnly: Bool = false) -> String? {
        let string = url.absoluteString
        if isNormalized(string, httpOnly: httpOnly) { return string }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let scheme = components.scheme?.lowercased(),
            !httpOnly || scheme == "http" || scheme == "https"
        else { return nil }
        components.scheme = scheme
        if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
        components.fragment = nil
        if let port = components.port, port == defaultPort(for: scheme) { components.port = nil }
        return components.string
    }

    static func defaultPort(for scheme: String) -> Int? {
        switch scheme {
        case "http": 80
        case "https": 443
        default: nil
        }
    }

    /// True when `string` is `scheme://authority…` with a lowercase scheme and authority, no user
    /// info, no default port and no fragment.
    /// - Parameter httpOnly: also require the scheme to be http or https.
    static func isNormalized(_ string: String, httpOnly: Bool = false) -> Bool {
        if let normalized = string.utf8.withContiguousStorageIfAvailable({ isNormalized($0, httpOnly: httpOnly) }) {
            return normalized
        }
        var string = string
        return string.withUTF8 { isNormalized(UnsafeBufferPointer(rebasing: $0[...]), httpOnly: httpOnly) }
    }

    private static func isNormalized(_ bytes: UnsafeBufferPointer<UInt8>, httpOnly: Bool) -> Bool {
        // Read through the base pointer, without overflow checks on offsets bounded by `count`:
        // a hit scans every byte, and this keeps each to a load, a shift and a test.
        guard let base = bytes.baseAddress else { return false }
        let count = bytes.count
        guard let (schemeLength, isHTTP) = scheme(base, count: count) else { return false }
        if httpOnly && !isHTTP { return false }
        var index = schemeLength &+ 3
        // Authority up to "/", "?" or "#": no capitals, no user info. The bytes that need a look
        // are marked in two 64-bit masks; everything else (lowercase, digits, ".", "-") passes.
        let authorityStart = index
        var portStart = -1
        // "#", "/", ":" and "?" among the bytes below 64; "@", "A" to "Z" and "]" among 64 to 127.
        let lowMask: UInt64 = 1 << 0x23 | 1 << 0x2F | 1 << 0x3A | 1 << 0x3F
        let highMask: UInt64 = 0x07FF_FFFF | 1 << (0x5D - 64)
        while index < count {
            let byte = base[index]
            let marked = byte < 64 ? (lowMask >> byte) & 1 : byte < 128 ? (highMask >> (byte &- 64)) & 1 : 0
            if marked != 0 {
                if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
                if byte == UInt8(ascii: ":") {
                    portStart = index &+ 1
                } else if byte == UInt8(ascii: "]") {
                    portStart = -1
                } else {
                    return false  // a capital or "@"
                }
            }
            index &+= 1
        }
        guard index > authorityStart else { return false }
        if portStart >= 0 {
            let portLength = index &- portStart
            if portLength == 0 { return false }
            if isHTTP, schemeLength == 4, portLength == 2,
                base[portStart] == UInt8(ascii: "8"), base[portStart &+ 1] == UInt8(ascii: "0")
            {
                return false
            }
            if isHTTP, schemeLength == 5, portLength == 3, base[portStart] == UInt8(ascii: "4"),
                base[portStart &+ 1] == UInt8(ascii: "4"), base[portStart &+ 2] == UInt8(ascii: "3")
            {
                return false
            }
        }
        // No fragment anywhere after the authority.
        return index == count || memchr(base + index, Int32(UInt8(ascii: "#")), count &- index) == nil
    }

    /// The length of the scheme before "://" and whether it is http or https, when it is
    /// lowercase letters, digits, "+", "-" or "."; nil otherwise.
    private static func scheme(_ base: UnsafePointer<UInt8>, count: Int) -> (length: Int, isHTTP: Bool)? {
        // The two schemes a transport caches, at once.
        if count >= 8, base[0] == UInt8(ascii: "h"), base[1] == UInt8(ascii: "t"), base[2] == UInt8(ascii: "t"),
            base[3] == UInt8(ascii: "p")
        {
            if base[4] == UInt8(ascii: ":"), base[5] == UInt8(ascii: "/"), base[6] == UInt8(ascii: "/") {
                return (4, true)
            }
            if base[4] == UInt8(ascii: "s"), base[5] == UInt8(ascii: ":"), base[6] == UInt8(ascii: "/"),
                base[7] == UInt8(ascii: "/")
            {
                return (5, true)
            }
        }
        var index = 0
        while index < count, base[index] != UInt8(ascii: ":") {
            let byte = base[index]
            guard
                (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "+")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            else { return nil }
            index &+= 1
        }
        guard index > 0, index &+ 3 <= count, base[index &+ 1] == UInt8(ascii: "/"),
            base[index &+ 2] == UInt8(ascii: "/")
        else { return nil }
        let isHTTP =
            (index == 4 || index == 5) && base[0] == UInt8(ascii: "h") && base[1] == UInt8(ascii: "t")
            && base[2] == UInt8(ascii: "t") && base[3] == UInt8(ascii: "p")
            && (index == 4 || base[4] == UInt8(ascii: "s"))
        return (index, isHTTP)
    }
}
