// swift-format-ignore-file
// A block of WhyFromTheNetwork.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func whyFromTheNetworkSwitch(transport: CachedTransport, request: URLRequest) async throws {
    let (_, _, outcome) = try await transport.response(for: request)
    switch outcome.source {
    case .memory(.fresh): break                                    // no network at all
    case .network(let reason): print("fetched: \(reason)")         // no entry, expired, invalidated …
    case .revalidated: print("the origin confirmed it with a 304")
    case .passedThrough(let reason): print("not cached: \(reason)")  // own If-*/Range, no-store, POST …
    default: print(outcome)                                        // "network (expired), joined, stored, 38 ms"
    }
    Task { for await event in transport.events() { print(event) } }   // every answer, fetch, store, eviction
}
