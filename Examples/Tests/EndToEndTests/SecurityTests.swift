import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
import TransportCache
import TransportCacheTesting

@Suite("Identities never cross, and nothing reaches the disk")
struct SecurityTests {
    @available(macOS 26.0, *)
    @Test("Cookie values never cross, even among concurrent callers of one URL")
    func cookieIsolation() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/me?gate=1")
            let cookies = ["session=alice", "session=bob", "session=carol", "session=alice; theme=dark"]
            await origin.closeGate()
            let callers = cookies.flatMap { cookie in
                startCalls(25) { (cookie, try await transport.data(for: request(url, headers: ["Cookie": cookie])).0) }
            }
            // Checked before waiting for the requests: were identities shared, more callers would
            // have joined, and fewer requests would ever arrive.
            try #require(transport.statistics.coalescedJoins == 96)
            await origin.waitForHits("/me?gate=1", count: cookies.count)
            #expect(await origin.hits("/me?gate=1") == cookies.count)
            await origin.openGate()
            for caller in callers {
                let (cookie, body) = try await caller.value
                #expect(body.text.hasSuffix(" cookie=\(cookie)"))
            }
            for cookie in cookies {
                let body = try await transport.data(for: request(url, headers: ["Cookie": cookie])).0
                #expect(body.text.hasSuffix(" cookie=\(cookie)"))
            }
            let anonymous = try await transport.data(for: request(url)).0
            #expect(!anonymous.text.contains("cookie="))
            #expect(await origin.hits("/me?gate=1") == cookies.count + 1)
        }
    }

    @Test("a cookie the origin sets for one transport is never sent by another sharing its connections")
    func sharedInnerSessionKeepsNoCookies() async throws {
        // Transports with the default session configuration fetch through one inner session.
        try await withOrigin { origin in
            let first = CachedTransport()
            let (_, response) = try await first.data(from: origin.url("/login?setcookie=1"))
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Set-Cookie") != nil)
            let second = CachedTransport()
            let body = try await second.data(from: origin.url("/me")).0
            #expect(!body.text.contains("cookie="))
            #expect(await origin.lastRequestHeader("Cookie", for: "/me") == nil)
            // The first transport does not send it again either.
            #expect(!(try await first.data(from: origin.url("/me?again=1")).0.text.contains("cookie=")))
        }
    }

    @Test("12 identities on 8 workers with invalidations in between: every body names its own caller")
    func identitiesUnderLoad() async throws {
        try await withOrigin { origin in
            var configuration = CachedTransport.Configuration()
            configuration.storage.memoryCapacity = 64 * 1024
            let transport = CachedTransport(configuration: configuration)
            let identities: [[String: String]] = (0..<12).map { index in
                switch index % 3 {
                case 0: ["Authorization": "Bearer user\(index)"]
                case 1: ["Cookie": "session=user\(index)"]
                default: ["Authorization": "Bearer user\(index)", "Cookie": "session=user\(index)"]
                }
            }
            try await withThrowingTaskGroup(of: Int.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var checked = 0
                        for step in 0..<150 {
                            let identity = identities[(worker * 7 + step * 5) % identities.count]
                            let url = origin.url("/account/\(step % 10)")
                            if step % 11 == 0 {
                                transport.invalidate(.url(url))
                                continue
                            }
                            let body = try await transport.data(for: request(url, headers: identity)).0.text
                            #expect(body.hasPrefix("path=/account/\(step % 10) "))
                            #expect(body.contains(" auth=\(identity["Authorization"] ?? "-") "))
                            if let cookie = identity["Cookie"] {
                                #expect(body.hasSuffix(" cookie=\(cookie)"))
                            } else {
                                #expect(!body.contains("cookie="))
                            }
                            checked += 1
                        }
                        return checked
                    }
                }
                var checked = 0
                for try await count in group { checked += count }
                #expect(checked == 8 * (150 - 14))
            }
            #expect(transport.statistics.bytesHeld <= 64 * 1024)
        }
    }

    @Test("a response that sets a cookie is never stored: neither its own identity nor another is handed it again")
    func setCookieNotStored() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/login?setcookie=1")
            let (first, response) = try await transport.data(for: request(url, headers: ["Cookie": "visitor=1"]))
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Set-Cookie") == "session=1")
            let (again, againResponse) = try await transport.data(for: request(url, headers: ["Cookie": "visitor=1"]))
            let (other, otherResponse) = try await transport.data(for: request(url))
            #expect(Set([first, again, other]).count == 3)
            #expect((againResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "Set-Cookie") == "session=2")
            #expect((otherResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "Set-Cookie") == "session=3")
            #expect(transport.statistics.stores == 0)
            #expect(await origin.hits("/login?setcookie=1") == 3)
        }
    }

    @available(macOS 26.0, *)
    @Test("concurrent sign-ins of two identities each get their own Set-Cookie, and nothing is kept")
    func concurrentSetCookie() async throws {
        try await withOrigin { origin in
            let transport = CachedTransport()
            let url = origin.url("/login?setcookie=1&gate=1")
            await origin.closeGate()
            let callers = ["Bearer alice", "Bearer bob"].flatMap { token in
                startCalls(10) {
                    let (data, response) = try await transport.data(
                        for: request(url, headers: ["Authorization": token]))
                    return (token, data, (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Set-Cookie"))
                }
            }
            try #require(transport.statistics.coalescedJoins == 18)
            await origin.waitForHits("/login?setcookie=1&gate=1", count: 2)
            #expect(await origin.hits("/login?setcookie=1&gate=1") == 2)
            await origin.openGate()
            var cookies: [String: Set<String?>] = [:]
            for caller in callers {
                let (token, data, cookie) = try await caller.value
                #expect(data.text.contains(" auth=\(token) "))
                cookies[token, default: []].insert(cookie)
            }
            #expect(cookies["Bearer alice"]?.count == 1)
            #expect(cookies["Bearer bob"]?.count == 1)
            #expect(cookies["Bearer alice"] != cookies["Bearer bob"])
            #expect(transport.statistics.stores == 0)
        }
    }

    @Test("no byte of a response is written to disk")
    func nothingOnDisk() async throws {
        let started = Date()
        let secret = "secret-\(UUID().uuidString)"
        try await withOrigin { origin in
            let transport = CachedTransport()
            for index in 0..<50 {
                _ = try await transport.data(
                    for: request(origin.url("/private/\(index)"), headers: ["Authorization": "Bearer \(secret)"]))
            }
            _ = try await transport.data(
                for: request(origin.url("/private/big?size=2000000"), headers: ["Authorization": "Bearer \(secret)"]))
            _ = try await transport.refresh(
                request(origin.url("/private/0"), headers: ["Authorization": "Bearer \(secret)"]))
            #expect(transport.statistics.entries == 51)
        }
        let home = FileManager.default.homeDirectoryForCurrentUser
        let places = [
            home.appendingPathComponent(".cache"),
            home.appendingPathComponent(".local/share"),
            home.appendingPathComponent("Library/Caches"),
            FileManager.default.temporaryDirectory,
        ]
        var scanned = 0
        for place in places {
            for file in Self.files(under: place, modifiedSince: started) {
                scanned += 1
                guard let contents = try? Data(contentsOf: file, options: .mappedIfSafe) else { continue }
                #expect(contents.range(of: Data(secret.utf8)) == nil, "\(file.path) holds a response")
            }
        }
        print("nothing on disk: \(scanned) files written since the test began were scanned")
    }

    /// Regular files below `directory` modified at or after `date`, at most 64 MB each.
    static func files(under directory: URL, modifiedSince date: Date) -> [URL] {
        let keys: Set<URLResourceKey> = [.isRegularFileKey, .contentModificationDateKey, .fileSizeKey]
        guard let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: Array(keys))
        else {
            return []
        }
        var files: [URL] = []
        for case let url as URL in enumerator {
            guard let values = try? url.resourceValues(forKeys: keys), values.isRegularFile == true,
                let modified = values.contentModificationDate, modified >= date.addingTimeInterval(-1),
                (values.fileSize ?? 0) <= 64 * 1024 * 1024
            else { continue }
            files.append(url)
        }
        return files
    }
}
