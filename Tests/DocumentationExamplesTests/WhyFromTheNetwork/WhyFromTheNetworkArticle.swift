// swift-format-ignore-file
// The blocks of WhyFromTheNetwork.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

/// Stands for the app's logger.
struct WhyFromTheNetworkLogger {
    func debug(_ message: String) { print(message) }
}

func whyFromTheNetworkOutcome(transport: CachedTransport, request: URLRequest, logger: WhyFromTheNetworkLogger) async throws {
    let (data, response, outcome) = try await transport.response(for: request)
    if case .network(let reason) = outcome.source {
        logger.debug("\(request.url!) fetched: \(reason)")   // no entry, expired, invalidated …
    }
    _ = (data, response)
}

func whyFromTheNetworkSnapshot(transport: CachedTransport) {
    print(transport.snapshot())
}
