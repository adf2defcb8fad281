import Testing

/// Waits until `condition` holds, checking between short pauses, and records a failure if it
/// does not hold within `timeout`. It waits for a state, never for a guessed amount of time.
func waitUntil(
    timeout: Duration = .seconds(10),
    _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(1))
    }
    Issue.record(comment ?? "condition not met within \(timeout)", sourceLocation: sourceLocation)
}

/// The error a throwing async expression threw, or nil when it returned.
func thrownError<T>(_ body: () async throws -> T) async -> (any Error)? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}
