// The flat names the settings had before they were grouped, kept so that existing code builds
// (with a deprecation warning that names the new place).

extension CachedTransport.Configuration {
    /// Renamed ``Storage/memoryCapacity``, in ``storage``.
    @available(*, deprecated, renamed: "storage.memoryCapacity")
    public var memoryCapacity: Int {
        get { storage.memoryCapacity }
        set { storage.memoryCapacity = newValue }
    }

    /// Renamed ``Storage/maximumEntryShare``, in ``storage``.
    @available(*, deprecated, renamed: "storage.maximumEntryShare")
    public var maximumEntryShare: Double {
        get { storage.maximumEntryShare }
        set { storage.maximumEntryShare = newValue }
    }

    /// Renamed ``Storage/maximumVariants``, in ``storage``.
    @available(*, deprecated, renamed: "storage.maximumVariants")
    public var maximumVariants: Int {
        get { storage.maximumVariants }
        set { storage.maximumVariants = newValue }
    }

    /// Renamed ``Storage/storableStatusCodes``, in ``storage``.
    @available(*, deprecated, renamed: "storage.storableStatusCodes")
    public var storableStatusCodes: Set<Int> {
        get { storage.storableStatusCodes }
        set { storage.storableStatusCodes = newValue }
    }

    /// Renamed ``Storage/maximumDecodedValuesPerEntry``, in ``storage``.
    @available(*, deprecated, renamed: "storage.maximumDecodedValuesPerEntry")
    public var maximumDecodedValuesPerEntry: Int {
        get { storage.maximumDecodedValuesPerEntry }
        set { storage.maximumDecodedValuesPerEntry = newValue }
    }

    /// Renamed ``Storage/respondsToMemoryPressure``, in ``storage``.
    @available(*, deprecated, renamed: "storage.respondsToMemoryPressure")
    public var respondsToMemoryPressure: Bool {
        get { storage.respondsToMemoryPressure }
        set { storage.respondsToMemoryPressure = newValue }
    }

    /// Renamed ``Freshness/maximumAge``, in ``freshness``.
    @available(*, deprecated, renamed: "freshness.maximumAge")
    public var maximumAge: Duration? {
        get { freshness.maximumAge }
        set { freshness.maximumAge = newValue }
    }

    /// Renamed ``Freshness/maximumAges``, in ``freshness``.
    @available(*, deprecated, renamed: "freshness.maximumAges")
    public var maximumAges: [EndpointSetting<Duration>] {
        get { freshness.maximumAges }
        set { freshness.maximumAges = newValue }
    }

    /// Renamed ``Freshness/staleWhileRevalidate``, in ``freshness``.
    @available(*, deprecated, renamed: "freshness.staleWhileRevalidate")
    public var staleWhileRevalidate: Duration? {
        get { freshness.staleWhileRevalidate }
        set { freshness.staleWhileRevalidate = newValue }
    }

    /// Renamed ``Freshness/staleWhileRevalidateWindows``, in ``freshness``.
    @available(*, deprecated, renamed: "freshness.staleWhileRevalidateWindows")
    public var staleWhileRevalidateWindows: [EndpointSetting<Duration>] {
        get { freshness.staleWhileRevalidateWindows }
        set { freshness.staleWhileRevalidateWindows = newValue }
    }

    /// Renamed ``Freshness/staleIfError``, in ``freshness``.
    @available(*, deprecated, renamed: "freshness.staleIfError")
    public var staleIfError: Bool {
        get { freshness.staleIfError }
        set { freshness.staleIfError = newValue }
    }

    /// Renamed ``Freshness/conformsToHTTPCaching``, in ``freshness``.
    @available(*, deprecated, renamed: "freshness.conformsToHTTPCaching")
    public var conformsToHTTPCaching: Bool {
        get { freshness.conformsToHTTPCaching }
        set { freshness.conformsToHTTPCaching = newValue }
    }

    /// Renamed ``Freshness/usesConditionalRequests``, in ``freshness``.
    @available(*, deprecated, renamed: "freshness.usesConditionalRequests")
    public var usesConditionalRequests: Bool {
        get { freshness.usesConditionalRequests }
        set { freshness.usesConditionalRequests = newValue }
    }

