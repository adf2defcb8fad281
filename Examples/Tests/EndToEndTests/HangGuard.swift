import Foundation
import Synchronization
import Testing

/// Runs `body` and returns how it ended, or records a failure and returns nil when it has not
/// ended within `limit`. A guard against hangs: it never waits for a guessed time to pass, it
/// only bounds how long a test may take to fail. `whenHung`, read when the limit has passed, is
/// added to the failure: what is likely stuck, how far the work got, and what else in the process
/// may be stuck with it.
///
/// Its timer is a task: a hang that holds every thread of the concurrency pool stops it too. See
/// ``endingTheProcess(unlessEndedWithin:explanation:isolation:_:)`` for that case.
func ending<T: Sendable>(
    within limit: Duration,
    whenHung explanation: @autoclosure () -> String? = nil,
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
    if outcome == nil {
        let comment = "did not end within \(limit)" + (explanation().map { ": \($0)" } ?? "")
        Issue.record(Comment(rawValue: comment), sourceLocation: sourceLocation)
    }
    return outcome
}

/// Runs `body`, and ends the process with `explanation`, read then, when it has not returned
/// within `limit`.
///
/// The last resort behind ``ending(within:whenHung:sourceLocation:_:)``, whose timer is a task: a
/// deadlock that blocks the threads of the concurrency pool (two on a two-core machine) keeps
/// that timer from ever running, and the test run would hang instead of failing. This timer
/// waits on a thread of its own, outside the pool. Give it more time than the `ending` inside it,
/// which reports a hang as a test failure whenever the pool can still run it.
func endingTheProcess<T>(
    unlessEndedWithin limit: Duration,
    explanation: @autoclosure @escaping @Sendable () -> String,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> T
) async rethrows -> T {
    let ended = DispatchSemaphore(value: 0)
    let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
    let watchdog = Thread {
        guard ended.wait(timeout: .now() + seconds) == .timedOut else { return }
        fatalError("did not end within \(limit), and no task could run to report it as a failure: \(explanation())")
    }
    watchdog.start()
    defer { ended.signal() }
    return try await body()
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
