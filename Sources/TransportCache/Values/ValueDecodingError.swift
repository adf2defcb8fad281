import Foundation

/// Why ``CachedTransport/value(_:for:decoder:)`` could not produce a value from an answer it
/// received: the body did not decode, or the status was not a success.
///
/// It names the type and the URL. The failure is never stored: the stored bytes stay usable by
/// `data(for:)` and other types, and the next call for the same type decodes again. Network
/// errors arrive unchanged as `URLError`, cancellation as `CancellationError`.
public struct ValueDecodingError: Error, Sendable, CustomStringConvertible {
    /// What went wrong. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        /// The decoder threw; ``ValueDecodingError/underlyingError`` holds its error.
        public static let decodingFailed = Code(name: "decodingFailed")
        /// The response's status was outside 200-299; the body was not decoded.
        /// ``ValueDecodingError/statusCode`` holds the status.
        public static let unacceptableStatus = Code(name: "unacceptableStatus")

        /// The code's name, for example `decodingFailed`.
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// The name of the type that was asked for, for example `Array<App.Article>`.
    public let typeName: String
    /// The URL of the request.
    public let url: URL
    /// The HTTP status of the answer, when there was one.
    public let statusCode: Int?
    /// The decoder's error, for ``Code/decodingFailed``.
    public let underlyingError: (any Error)?
    /// The outcome of the memory answer whose entry gave no value, when
    /// ``CachedTransport/lookUpCachedValue(_:for:decoder:)`` threw the error: the answer came from
    /// memory, and a screen shows that answer's failure with its outcome without fetching.
    package internal(set) var cacheOutcome: CacheOutcome?

    /// An error for a value of `type` that could not be made from the answer to `url`: the
    /// transport makes these, and so can code that decodes an answer the transport did not
    /// store, so that its callers see the same error as ``CachedTransport/value(_:for:decoder:)``'s.
    public init<Value>(
        _ code: Code, type: Value.Type, url: URL, statusCode: Int?, underlyingError: (any Error)? = nil
    ) {
        self.code = code
        typeName = String(reflecting: type)
        self.url = url
        self.statusCode = statusCode
        self.underlyingError = underlyingError
    }

    /// A sentence naming the type, the URL and the cause, for logs.
    public var description: String {
        switch code {
        case .unacceptableStatus:
            return
                "Cannot decode \(typeName) from \(url.absoluteString): status \(statusCode.map(String.init) ?? "none")"
        default:
            return
                "Cannot decode \(typeName) from \(url.absoluteString): \(underlyingError.map { String(describing: $0) } ?? code.description)"
        }
    }
}
