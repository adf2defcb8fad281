import Foundation
import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Why a query's last answer failed, in the terms a screen shows it: the server refused, it sent
/// data the app cannot read, or the request never got an answer. ``CachedQuery/failure``, and
/// ``CachedPagedQuery/failure``.
///
/// ```swift
/// switch articles.failure {
/// case .status(404)?: Text("There are no articles here.")
/// case .status?, .invalidData?: Text("The server sent something this app cannot show.")
/// case .network?: Text("You are offline.")
/// case .other?, nil: EmptyView()
/// }
/// ```
///
/// It sorts the error the query shows (``CachedQuery/error``), which keeps every detail: the
/// `ValueDecodingError` with its URL and the decoder's own error, or the `URLError`.
public enum QueryFailure: Sendable, Hashable {
    /// The server answered with a status outside 200-299, such as `404` or `500`: a refusal, its
    /// body not decoded.
    case status(Int)
    /// The server answered with a success whose body did not decode as the query's type: a
    /// server and an app that disagree on the data.
    case invalidData
    /// The request got no answer: no connection, a timeout, a host not found, a cache-only request
    /// (`returnCacheDataDontLoad`) with nothing stored. The error says which.
    case network(URLError)
    /// Anything else, such as an `AuthenticationError` when the app's credentials could not be
    /// refreshed: ``CachedQuery/error`` says what.
    case other

    /// The failure `error` is, as a query shows it.
    init(_ error: any Error) {
        switch error {
        case let error as ValueDecodingError:
            if error.code == .unacceptableStatus, let status = error.statusCode {
                self = .status(status)
            } else if error.code == .decodingFailed {
                self = .invalidData
            } else {
                // A code added later: what it means is for the error to say.
                self = .other
            }
        case let error as URLError:
            self = .network(error)
        default:
            self = .other
        }
    }

    /// The status the server refused with, for ``status(_:)``; nil for every other failure.
    public var statusCode: Int? {
        if case .status(let status) = self { return status }
        return nil
    }
}
