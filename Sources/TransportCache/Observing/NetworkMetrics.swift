import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What URLSession measured of one network task of a transport: its transactions (one per
/// request sent, redirects included), their timings, protocol and connection. Carried by
/// ``CacheEvent/Kind/networkMetrics(_:)``.
///
/// Apple platforms collect them for every task; swift-corelibs-foundation (Linux) collects none,
/// so there no such event is made.
///
/// `@unchecked Sendable`: URLSession hands a task's metrics over once it has finished collecting
/// them and changes them no more; their properties cannot be set from outside Foundation.
public struct NetworkMetrics: @unchecked Sendable, CustomStringConvertible {
    /// URLSession's own record of the task.
    public let taskMetrics: URLSessionTaskMetrics

    /// Wraps what URLSession collected.
    public init(_ taskMetrics: URLSessionTaskMetrics) {
        self.taskMetrics = taskMetrics
    }

    /// How many redirects the task followed.
    public var redirectCount: Int { taskMetrics.redirectCount }

    /// From the task's creation to its end.
    public var duration: Duration { .seconds(taskMetrics.taskInterval.duration) }

    /// One line, as in `1 transaction, 0 redirects, 38 ms`.
    public var description: String {
        let transactions = taskMetrics.transactionMetrics.count
        return "\(transactions) transaction\(transactions == 1 ? "" : "s"), \(redirectCount) redirect"
            + "\(redirectCount == 1 ? "" : "s"), \(CacheOutcome.milliseconds(duration))"
    }
}
