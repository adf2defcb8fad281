import Foundation

/// What a request's own headers ask of the cache: to be left out of it (its own conditions or
/// range, or `Cache-Control: no-store`), to be revalidated (`no-cache`, `max-age=0`, or
/// `Pragma: no-cache` without `Cache-Control`), and, for the HTTP caching mode, its other
/// `Cache-Control` directives.
struct RequestDirectives {
    /// Request headers that make the origin's answer depend on what the caller already holds
    /// (a `304`, a `412`, a `206`): such an answer is the caller's own, and must neither come
    /// from nor go into the store.
    static let conditionalHeaders = [
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range",
    ]

    /// Why the request goes to the origin as sent, past the store and coalescing, storing
    /// nothing; nil when it does not.
    private(set) var bypass: CacheOutcome.PassThroughReason?
    /// Do not answer from memory without asking the origin; store the answer.
    private(set) var revalidates = false
    /// The request's `Cache-Control`, when it has one.
    private(set) var cacheControl: CacheControl?

    /// The directives of a request with `headers`.
    /// - Complexity: O(h) in the number of header fields, and no allocation unless the request
    ///   carries `Cache-Control` or `Pragma`.
    init(_ headers: [String: String]?) {
        guard let headers, !headers.isEmpty else { return }
        var pragmaNoCache = false
        for (field, value) in headers {
            // Every name looked for starts with "i", "r", "c" or "p"; most header names do not.
            guard let first = field.utf8.first else { continue }
            switch first | 0x20 {
            case UInt8(ascii: "i"), UInt8(ascii: "r"):
                if Self.conditionalHeaders.contains(where: { ASCII.equalsIgnoringCase($0, field) }) {
                    bypass = .requestConditions
                }
            case UInt8(ascii: "c"):
                guard ASCII.equalsIgnoringCase("cache-control", field) else { continue }
                let directives = CacheControl(value)
                cacheControl = directives
                if directives.noStore, bypass == nil { bypass = .requestNoStore }
                if directives.noCache || directives.maxAge == .value(0) { revalidates = true }
            case UInt8(ascii: "p"):
                if ASCII.equalsIgnoringCase("pragma", field), HeaderList.contains("no-cache", in: value) {
                    pragmaNoCache = true
                }
            default:
                continue
            }
        }
        // `Pragma` counts only where `Cache-Control` is absent (RFC 9111 section 5.4).
        if pragmaNoCache, cacheControl == nil { revalidates = true }
    }
}
