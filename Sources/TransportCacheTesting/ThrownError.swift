/// The error that `body` threw, or nil when it returned: for a test that checks a failure it
/// waits for, such as a cancelled caller's, without a `do`/`catch` of its own.
///
/// ```swift
/// caller.cancel()
/// #expect(await thrownError { try await caller.value } is CancellationError)
/// ```
public func thrownError<T>(_ body: () async throws -> T) async -> (any Error)? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}
