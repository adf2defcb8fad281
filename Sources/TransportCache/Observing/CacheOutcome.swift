import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a ``CachedTransport`` made one answer, and why: from memory, from the network, confirmed
/// by a `304`, or sent past the store.
///
/// Every HTTP answer carries one. ``CachedTransport/response(for:)`` returns it typed; an answer
/// of ``CachedTransport/data(for:)`` gives it as `response.cacheOutcome`, and a `URLError` the
/// transport throws as `error.cacheOutcome` (in its `userInfo`, a Swift value: an `NSError`
/// bridged from it does not archive that entry with secure coding). The non-HTTP answer of a
/// request to another scheme cannot carry it; ``CachedTransport/events()`` reports it as
/// ``PassThroughReason/notHTTP``.
///
/// Two outcomes are equal when every property is, ``networkDuration`` included: compare
/// ``source`` (and the others) to ask what happened.
///
/// ```swift
/// let (data, response, outcome) = try await transport.response(for: request)
/// if case .network(let reason) = outcome.source {
///     print("fetched because \(reason)")   // fetched because expired
/// }
/// print(outcome)                           // network (expired), stored, 38 ms
/// ```
public struct CacheOutcome: Sendable, Hashable, CustomStringConvertible {
    /// Where the answer came from.
    public enum Source: Sendable, Hashable {
        /// From a stored entry, without the network, or after the network failed (see
        /// ``MemoryReason/staleAfterFailure(_:)``).
        case memory(MemoryReason)
        /// From the origin: a full answer to a fetch made for the reason given.
        case network(FetchReason)
        /// From a stored entry the origin confirmed with `304 Not Modified`, to a conditional
        /// fetch made for the reason given.
        case revalidated(FetchReason)
        /// From the origin, sent as it was, past the store and coalescing.
        case passedThrough(PassThroughReason)
        /// From neither: the request allows only a stored answer (`returnCacheDataDontLoad`,
        /// `Cache-Control: only-if-cached`) and none could be used. The first throws
        /// `URLError(.resourceUnavailable)`, the second answers `504`.
        case cacheOnlyMiss
    }

    /// Why a stored entry answered.
    public enum MemoryReason: Sendable, Hashable, CustomStringConvertible {
        /// It is fresh.
        case fresh
        /// It is stale, and the request accepts that: its `max-stale`, or a policy that takes any
        /// age (`returnCacheDataDontLoad`, `returnCacheDataElseLoad` when following HTTP).
        case staleAccepted
        /// It is within its stale-while-revalidate window: a background revalidation started.
        case staleWhileRevalidate
        /// The fetch failed with an error of this code, and the entry answered instead
        /// (``CachedTransport/Configuration/Freshness/staleIfError``, or following HTTP caching the
        /// response's own `stale-if-error`); `badServerResponse` when, following HTTP caching,
        /// the origin answered 500, 502, 503 or 504. A code rather than the error, so that a reason
        /// stays a plain value, which a hit copies for nothing.
        case staleAfterFailure(URLError.Code)

        /// A short phrase, as in the outcome's own description.
        public var description: String {
            switch self {
            case .fresh: "fresh"
            case .staleAccepted: "stale, accepted"
            case .staleWhileRevalidate: "stale, revalidating"
            case .staleAfterFailure(let code): "stale after failure \(code.rawValue)"
            }
        }
    }

    /// Why a request went to the network.
    public enum FetchReason: Sendable, Hashable, CustomStringConvertible {
        /// Nothing was stored for its key.
        case noEntry
        /// The entry stored for it is stale.
        case expired
        /// Its entry was dropped by an invalidation (or a successful unsafe request to its URL).
        case invalidated
        /// Its entry was evicted: the byte budget or memory pressure. (A variant dropped to keep
        /// its URL within ``CachedTransport/Configuration/Storage/maximumVariants`` leaves the URL's other
        /// variants, and reads as ``noMatchingVariant``.)
        case evicted
        /// Entries are stored for its URL, but none for its values of the fields their `Vary`
        /// names.
        case noMatchingVariant
        /// Its policy ignores what is stored (`reloadIgnoringLocalCacheData` and the others).
        case reloadPolicy
        /// Its own `Cache-Control: no-cache`, `max-age=0` or `Pragma: no-cache`.
        case requestRevalidates
        /// ``CachedTransport/refresh(_:)``.
        case refresh
        /// The transport revalidated a held entry on its own: ``CachedTransport/revalidate(_:)``,
        /// ``CachedTransport/revalidateAll()``, a trigger (``CachedTransport/revalidateWatched()``)
        /// or a poll (``CachedTransport/Configuration/StayingCurrent/refreshIntervals``).
        case revalidation
        /// The transport revalidated, in the background, an entry it had just answered from within
        /// its stale-while-revalidate window (``CachedTransport/Configuration/Freshness/staleWhileRevalidate``).
        /// A caller that joined such a fetch has its own reason.
        case backgroundRevalidation

