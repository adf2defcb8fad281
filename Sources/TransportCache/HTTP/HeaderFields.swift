import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response's header fields read once, for several lookups.
///
/// On Linux every `HTTPURLResponse.value(forHTTPHeaderField:)` lowercases every field name of the
/// response (a few thousand instructions each), and `allHeaderFields` converts the whole table to
/// `[AnyHashable: Any]`: deciding a rewrite and a store with them cost tens of thousands of
/// instructions per miss. This takes the table once and answers each lookup with one hash.
struct HeaderFields: Sendable {
    /// The fields by lowercased name, each with its name as the response gave it.
    private(set) var byLowercasedName: [String: (name: String, value: String)] = [:]

    init() {}

    init(_ fields: [String: String]) {
        byLowercasedName.reserveCapacity(fields.count)
        for (name, value) in fields { set(value, name: name, lowercasedName: ASCII.lowercased(name)) }
    }

    init(of response: HTTPURLResponse) {
        if let rewritten = response as? TransportHTTPURLResponse {
            self = rewritten.headerFields
            return
        }
        self.init(Self.strings(response.allHeaderFields))
    }

    /// `allHeaderFields` as strings.
    static func strings(_ all: [AnyHashable: Any]) -> [String: String] {
        var fields: [String: String] = [:]
        fields.reserveCapacity(all.count)
        for (name, value) in all {
            fields[name.base as? String ?? String(describing: name)] = value as? String ?? String(describing: value)
        }
        return fields
    }

    /// Sets the field `name`, replacing any field whose name differs only in case.
    mutating func set(_ value: String, name: String, lowercasedName: String) {
        byLowercasedName[lowercasedName] = (name, value)
    }

    /// The fields by their names as given.
    var fields: [String: String] {
        var fields: [String: String] = [:]
        fields.reserveCapacity(byLowercasedName.count)
        for field in byLowercasedName.values { fields[field.name] = field.value }
        return fields
    }

    /// The value of the field `lowercasedName`.
    subscript(lowercasedName: String) -> String? {
        byLowercasedName[lowercasedName]?.value
    }
}

extension HeaderFields {
    /// The value of the field `lowercasedName` in a request's `fields`, ignoring the case of names.
    static func value(named lowercasedName: String, in fields: [String: String]?) -> String? {
        guard let fields else { return nil }
        for (field, value) in fields where ASCII.equalsIgnoringCase(lowercasedName, field) {
            return value
        }
        return nil
    }
}

extension HTTPURLResponse {
    /// The value of the header field `lowercasedName`: one hash lookup on a response the library
    /// made, `value(forHTTPHeaderField:)` on any other.
    func headerValue(_ lowercasedName: String) -> String? {
        if let rewritten = self as? TransportHTTPURLResponse { return rewritten.headerFields[lowercasedName] }
        return value(forHTTPHeaderField: lowercasedName)
    }
}

/// A response the library made: rewritten by ``CacheOverride``, or answered by a transport. It keeps
/// the header fields it was made from and, when a transport answered with it, the outcome.
///
/// Everything after a rewrite (the transport's store decision, the validators, the `Vary` names,
/// the cost of the entry) reads these fields instead of asking the response again, and the
/// transport does not apply the override a second time to a response that already went through it.
///
/// `@unchecked Sendable` is safe here: every property is set in the initializers and never changed,
/// except ``outcome``, which ``settle(_:)`` sets at most once, under the transport's in-flight lock,
/// on a response its loader made for that one fetch, before any caller is resumed with it. Its
/// readers are ordered after that write or hold the same lock: the committer, which reads it under
/// that lock to decide whether an entry needs a copy of the response; and the callers, through
/// `cacheOutcome` and `response(for:)`, once they are resumed. A stored entry's response is never
/// settled: it carries its outcome from the start, and a fetched response without one is copied
/// before it is stored.
final class TransportHTTPURLResponse: HTTPURLResponse, @unchecked Sendable {
    private(set) var headerFields: HeaderFields
    /// Rewritten by the header override with a `max-age` above zero, so rewriting it again would
    /// change nothing.
    private(set) var isFresh: Bool
    /// How the transport made this answer; nil on a response the header override made on its own.
    private(set) var outcome: CacheOutcome?

    init?(url: URL, statusCode: Int, headerFields: HeaderFields, isFresh: Bool, outcome: CacheOutcome?) {
        self.headerFields = headerFields
        self.isFresh = isFresh
        self.outcome = outcome
        super.init(
            url: url, statusCode: statusCode, httpVersion: HTTPResponseBuilder.httpVersion,
            headerFields: headerFields.fields)
    }

    /// Gives a response that carries no outcome yet (one the header override made for one load)
    /// the outcome of the answer it becomes, so that the answer needs no copy of its own.
    /// - Returns: false, changing nothing, when it already carries one.
    func settle(_ outcome: CacheOutcome) -> Bool {
        guard self.outcome == nil else { return false }
        self.outcome = outcome
        return true
    }

    required init?(coder: NSCoder) {
        headerFields = HeaderFields([:])
        isFresh = false
        outcome = nil
        super.init(coder: coder)
        headerFields = HeaderFields(HeaderFields.strings(allHeaderFields))
    }
}
