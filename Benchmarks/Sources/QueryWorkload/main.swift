import CallgrindControl
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Observation
import TransportCache
import TransportCacheQueries
import TransportCacheTesting

// Runs the paths of the observable queries many times on the main actor, with nothing else around
// them, for profilers (`valgrind --tool=callgrind --collect-atstart=no` counts only the measured
// part):
//
//     QueryWorkload make 10000        10,000 queries made from memory and released, one at a time
//     QueryWorkload make-held 10000   the same while another query of the URL is held
//     QueryWorkload fan-out 1000 20   20 changes, each to 1,000 queries on one URL
//
// The main thread runs the main actor's jobs in its run loop, as an app's does.

struct Article: Codable, Sendable {
    let id: Int
    let title: String
}

let arguments = CommandLine.arguments.dropFirst()
guard let mode = arguments.first, let count = arguments.dropFirst().first.flatMap(Int.init) else {
    FileHandle.standardError.write(Data("usage: QueryWorkload make|make-held|fan-out COUNT [ROUNDS]\n".utf8))
    exit(2)
}
let rounds = arguments.dropFirst(2).first.flatMap(Int.init) ?? 1
let request = URLRequest(url: URL(string: "https://api.example.com/articles")!)

func articles(_ version: Int) -> [Article] {
    (1...20).map { Article(id: $0, title: "Article \($0), version \(version)") }
}

@inline(never)
func blackHole<Value>(_ value: Value) {
    withExtendedLifetime(value) {}
}

/// Counts observed changes of the queries' values down to zero.
@MainActor
final class Countdown {
    var remaining = 0

    func watch(_ query: CachedQuery<[Article]>) {
        remaining += 1
        withObservationTracking {
            _ = query.value
        } onChange: {
            MainActor.assumeIsolated { self.remaining -= 1 }
        }
    }
}

/// Runs the main actor's jobs until `transport` has `count` change subscribers.
@MainActor
func runUntil(_ transport: CachedTransport, hasSubscribers count: Int) {
    var reached = false
    Task { @MainActor in
        await transport.waitForChangeSubscribers(count)
        reached = true
    }
    runUntil { reached }
}

/// Runs the main actor's jobs until `done` holds.
@MainActor
func runUntil(_ done: () -> Bool) {
    while !done() { _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.01)) }
}

@MainActor
func run() throws {
    let transport = CachedTransport()
    try transport.store(ProvisionalAnswer(for: request, value: articles(0)))
    blackHole(try transport.cachedValue([Article].self, for: request))
    let clock = ContinuousClock()
    var elapsed = Duration.zero
    switch mode {
    case "make", "make-held":
        let held = mode == "make-held" ? CachedQuery([Article].self, for: request, in: transport) : nil
        // A first round resolves symbols and fills caches.
        blackHole(CachedQuery([Article].self, for: request, in: transport).value)
        runUntil(transport, hasSubscribers: held == nil ? 0 : 1)
        callgrind_toggle_collect()
        let start = clock.now
        for _ in 0..<count { blackHole(CachedQuery([Article].self, for: request, in: transport).value) }
        runUntil(transport, hasSubscribers: held == nil ? 0 : 1)
        elapsed = clock.now - start
        callgrind_toggle_collect()
        blackHole(held)
    case "fan-out":
        let queries = (0..<count).map { _ in CachedQuery([Article].self, for: request, in: transport) }
        for round in 1...rounds + 1 {
            let countdown = Countdown()
            for query in queries { countdown.watch(query) }
            if round == 2 { callgrind_toggle_collect() }
            let start = clock.now
            try transport.store(ProvisionalAnswer(for: request, value: articles(round)))
            runUntil { countdown.remaining == 0 }
            if round > 1 { elapsed += clock.now - start }
        }
        callgrind_toggle_collect()
        blackHole(queries)
    default:
        FileHandle.standardError.write(Data("unknown mode \(mode)\n".utf8))
        exit(2)
    }
    FileHandle.standardError.write(Data("\(mode) \(count) x \(rounds): \(elapsed)\n".utf8))
}

try MainActor.assumeIsolated { try run() }
