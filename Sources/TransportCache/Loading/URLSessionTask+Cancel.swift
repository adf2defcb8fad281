import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionTask {
    /// Cancels the task from `session`'s delegate queue, the queue its completion handler runs on.
    ///
    /// swift-corelibs-foundation's `cancel()` checks that the task is still running, then, in a
    /// later block on the session's work queue, reports the cancellation to the task's protocol
    /// client. A completion handler that finishes on the delegate queue in between removes the task
    /// from the session's registry, and that report then stops the process ("Trying to access a
    /// behaviour for a task that in not in the registry"; seen once in 200,000 mixed operations).
    /// The delegate queue runs one operation at a time, so from there `cancel()` comes either after
    /// the completion (and does nothing) or before it (and the completion sees the cancellation).
    ///
    /// Never call `cancel()` on an actor's executor or inside a protocol callback: it waits on the
    /// session's work queue. The delegate queue is neither.
    func cancel(onDelegateQueueOf session: URLSession) {
        let task = self
        session.delegateQueue.addOperation { task.cancel() }
    }
}
