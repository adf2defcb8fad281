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
    /// The key of a cacheable request, or nil when the request has no URL that can be normalised.
    init?(method: String, url: URL, headers: [String: String]?, keyHeaders: KeyHeaders) {
        guard let normalized = URLNormalization.normalized(url) else { return nil }
        self.init(method: method, url: normalized, identity: keyHeaders.values(in: headers))
    }
}

enum ASCII {
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
    static func normalized(_ url: URL) -> String? {
        let string = url.absoluteString
        if isNormalized(string) { return string }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
              let scheme = components.scheme?.lowercased()
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
    static func isNormalized(_ string: String) -> Bool {
        let bytes = string.utf8
        var index = bytes.startIndex
        var schemeLength = 0
        // Scheme: lowercase letters up to "://".
        while index != bytes.endIndex, bytes[index] != UInt8(ascii: ":") {
            let byte = bytes[index]
            guard (byte >= 0x61 && byte <= 0x7A) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: ".") || (byte >= 0x30 && byte <= 0x39) else { return false }
            schemeLength += 1
            index = bytes.index(after: index)
        }
        guard schemeLength > 0, index != bytes.endIndex else { return false }
        // "://"
        for expected in "://".utf8 {
            guard index != bytes.endIndex, bytes[index] == expected else { return false }
            index = bytes.index(after: index)
        }
        // Authority up to "/", "?" or "#".
        var portStart: String.UTF8View.Index?
        var authorityLength = 0
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte >= 0x41 && byte <= 0x5A { return false }
            if byte == UInt8(ascii: "@") { return false }
            if byte == UInt8(ascii: ":") { portStart = bytes.index(after: index) }
            if byte == UInt8(ascii: "]") { portStart = nil }
            authorityLength += 1
            index = bytes.index(after: index)
        }
        guard authorityLength > 0 else { return false }
        if let portStart {
            let port = string[portStart..<index]
            if port.isEmpty { return false }
            if port == "80" && string.hasPrefix("http:") { return false }
            if port == "443" && string.hasPrefix("https:") { return false }
        }
        // No fragment anywhere after the authority.
        return !bytes[index...].contains(UInt8(ascii: "#"))
    }
}
