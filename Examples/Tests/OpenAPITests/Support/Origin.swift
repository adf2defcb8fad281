import Foundation
import LoopbackOrigin
import Testing

/// Runs `body` with a fresh origin, and stops the origin afterwards whatever happens.
func withOrigin(_ body: (LoopbackOrigin) async throws -> Void) async throws {
    let origin = try await LoopbackOrigin.start()
    do {
        try await body(origin)
    } catch {
        await origin.stop()
        throw error
    }
    await origin.stop()
}

/// Waits until `condition` holds, checking between short pauses; records a failure if it does not
/// hold within `timeout`. It waits for a state, never for a guessed amount of time.
func waitUntil(
    timeout: Duration = .seconds(20),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("condition not met within \(timeout)", sourceLocation: sourceLocation)
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
