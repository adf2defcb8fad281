import Foundation
import LoopbackOrigin
@testable import OpenAPIExample
import OpenAPIRuntime
import Testing

/// The figures of the OpenAPI table in Benchmarks/README.md: the same generated client and operations over both
/// transports, against one origin each, with the origin's hits and the wall time printed.
@Suite("Side by side: a generated client's origin hits and wall time over both transports")
struct SideBySideMeasurementTests {
    struct Figure {
        let transport: TransportUnderTest
        let hits: Int
        let time: Duration
    }

    /// 100 concurrent `listArticles` calls, the origin taking 20 ms to answer.
    static func concurrentCalls(over transport: TransportUnderTest) async throws -> Figure {
        var figure: Figure?
        try await withOrigin { origin in
            let client = try await warmClient(over: transport, origin: origin)
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        _ = try await String(
                            plainText: client.listArticles(query: .init(page: 1, delay: 20)).ok.body.plainText
                        )
                    }
                }
                try await group.waitForAll()
            }
            let time = ContinuousClock.now - start
            figure = Figure(transport: transport, hits: await origin.hits(path: "/articles"), time: time)
        }
        return try #require(figure)
    }

    /// 1,000 `getItem` calls one after another, the origin answering at once.
    static func sequentialCalls(over transport: TransportUnderTest) async throws -> Figure {
        var figure: Figure?
        try await withOrigin { origin in
            let client = try await warmClient(over: transport, origin: origin)
            let start = ContinuousClock.now
            for _ in 0..<1_000 {
                _ = try await client.itemText("a", page: 1)
            }
            let time = ContinuousClock.now - start
            figure = Figure(transport: transport, hits: await origin.hits(path: "/items/a"), time: time)
        }
        return try #require(figure)
    }

    /// A client whose connection to the origin is already open, so neither transport's figures
    /// include connecting.
    static func warmClient(over transport: TransportUnderTest, origin: LoopbackOrigin) async throws -> Client {
        let (client, _) = transport.makeClient(serverURL: origin.baseURL)
        _ = try await client.itemText("warm-up")
        return client
    }

    @Test("the cache takes the origin's hits from one per call to one, and the time with them")
    func measure() async throws {
        var lines = [
            "| generated client, same operations | transport | origin hits | wall time |",
            "|---|---|---:|---:|",
        ]
        var concurrent: [TransportUnderTest: Figure] = [:]
        var sequential: [TransportUnderTest: Figure] = [:]
        for transport in TransportUnderTest.allCases {
            concurrent[transport] = try await Self.concurrentCalls(over: transport)
            sequential[transport] = try await Self.sequentialCalls(over: transport)
        }
        for transport in TransportUnderTest.allCases {
            lines.append(Self.row("100 concurrent `listArticles`, origin answers in 20 ms", concurrent[transport]!))
        }
        for transport in TransportUnderTest.allCases {
            lines.append(Self.row("1,000 sequential `getItem`", sequential[transport]!))
        }
        print(lines.joined(separator: "\n"))

        #expect(concurrent[.cached]?.hits == 1)
        #expect(concurrent[.urlSession]?.hits == 100)
        #expect(sequential[.cached]?.hits == 1)
        #expect(sequential[.urlSession]?.hits == 1_000)
    }

    static func row(_ scenario: String, _ figure: Figure) -> String {
        let time = String(format: "%.1f ms", figure.time / .milliseconds(1))
        return "| \(scenario) | `\(figure.transport.rawValue)` | \(figure.hits) | \(time) |"
    }
}
