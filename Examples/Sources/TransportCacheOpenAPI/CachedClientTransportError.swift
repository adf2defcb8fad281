/// Why a ``CachedClientTransport`` could not send an operation. The generated client hands it to
/// its caller as the `underlyingError` of its `ClientError`.
public struct CachedClientTransportError: Error, Hashable, CustomStringConvertible {
    private enum Code: Hashable {
        case requestBodyTooLarge
        case invalidRequestURL
        case notHTTPResponse
    }

    private let code: Code

    /// The request body is larger than ``CachedClientTransport/maximumRequestBodySize``.
    public static let requestBodyTooLarge = CachedClientTransportError(code: .requestBodyTooLarge)
    /// The base URL and the request's path do not form a URL.
    public static let invalidRequestURL = CachedClientTransportError(code: .invalidRequestURL)
    /// The answer was not an HTTP response.
    public static let notHTTPResponse = CachedClientTransportError(code: .notHTTPResponse)

    /// What went wrong, in a sentence.
    public var description: String {
        switch code {
        case .requestBodyTooLarge: "the request body is larger than the transport's maximum request body size"
        case .invalidRequestURL: "the base URL and the request's path do not form a URL"
        case .notHTTPResponse: "the answer was not an HTTP response"
        }
    }
}
