import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the transport does with one request, and why: the ``RequestPlanner``'s answer, which
/// every entry point performs.
enum Plan {
    /// Answer from memory.
    case memory(MemoryAnswer)
    /// Answer a request's own conditions or range from a fresh stored entry (HTTP caching): a
    /// `304`, a `206` or a `416` made from it, with nothing sent.
    case conditional(ConditionalAnswer)
    /// Fetch through the coalesced, stored path.
    case fetch(FetchPlan)
    /// Send as it is, past the store and coalescing.
    case send(SendPlan)
    /// `returnCacheDataDontLoad` with nothing stored: fail without touching the network.
    case unavailable
    /// `only-if-cached` (HTTP caching) with nothing usable stored: answer `504` without touching
    /// the network (RFC 9111 section 5.2.1.7).
    case gatewayTimeout(URL)

    /// The key whose stored answer the plan reads or writes; nil for a request never stored.
    var storedKey: CacheKey? {
        switch self {
        case .memory(let answer): answer.entry.key
        case .fetch(let plan): plan.key
        case .conditional, .send, .unavailable, .gatewayTimeout: nil
        }
    }

    // The reasons are the public ones a caller reads in its answer's ``CacheOutcome``.
    typealias MemoryReason = CacheOutcome.MemoryReason
    typealias FetchReason = CacheOutcome.FetchReason
    typealias SendReason = CacheOutcome.PassThroughReason
}

/// A stored answer the planner chose. Small, as a hit carries it: the request it answers stays
/// with the caller.
struct MemoryAnswer {
    let entry: StoredResponse
    /// The response to hand over: the entry's, marked or aged as the reason requires.
    let response: URLResponse
    let reason: Plan.MemoryReason
    /// Whether anyone listens to the transport's ``CachedTransport/events()``, read under the
    /// lock the lookup held anyway.
    let isObserved: Bool

    var data: Data { entry.data }
}

/// The answer to a request's own conditions or range, made from a stored entry.
struct ConditionalAnswer {
    let data: Data
    let response: URLResponse
    /// Whether anyone listens to the transport's ``CachedTransport/events()``.
    let isObserved: Bool
}

/// A request to fetch, with its key. A class, so that a plan (which a hit returns too) stays the
/// size of its smallest cases.
final class FetchPlan: Sendable {
    let request: URLRequest
    let key: CacheKey
    /// The request's header fields, read once.
    let fields: [String: String]?
    let reason: Plan.FetchReason
    /// How stored entries may answer it when a fetch of the same key has completed meanwhile.
    let acceptance: FreshnessPolicy.Acceptance
    /// Whether anyone listened to the transport's events when it was planned, when the plan's
    /// lookup read it: its answer is reported then without asking again.
    let isObserved: Bool?
    /// Its URL's maximum age and stale window, read when it was planned, with no lock held: what
    /// its fetch stores lives that long.
    let settings: FreshnessPolicy.Settings

    init(
        request: URLRequest, key: CacheKey, fields: [String: String]?, reason: Plan.FetchReason,
        acceptance: FreshnessPolicy.Acceptance, isObserved: Bool?, settings: FreshnessPolicy.Settings
    ) {
        self.settings = settings
        self.request = request
        self.key = key
        self.fields = fields
        self.reason = reason
        self.acceptance = acceptance
        self.isObserved = isObserved
    }

    /// Which fetch already in flight it may share.
    enum Sharing: Sendable {
        /// Any fetch of its key.
        case any
        /// Only one that was itself started to reload (a reload policy, a request's own
        /// `no-cache`, a refresh, a revalidation).
        case reloads
        /// Only one sent after it was made: it asked for what the origin holds now, and a fetch
        /// sent before may bring an older answer (see ``FetchStateMachine`` for how refreshes
        /// share the next fetch).
        case sentAfterCall
    }

    var sharing: Sharing { reason.sharing }

    /// Whether it revalidates a held entry (on request, or in the background).
    var isRevalidation: Bool { reason == .revalidation || reason == .backgroundRevalidation }

    /// Whether an entry stored while it was planned may answer it instead of a fetch: a request
    /// that found nothing usable may take one; a reload, and a revalidation of what is held, may not.
    var mayTakeStoredAnswer: Bool { sharing == .any && !isRevalidation }

    /// Whether a fetch it starts is a reload, which ``Sharing/reloads`` requests may share: it
    /// asks the origin now, whatever is stored.
    var isReload: Bool { sharing != .any || isRevalidation }
}

extension Plan.FetchReason {
    /// Which fetch already in flight a plan fetching for this reason may share.
    var sharing: FetchPlan.Sharing {
        switch self {
        // A revalidation asks the origin to confirm what is held: any fetch of the key in flight
        // brings that answer too.
        case .noEntry, .expired, .invalidated, .evicted, .noMatchingVariant, .revalidation, .backgroundRevalidation:
            .any
        case .reloadPolicy, .requestRevalidates: .reloads
        case .refresh: .sentAfterCall
        }
    }
}

/// A request sent as it is.
struct SendPlan {
    let request: URLRequest
    let url: URL
    let reason: Plan.SendReason
    /// The account the request was made for (see ``KeyedRequest``): it goes out with that
    /// account's credential only, though nothing of it is stored.
    let account: String?
}
