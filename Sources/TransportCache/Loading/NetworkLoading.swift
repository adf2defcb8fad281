import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The seam between the transport and the network: one request in, one complete answer out.
///
/// The transport calls it once per origin fetch and cancels the calling task when no caller is
/// left, so an implementation must react to task cancellation by throwing.
protocol NetworkLoading: Sendable {
    func load(_ request: URLRequest) async throws -> (Data, URLResponse)
}
