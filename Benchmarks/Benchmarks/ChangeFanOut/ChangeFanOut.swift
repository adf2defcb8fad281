import Benchmark
import BenchmarkSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

// The time from an invalidation until every one of 1,000 subscribers has received it, each
// subscriber a task waiting on its own stream.

private final class Countdown: @unchecked Sendable {
    // `@unchecked`: `remaining` and `waiter` are only touched while `lock` is held.
    private let lock = NSLock()
    private var remaining: Int
    private var waiter: CheckedContinuation<Void, Never>?

    init(_ count: Int) { remaining = count }

    func tick() {
        let done: CheckedContinuation<Void, Never>? = lock.withLock {
            remaining -= 1
            guard remaining == 0 else { return nil }
            defer { waiter = nil }
            return waiter
        }
        done?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let finished = lock.withLock {
                if remaining == 0 { return true }
                waiter = continuation
                return false
            }
            if finished { continuation.resume() }
        }
    }
}

let benchmarks: @Sendable () -> Void = {
    let subscriberCount = 1_000
    Benchmark(
        "Fan-out: one invalidation to \(subscriberCount) subscribers",
        configuration: .init(
            metrics: [.wallClock], maxDuration: .seconds(isSmokeRun ? 1 : 10), maxIterations: isSmokeRun ? 3 : 200)
    ) { benchmark in
        let transport = CachedTransport()
        let countdown = Countdown(subscriberCount)
        let subscribed = Countdown(subscriberCount)
        let request = URLRequest(url: URL(string: "https://api.example.com/items/1")!)
        // Stored before anyone listens: an invalidation announces what it removes.
        guard (try? transport.store(ProvisionalAnswer(for: request, data: Data("items".utf8)))) != nil else {
            fatalError("the entry to invalidate could not be stored")
        }
        let listeners = (0..<subscriberCount).map { _ in
            Task.detached {
                var changes = transport.changes().makeAsyncIterator()
                subscribed.tick()
                if await changes.next() != nil { countdown.tick() }
            }
        }
        await subscribed.wait()
        benchmark.startMeasurement()
        await Task.detached {
            transport.invalidate(request)
            await countdown.wait()
        }.value
        benchmark.stopMeasurement()
        for listener in listeners { await listener.value }
    }
}
