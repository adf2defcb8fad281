import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CachedTransport {
    /// How a ``CachedTransport`` stores, keys and fetches, in groups that each decide one thing:
    /// ``Storage`` what is kept and how much, ``Freshness`` how long it answers, ``Network`` how
    /// fetches go out, ``Identity`` whom a request is for, and ``StayingCurrent`` what the transport
    /// revalidates and announces without being asked.
    ///
    /// ```swift
    /// var configuration = CachedTransport.Configuration()
    /// configuration.storage.memoryCapacity = 64 * 1024 * 1024
    /// configuration.freshness.maximumAge = .seconds(300)
    /// configuration.network.retryPolicy = RetryPolicy()
    /// configuration.identity.keyHeaders = ["X-Tenant"]
    /// configuration.stayingCurrent.revalidatesOnForeground = true
    /// let transport = CachedTransport(configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// What the transport keeps and how much.
        public var storage = Storage()

        /// How long a stored entry answers.
        public var freshness = Freshness()

        /// How the transport's fetches go out and come back.
        public var network = Network()

        /// Whom a request is for.
        public var identity = Identity()

        /// What the transport revalidates and announces without being asked.
        public var stayingCurrent = StayingCurrent()

        /// The time entries age by: the system's clocks, or a ``ManualCacheClock`` in tests so
        /// that they age entries without sleeping.
        ///
        /// Default: ``CacheClock/continuous``.
        public var clock: CacheClock = .continuous

        /// A configuration with the defaults described on each property.
        public init() {}

        /// The header override the transport applies, reading this configuration's clock: none
        /// when it follows HTTP caching.
        var effectiveCacheOverride: CacheOverride? {
            guard !freshness.conformsToHTTPCaching, var cacheOverride = network.cacheOverride else { return nil }
            cacheOverride.clock = clock
            return cacheOverride
        }
    }
}

extension CachedTransport.Configuration {
    /// What the transport keeps and how much: the byte budget of its store and the largest entry
    /// in it, the representations one URL keeps, the statuses that are stored, the decoded values
    /// kept beside each entry, and whether memory is given back under pressure.
    public struct Storage: Sendable {
        /// The byte budget of the store: bodies plus a per-entry overhead for URL, headers and
        /// bookkeeping. Least recently used entries are evicted to stay within it. Zero stores nothing.
        ///
        /// Default: 32 MiB.
        public var memoryCapacity: Int = 32 * 1024 * 1024

        /// The largest share of ``memoryCapacity`` one entry may take, from 0 to 1. A larger
        /// response is returned to its callers but not stored, and counted in
        /// ``CacheStatistics/rejectedTooLarge``.
        ///
        /// Default: 0.1 (a tenth of the capacity).
        public var maximumEntryShare: Double = 0.1

        /// The largest share of ``memoryCapacity``, from 0 to 1, that prefetched answers no screen
        /// has read yet may take when making room means evicting answers screens read. They fill
        /// free memory, are evicted first when a screen's answer needs room, and become ordinary
        /// entries when a screen reads them. At least the largest entry's room. See <doc:Prefetching>.
        ///
        /// Default: 0.25.
        public var prefetchShare: Double = 0.25

        /// How many representations one URL and identity keeps when the origin names request
        /// headers in `Vary`: one per combination of their values, least recently used dropped
        /// first. At least 1. Default: 4.
        public var maximumVariants = 4

        /// The status codes whose responses may be stored. Others reach the caller and are never
        /// stored.
        ///
        /// Default: 200, 203, 204, 300, 301 and 308: the statuses HTTP lets a cache store without
        /// explicit freshness (RFC 9110 section 15.1), less the errors (404, 405, 410, 414, 501),
        /// which an app usually wants to ask again, and 206. A `201 Created` or `202 Accepted` is
        /// the answer to one request, not a representation to reuse. A `206 Partial Content` is
        /// never stored, whatever this says: it holds part of a resource, and a later plain
        /// request wants all of it.
        public var storableStatusCodes: Set<Int> = [200, 203, 204, 300, 301, 308]

        /// The most decoded values one stored entry keeps, over all types and decoder settings
        /// (see ``CachedTransport/value(_:for:decoder:)``). Beyond it, the entry's least recently
        /// used value is dropped, counted in ``CacheStatistics/decodedEvictions``, and decoded
        /// again if asked for. Zero keeps none.
        ///
        /// Default: 4, room for the one or two types a screen decodes from a response and for a
        /// few decoders whose settings cannot be compared.
        public var maximumDecodedValuesPerEntry = 4

