import Foundation
import Testing
@testable import TransportCache

@Suite("Bulk work lets a waiting thread have the lock", .timeLimit(.minutes(1)))
struct LockedTests {
    @Test("work that hands the lock over between two holds waits until the waiting thread has had it")
    func handOverWaitsForTheWaiter() {
        let locked = Locked([String]())
        let waiterDone = DispatchSemaphore(value: 0)
        locked.withLock { _ in
            Thread.detachNewThread {
                locked.withLock { $0.append("waiter") }
                waiterDone.signal()
            }
            // The waiter is counted and blocked behind this hold.
            locked.waitForWaiters(1)
        }
        // Much longer than the test may take: it returns because the waiter has had the lock.
        locked.handOverToWaiters(forAtMost: 60_000_000_000)
        locked.withLock { $0.append("bulk work") }
        waiterDone.wait()
        #expect(locked.withLock { $0 } == ["waiter", "bulk work"])
    }

    @Test("with no thread waiting, handing over returns at once")
    func noWaiter() {
        let locked = Locked(0)
        // A call that waited would take the whole limit and fail here; the limit is below the
        // suite's time limit, so this assertion, not the time limit, is what reports it.
        let limit: UInt64 = 10_000_000_000
        let elapsed = ContinuousClock().measure { locked.handOverToWaiters(forAtMost: limit) }
        #expect(elapsed < .nanoseconds(limit))
    }

    #if DEBUG
    @Test("locks taken in their written order pass, and one taken out of it stops a debug build")
    func lockOrder() async {
        let inFlight = Locked(0, rank: .inFlight)
        let store = Locked(0, rank: .store)
        let unranked = Locked(0)
        #expect(inFlight.withLock { _ in store.withLock { _ in unranked.withLock { _ in true } } })
        await #expect(processExitsWith: .failure) {
            let inFlight = Locked(0, rank: .inFlight)
            let store = Locked(0, rank: .store)
            store.withLock { _ in inFlight.withLock { _ in } }
        }
        await #expect(processExitsWith: .failure) {
            let index = Locked(0, rank: .store)
            let entries = Locked(0, rank: .store)
            index.withLock { _ in entries.withLock { _ in } }
        }
    }

    @Test("the app's code never runs under a lock: a clock read or a predicate asked under one stops a debug build")
    func appCodeOutsideLocks() async {
        let clock = CacheClock.continuous
        let predicate = Endpoint.matching { _ in true }
        let url = URL(string: "https://api.example.com/items")!
        // Outside every lock, and under a lock outside the order, both are read.
        #expect(Locked(0).withLock { _ in clock.reading.date <= Date() && predicate.matches(url) })
        await #expect(processExitsWith: .failure) {
            _ = Locked(0, rank: .inFlight).withLock { _ in CacheClock.continuous.now }
        }
        await #expect(processExitsWith: .failure) {
            _ = Locked(0, rank: .store).withLock { _ in CacheClock.continuous.date }
        }
        await #expect(processExitsWith: .failure) {
            let predicate = Endpoint.matching { _ in true }
            _ = Locked(0, rank: .leaf).withLock { _ in predicate.matches(URL(string: "https://api.example.com/")!) }
        }
    }
    #endif
}

@Suite("What a transport announces reaches its streams in order, made with no lock held", .timeLimit(.minutes(1)))
struct DeliveryQueueTests {
    /// An item of a test queue: ready, or made only once `release` is signalled.
    struct Item: QueuedItem {
        let name: String
        let release: DispatchSemaphore?

        var isCostlyToMake: Bool { release != nil }

        func made() -> Item {
            release?.wait()
            return Item(name: name + " made", release: nil)
        }
    }

    /// Records the names of the items delivered to it, in order.
    struct Recorder: DeliveryTarget {
        let delivered: Locked<[String]>

        var current: Locked<[String]> { delivered }

        static func deliver(_ item: Item, to delivered: Locked<[String]>) {
            delivered.withLock { $0.append(item.isCostlyToMake ? item.made().name : item.name) }
        }
    }

    @Test(
        "an item costly to make is made on a thread of its own; the caller who delivers does not wait, and what follows it waits for it"
    )
    func costlyItemMadeApart() {
        let delivered = Locked([String]())
        let queue = DeliveryQueue(Recorder(delivered: delivered))
        let release = DispatchSemaphore(value: 0)
        queue.enqueue(Item(name: "a", release: nil))
        queue.enqueue(Item(name: "b", release: release))
        queue.enqueue(Item(name: "c", release: nil))
        // Made on this thread, either call would wait for ever.
        queue.deliverQueued()
        queue.deliverQueued()
        #expect(delivered.withLock { $0 } == ["a"])
        release.signal()
        let deadline = ContinuousClock.now + .seconds(30)
        while delivered.withLock({ $0.count }) < 3, ContinuousClock.now < deadline { usleep(100) }
        #expect(delivered.withLock { $0 } == ["a", "b made", "c"])
    }

    #if DEBUG
    @Test("an invalidation's URLs are named with no lock held: under one, a debug build stops")
    func urlsNamedOutsideLocks() async {
        let keys = [CacheKey(method: "GET", url: "https://api.example.com/items", identity: .none)]
        #expect(Committer.urls(of: keys) == [URL(string: "https://api.example.com/items")!])
        await #expect(processExitsWith: .failure) {
            let keys = [CacheKey(method: "GET", url: "https://api.example.com/items", identity: .none)]
            _ = Locked(0, rank: .inFlight).withLock { _ in Committer.urls(of: keys) }
        }
    }
    #endif
}
