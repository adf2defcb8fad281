import OpenAPIRuntime

// `Client`, `Operations` and `Servers` are generated at build time from `openapi.yaml` by the
// swift-openapi-generator plugin; nothing generated is checked in.

extension String {
    /// The text of a plain-text body the loopback origin sent, collected up to `limit` bytes.
    init(plainText body: HTTPBody, upTo limit: Int = 1024 * 1024) async throws {
        try await self.init(collecting: body, upTo: limit)
    }
}
