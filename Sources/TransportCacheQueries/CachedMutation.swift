import Foundation
import Observation
import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A change a screen makes through the transport, shown at once everywhere with
/// `CachedTransport.optimisticUpdate(_:write:confirmed:)`: whether it is pending, its error and
/// its result, so that a form can disable its button and show a failure.
///
/// ```swift
/// let post = CachedMutation(in: transport) { (draft: Article) in
///     [try ProvisionalAnswer(for: listRequest, value: (list.value ?? []) + [draft])]
/// } write: { draft in
///     try await api.post(draft)
/// }
/// Button("Post") { Task { await post.run(draft) } }
///     .disabled(post.isPending)
/// ```
///
/// Each run shows its provisional answers in every query of their URLs, runs `write`, and
/// settles as `CachedTransport.optimisticUpdate(_:write:confirmed:)` does: the origin's answer
/// when `write` returns, the exact bytes held before when it throws. Its state changes on the main
/// actor, one observed change when a run begins and one when it ends.
@MainActor
@Observable
public final class CachedMutation<Input, Output> {
    private var state = MutationState<Output>()

    /// Whether a run is under way.
    public var isPending: Bool { state.pending > 0 }
    /// Why the last run that ended failed: what `write` threw, a `LocalWriteError` for a
    /// provisional answer that cannot be stored, or what `confirmed` threw; nil once a run
    /// succeeds, and while a run is pending.
    public var error: (any Error)? { state.error }
    /// What the last successful run's `write` returned.
    public var result: Output? { state.result }

    /// The transport the provisional answers go to.
    public let transport: CachedTransport
    @ObservationIgnored private let provisional: @MainActor (Input) throws -> [ProvisionalAnswer]
    @ObservationIgnored private let write: @MainActor (Input) async throws -> Output
    @ObservationIgnored private let confirmed: @MainActor (Output) throws -> [ProvisionalAnswer]?

    /// Makes a mutation; nothing runs until ``run(_:)``.
    ///
    /// - Parameters:
    ///   - transport: the transport to update.
    ///   - provisional: the answers to show while the write runs, made from the input (on the main
    ///     actor, so it may read the queries a screen shows).
    ///   - write: the request that makes the change, usually a `POST`, `PUT` or `DELETE`.
    ///   - confirmed: the origin's answers the write's output gives; nil (the default) refetches
    ///     every provisional key instead.
    public init(
        in transport: CachedTransport,
        provisional: @escaping @MainActor (Input) throws -> [ProvisionalAnswer],
        write: @escaping @MainActor (Input) async throws -> Output,
        confirmed: @escaping @MainActor (Output) throws -> [ProvisionalAnswer]? = { _ in nil }
    ) {
        self.transport = transport
        self.provisional = provisional
        self.write = write
        self.confirmed = confirmed
    }

    /// Runs the mutation with `input` and returns what `write` returned, or nil when it failed:
    /// the failure is then ``error``. Runs may overlap; ``isPending`` stays true until the last
    /// one ends.
    @discardableResult
    public func run(_ input: Input) async -> Output? {
        var next = state
        next.pending += 1
        next.error = nil
        state = next
        let outcome: Result<Output, any Error>
        do {
            let answers = try provisional(input)
            let write = write
            outcome = .success(
                try await transport.optimisticUpdate(
                    answers, write: { try await write(input) }, confirmed: confirmed))
        } catch {
            outcome = .failure(error)
        }
        next = state
        next.pending -= 1
        switch outcome {
        case .success(let output): next.result = output
        case .failure(let error): next.error = error
        }
        state = next
        return try? outcome.get()
    }
}

/// What a ``CachedMutation`` shows, as one value, so that a run's end is one observed change.
struct MutationState<Output> {
    var pending = 0
    var error: (any Error)?
    var result: Output?
}
