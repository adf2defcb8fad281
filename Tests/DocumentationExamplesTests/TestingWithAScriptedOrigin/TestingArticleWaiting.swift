// swift-format-ignore-file
import Foundation
import Testing
import TransportCache
import TransportCacheTesting

@Suite struct TestingArticleWaiting {
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test func waitsForAStateNeverForTime() async throws {
        let origin = ScriptedOrigin(gated: true)
        let transport = CachedTransport(origin: origin)
        let url = URL(string: "https://api.example.com/articles")!
        let callers = startCalls(20) { try await transport.data(from: url) }
        #expect(transport.statistics.coalescedJoins == 19)
        origin.openGate()
        for caller in callers { _ = try await caller.value }
        #expect(origin.callCount == 1)
    }
}
