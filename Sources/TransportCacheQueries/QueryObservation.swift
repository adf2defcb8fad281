import Observation

/// Where a ``CachedQuery``'s observers register, and what it tells them when its state changes.
///
/// A class of its own, not generic: the registrar needs a key path at each access and each
/// change, and a key path into a generic class is built anew each time from the names of its
/// types (tens of microseconds' worth of runtime work per query), while one into this class is
/// built once for the program. `Sendable`: it holds only the registrar, which is.
final class QueryObservation: Observable, Sendable {
    private let registrar = ObservationRegistrar()

    /// Stands for everything the query shows: each observed change of the query is one change
    /// of this.
    var state: Void { () }

    /// Records that the caller reads the query's state, for `withObservationTracking`.
    func access() {
        registrar.access(self, keyPath: \.state)
    }

    /// Makes `change` to the query's state one observed change.
    func withMutation<Result>(_ change: () throws -> Result) rethrows -> Result {
        try registrar.withMutation(of: self, keyPath: \.state, change)
    }
}