    /// Renamed ``Network/cacheOverride``, in ``network``.
    @available(*, deprecated, renamed: "network.cacheOverride")
    public var cacheOverride: CacheOverride? {
        get { network.cacheOverride }
        set { network.cacheOverride = newValue }
    }

    /// Renamed ``Network/retryPolicy``, in ``network``.
    @available(*, deprecated, renamed: "network.retryPolicy")
    public var retryPolicy: RetryPolicy? {
        get { network.retryPolicy }
        set { network.retryPolicy = newValue }
    }

    /// Renamed ``Network/queryEndpoints``, in ``network``.
    @available(*, deprecated, renamed: "network.queryEndpoints")
    public var queryEndpoints: [Endpoint] {
        get { network.queryEndpoints }
        set { network.queryEndpoints = newValue }
    }

    /// Renamed ``Network/maximumQueryBodySize``, in ``network``.
    @available(*, deprecated, renamed: "network.maximumQueryBodySize")
    public var maximumQueryBodySize: Int {
        get { network.maximumQueryBodySize }
        set { network.maximumQueryBodySize = newValue }
    }

    /// Renamed ``Identity/keyHeaders``, in ``identity``.
    @available(*, deprecated, renamed: "identity.keyHeaders")
    public var keyHeaders: Set<String> {
        get { identity.keyHeaders }
        set { identity.keyHeaders = newValue }
    }

    /// Renamed ``Identity/requestAdapters``, in ``identity``.
    @available(*, deprecated, renamed: "identity.requestAdapters")
    public var requestAdapters: [RequestAdapter] {
        get { identity.requestAdapters }
        set { identity.requestAdapters = newValue }
    }

    /// Renamed ``StayingCurrent/maximumConcurrentRevalidations``, in ``stayingCurrent``.
    @available(*, deprecated, renamed: "stayingCurrent.maximumConcurrentRevalidations")
    public var maximumConcurrentRevalidations: Int {
        get { stayingCurrent.maximumConcurrentRevalidations }
        set { stayingCurrent.maximumConcurrentRevalidations = newValue }
    }

    /// Renamed ``StayingCurrent/minimumRevalidationInterval``, in ``stayingCurrent``.
    @available(*, deprecated, renamed: "stayingCurrent.minimumRevalidationInterval")
    public var minimumRevalidationInterval: Duration {
        get { stayingCurrent.minimumRevalidationInterval }
        set { stayingCurrent.minimumRevalidationInterval = newValue }
    }

    /// Renamed ``StayingCurrent/revalidatesOnForeground``, in ``stayingCurrent``.
    @available(*, deprecated, renamed: "stayingCurrent.revalidatesOnForeground")
    public var revalidatesOnForeground: Bool {
        get { stayingCurrent.revalidatesOnForeground }
        set { stayingCurrent.revalidatesOnForeground = newValue }
    }

    /// Renamed ``StayingCurrent/revalidatesOnReconnect``, in ``stayingCurrent``.
    @available(*, deprecated, renamed: "stayingCurrent.revalidatesOnReconnect")
    public var revalidatesOnReconnect: Bool {
        get { stayingCurrent.revalidatesOnReconnect }
        set { stayingCurrent.revalidatesOnReconnect = newValue }
    }

    /// Renamed ``StayingCurrent/refreshIntervals``, in ``stayingCurrent``.
    @available(*, deprecated, renamed: "stayingCurrent.refreshIntervals")
    public var refreshIntervals: [EndpointSetting<Duration>] {
        get { stayingCurrent.refreshIntervals }
        set { stayingCurrent.refreshIntervals = newValue }
    }

    /// Renamed ``StayingCurrent/changeBufferLimit``, in ``stayingCurrent``.
    @available(*, deprecated, renamed: "stayingCurrent.changeBufferLimit")
    public var changeBufferLimit: Int {
        get { stayingCurrent.changeBufferLimit }
        set { stayingCurrent.changeBufferLimit = newValue }
    }

    /// Renamed ``Identity/authenticate(with:)-(Credentials<Authenticating>)``, in ``identity``.
    @available(*, deprecated, renamed: "identity.authenticate(with:)")
    public mutating func authenticate<Authenticating: Authenticator>(with credentials: Credentials<Authenticating>) {
        identity.authenticate(with: credentials)
    }
}
