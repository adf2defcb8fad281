/// Starts `count` tasks that each run `call`, running each one at once, on the calling thread, up
/// to its first suspension, before the next starts; returns them in the order they started.
///
/// A `CachedTransport` request that goes to the network joins the fetch in flight for its key, or
/// starts that fetch, before it first suspends. So when this returns, every call of one key has
/// joined one fetch, with no waiting: a test checks `statistics.coalescedJoins` right away, then
/// lets the fetch answer.
///
/// ```swift
/// let origin = ScriptedOrigin(gated: true)
/// let callers = startCalls(20) { try await transport.data(from: articlesURL) }
/// #expect(transport.statistics.coalescedJoins == 19)
/// origin.openGate()
/// ```
///
/// A call that suspends before it reaches the transport (through code that hops to an actor, say)
/// is not there yet when this returns.
@available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
public func startCalls<Value: Sendable>(
    _ count: Int, _ call: @escaping @Sendable () async throws -> Value
) -> [Task<Value, any Error>] {
    (0..<count).map { _ in Task.immediate { try await call() } }
}

/// Starts one task that runs `call`, running it at once, on the calling thread, up to its first
/// suspension: a request that goes to the network has then joined or started its fetch. See
/// ``startCalls(_:_:)``.
@available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
public func startCall<Value: Sendable>(_ call: @escaping @Sendable () async throws -> Value) -> Task<Value, any Error> {
    Task.immediate { try await call() }
}
