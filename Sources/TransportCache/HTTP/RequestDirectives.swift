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

    /// The lengths of the names ``read(_:_:)`` looks for (``ASCII/lengthBit(_:)``).
    static let lengths = (conditionalHeaders + [cacheControl, pragma]).reduce(0) { $0 | ASCII.lengthBit($1) }

    /// The other names ``read(_:_:)`` looks for.
    private static let cacheControl = "cache-control"
    private static let pragma = "pragma"

    /// Why the request goes to the origin as sent, past the store and coalescing, storing
    /// nothing; nil when it does not.
    private(set) var bypass: CacheOutcome.PassThroughReason?
    /// Do not answer from memory without asking the origin; store the answer.
    private(set) var revalidates = false
    /// The request's `Cache-Control`, when it has one.
    var cacheControl: CacheControl? { requested?.value }
    /// The same, held by reference: most requests carry none, and the directives of one that
    /// carries none stay a few bytes, copied with every request's fields at no cost.
    private var requested: Requested?

    private final class Requested: Sendable {
        let value: CacheControl
        init(_ value: CacheControl) { self.value = value }
    }

    /// `Pragma: no-cache` was read; it counts only where `Cache-Control` is absent.
    private var pragmaNoCache = false

    init() {}

    /// The directives of a request with `headers`.
    /// - Complexity: O(h) in the number of header fields, and no allocation unless the request
    ///   carries `Cache-Control` or `Pragma`.
    init(_ headers: [String: String]?) {
        guard let headers, !headers.isEmpty else { return }
        for (field, value) in headers { read(field, value) }
        finish()
    }

    /// Reads one header field of the request; ``finish()`` follows the last
    /// (``RequestFields`` reads every field once for all it needs, and only those of the lengths
    /// ``lengths`` holds).
    @inline(__always)
    mutating func read(_ field: String, _ value: String) {
        // Every name looked for starts with "i", "r", "c" or "p"; most header names do not.
        guard let first = field.utf8.first else { return }
        switch first | 0x20 {
        case UInt8(ascii: "i"), UInt8(ascii: "r"):
            if Self.conditionalHeaders.contains(where: { ASCII.equalsIgnoringCase($0, field) }) {
                bypass = .requestConditions
            }
        case UInt8(ascii: "c"):
            guard ASCII.equalsIgnoringCase(Self.cacheControl, field) else { return }
            let directives = CacheControl(value)
            requested = Requested(directives)
            if directives.noStore, bypass == nil { bypass = .requestNoStore }
            if directives.noCache || directives.maxAge == .value(0) { revalidates = true }
        case UInt8(ascii: "p"):
            if ASCII.equalsIgnoringCase(Self.pragma, field), HeaderList.contains("no-cache", in: value) {
                pragmaNoCache = true
            }
        default:
            return
        }
    }

    /// Completes the directives once every field was read.
    @inline(__always)
    mutating func finish() {
        // `Pragma` counts only where `Cache-Control` is absent (RFC 9111 section 5.4).
        if pragmaNoCache, requested == nil { revalidates = true }
    }
}
