import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

@Suite("What an invalidation drops is freed a slice at a time", .timeLimit(.minutes(1)))
struct ReleaseTests {
    /// Counts the ``Tracked`` values freed, and resumes a waiter once as many as it asked for are.
    final class Frees: Sendable {
        private struct State {
            var count = 0
            var awaited = Int.max
            var waiter: CheckedContinuation<Void, Never>?
        }
        private let state = Locked(State())

        var count: Int { state.withLock { $0.count } }

        func freed() {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.count += 1
                guard state.count >= state.awaited else { return nil }
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }

        /// Runs `start`, then waits until `count` values have been freed.
        func wait(for count: Int, after start: () -> Void) async {
            await withCheckedContinuation { waiter in
                state.withLock { state in
                    state.awaited = count
                    state.waiter = waiter
                }
                start()
            }
        }
    }

    /// A value that tells `frees` when it is freed.
    final class Tracked: Sendable {
        private let frees: Frees
        init(_ frees: Frees) { self.frees = frees }
        deinit { frees.freed() }
    }

    /// Releases `count` values that tell `frees` when they are freed, through `queue`.
    private func release(_ count: Int, telling frees: Frees, through queue: ReleaseQueue, atOnce: Bool = false) {
        var released = Released()
        released.append((0..<count).map { _ in Tracked(frees) }, count: count)
        released.release(through: queue, atOnce: atOnce)
    }

    @Test(
        "many entries go to the release queue, which frees them all: a few per slice, or in one go for a critical memory warning",
        arguments: [(atOnce: false, slices: 64), (atOnce: true, slices: 1)])
    func manyFreedOnTheQueue(atOnce: Bool, slices: Int) async {
        // A slice with no time to spare frees one step's worth of entries.
        let queue = ReleaseQueue(sliceLimit: 0, pause: 0)
        let frees = Frees()
        let count = 64 * ResponseStore.stepSize
        await frees.wait(for: count) { release(count, telling: frees, through: queue, atOnce: atOnce) }
        #expect(frees.count == count)
        #expect(queue.slicesRun == slices)
    }

    /// A value that keeps the queue's thread in its first step until ``open()``.
    final class Gate: ReleasableInSteps, Sendable {
        private let opened = DispatchSemaphore(value: 0)
        func open() { opened.signal() }
        func releaseSome(_ limit: Int) -> Bool {
            opened.wait()
            return false
        }
    }

    @Test("a critical memory warning frees in one go what earlier releases left to free")
    func criticalHurriesWhatIsQueued() async {
        let queue = ReleaseQueue(sliceLimit: 0, pause: 0)
        let frees = Frees()
        let count = 64 * ResponseStore.stepSize
        let gate = Gate()
        await frees.wait(for: 2 * count) {
            // The queue is kept busy while a paced release waits behind it, then a critical one
            // comes, and only then does the queue go on.
            queue.release([gate])
            release(count, telling: frees, through: queue)
            release(count, telling: frees, through: queue, atOnce: true)
            gate.open()
        }
        #expect(frees.count == 2 * count)
        // The gate's slice, then one slice for each release instead of 64.
        #expect(queue.slicesRun == 3)
    }

    @Test("a critical memory warning with nothing queued leaves later releases paced")
    func hurryEndsWithTheQueue() async {
        let queue = ReleaseQueue(sliceLimit: 0, pause: 0)
        let frees = Frees()
        Released().release(through: queue, atOnce: true)
        let count = 16 * ResponseStore.stepSize
        await frees.wait(for: count) { release(count, telling: frees, through: queue) }
        #expect(queue.slicesRun == 16)
    }

    @Test("a few entries are freed on the caller's thread, not handed to the queue")
    func fewFreedAtOnce() {
        let queue = ReleaseQueue(sliceLimit: 0, pause: 0)
        let frees = Frees()
        release(Released.queueThreshold, telling: frees, through: queue)
        #expect(frees.count == Released.queueThreshold)
        #expect(queue.slicesRun == 0)
    }

    @Test("several handovers are each freed in full, a few entries per slice")
    func severalHandovers() async {
        let queue = ReleaseQueue(sliceLimit: 0, pause: 0)
        let frees = Frees()
        let each = 16 * ResponseStore.stepSize
        await frees.wait(for: 3 * each) {
            for _ in 0..<3 { release(each, telling: frees, through: queue) }
        }
        #expect(frees.count == 3 * each)
        #expect(queue.slicesRun == 3 * 16)
    }

    /// A decoded value that tells the ``Frees`` in its decoder's `userInfo` when it is freed.
    final class DecodedTracked: Decodable, Sendable {
        static let frees = CodingUserInfoKey(rawValue: "frees")!
        private let frees: Frees
        init(from decoder: any Decoder) throws { frees = decoder.userInfo[Self.frees] as! Frees }
        deinit { frees.freed() }
    }

    @Test("every entry invalidateAll drops is freed, a store's worth of them with their decoded values")
    func invalidateAllFreesEverything() async throws {
        let transport = makeTransport(loader: echoOrigin())
        let frees = Frees()
        let decoder = JSONDecoder()
        decoder.userInfo[DecodedTracked.frees] = frees
        let count = 4 * Released.queueThreshold
        for index in 0..<count {
            let request = request("https://api.example.com/items/\(index)")
            try transport.store(ProvisionalAnswer(for: request, data: Data("{}".utf8)))
            _ = try await transport.value(DecodedTracked.self, for: request, decoder: decoder)
        }
        #expect(frees.count == 0)
        await frees.wait(for: count) { transport.invalidateAll() }
        #expect(frees.count == count)
        #expect(transport.store.state.withLock { $0.entries.count } == 0)
    }

    @Test("an emptied store lets go of its entries and of their places in the index a few at a time")
    func emptiedStoreInSteps() throws {
        let transport = makeTransport(loader: echoOrigin())
        let count = 300
        for index in 0..<count {
            let url = "https://api.example.com/g\(index % 7)/items/\(index)"
            try transport.store(ProvisionalAnswer(for: request(url), data: Data(url.utf8)))
        }
        var emptied = transport.store.removeEverything(because: .invalidated).emptied
        #expect(transport.store.index.withLock { $0.count } == 0)
        #expect(transport.store.state.withLock { $0.entries.count } == 0)
        let step = ResponseStore.stepSize
        var left = count
        while left > 0 {
            let more = emptied.releaseSome(step)
            left -= min(step, left)
            #expect(more == (left > 0))
            #expect(emptied.count == left)
            var held = Set<CacheKey>()
            emptied.entries.forEachEntry { key, _ in held.insert(key) }
            #expect(Set(emptied.index.keys) == held)
            #expect(emptied.index.count == left)
        }
    }
}
