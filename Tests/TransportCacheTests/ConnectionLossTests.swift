import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache

@Suite("A connection lost in the middle of an answer")
struct ConnectionLossTests {
    static func curlError(_ description: String) -> URLError {
        URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: description])
    }

    @Test(
        "libcurl's reports of a cut-off transfer become networkConnectionLost, the original kept underneath",
        arguments: [
            "transfer closed with 99000 bytes remaining to read",
            "transfer closed with outstanding read data remaining",
            "Recv failure: Connection reset by peer",
            "Send failure: Broken pipe",
            "Transferred a partial file",
            "Failure when receiving data from the peer",
        ])
    func connectionLoss(description: String) throws {
        let original = Self.curlError(description)
        let normalized = try #require(URLSessionLoader.normalized(original) as? URLError)
        #expect(normalized.code == .networkConnectionLost)
        let underlying = try #require(normalized.userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(underlying.code == URLError.Code.unknown.rawValue)
        #expect(underlying.localizedDescription == description)
    }

    @Test("a connection closed before any answer becomes networkConnectionLost")
    func emptyReply() throws {
        let original = URLError(.badServerResponse, userInfo: [NSLocalizedDescriptionKey: "Empty reply from server"])
        let normalized = try #require(URLSessionLoader.normalized(original) as? URLError)
        #expect(normalized.code == .networkConnectionLost)
    }

    @Test("other errors are returned as they are")
    func otherErrors() {
        #expect((URLSessionLoader.normalized(Self.curlError("SSL certificate problem")) as? URLError)?.code == .unknown)
        #expect((URLSessionLoader.normalized(URLError(.timedOut)) as? URLError)?.code == .timedOut)
        #expect((URLSessionLoader.normalized(URLError(.badServerResponse)) as? URLError)?.code == .badServerResponse)
        #expect(URLSessionLoader.normalized(CancellationError()) is CancellationError)
    }
}
