import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The seam between the transport and the network: one request in, one complete answer out.
///
/// The transport starts one load per origin fetch with ``start(_:completion:)`` and cancels it
/// when no caller is left; requests it does not cache go through ``load(_:)``.
package protocol NetworkLoading: Sendable {
    /// Loads `request`, throwing when the calling task is cancelled.
    func load(_ request: URLRequest) async throws -> (Data, URLResponse)

    /// Starts loading `request` and calls `completion` exactly once with the outcome, from any
    /// thread but never synchronously inside this call.
    ///
    /// The default runs ``load(_:)`` in a task of its own. A loader that can hand its answer over
    /// from where it arrives implements this directly: then the answer reaches the transport
    /// without first waking a task.
    /// - Returns: what cancels the load; a cancelled load completes with an error.
    func start(_ request: URLRequest, completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>) -> Void)
        -> any NetworkLoad

    /// Where the loader reports the metrics of its network tasks, each with the URL its request
    /// asked for, from then on. The transport calls it once, before it sends anything. The default
    /// ignores it: a loader with no URLSession tasks has no metrics.
    func reportMetrics(to report: @escaping @Sendable (URL, URLSessionTaskMetrics) -> Void)
}

/// A load in progress.
package protocol NetworkLoad: Sendable {
    /// Cancels the load if it has not completed. Safe to call from any thread, at any time.
    func cancel()

    /// Tells the load its fetch's priority changed. The default does nothing: a load of a
    /// URLSession task passes it on as the task's `priority`, a hint Apple platforms use and
    /// swift-corelibs-foundation keeps without using.
    func prioritize(_ priority: FetchPriority)
}

extension NetworkLoad {
    package func prioritize(_ priority: FetchPriority) {}
}

extension NetworkLoading {
    package func reportMetrics(to report: @escaping @Sendable (URL, URLSessionTaskMetrics) -> Void) {}

    package func start(
        _ request: URLRequest, completion: @escaping @Sendable (Result<(Data, URLResponse), any Error>) -> Void
    )
        -> any NetworkLoad
    {
        TaskLoad(
            task: Task {
                do {
                    completion(.success(try await load(request)))
                } catch {
                    completion(.failure(error))
                }
            })
    }
}

/// A load running in a task of its own (or a wait before one), cancelled by cancelling the task.
struct TaskLoad: NetworkLoad {
    let task: Task<Void, Never>

    func cancel() { task.cancel() }
}
