import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
import TransportCache

/// A fetch goes to the network and completes while every thread of the concurrency pool is busy.
///
/// Ten thousand callers arriving at once keep the pool's threads busy for tens of milliseconds. A
/// fetch whose own steps (the header override's inner request, the session's completion handlers)
/// were queued behind them started only once they had all arrived, and its answer came that much
/// later. Here the pool's threads spin, runnable, so that no thread is added to the pool, while the
/// fetch is started and awaited from one of them without a suspension.
/// Its cases run one at a time: two at once would spin each other's threads.
@Suite("A fetch needs no thread of the concurrency pool", .serialized)
struct BusyPoolEndToEndTests {
    /// Every way the transport makes its sessions.
    enum Sessions: String, CaseIterable, CustomTestStringConvertible {
        case sharedInnerSession = "header override, shared inner session"
        case ownInnerSession = "header override, its own session configuration"
        case delegateWithOverride = "header override, the app's session delegate"
        case delegateWithoutOverride = "no header override, the app's session delegate"
        case withoutOverride = "no header override"

        var testDescription: String { rawValue }

        func transport() -> CachedTransport {
            var configuration = CachedTransport.Configuration()
            if self == .delegateWithoutOverride || self == .withoutOverride {
                configuration.network.cacheOverride = nil
            }
            switch self {
            case .sharedInnerSession, .withoutOverride:
                return CachedTransport(configuration: configuration)
            case .ownInnerSession:
                return CachedTransport(configuration: configuration, sessionConfiguration: .ephemeral)
            case .delegateWithOverride, .delegateWithoutOverride:
                return CachedTransport(configuration: configuration, sessionDelegate: AppDelegate())
            }
        }
    }

    @Test(
        "a prefetch reaches the origin and stores its answer while every thread of the pool spins",
        arguments: Sessions.allCases)
    func completesWhileThePoolIsBusy(sessions: Sessions) async throws {
        // An origin served from a thread of its own: the loopback origin's handlers are tasks, which
        // the spinning pool would hold back.
        let origin = try ThreadOrigin()
        defer { origin.stop() }
        let transport = sessions.transport()
        // Warm: every lazily made session exists before the pool is taken.
        _ = try await transport.data(from: origin.url("/warm"))
        let url = origin.url("/busy-pool")
        let stored = try await Self.whilePoolSpins {
            _ = try transport.prefetch(URLRequest(url: url), priority: .high)
            // Bounds how long the test may take to fail; the loop ends as soon as the answer is in.
            let deadline = ContinuousClock.now + .seconds(20)
            while transport.statistics.stores < 2 && ContinuousClock.now < deadline {}
            return transport.statistics.stores
        }
        #expect(stored == 2, "the prefetch's answer was not stored while the pool's threads were busy")
        #expect(origin.hits == 2)
        let (data, response) = try await transport.data(from: url)
        #expect(data == Data("/busy-pool".utf8))
        #expect(response.cacheOutcome?.isFromMemory == true)
    }

    /// Runs `body` on a thread of the pool while every other thread of the pool spins, and
    /// returns what it returns once the spinners have stopped.
    static func whilePoolSpins<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let spinners = ProcessInfo.processInfo.activeProcessorCount
        let spin = Spin()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            for _ in 0..<spinners - 1 {
                group.addTask {
                    spin.started.add(1, ordering: .relaxed)
                    while !spin.stop.load(ordering: .relaxed) {}
                    return nil
                }
            }
            group.addTask {
                defer { spin.stop.store(true, ordering: .relaxed) }
                while spin.started.load(ordering: .relaxed) < spinners - 1 {}
                return try body()
            }
            var result: T?
            for try await value in group where value != nil { result = value }
            return result!
        }
    }

    final class Spin: Sendable {
        let started = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
    }
}

/// An HTTP/1.1 origin on 127.0.0.1 that answers every request with its path, fresh for ten
/// minutes, from a thread of its own, one connection at a time.
final class ThreadOrigin: Sendable {
    private let listener: Int32
    let port: Int
    private let served = Atomic<Int>(0)

    var hits: Int { served.load(ordering: .relaxed) }

    init() throws {
        #if canImport(Glibc)
        let stream = Int32(SOCK_STREAM.rawValue)
        #else
        let stream = SOCK_STREAM
        #endif
        let listening = Self.check(socket(AF_INET, stream, 0))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                _ = Self.check(bind(listening, address, length))
                _ = Self.check(getsockname(listening, address, &length))
            }
        }
        _ = Self.check(listen(listening, 16))
        listener = listening
        port = Int(UInt16(bigEndian: address.sin_port))
        let origin = self
        Thread { origin.serve() }.start()
    }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// Closes the listening socket, which ends the serving thread.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !received.suffix(4).elementsEqual("\r\n\r\n".utf8) {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                received += buffer[..<count]
            }
            let line = String(decoding: received.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
            let path = line.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            served.add(1, ordering: .relaxed)
            let answer = Array(
                ("HTTP/1.1 200 OK\r\nContent-Length: \(path.utf8.count)\r\nCache-Control: max-age=600\r\n"
                    + "Connection: close\r\n\r\n\(path)").utf8)
            _ = answer.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            close(connection)
        }
    }

    private static func check(_ result: Int32) -> Int32 {
        precondition(result >= 0, "socket call failed: \(errno)")
        return result
    }
}
