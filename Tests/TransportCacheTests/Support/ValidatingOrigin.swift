import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TransportCache
import TransportCacheTesting

/// An in-process origin whose resource has a version: it answers `200` with the current body and
/// its validators, or `304` with no body when the request's `If-None-Match` or
/// `If-Modified-Since` still matches. It counts what it answered.
final class ValidatingOrigin: Sendable {
    enum Validators: Sendable { case entityTag, lastModified, both, none }

    private struct State {
        var version = 1
        var full = 0
        var notModified = 0
        var extraHeaders: [String: String] = [:]
    }

    private let state = Locked(State())
    let validators: Validators

    init(validators: Validators = .both) {
        self.validators = validators
    }

    /// Changes the resource, as another client would.
    func bump() { state.withLock { $0.version += 1 } }

    /// Headers added to every later answer, 304s included.
    func setHeader(_ name: String, _ value: String) { state.withLock { $0.extraHeaders[name] = value } }

    var fullAnswers: Int { state.withLock { $0.full } }
    var notModifiedAnswers: Int { state.withLock { $0.notModified } }

    static func body(version: Int) -> Data { Data("resource version \(version), the same bytes every time".utf8) }
    static func entityTag(version: Int) -> String { "\"v\(version)\"" }
    static func lastModified(version: Int) -> String {
        // One day per version, so later versions are strictly later.
        let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(version) * 86_400)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    var responder: ScriptedOrigin.Responder {
        { [self] request, _ in
            let (version, extra) = state.withLock { ($0.version, $0.extraHeaders) }
            var headers = extra
            let tag = Self.entityTag(version: version)
            let modified = Self.lastModified(version: version)
            if validators == .entityTag || validators == .both { headers["ETag"] = tag }
            if validators == .lastModified || validators == .both { headers["Last-Modified"] = modified }
            let unchanged: Bool
            if let condition = request.value(forHTTPHeaderField: "If-None-Match") {
                unchanged = headers["ETag"] != nil && condition == tag
            } else if let condition = request.value(forHTTPHeaderField: "If-Modified-Since") {
                unchanged = headers["Last-Modified"] != nil && condition == modified
            } else {
                unchanged = false
            }
            if unchanged {
                state.withLock { $0.notModified += 1 }
                return ScriptedOrigin.Reply(status: 304, headers: headers, body: Data())
            }
            state.withLock { $0.full += 1 }
            return ScriptedOrigin.Reply(status: 200, headers: headers, body: Self.body(version: version))
        }
    }
}
