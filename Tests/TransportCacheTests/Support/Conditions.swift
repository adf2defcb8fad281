import Testing

/// Waits until `condition` holds, checking between short pauses, and records a failure if it
/// does not hold within `timeout`. Only for a state that reports nothing a test could wait for:
/// every call says why it must poll.
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
