/// The directives of a `Cache-Control` field (RFC 9111 section 5.2), request or response: the one
/// parser of the field in the library.
///
/// Names compare without case; a directive given twice keeps its first value (section 4.2.1). A
/// delta-seconds value that is not a non-negative integer (`3600.0`, `3600a`, `a3600`) is recorded
/// as invalid, which callers treat as the most cautious reading (a response's `max-age` then makes
/// it stale). The grammar (`token [ "=" ( token / quoted-string ) ]`) has no spaces around `=`:
/// `max-age =60` names another directive, ignored, and `max-age= 60` has an invalid value.
struct CacheControl: Sendable, Equatable {
    /// A `delta-seconds` argument: a number of seconds, or present but unreadable.
    enum Seconds: Sendable, Equatable {
        case value(Int)
        case invalid

        var seconds: Int? {
            if case .value(let seconds) = self { return seconds }
            return nil
        }
    }

    var maxAge: Seconds?
    var maxStale: Seconds?
    /// `max-stale` without an argument: any staleness is acceptable.
    var acceptsAnyStaleness = false
    var minFresh: Seconds?
    var staleWhileRevalidate: Seconds?
    var noCache = false
    var noStore = false
    var mustRevalidate = false
    var isPrivate = false
    var onlyIfCached = false
    var isPublic = false
    /// `must-understand`: store only a status whose caching rules the cache implements (section
    /// 5.2.2.3), and then ignore `no-store`.
    var mustUnderstand = false
    /// `proxy-revalidate` or `s-maxage`: rules for shared caches that a private one need not
    /// follow, but that forbid serving the response stale there.
    var forbidsStaleInSharedCaches = false
    /// `stale-if-error` (RFC 5861 section 4): how long past its freshness the response may answer
    /// when the origin cannot be reached or answers with a server error.
    var staleIfError: Seconds?

    init() {}

    /// The directives of `value`, the field's (combined) value; nil reads as none.
    init(_ value: String?) {
        guard let value else { return }
        for item in HeaderList.elements(value) {
            var name = item
            var argument: Substring?
            if let equals = item.utf8.firstIndex(of: UInt8(ascii: "=")) {
                name = item[..<equals]
                argument = Self.unquoted(item[item.utf8.index(after: equals)...])
            }
            switch ASCII.lowercased(String(name)) {
            case "max-age": if maxAge == nil { maxAge = Self.seconds(argument) }
            case "max-stale":
                if argument == nil {
                    acceptsAnyStaleness = true
                } else if maxStale == nil {
                    maxStale = Self.seconds(argument)
                }
            case "min-fresh": if minFresh == nil { minFresh = Self.seconds(argument) }
            case "stale-while-revalidate":
                if staleWhileRevalidate == nil { staleWhileRevalidate = Self.seconds(argument) }
            // `no-cache="field"` limits reuse of those fields; a private cache may treat it as
            // plain `no-cache`, which is the cautious reading (and the same for `private=`).
            case "no-cache": noCache = true
            case "no-store": noStore = true
            case "must-revalidate": mustRevalidate = true
            case "private": isPrivate = true
            case "only-if-cached": onlyIfCached = true
            case "public": isPublic = true
            case "must-understand": mustUnderstand = true
            case "proxy-revalidate", "s-maxage": forbidsStaleInSharedCaches = true
            case "stale-if-error": if staleIfError == nil { staleIfError = Self.seconds(argument) }
            default: break
            }
        }
    }

    private static func unquoted(_ value: Substring) -> Substring {
        let utf8 = value.utf8
        guard utf8.count >= 2, utf8.first == UInt8(ascii: "\""), utf8.last == UInt8(ascii: "\"") else { return value }
        return value[utf8.index(after: utf8.startIndex)..<utf8.index(before: utf8.endIndex)]
    }

    /// `delta-seconds` (RFC 9111 section 1.2.2): digits only; an overflowing value is the largest.
    private static func seconds(_ argument: Substring?) -> Seconds {
        guard let argument, ASCII.isDigits(argument) else { return .invalid }
        return .value(Int(argument) ?? Int(Int32.max))
    }
}
