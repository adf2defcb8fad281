import Dispatch

/// What an operation took out of the store, released once the operation holds no lock.
///
/// Freeing a stored answer frees its body, its response and its request: a few microseconds
/// each, so a whole store of them takes tens of milliseconds. Taken out under the store's lock and
/// freed outside it, they never keep a hit waiting; a large handful is freed on a background
/// queue, so that `invalidateAll()` or a trim returns to its caller (often the main actor) at once.
/// A few are freed on the caller's thread, so that what an invalidation drops is gone when it
/// returns.
struct Released: Sendable {
    /// More values than this are freed on a background queue: a hundred or so take about as
    /// long to free as the rest of an invalidation of them.
    static let backgroundThreshold = 128

    private var values: [any Sendable] = []
    private var count = 0

    init() {}

    /// Adds `value`, standing for `count` stored entries.
    mutating func append(_ value: some Sendable, count: Int = 1) {
        values.append(value)
        self.count += count
    }

    mutating func append(contentsOf other: consuming Released) {
        values.append(contentsOf: other.values)
        count += other.count
    }

    /// Frees the values: on a background queue when there are many, else here and now.
    consuming func release() {
        guard count > Self.backgroundThreshold else { return }
        let handover = Handover(values)
        values = []
        DispatchQueue.global(qos: .utility).async { handover.empty() }
    }
}

/// The values handed to the background queue, freed there.
///
/// `@unchecked Sendable` is safe here: `values` is written once in `init` and once by `empty()`,
/// which runs on the queue after `async` has handed it over, so the two never overlap.
private final class Handover: @unchecked Sendable {
    private var values: [any Sendable]

    init(_ values: [any Sendable]) {
        self.values = values
    }

    func empty() {
        values = []
    }
}