        /// On Apple platforms, whether the transport gives memory back when the system reports
        /// memory pressure, as `NSCache` and `URLCache` do: a warning makes it
        /// ``CachedTransport/trim(for:)`` with ``MemoryPressure/warning``, a critical level with
        /// ``MemoryPressure/critical``. It listens through
        /// `DispatchSource.makeMemoryPressureSource` for as long as the transport lives.
        ///
        /// Linux has no such source: there this setting changes nothing, and an app calls
        /// ``CachedTransport/trim(for:)`` itself when it learns of pressure.
        ///
        /// Default: true.
        public var respondsToMemoryPressure = true

        /// The storage settings with the defaults described on each property.
        public init() {}
    }

    /// How long a stored entry answers: its maximum age, the windows in which a stale entry still
    /// answers, whether the transport follows HTTP caching instead, and whether it revalidates
    /// rather than downloading again.
    public struct Freshness: Sendable {
        /// How long a stored entry may answer requests with the default policy
        /// (`useProtocolCachePolicy`, `returnCacheDataElseLoad`): with ``maximumAges``, the one
        /// setting that decides how long the transport's entries stay fresh. Nil, the default, keeps
        /// entries until they are invalidated or evicted, whatever their age. When following HTTP
        /// caching, it caps the freshness the response gives.
        public var maximumAge: Duration?

        /// Per-endpoint maximum ages, taking precedence over ``maximumAge``; the first endpoint that
        /// matches a URL decides.
        public var maximumAges: [EndpointSetting<Duration>] = []

        /// How long past its maximum age an entry still answers at once while it is revalidated
        /// in the background (stale-while-revalidate). Within the window a request gets the stored
        /// answer marked stale (see ``CachedTransport/revalidatingStaleValue``), and one background
        /// revalidation per key, conditional when it can be, brings the entry up to date; changed
        /// bytes announce ``CacheChange/updated(_:)``. Past the window a request waits for the
        /// network as usual. It applies only to entries with a maximum age (``maximumAge`` or
        /// ``maximumAges``).
        ///
        /// Default: nil (no window).
        public var staleWhileRevalidate: Duration?

        /// Per-endpoint stale-while-revalidate windows, taking precedence over
        /// ``staleWhileRevalidate``; the first endpoint that matches a URL decides.
        public var staleWhileRevalidateWindows: [EndpointSetting<Duration>] = []

        /// When true, a fetch that fails with a connectivity error (not connected, cannot connect,
        /// cannot find the host, timed out, connection lost, including a connection closed or reset
        /// in the middle of the answer) for a key that still has a stored
        /// entry, past its maximum age or being reloaded, answers with that entry instead of the
        /// error. With ``conformsToHTTPCaching``, an answer of 500, 502, 503 or 504 is met the same
        /// way (its stale answer reads as after `URLError.badServerResponse`), and never for a
        /// `no-cache`, `must-revalidate`, `proxy-revalidate` or `s-maxage` response. The answer's
        /// response carries the ``CachedTransport/staleHeaderField`` header (test it with
        /// `isStaleAnswer`). Invalidated entries are gone and never served.
        ///
        /// Default: false.
        public var staleIfError = false

        /// Follow HTTP caching (RFC 9111) as a private cache for requests with the
        /// `useProtocolCachePolicy` policy, instead of keeping entries until they are invalidated.
        ///
        /// When true:
        /// - an entry's freshness comes from the response: `max-age` (`s-maxage` is for shared
        ///   caches), then `Expires` against `Date`, then a heuristic of a tenth of the time since
        ///   `Last-Modified` for the statuses that allow one, less its age on arrival (`Age`,
        ///   `Date`, and the time the request took); ``maximumAge`` caps it;
        /// - a stale entry is revalidated (conditionally when it has validators) before it is
        ///   used; `no-cache` and `must-revalidate` entries are never answered stale (neither in a
        ///   stale-while-revalidate window nor with ``staleIfError``); a response's own
        ///   `stale-while-revalidate=N` opens a window for it;
        /// - answers from memory carry a generated `Age`;
        /// - the request's `max-age`, `min-fresh`, `max-stale` and `only-if-cached` are honoured
        ///   (`only-if-cached` without a usable entry answers `504 Gateway Timeout`);
        /// - a response of any final status with explicit freshness, `public`, or a heuristically
        ///   cacheable status (404, 405, 410, 414, 501 besides the 2xx and 3xx ones) may be stored,
        ///   besides ``CachedTransport/Configuration/Storage/storableStatusCodes``;
        ///   `must-understand` stores such a status in spite of `no-store`, and no other status;
        /// - a `GET` or `HEAD` with its own `If-None-Match`, `If-Modified-Since` or single-range
        ///   `Range` is answered from a stored entry of its key that is fresh for it (`304`, `206`,
        ///   `416` or the stored answer) without the network; `If-Match` and `If-Unmodified-Since`
        ///   still go to the origin;
        /// - a response's own `stale-if-error` answers stale within its window when the origin
        ///   cannot be reached or answers 500, 502, 503 or 504;
        /// - the header override (``CachedTransport/Configuration/Network/cacheOverride``) is not
        ///   applied: the origin's headers are taken at their word.
        ///
        /// Requests with another policy behave as they do by default.
        ///
        /// Default: false.
        public var conformsToHTTPCaching = false

