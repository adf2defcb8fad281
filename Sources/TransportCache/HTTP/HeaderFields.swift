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
/// except the outcome a response made without one is given once (``settle(_:)``), which is
/// written and read under a lock of its own (``settling``). A fetch's first caller gets the
/// fetched response itself with its outcome settled: a copy costs Foundation a canonicalisation
/// of every field. A stored entry's response is never settled: it carries its outcome from the
/// start, and is read with no lock.
final class TransportHTTPURLResponse: HTTPURLResponse, @unchecked Sendable {
    private(set) var headerFields: HeaderFields
    /// Rewritten by the header override with a `max-age` above zero, so rewriting it again would
    /// change nothing.
    private(set) var isFresh: Bool
    /// The outcome it was made with; nil on a response the header override made on its own.
    private let madeWith: CacheOutcome?
    /// The outcome given later to a response made without one (``settle(_:)``): guarded by
    /// ``settling``.
    private var settled: CacheOutcome?
    /// The lock under which outcomes are settled and read. One for every response: a response
    /// is settled once, and read once or twice by the caller it answers.
    private static let settling = Locked(())

    /// How the transport made this answer; nil on a response the header override made on its own
    /// and no caller was answered with yet.
    var outcome: CacheOutcome? {
        if let madeWith { return madeWith }
        return Self.settling.withLock { _ in settled }
    }

    init?(url: URL, statusCode: Int, headerFields: HeaderFields, isFresh: Bool, outcome: CacheOutcome?) {
        self.headerFields = headerFields
        self.isFresh = isFresh
        madeWith = outcome
        super.init(
            url: url, statusCode: statusCode, httpVersion: HTTPResponseBuilder.httpVersion,
            headerFields: headerFields.fields)
    }

    /// Gives a response that carries no outcome yet (one the header override made for one load)
    /// the outcome of the answer it becomes, so that the answer needs no copy of its own.
    /// - Returns: false, changing nothing, when it already carries one.
    func settle(_ outcome: CacheOutcome) -> Bool {
        guard madeWith == nil else { return false }
        return Self.settling.withLock { _ in
            guard settled == nil else { return false }
            settled = outcome
            return true
        }
    }

    required init?(coder: NSCoder) {
        headerFields = HeaderFields([:])
        isFresh = false
        madeWith = nil
        super.init(coder: coder)
        headerFields = HeaderFields(HeaderFields.strings(allHeaderFields))
    }
}
