import Foundation
@testable import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A JSON decoder that holds one decode, the `held`-th, on its thread until ``release()``: a
/// decode another caller has under way. Hold it on a thread of its own: a held thread of the
/// task pool (one per core) could leave none for the test.
final class HeldDecoder: ResponseDecoding {
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
            // Bounded, so a broken test fails instead of hanging.
            _ = released.wait(timeout: .now() + 10)
        }
        return try JSONDecoder().decode(type, from: data)
    }

    /// Blocks the calling thread until the held decode has begun: nothing else runs on the caller's
    /// actor meanwhile. - Returns: false when it did not begin within 10 seconds.
    func blockUntilHeld() -> Bool {
        entered.wait(timeout: .now() + 10) == .success
    }

    func release() {
        released.signal()
    }
}

/// Another caller: `transport` refreshes `request` on the task pool, then a thread of its own (not
/// one of the pool's, which a held decode could starve) decodes the new entry with `decoder`.
/// - Returns: the value it decoded once it has, and a semaphore signalled then.
func decodeOnAnotherThread(
    after transport: CachedTransport, refreshes request: URLRequest, with decoder: HeldDecoder
) -> (decoded: Locked<[Article]?>, finished: DispatchSemaphore) {
    let refreshed = DispatchSemaphore(value: 0)
    Task.detached {
        _ = try? await transport.refresh(request)
        refreshed.signal()
    }
    let decoded = Locked<[Article]?>(nil)
    let finished = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        _ = refreshed.wait(timeout: .now() + 10)
        let value = try? transport.cachedValue([Article].self, for: request, decoder: decoder)?.value
        decoded.withLock { $0 = value }
        finished.signal()
    }
    return (decoded, finished)
}
