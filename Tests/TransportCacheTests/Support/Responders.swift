import Foundation
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The answers the library's tests script most: each names its call, so two callers of one
/// fetch get identical bytes and two fetches never do.
extension ScriptedOrigin {
    /// 200 with a body that names the method, the URL, the `Authorization` value and the call
    /// number, plus `headers`.
    static func ok(headers: [String: String] = [:]) -> Responder {
        { request, call in
            let auth = request.value(forHTTPHeaderField: "Authorization") ?? "-"
            let body = "\(request.httpMethod ?? "GET") \(request.url!.absoluteString) auth=\(auth) call=\(call)"
            return Reply(headers: headers, text: body)
        }
    }

    static func status(_ status: Int) -> Responder {
        { _, call in Reply(status: status, text: "status \(status) call=\(call)") }
    }

    static func body(size: Int) -> Responder {
        { _, _ in Reply(body: Data(repeating: 0x61, count: size)) }
    }

    static func failing(_ code: URLError.Code) -> Responder {
        { _, _ in .failure(code) }
    }
}

/// An origin that answers every request with ``ScriptedOrigin/ok(headers:)``, holding the calls
/// at its gate when `gated`.
func echoOrigin(gated: Bool = false) -> ScriptedOrigin {
    ScriptedOrigin(gated: gated, respond: ScriptedOrigin.ok())
}