        /// A short phrase, as in the outcome's own description.
        public var description: String {
            switch self {
            case .noEntry: "no entry"
            case .expired: "expired"
            case .invalidated: "invalidated"
            case .evicted: "evicted"
            case .noMatchingVariant: "no matching variant"
            case .reloadPolicy: "reload policy"
            case .requestRevalidates: "request revalidates"
            case .refresh: "refresh"
            case .revalidation: "revalidation"
            case .backgroundRevalidation: "background revalidation"
            }
        }
    }

    /// Why a request was sent as it was.
    public enum PassThroughReason: Sendable, Hashable, CustomStringConvertible {
        /// A GET or HEAD with its own `If-None-Match`, `If-Modified-Since`, `If-Match`,
        /// `If-Unmodified-Since`, `If-Range` or `Range`: the answer (`304`, `206`, `412`) is its own.
        case requestConditions
        /// A GET or HEAD with its own `Cache-Control: no-store`.
        case requestNoStore
        /// Not GET or HEAD: never stored, and it invalidates what it changed when it succeeds.
        case unsafeMethod
        /// A `POST` to a query endpoint (``CachedTransport/Configuration/Network/queryEndpoints``) whose
        /// body is a stream or larger than ``CachedTransport/Configuration/Network/maximumQueryBodySize``.
        case queryBodyTooLarge
        /// Not `http` or `https`.
        case notHTTP

        /// A short phrase, as in the outcome's own description.
        public var description: String {
            switch self {
            case .requestConditions: "request conditions"
            case .requestNoStore: "request no-store"
            case .unsafeMethod: "unsafe method"
            case .queryBodyTooLarge: "query body too large"
            case .notHTTP: "not HTTP"
            }
        }
    }

    /// What became of a fetched answer in the store.
    public enum Storage: Sendable, Hashable, CustomStringConvertible {
        /// Stored; `changedBytes` is false when the same bytes were already held (a `304`
        /// updates the stored headers only). While optimistic updates of the key are pending, the
        /// answer goes under them (what they roll back to), and `changedBytes` compares it with
        /// what the key held there, not with the provisional answer shown.
        case stored(changedBytes: Bool)
        /// Not stored, for this reason.
        case notStored(NotStoredReason)

        /// A short phrase, as in the outcome's own description.
        public var description: String {
            switch self {
            case .stored(let changedBytes): changedBytes ? "stored" : "stored, same bytes"
            case .notStored(let reason): "not stored: \(reason)"
            }
        }
    }

    /// Why a fetched answer was not stored.
    public enum NotStoredReason: Sendable, Hashable, CustomStringConvertible {
        /// Its status is not storable (``CachedTransport/Configuration/Storage/storableStatusCodes``).
        case status(Int)
        /// `206 Partial Content`: part of a resource.
        case partialContent
        /// It sets a cookie (`Set-Cookie`, `Set-Cookie2`).
        case setsCookie
        /// `Cache-Control: no-store`, when the header override did not rewrite it.
        case noStore
        /// `Vary: *`, when the header override did not rewrite it.
        case variesOnEverything
        /// Larger than the largest entry allowed
        /// (``CachedTransport/Configuration/Storage/maximumEntryShare`` of the capacity).
        case tooLarge
        /// Its key was invalidated while it was in flight.
        case invalidatedInFlight
        /// A newer reload or refresh of its key began while it was in flight.
        case supersededInFlight

        /// Whether the answer itself was refused: a revalidation that ends so has failed. One left
        /// unstored because the key moved on while it was in flight (invalidated, or a newer fetch
        /// began) has not: what is stored now is newer.
        var refusesAnswer: Bool { self != .invalidatedInFlight && self != .supersededInFlight }

