/// How much memory the system wants back, for ``CachedTransport/trim(for:)``.
///
/// The two levels of the system's memory pressure events on Apple platforms, which the transport
/// follows by itself there (``CachedTransport/Configuration/Storage/respondsToMemoryPressure``).
public enum MemoryPressure: Sendable, Hashable {
    /// Memory is getting short (a memory warning): drop every decoded value and trim the store to
    /// half its capacity, least recently used entries first.
    case warning
    /// Memory is critically short: empty the store.
    case critical
}
