import Foundation
import Testing
@testable import TransportCache
import TransportCacheQueries
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A JSON decoder that holds one decode, the `held`-th, on its thread until ``release()``: a
/// decode another caller has under way. Hold it on a thread of its own: a held thread of the
/// task pool (one per core) could leave none for the test.
final class HeldDecoder: ResponseDecoding {
    /// How long each wait of the held decode and of its test lasts at most, so that a broken test
    /// fails instead of hanging: far longer than any wait of a test that works takes, even under a
    /// sanitizer on a busy machine.
    static let patience: DispatchTimeInterval = .seconds(60)
    private let held: Int
    private let decodes = Locked(0)
    private let entered = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    init(holding held: Int) {
        self.held = held
    }

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        let count = decodes.withLock { count in
            count += 1
            return count
        }
        if count == held {
            entered.signal()
            _ = released.wait(timeout: .now() + Self.patience)
        }
        return try JSONDecoder().decode(type, from: data)
    }

    /// Blocks the calling thread until the held decode has begun: nothing else runs on the caller's
    /// actor meanwhile. - Returns: false when it did not begin within ``patience``.
    func blockUntilHeld() -> Bool {
        entered.wait(timeout: .now() + Self.patience) == .success
    }

    func release() {
        released.signal()
    }
}

/// A query of `articlesURL` showing "one" while another caller decodes the entry that replaced
/// it. The origin must answer "one", then "two", then whatever the test needs.
///
/// The other caller refreshes on the task pool, then decodes the new entry with a held decoder on
/// a thread of its own: not one of the pool's threads, which a held decode could starve. The main
/// actor is held until that decode has begun, so the change reaches the query while the decode
/// is under way, and the query is waiting for it when this returns.
@MainActor
struct QueryWaitingForAnotherDecode {
    let transport: CachedTransport
    let decoder = HeldDecoder(holding: 2)
    let query: CachedQuery<[Article]>
    let observed: ObservedStates<Shown>
    /// What the other caller decoded, set before `finished` is signalled.
    let decoded = Locked<[Article]?>(nil)
    let finished = DispatchSemaphore(value: 0)

    init(_ origin: ScriptedOrigin) async throws {
        transport = makeTransport(origin)
        let request = URLRequest(url: articlesURL)
        _ = try await transport.data(for: request)
        query = CachedQuery([Article].self, for: request, in: transport, decoder: decoder)
        observed = observe(query)

        let (transport, decoder, decoded, finished) = (transport, decoder, decoded, finished)
        let refreshed = DispatchSemaphore(value: 0)
        Task.detached {
            _ = try? await transport.refresh(request)
            refreshed.signal()
        }
        Thread.detachNewThread {
            _ = refreshed.wait(timeout: .now() + HeldDecoder.patience)
            let value = try? transport.cachedValue([Article].self, for: request, decoder: decoder)?.value
            decoded.withLock { $0 = value }
            finished.signal()
        }
        try #require(decoder.blockUntilHeld())
        await transport.store.waitForDecodeWaits(1)
    }

    /// Lets the other caller's decode end. - Returns: what it decoded.
    func releaseTheOtherDecode() -> [Article]? {
        decoder.release()
        _ = finished.wait(timeout: .now() + HeldDecoder.patience)
        return decoded.withLock { $0 }
    }
}
