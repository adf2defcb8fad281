import Foundation
import Testing
@testable import TransportCache

@Suite("A value read without a lock", .timeLimit(.minutes(1)))
struct ReadMostlyTests {
    /// Counts the copies of it alive.
    final class Counted: Sendable {
        let number: Int
        let alive: Locked<Int>
        init(_ number: Int, alive: Locked<Int>) {
            self.number = number
            self.alive = alive
            alive.withLock { $0 += 1 }
        }
        deinit { alive.withLock { $0 -= 1 } }
    }

    @Test("a read under way keeps the copy it borrows; the next write after it frees every one replaced")
    func replacedCopiesOutliveTheirReads() {
        let alive = Locked(0)
        let value = ReadMostly(Counted(0, alive: alive))
        let (reading, finish, read) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), Locked(-1))
        Thread.detachNewThread {
            value.read { counted in
                reading.signal()
                finish.wait()
                read.withLock { $0 = counted.number }
            }
        }
        reading.wait()
        value.write { $0 = Counted(1, alive: alive) }
        value.write { $0 = Counted(2, alive: alive) }
        // The first copy is borrowed, the second may be: both wait.
        #expect(alive.withLock { $0 } == 3)
        #expect(value.read { $0.number } == 2)
        finish.signal()
        while read.withLock({ $0 }) < 0 { usleep(100) }
        #expect(read.withLock { $0 } == 0)
        // The reader counts itself out after its body: the next write with none under way frees them.
        var freed = false
        for number in 3..<1_000 where !freed {
            value.write { $0 = Counted(number, alive: alive) }
            freed = alive.withLock { $0 } == 1
        }
        #expect(freed)
    }

    @Test("reads on many threads while one writes see whole values, each written one or the first")
    func concurrentReadsSeeWholeValues() async throws {
        struct Pair: Sendable {
            var first: Int
            var second: [Int]
        }
        let value = ReadMostly(Pair(first: 0, second: [0]))
        let (torn, readersDone, written) = (Locked(0), Locked(0), Locked(0))
        let run: @Sendable (Int) -> Void = { thread in
            if thread == 0 {
                // Writes for as long as any reader reads.
                var number = 0
                while readersDone.withLock({ $0 }) < 3 {
                    number += 1
                    value.write { $0 = Pair(first: number, second: [number]) }
                }
                written.withLock { $0 = number }
                return
            }
            var last = 0
            for _ in 0..<20_000 {
                let (first, second) = value.read { ($0.first, $0.second[0]) }
                // Whole, and never older than one read before.
                if first != second || first < last { torn.withLock { $0 += 1 } }
                last = first
            }
            readersDone.withLock { $0 += 1 }
        }
        // Threads of their own: the four would otherwise hold the concurrency pool all the while.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for thread in 0..<4 { group.addTask { try await onAThreadOfItsOwn { run(thread) } } }
            try await group.waitForAll()
        }
        #expect(torn.withLock { $0 } == 0)
        #expect(value.read { $0.first } == written.withLock { $0 })
    }
}