        /// Revalidate instead of downloading again. When true, whenever the transport goes to the
        /// network for a key that still holds an entry (``CachedTransport/refresh(_:)``, the
        /// reload policies, an entry past its maximum age, a background revalidation), it sends
        /// the entry's `ETag` as `If-None-Match` and its `Last-Modified` as `If-Modified-Since`.
        /// A `304 Not Modified` keeps the stored body, updates its headers and restarts its age;
        /// every caller gets the stored body with status 200 and no ``CacheChange/updated(_:)`` is
        /// announced. Counted in ``CacheStatistics/notModified``.
        ///
        /// Default: true.
        public var usesConditionalRequests = true

        /// The freshness settings with the defaults described on each property.
        public init() {}
    }

    /// How the transport's fetches go out and come back: the header override they pass through,
    /// how a failed one is tried again, and which `POST`s are queries to be cached like a `GET`.
    public struct Network: Sendable {
        /// The header override the transport's fetches go through (``CacheOverrideURLProtocol``):
        /// responses whose headers would stop them from being cached (`no-cache`, `no-store`,
        /// `Pragma`, past `Expires`, `Vary: *` …) are rewritten to `Cache-Control: max-age=N` and
        /// stored. A `Vary: *` response is then stored and reused like any other (its `Vary` kept
        /// as `X-Original-Vary`), and callers that joined its fetch share its answer. Narrow it with
        /// ``CacheOverride/endpoints``, or set nil to switch it off: the transport then does not
        /// store responses marked `no-store` or `Vary: *`, and a `Vary: *` answer serves only the
        /// caller that started its fetch.
        ///
        /// Default: every http(s) response, `max-age=3600`.
        public var cacheOverride: CacheOverride? = CacheOverride()

        /// Tries a failed `GET` or `HEAD` again, with backoff, after a connectivity failure or a
        /// status such as 503 (see ``RetryPolicy``): one sequence of attempts per shared fetch.
        /// Counted in ``CacheStatistics/retries``.
        ///
        /// Default: nil (a failure reaches the callers at once).
        public var retryPolicy: RetryPolicy?

        /// Endpoints whose `POST` requests are queries (a GraphQL endpoint, a search API): such a
        /// request is keyed by its URL, identity headers and body, and coalesced, stored and
        /// answered from memory like a `GET`; it invalidates nothing. Every other `POST` goes to
        /// the origin, is never stored, and invalidates what it may have changed. A body sent as a
        /// stream, or larger than ``maximumQueryBodySize``, passes through (outcome
        /// ``CacheOutcome/PassThroughReason/queryBodyTooLarge``), invalidating nothing. Being
        /// declared a query, such a `POST` may be sent again on the transport's own account (a
        /// revalidation, a poll; never a retry, which is for `GET` and `HEAD` only): list only
        /// endpoints where that is harmless.
        ///
        /// Default: none.
        public var queryEndpoints: [Endpoint] = []

        /// The largest body a query `POST` (``queryEndpoints``) is keyed by, in bytes: the key
        /// holds the body itself, so that two different queries never share an answer.
        ///
        /// Default: 64 KiB.
        public var maximumQueryBodySize = 64 * 1024

        /// The most requests the transport has in flight to one host (scheme, host and port) at
        /// once. Others wait in its queue, highest ``FetchPriority`` first and first come first
        /// served within one, and a request cancelled while it waits is never sent. Requests below
        /// ``FetchPriority/normal`` (prefetches) take at most one less than this, so that a screen's
        /// request finds a place at once. Hits never wait. See <doc:Prefetching>.
        ///
        /// Values below 1 count as 1; `Int.max` sends every request at once, leaving the order to
        /// URLSession.
        ///
        /// Default: nil, the session configuration's `httpMaximumConnectionsPerHost` (6 on Linux
        /// and macOS, 4 on iOS).
        public var maximumFetchesPerHost: Int?

        /// The network settings with the defaults described on each property.
        public init() {}
    }

    /// Whom a request is for: the request headers that join its cache key, the adapters every
    /// request passes through, and the app's credentials, which key each request by its account
    /// and sign what goes to the network.
    public struct Identity: Sendable {
        /// Request headers that join the cache key besides `Authorization`, `Cookie`, `Accept` and
        /// `Accept-Language` (which always do). Names compare without case.
        public var keyHeaders: Set<String> = []

