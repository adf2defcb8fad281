import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a fetch's own steps run between the caller and the network: on serial dispatch queues
/// of their own, never on the global concurrent queue.
///
/// On Linux, Swift's global executor runs tasks on the global concurrent queue, which runs one
/// thread a core. A step queued there, by `DispatchQueue.global()` or by an `OperationQueue`
/// (which runs its operations on a concurrent queue that targets it), waits behind every task
/// job queued before it: ten thousand callers arriving at once held their fetch's request back
/// until the last of them had arrived, and its answer back as long. A serial queue gets a thread
/// of its own when the others are busy.
enum NetworkQueues {
    /// A serial queue for one step of a fetch.
    static func serial(_ label: String) -> DispatchQueue {
        DispatchQueue(label: label)
    }

    /// A session made from `configuration`, whose delegate and completion handlers run on a
    /// serial queue of their own, one operation at a time, as a session's own delegate queue
    /// runs them (``URLSessionTask/cancel(onDelegateQueueOf:)`` relies on it).
    static func session(
        _ configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)? = nil
    ) -> URLSession {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.underlyingQueue = serial("TransportCache.SessionDelegateQueue")
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
    }
}
