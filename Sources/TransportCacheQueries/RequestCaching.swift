import Foundation
import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Whether the transport stores a query's request, which decides whether the query follows its
/// URL's changes: nothing stored could change for a request that is never stored, so such a query
/// must not hold a subscription (and with it, the transport's polling of its URL).
///
/// Decided in the query's initialiser, synchronously, from the request's method and scheme, the
/// rules the transport itself applies first. One case is left open: a `POST` is stored only when
/// it goes to one of the transport's query endpoints (`Configuration.queryEndpoints`, with a body
/// small enough to key it by), and the transport does not say so before it answers. Such a query
/// does not follow changes until an answer shows its request stored, and the first answer from
/// memory or the network settles it.
enum RequestCaching: Equatable {
    /// Stored: followed from the initialiser on.
    case stored
    /// Never stored, so never followed: another scheme, no URL, a method that is never stored, or
    /// a request whose answer passed through the store (a `GET` with its own conditions or
    /// `no-store`, a query `POST` whose body is too large to key it by).
    case passedThrough
    /// A `POST` to `http` or `https`: stored only when it goes to a query endpoint, which the first
    /// answer tells.
    case unknown

    /// What the method and the scheme of `request` say.
    init(_ request: URLRequest) {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            self = .passedThrough
            return
        }
        // As the transport compares them: `GET` when the method is not set, and spelled exactly.
        switch request.httpMethod ?? "GET" {
        case "GET", "HEAD": self = .stored
        case "POST": self = .unknown
        default: self = .passedThrough
        }
    }

    /// What an answer with `outcome` shows: an answer passed through the store says the request is
    /// never stored; any other (from memory, from the network, a cache-only miss) that it is keyed
    /// and stored. Nil, an answer that said nothing (a cancellation), changes nothing.
    func settled(by outcome: CacheOutcome?) -> RequestCaching {
        switch outcome?.source {
        case nil: self
        case .passedThrough: .passedThrough
        case .memory, .network, .revalidated, .cacheOnlyMiss: self == .unknown ? .stored : self
        }
    }
}