        /// Adapters of requests: the keyed ones run on every call before its key is built, the
        /// sending ones on every request that goes to the network, the transport's own included
        /// (see ``RequestAdapter``).
        ///
        /// Default: none.
        public var requestAdapters: [RequestAdapter] = []

        /// The names of the keyed headers among ``requestAdapters``: key headers too.
        var keyedHeaderNames: Set<String> {
            Set(
                requestAdapters.compactMap { adapter in
                    if case .header(let name, _) = adapter.step { name } else { nil }
                })
        }

        /// The app's credentials (see ``authenticate(with:)-(Credentials<Authenticating>)`` and
        /// ``authenticate(with:)-(Accounts<Authenticating>)``).
        var credentials: (any CredentialApplying)?

        /// Puts the current credential of `credentials` on every request that goes to the network,
        /// after the ``requestAdapters``, keys every request by the credential's account (its
        /// partition, when ``Credentials`` declares them), and refreshes it once for any number of
        /// refused requests (see ``Credentials``).
        public mutating func authenticate<Authenticating: Authenticator>(with credentials: Credentials<Authenticating>)
        {
            self.credentials = credentials
        }

        /// Puts on every request that goes to the network the current credential of the account it
        /// names (`URLRequest.account`), after the ``requestAdapters``, keys every
        /// request by that account, and refreshes each account's credential on its own (see
        /// ``Accounts``): several accounts signed in at once. Replaces a ``Credentials`` given
        /// before.
        public mutating func authenticate<Authenticating: Authenticator>(with accounts: Accounts<Authenticating>) {
            credentials = accounts
        }

        /// The identity settings with the defaults described on each property: no key headers,
        /// no adapters, no credentials.
        public init() {}
    }

    /// What the transport revalidates and announces without being asked: how many revalidations
    /// run at once and how recently confirmed entries are skipped, the moments that revalidate
    /// what is watched, the polling intervals of watched endpoints, and the changes each stream
    /// keeps for a slow subscriber.
    public struct StayingCurrent: Sendable {
        /// The most revalidations the transport runs at once, over every
        /// ``CachedTransport/revalidate(_:)``, ``CachedTransport/revalidateAll()`` and
        /// ``CachedTransport/revalidateWatched()`` call, trigger and poll under way, so that coming
        /// back to the foreground with a thousand entries never opens a thousand connections. At
        /// least 1.
        ///
        /// Default: 4.
        public var maximumConcurrentRevalidations = 4

        /// Entries stored or confirmed by the origin within this interval are skipped by
        /// ``CachedTransport/revalidate(_:)``, ``CachedTransport/revalidateAll()`` and
        /// ``CachedTransport/revalidateWatched()``: an app that comes back to the foreground twice
        /// in a few seconds asks the origin once.
        ///
        /// Default: 5 seconds.
        public var minimumRevalidationInterval: Duration = .seconds(5)

        /// Whether what is watched is revalidated (``CachedTransport/revalidateWatched()``) each
        /// time the app becomes active. Apple platforms only, through the platform's own
        /// did-become-active notification; elsewhere the app calls
        /// ``CachedTransport/revalidateWatched()`` from its own lifecycle code.
        ///
        /// Default: false.
        public var revalidatesOnForeground = false

        /// Whether what is watched is revalidated (``CachedTransport/revalidateWatched()``) each
        /// time the network path becomes satisfied after it was not. Apple platforms only, through
        /// `NWPathMonitor`; elsewhere the app calls ``CachedTransport/revalidateWatched()`` when it
        /// learns that the network is back.
        ///
        /// Default: false.
        public var revalidatesOnReconnect = false

        /// Per-endpoint polling intervals: while at least one stream watches an endpoint
        /// (``CachedTransport/changes(for:)``, or a ``CachedTransport/values(_:for:decoder:)``
        /// stream, which watches its URL), the transport revalidates its entries each time that
        /// interval has passed since its previous poll ended (conditionally when they have
        /// validators, so an unchanged answer costs no body), and stops as soon as the last such
        /// stream ends. A stream's interval is the setting whose
        /// endpoint equals the stream's, or, for a stream of one URL, the first setting that
        /// matches the URL. Entries confirmed within the last half interval, by another fetch, are
        /// skipped on that tick.
        ///
        /// Default: none.
        public var refreshIntervals: [EndpointSetting<Duration>] = []

        /// How many undelivered changes each stream from ``CachedTransport/changes()`` keeps. A
        /// subscriber slower than the changes loses the oldest ones first; the transport never
        /// waits for a subscriber. Default: 100.
        public var changeBufferLimit = 100

        /// The staying-current settings with the defaults described on each property.
        public init() {}
    }
}
