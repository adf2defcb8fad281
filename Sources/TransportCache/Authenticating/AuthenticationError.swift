import Foundation

/// Why a request failed for want of a credential the origin accepts.
///
/// Each caller of a failed request gets it with the outcome of its attempt as ``cacheOutcome``.
public struct AuthenticationError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// The authenticator's ``Authenticator/refresh(_:)`` threw (``underlyingError``).
        case refreshFailed
        /// The ``RefreshLimit`` was reached: the origin keeps refusing fresh credentials.
        case tooManyRefreshes
        /// The refresh gave back the credential the origin had just refused.
        case credentialUnchanged
        /// The origin refused a request sent with no credential: none is set; or, with ``Accounts``,
        /// the account the request names is not signed in.
        case noCredential
        /// The request would have gone out as another identity than its key's, so it was not sent:
        /// the app set another account's credential after the request was keyed, or a sending
        /// ``RequestAdapter`` changed a key header (make it a keyed adapter).
        case identityChanged
        /// Its account was signed out (``CachedTransport/signOut(partition:)``, or its credential
        /// set to nil), while it was in flight or before it was made.
        case signedOut
        /// The ``Credentials``' partition closure threw for the current credential
        /// (``underlyingError``): no request is keyed or sent with it.
        case partitionUnavailable
        /// The request names no account of ``Accounts`` (`URLRequest.account`) and
        /// carries no `Authorization` of its own.
        case noAccount
        /// The request names an account in a way that cannot be one: an empty name, a control
        /// character, two names, or a name beside its own `Authorization`.
        case invalidAccount
    }

    /// What went wrong.
    public let code: Code
    /// The refresh's own error, for ``Code/refreshFailed``; the partition closure's, for
    /// ``Code/partitionUnavailable``.
    public let underlyingError: (any Error)?
    /// The outcome of the attempt that failed.
    public internal(set) var cacheOutcome: CacheOutcome?

    init(_ code: Code, underlyingError: (any Error)? = nil) {
        self.code = code
        self.underlyingError = underlyingError
    }

    /// What went wrong, in a sentence.
    public var description: String {
        switch code {
        case .refreshFailed: "the credential's refresh failed: \(underlyingError.map { "\($0)" } ?? "unknown error")"
        case .tooManyRefreshes: "the credential was refreshed too many times in a row"
        case .credentialUnchanged: "the refresh returned the credential the origin refused"
        case .noCredential: "the origin asked for a credential and none is set"
        case .identityChanged: "the request would have been sent as another identity than its key's"
        case .signedOut: "its account was signed out"
        case .partitionUnavailable:
            "the credential's partition could not be read: \(underlyingError.map { "\($0)" } ?? "unknown error")"
        case .noAccount: "the request names no account"
        case .invalidAccount: "the request names its account in a way that cannot be one"
        }
    }
}
