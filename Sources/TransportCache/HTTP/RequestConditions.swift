import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request's own `If-None-Match`, `If-Modified-Since`, `Range` and `If-Range`, as a private
/// cache following HTTP answers them from a fresh stored response (RFC 9111 section 4.3.2,
/// RFC 9110 sections 13.2.2 and 14): a `304` when the condition says the caller holds it, a `206`
/// with the one range asked for, a `416` for a range past its end, or the whole stored answer.
///
/// Conditions only an origin can judge (`If-Match`, `If-Unmodified-Since`, which guard changes)
/// are never answered here: such a request goes to the origin as sent.
struct RequestConditions: Sendable {
    private var noneMatch: EntityTag.Condition?
    private var modifiedSince: Date?
    private var range: ByteRange?
    private var ifRange: String?
    /// The transport's clock when the request was planned: what a two-digit year is read against.
    private let now: Date

    /// The conditions of a `GET` or `HEAD` request with `fields`; nil when a stored response may
    /// not answer them (another method, or a condition for the origin alone).
    init?(_ fields: [String: String]?, method: String, now: Date) {
        self.now = now
        guard method == "GET" || method == "HEAD", let fields else { return nil }
        var hasNoneMatch = false
        for (name, value) in fields {
            switch ASCII.lowercased(name) {
            case "if-match", "if-unmodified-since": return nil
            case "if-none-match":
                hasNoneMatch = true
                noneMatch = EntityTag.Condition(value)
            // Not a valid date (one that holds a list among them): ignored (RFC 9110 13.1.3).
            case "if-modified-since": modifiedSince = HTTPDate.parse(value, now: now)
            // Range is defined for GET only; a field that cannot be read is ignored (14.2).
            case "range": range = method == "GET" ? ByteRange(value) : nil
            case "if-range": ifRange = value
            default: continue
            }
        }
        // If-None-Match takes precedence: If-Modified-Since is then ignored (13.1.3).
        if hasNoneMatch { modifiedSince = nil }
    }

    /// What the request's conditions make of a stored response.
    enum Answer: Equatable {
        /// `304 Not Modified`: the caller holds it already.
        case notModified
        /// `206 Partial Content` with these bytes of the body.
        case partial(Range<Int>)
        /// `416 Range Not Satisfiable`: the range starts past the end of the body.
        case unsatisfiable
        /// The stored answer, whole.
        case whole
    }

    /// The answer for `response`, stored with `body`, received at `receivedAt`.
    func answer(for response: HTTPURLResponse, body: Data, receivedAt: Date) -> Answer {
        if let noneMatch {
            if noneMatch.matchesWeakly(response.headerValue("etag").flatMap { EntityTag($0[...]) }) {
                return .notModified
            }
        } else if let modifiedSince {
            // RFC 9111 4.3.2: the stored Last-Modified, else its Date, else when it was received.
            let modified =
                response.headerValue("last-modified").flatMap(parse)
                ?? response.headerValue("date").flatMap(parse) ?? receivedAt
            if modified <= modifiedSince { return .notModified }
        }
        guard let range, response.statusCode == 200, !Self.isEncoded(response), rangeApplies(to: response) else {
            return .whole
        }
        guard let offsets = range.offsets(in: body.count) else { return .unsatisfiable }
        return .partial(offsets)
    }

    /// Whether `If-Range`, when sent, lets the range apply (RFC 9110 section 13.1.5): an entity
    /// tag matching the stored one strongly, or a date equal to a strong stored `Last-Modified`.
    private func rangeApplies(to response: HTTPURLResponse) -> Bool {
        guard let ifRange else { return true }
        if let tag = EntityTag(ifRange[...]) {
            guard let stored = response.headerValue("etag").flatMap({ EntityTag($0[...]) }) else { return false }
            return tag.matchesStrongly(stored)
        }
        // A Last-Modified is strong only when its Date is at least a second later (8.8.2.2).
        guard let date = parse(ifRange),
            let lastModified = response.headerValue("last-modified").flatMap(parse),
            let responseDate = response.headerValue("date").flatMap(parse)
        else { return false }
        return date == lastModified && responseDate.timeIntervalSince(lastModified) >= 1
    }

    private func parse(_ value: String) -> Date? { HTTPDate.parse(value, now: now) }

    /// Whether the stored bytes may differ from the representation's: ranges count the bytes of
    /// the encoded representation, and the loader may have decoded them.
    private static func isEncoded(_ response: HTTPURLResponse) -> Bool {
        guard let encoding = response.headerValue("content-encoding") else { return false }
        return HeaderList.elements(encoding).contains { !ASCII.equalsIgnoringCase("identity", String($0)) }
    }

    /// The fields a `304` made from a stored response carries (RFC 9110 section 15.4.5): those a
    /// `200` would have that guide a cache's update, and its `Age`.
    static let notModifiedFields: Set<String> = [
        "cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified", "age",
    ]

    /// The answer to hand over for `answer`, made from `response` (as a memory answer hands it
    /// over: its outcome and `Age` set) and `body`.
    static func response(_ answer: Answer, from response: HTTPURLResponse, body: Data) -> (Data, URLResponse) {
        guard let url = response.url else { return (body, response) }
        let stored = HeaderFields(of: response)
        var fields = HeaderFields()
        let status: Int
        var part = Data()
        switch answer {
        case .whole:
            return (body, response)
        case .notModified:
            status = 304
            for (name, field) in stored.byLowercasedName where notModifiedFields.contains(name) {
                fields.set(field.value, name: field.name, lowercasedName: name)
            }
        case .partial(let offsets):
            status = 206
            fields = stored
            part = body.subdata(in: (body.startIndex + offsets.lowerBound)..<(body.startIndex + offsets.upperBound))
            fields.set(
                "bytes \(offsets.lowerBound)-\(offsets.upperBound - 1)/\(body.count)", name: "Content-Range",
                lowercasedName: "content-range")
        case .unsatisfiable:
            status = 416
            fields.set("bytes */\(body.count)", name: "Content-Range", lowercasedName: "content-range")
        }
        fields.set(String(part.count), name: "Content-Length", lowercasedName: "content-length")
        let outcome = (response as? TransportHTTPURLResponse)?.outcome
        return (
            part, HTTPResponseBuilder.response(url: url, statusCode: status, headerFields: fields, outcome: outcome)
        )
    }
}
