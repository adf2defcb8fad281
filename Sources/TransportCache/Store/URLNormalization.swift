import Foundation

/// URL normalisation for keys: scheme and host lowercased, the default port and the fragment
/// dropped, the query kept. Already-normal URLs (nearly all of them) are recognised with one scan
/// of `absoluteString` and used as they are. A hit of a URL in normal form does not come here: a
/// request first looks its key up by its URL as written
/// (``CacheKey/init(method:writtenURL:values:account:keyHeaders:headers:)``), and its URL is
/// judged only when that finds nothing.
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

    /// The normal form of `url`, an http or https URL, with its digest as a key begins with it
    /// (``KeyDigest/add(_:finding:)``); nil for another scheme. A normal URL (nearly every one)
    /// is digested and checked in one scan of its bytes: the fragment's `#` is looked for eight
    /// bytes at a time as they are digested, and the authority is checked by
    /// ``isNormalized(_:httpOnly:)``'s rules, eight bytes at a time to each byte they judge.
    @inline(__always)
    static func keyed(_ url: borrowing URL) -> (url: String, digest: KeyDigest)? {
        // The URL is read here, inlined into the caller, and only its string is handed on: a URL
        // passed to another function was retained and released for the call.
        keyed(normal: url.absoluteString) ?? normalizedKeyURL(url)
    }

    /// `string`, a URL's `absoluteString`, with its digest, when it is normal already (see
    /// ``keyed(_:)``); nil otherwise.
    private static func keyed(normal string: consuming String) -> (url: String, digest: KeyDigest)? {
        var digest = KeyDigest()
        guard KeyDigest.reading(&string, { scan($0, into: &digest) }) else { return nil }
        return (string, digest)
    }

    /// Digests `bytes` into `digest` and says whether they are a normal URL, in one pass.
    @inline(__always)
    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>, into digest: inout KeyDigest) -> Bool {
        !digest.add(UnsafeRawBufferPointer(bytes), finding: UInt8(ascii: "#"))
            && isNormalized(bytes, httpOnly: true, fragmentChecked: true)
    }

    /// ``keyed(_:)`` of a URL that is not normal already.
    @inline(never)
    private static func normalizedKeyURL(_ url: borrowing URL) -> (url: String, digest: KeyDigest)? {
        guard let normalized = normalized(url, httpOnly: true) else { return nil }
        var digest = KeyDigest()
        digest.add(normalized)
        return (normalized, digest)
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

    /// - Parameter fragmentChecked: the bytes are known to hold no `#`.
    private static func isNormalized(
        _ bytes: UnsafeBufferPointer<UInt8>, httpOnly: Bool, fragmentChecked: Bool = false
    ) -> Bool {
        // Read through the base pointer, without overflow checks on offsets bounded by `count`:
        // a hit scans every byte of the authority, eight at a time where none needs a look.
        guard let base = bytes.baseAddress else { return false }
        let count = bytes.count
        guard let (schemeLength, isHTTP) = scheme(base, count: count) else { return false }
        if httpOnly && !isHTTP { return false }
        var index = schemeLength &+ 3
        // Authority up to "/", "?" or "#": no capitals, no user info. The bytes that need a look
        // are marked in two 64-bit masks, the one home of these rules; everything else (lowercase,
        // digits, ".", "-") passes. ``marks(_:)`` only finds the next byte for them to judge.
        let authorityStart = index
        var portStart = -1
        // "#", "/", ":" and "?" among the bytes below 64; "@", "A" to "Z" and "]" among 64 to 127.
        let lowMask: UInt64 = 1 << 0x23 | 1 << 0x2F | 1 << 0x3A | 1 << 0x3F
        let highMask: UInt64 = 0x07FF_FFFF | 1 << (0x5D - 64)
        while index < count {
            if index &+ 8 <= count {
                // Eight bytes at a time to the next one that may need a look (most of a host).
                let marks = marks(UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)))
                if marks == 0 {
                    index &+= 8
                    continue
                }
                index &+= marks.trailingZeroBitCount &>> 3
            }
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
        if portStart >= 0, !isNormalPort(base + portStart, length: index &- portStart, schemeLength, isHTTP) {
            return false
        }
        // No fragment anywhere after the authority.
        return fragmentChecked || index == count
            || memchr(base + index, Int32(UInt8(ascii: "#")), count &- index) == nil
    }

    /// Whether the port of `length` bytes at `port` may stay in a normal URL: not empty, and not
    /// the default of http (80) or https (443).
    @inline(__always)
    private static func isNormalPort(_ port: UnsafePointer<UInt8>, length: Int, _ schemeLength: Int, _ isHTTP: Bool)
        -> Bool
    {
        if length == 0 { return false }
        if isHTTP, schemeLength == 4, length == 2, port[0] == UInt8(ascii: "8"), port[1] == UInt8(ascii: "0") {
            return false
        }
        if isHTTP, schemeLength == 5, length == 3, port[0] == UInt8(ascii: "4"), port[1] == UInt8(ascii: "4"),
            port[2] == UInt8(ascii: "3")
        {
            return false
        }
        return true
    }

    /// The high bit of each of the eight bytes of `word` that may need a look in an authority:
    /// "#", "/", ":", "?" and "@" to "]" (the capitals among them); a byte of 128 or more passes,
    /// as the masks judge it. The lowest bit set is exact (bytes above it may be marked in excess),
    /// so it finds the next byte to look at without a branch per byte.
    @inline(__always)
    private static func marks(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs = ones &<< 7
        func holds(_ byte: UInt64) -> UInt64 {
            let matched = word ^ (ones &* byte)
            return (matched &- ones) & ~matched & highs
        }
        // The bytes strictly between 0x3F and 0x5E, each judged on its own seven low bits.
        let low = word & (ones &* 0x7F)
        let between = ((ones &* (127 + 0x5E)) &- low) & ~word & (low &+ ones &* (127 - 0x3F)) & highs
        return between | holds(0x23) | holds(0x2F) | holds(0x3A) | holds(0x3F)
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
