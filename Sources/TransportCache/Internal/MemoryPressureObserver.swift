#if canImport(Darwin)
import Dispatch

/// Hands the system's memory pressure events to a handler for as long as it lives.
///
/// Only Apple platforms have `DispatchSource.makeMemoryPressureSource`; Linux's Dispatch does
/// not. One source per level, so that each handler knows its level without reading the source.
///
/// `@unchecked Sendable` is safe here: the sources are set up in `init` and only cancelled in `deinit`, and
/// dispatch sources may be used from any thread.
final class MemoryPressureObserver: @unchecked Sendable {
    private let sources: [any DispatchSourceMemoryPressure]

    init(handler: @escaping @Sendable (MemoryPressure) -> Void) {
        let levels: [(DispatchSource.MemoryPressureEvent, MemoryPressure)] = [
            (.warning, .warning), (.critical, .critical),
        ]
        sources = levels.map { event, pressure in
            let source = DispatchSource.makeMemoryPressureSource(eventMask: event, queue: .global(qos: .utility))
            source.setEventHandler { handler(pressure) }
            source.resume()
            return source
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }
}
#endif
