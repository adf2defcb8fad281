import Foundation
import TransportCache

/// What a ``CachedQuery`` shows but its value, as one value: a transition builds the next state
/// whole, and the query stores it (with the value, when the transition brings one) only when it
/// differs, so each real change is one observed change.
///
/// Not generic, so that the query's many transitions need no type metadata looked up at run time.
struct QueryState {
    /// What a query heard while work of its own was under way, ordered by the work it asks for.
    enum MissedChange: Int, Comparable {
        case none, updated, invalidated

        static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    var status: QueryStatus = .idle
    /// Whether a value is shown (the query holds it beside this state).
    private(set) var hasValue = false
    private(set) var error: (any Error)?
    var isFetching = false
    var outcome: CacheOutcome?
    var isFollowingChanges = false
    /// Counts the values and errors taken, which cannot be compared themselves.
    private var revision = 0

    /// A fetch begins: the first one shows as loading.
    mutating func beginFetch() {
        isFetching = true
        if status == .idle { status = .loading }
    }

    /// Takes a good answer, made from `data`. Bytes equal to those shown change nothing but the
    /// status, the error and, for an answer to a fetch or one that ends a failure, the outcome:
    /// the failure's outcome must not stay beside a value that is no longer failed.
    /// - Returns: whether the answer's value replaces the one shown.
    mutating func take(_ data: Data, outcome: CacheOutcome?, shown: inout Data?, isFetched: Bool) -> Bool {
        let replacesValue = !hasValue || data != shown
        if replacesValue {
            hasValue = true
            shown = data
            revision += 1
            self.outcome = outcome
        } else if isFetched || status == .failed {
            self.outcome = outcome
        }
        if error != nil {
            error = nil
            revision += 1
        }
        status = .loaded
        return replacesValue
    }

    /// Takes a failed answer, keeping the last good value, with its outcome: every answer shows how
    /// the transport gave it, so a failure never leaves the outcome of the answer before it. A
    /// cancellation is the query's own doing (stopped or released) and is not shown.
    mutating func take(_ failure: any Error) {
        let (failure, outcome) = Self.unwrapped(failure)
        if failure is CancellationError { return }
        if status != .failed || !Self.isSameFailure(error, failure) {
            error = failure
            revision += 1
        }
        status = .failed
        self.outcome = outcome
    }

    /// Whether the state shows `failure` already: failed, with the same failure.
    func isShowing(_ failure: any Error) -> Bool {
        status == .failed && Self.isSameFailure(error, Self.unwrapped(failure).0)
    }

    /// The outcome the transport gave a failed answer; nil when it said nothing.
    static func outcome(of failure: any Error) -> CacheOutcome? {
        unwrapped(failure).1
    }

    /// The error a failed answer shows, and the outcome the transport gave it: carried beside a
    /// value's error (``FailedAnswer``), or in the transport's own error (a value's error read from
    /// memory among them); nil when the transport said nothing (an error of the app's own request
    /// adapter).
    private static func unwrapped(_ failure: any Error) -> (any Error, CacheOutcome?) {
        switch failure {
        case let failed as FailedAnswer: (failed.error, failed.outcome)
        case let error as URLError: (error, error.cacheOutcome)
        case let error as AuthenticationError: (error, error.cacheOutcome)
        case let error as ValueDecodingError: (error, error.cacheOutcome)
        default: (failure, nil)
        }
    }

    /// Whether `new` is the failure `old` already shows: the same bytes failing to decode again
    /// after their change was heard, or the network failing the same way, is not a new change.
    private static func isSameFailure(_ old: (any Error)?, _ new: any Error) -> Bool {
        switch (old, new) {
        case let (old as ValueDecodingError, new as ValueDecodingError):
            return old.code == new.code && old.statusCode == new.statusCode
        case let (old as URLError, new as URLError):
            return old.code == new.code
        default:
            return false
        }
    }

    /// Whether `other` shows the same as this state.
    func isSame(as other: Self) -> Bool {
        status == other.status && revision == other.revision && isFetching == other.isFetching
            && outcome == other.outcome && isFollowingChanges == other.isFollowingChanges
    }
}
