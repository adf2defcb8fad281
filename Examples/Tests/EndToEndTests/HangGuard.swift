import Foundation
import Synchronization
import Testing

/// Runs `body` and returns how it ended, or records a failure and returns nil when it has not
/// ended within `limit`. A guard against hangs: it never waits for a guessed time to pass, it
/// only bounds how long a test may take to fail.
func ending<T: Sendable>(
    within limit: Duration,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable () async throws -> T
) async -> Result<T, any Error>? {
    let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
        let once = Once(continuation)
        let work = Task {
            do {
                once.resume(with: .success(try await body()))
            } catch {
                once.resume(with: .failure(error))
            }
        }
        Task {
            try? await Task.sleep(for: limit)
            if once.resume(with: nil) { work.cancel() }
        }
    }
    if outcome == nil { Issue.record("did not end within \(limit)", sourceLocation: sourceLocation) }
    return outcome
}

/// Resumes a continuation the first time it is asked to, and ignores later requests.
private final class Once<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Never>?>

    init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = Mutex(continuation)
    }

    /// - Returns: whether this call resumed it.
    @discardableResult
    func resume(with value: Value) -> Bool {
        let taken = continuation.withLock { stored in
            defer { stored = nil }
            return stored
        }
        taken?.resume(returning: value)
        return taken != nil
    }
}