        /// A short phrase, as in the outcome's own description.
        public var description: String {
            switch self {
            case .status(let status): "status \(status)"
            case .partialContent: "partial content"
            case .setsCookie: "sets a cookie"
            case .noStore: "no-store"
            case .variesOnEverything: "Vary: *"
            case .tooLarge: "too large"
            case .invalidatedInFlight: "invalidated in flight"
            case .supersededInFlight: "superseded in flight"
            }
        }
    }

    /// Where the answer came from, and why.
    public var source: Source
    /// True when the caller joined a fetch another caller (or a background revalidation) had
    /// started, rather than starting one.
    public var joinedFetch: Bool
    /// For an answer the origin gave to a fetch, whether it was stored; nil otherwise.
    public var storage: Storage?
    /// How long the fetch behind the answer waited on the network, from sending the request to
    /// its answer; nil when no request was sent.
    public var networkDuration: Duration?

    /// An outcome; the transport makes these.
    public init(
        source: Source, joinedFetch: Bool = false, storage: Storage? = nil, networkDuration: Duration? = nil
    ) {
        self.source = source
        self.joinedFetch = joinedFetch
        self.storage = storage
        self.networkDuration = networkDuration
    }

    /// True when the answer came from memory without any network request.
    public var isFromMemory: Bool {
        if case .memory(let reason) = source, networkDuration == nil {
            if case .staleAfterFailure = reason { return false }
            return true
        }
        return false
    }

    /// One line: where, why, what was stored, and how long the network took, as in
    /// `network (expired), joined, stored, 38 ms`.
    public var description: String {
        var parts: [String]
        switch source {
        case .memory(let reason): parts = ["memory (\(reason))"]
        case .network(let reason): parts = ["network (\(reason))"]
        case .revalidated(let reason): parts = ["revalidated (\(reason))"]
        case .passedThrough(let reason): parts = ["passed through (\(reason))"]
        case .cacheOnlyMiss: parts = ["cache-only miss"]
        }
        if joinedFetch { parts.append("joined") }
        if let storage { parts.append(storage.description) }
        if let networkDuration { parts.append(Self.milliseconds(networkDuration)) }
        return parts.joined(separator: ", ")
    }

    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = Double(seconds) * 1_000 + Double(attoseconds) / 1e15
        return milliseconds < 10 ? String(format: "%.1f ms", milliseconds) : "\(Int(milliseconds.rounded())) ms"
    }

    /// The key under which a `URLError` the transport throws carries the outcome of the attempt in
    /// its `userInfo`; read it with `error.cacheOutcome`.
    public static let userInfoKey = "TransportCacheOutcome"

    /// The outcome of a memory answer: constant, so a hit carries it without building anything.
    static let fresh = CacheOutcome(source: .memory(.fresh))
}

extension URLResponse {
    /// How the ``CachedTransport`` that returned this response made it, and why; nil for a
    /// response that did not come from a transport (or a non-HTTP one it passed through).
    public var cacheOutcome: CacheOutcome? {
        (self as? TransportHTTPURLResponse)?.outcome
    }
}

extension URLError {
    /// The outcome of the attempt that failed, when a ``CachedTransport`` threw this error.
    public var cacheOutcome: CacheOutcome? {
        userInfo[CacheOutcome.userInfoKey] as? CacheOutcome
    }

    /// This error with `outcome` in its user info, keeping its code and other information.
    func carrying(_ outcome: CacheOutcome) -> URLError {
        var info = userInfo
        info[CacheOutcome.userInfoKey] = outcome
        return URLError(code, userInfo: info)
    }
}

extension Error {
    /// This error carrying `outcome` when it is a `URLError`, an ``AuthenticationError`` or a
    /// ``ValueDecodingError``; any other error as it is (`CancellationError` among them).
    func carrying(_ outcome: CacheOutcome) -> any Error {
        switch self {
        case let error as URLError:
            return error.carrying(outcome)
        case var error as AuthenticationError:
            error.cacheOutcome = outcome
            return error
        case var error as ValueDecodingError:
            error.cacheOutcome = outcome
            return error
        default:
            return self
        }
    }
}
