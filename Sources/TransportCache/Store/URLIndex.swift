import Foundation

/// The stored keys by host, then by path segment, so that an invalidation finds the keys of an
/// ``Endpoint`` without looking at the others: an exact URL is a few hash lookups, a host or a
/// path prefix one walk down to a node and then only the keys below it.
///
/// A tree of path segments rather than a sorted list of paths: ``Endpoint/pathPrefix(_:host:)``
/// matches whole segments (`/items` takes `/items/7`, not `/itemsets`), and Swift compares strings
/// by canonical equivalence, which a tree of segment dictionaries follows exactly, where a byte
/// order would not. Hosts and paths are read from a key's URL as ``Endpoint`` reads them
/// (`URL.host` lowercased, `URL.path`, percent escapes decoded), so that the tree holds under a
/// prefix exactly the keys the endpoint matches.
///
/// Not thread-safe: ``ResponseStore`` keeps it under a lock of its own, which a hit never takes.
struct URLIndex: Sendable {
    /// Where a key sits in the index: its URL's host and path segments.
    struct Location: Sendable, Equatable {
        let host: String?
        let segments: [String]

        /// The location of a normalised URL string; nil when Foundation cannot read it as a URL.
        ///
        /// A key's URL is read again whenever the key leaves one by one (a request's or a tag's
        /// invalidation, an eviction): the plain URLs most keys have are read from their bytes
        /// (``init(plainURL:)``), well under a microsecond, where Foundation takes several.
        init?(normalizedURL: String) {
            if let plain = Location(plainURL: normalizedURL) {
                self = plain
                return
            }
            self.init(parsing: normalizedURL)
        }

        /// The location as Foundation reads the URL, as ``Endpoint`` does.
        init?(parsing normalizedURL: String) {
            guard let url = URL(string: normalizedURL) else { return nil }
            host = url.host?.lowercased()
            segments = Self.segments(of: url.path.isEmpty ? "/" : url.path)
        }

        /// The location of `http(s)://host[:port][/path][?query]` read from its bytes, for the
        /// form where they say exactly what Foundation reads: a host of lowercase letters, digits,
        /// `.` and `-`, a port of digits, and a path of letters, digits, `-`, `_`, `~` and `.`
        /// between single `/`s, no segment starting with `.` and no `/` at its end (which
        /// Foundation's `path` drops). Nil for anything else (escapes, user info, IPv6 hosts,
        /// other characters), which ``init(parsing:)`` reads.
        init?(plainURL url: String) {
            var url = url
            guard let location = url.withUTF8({ Self.plain($0) }) else { return nil }
            self = location
        }

        private init(host: String, segments: [String]) {
            self.host = host
            self.segments = segments
        }

        /// ``init(plainURL:)`` over the URL's bytes, one pass, no Foundation.
        private static func plain(_ bytes: UnsafeBufferPointer<UInt8>) -> Location? {
            let count = bytes.count
            guard count > 8, bytes[0] == UInt8(ascii: "h"), bytes[1] == UInt8(ascii: "t"),
                bytes[2] == UInt8(ascii: "t"), bytes[3] == UInt8(ascii: "p")
            else { return nil }
            var index = bytes[4] == UInt8(ascii: "s") ? 5 : 4
            guard bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
                bytes[index + 2] == UInt8(ascii: "/")
            else { return nil }
            index += 3
            let hostStart = index
            while index < count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?"),
                bytes[index] != UInt8(ascii: ":")
            {
                guard isHostByte(bytes[index]) else { return nil }
                index += 1
            }
            guard index > hostStart else { return nil }
            let host = string(bytes, hostStart..<index)
            if index < count, bytes[index] == UInt8(ascii: ":") {
                index += 1
                let portStart = index
                while index < count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?") {
                    guard bytes[index] >= 0x30 && bytes[index] <= 0x39 else { return nil }
                    index += 1
                }
                guard index > portStart else { return nil }
            }
            var segments = [""]
            // No path, or the path `/`: both read as `/`.
            if index < count, bytes[index] == UInt8(ascii: "/") { index += 1 }
            if index == count || bytes[index] == UInt8(ascii: "?") {
                segments.append("")
                return Location(host: host, segments: segments)
            }
            while true {
                let segmentStart = index
                while index < count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?") {
                    guard isPathByte(bytes[index]) else { return nil }
                    index += 1
                }
                // An empty segment (`//`, or a `/` at the end) or one starting with `.`: left to
                // Foundation, which drops a final `/` and may read dot segments its own way.
                guard index > segmentStart, bytes[segmentStart] != UInt8(ascii: ".") else { return nil }
                segments.append(string(bytes, segmentStart..<index))
                guard index < count, bytes[index] == UInt8(ascii: "/") else { break }
                index += 1
            }
            return Location(host: host, segments: segments)
        }

        private static func string(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }

        private static func isHostByte(_ byte: UInt8) -> Bool {
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "-")
        }

        private static func isPathByte(_ byte: UInt8) -> Bool {
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: "~")
        }

        /// `path` split at every `/`, empty segments kept: `/a/b` is `["", "a", "b"]`.
        static func segments(of path: String) -> [String] {
            // A `/` in an ASCII string is always a character of its own, so the bytes split where
            // the characters do, without the cost of finding character boundaries.
            if path.utf8.allSatisfy({ $0 < 0x80 }) {
                return path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
                    .map { String(Substring($0)) }
            }
            return path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        }
    }

    /// The keys at one path: most paths hold one key; paths that differ only in their query, method or
    /// identity share a node, by URL, so that one URL among many is still a lookup.
    fileprivate enum Keys: Sendable {
        case one(CacheKey)
        case byURL([String: [CacheKey]])

        var count: Int {
            switch self {
            case .one: 1
            case .byURL(let keys): keys.values.reduce(0) { $0 + $1.count }
            }
        }

        func forEach(_ body: (CacheKey) -> Void) {
            switch self {
            case .one(let key): body(key)
            case .byURL(let keys): for list in keys.values { list.forEach(body) }
            }
        }
    }

    fileprivate struct Node: Sendable {
        var children: [String: Node] = [:]
        var keys: Keys?

        var isEmpty: Bool { keys == nil && children.isEmpty }

        mutating func insert(_ key: CacheKey, at segments: ArraySlice<String>) -> Bool {
            guard let first = segments.first else {
                switch keys {
                case nil:
                    keys = .one(key)
                case .one(let held):
                    guard held != key else { return false }
                    var byURL = [held.url: [held]]
                    byURL[key.url, default: []].append(key)
                    keys = .byURL(byURL)
                case .byURL(var byURL):
                    guard byURL[key.url]?.contains(key) != true else { return false }
                    keys = nil
                    byURL[key.url, default: []].append(key)
                    keys = .byURL(byURL)
                }
                return true
            }
            return children[first, default: Node()].insert(key, at: segments.dropFirst())
        }

        /// Removes `key`, and the nodes left empty below this one.
        mutating func remove(_ key: CacheKey, at segments: ArraySlice<String>) -> Bool {
            guard let first = segments.first else {
                switch keys {
                case .one(let held) where held == key:
                    keys = nil
                    return true
                case .byURL(var byURL):
                    guard var list = byURL[key.url], let position = list.firstIndex(of: key) else { return false }
                    keys = nil
                    list.remove(at: position)
                    byURL[key.url] = list.isEmpty ? nil : list
                    keys = Self.keys(byURL)
                    return true
                default:
                    return false
                }
            }
            // One lookup per level: the child is changed in place through its position.
            guard let position = children.index(forKey: first) else { return false }
            let removed = children.values[position].remove(key, at: segments.dropFirst())
            if children.values[position].isEmpty { children.remove(at: position) }
            return removed
        }

        /// Removes the keys of `url` at the node `segments` lead to.
        mutating func removeURL(_ url: String, at segments: ArraySlice<String>) -> [CacheKey] {
            guard let first = segments.first else {
                switch keys {
                case .one(let held) where held.url == url:
                    keys = nil
                    return [held]
                case .byURL(var byURL):
                    keys = nil
                    let removed = byURL.removeValue(forKey: url) ?? []
                    keys = Self.keys(byURL)
                    return removed
                default:
                    return []
                }
            }
            guard children[first] != nil else { return [] }
            let removed = children[first]!.removeURL(url, at: segments.dropFirst())
            if children[first]!.isEmpty { children[first] = nil }
            return removed
        }

        /// Takes out the node `segments` lead to with everything below it, or only what lies below
        /// it when `keepingOwnKeys`.
        mutating func take(_ segments: ArraySlice<String>, keepingOwnKeys: Bool) -> Node? {
            guard let first = segments.first else {
                var taken = Node()
                swap(&taken.children, &children)
                if !keepingOwnKeys { swap(&taken.keys, &keys) }
                return taken.isEmpty ? nil : taken
            }
            guard children[first] != nil else { return nil }
            let taken = children[first]!.take(segments.dropFirst(), keepingOwnKeys: keepingOwnKeys)
            if children[first]!.isEmpty { children[first] = nil }
            return taken
        }

        /// Removes every key below this node that satisfies `matches`.
        mutating func removeAll(where matches: (CacheKey) -> Bool, into removed: inout [CacheKey]) {
            switch keys {
            case .one(let key) where matches(key):
                keys = nil
                removed.append(key)
            case .byURL(var byURL):
                keys = nil
                URLIndex.remove(from: &byURL, where: matches, into: &removed)
                keys = Self.keys(byURL)
            default:
                break
            }
            for name in Array(children.keys) {
                children[name]!.removeAll(where: matches, into: &removed)
                if children[name]!.isEmpty { children[name] = nil }
            }
        }

        func forEachKey(_ body: (CacheKey) -> Void) {
            keys?.forEach(body)
            for child in children.values { child.forEachKey(body) }
        }

        /// The node `segments` lead to, if any.
        func node(at segments: ArraySlice<String>) -> Node? {
            guard let first = segments.first else { return self }
            return children[first]?.node(at: segments.dropFirst())
        }

        /// The keys of `url` held at this node.
        func keys(of url: String) -> [CacheKey] {
            switch keys {
            case .one(let held) where held.url == url: [held]
            case .byURL(let byURL): byURL[url] ?? []
            default: []
            }
        }

        private static func keys(_ byURL: [String: [CacheKey]]) -> Keys? {
            guard byURL.count <= 1, let only = byURL.first?.value else { return .byURL(byURL) }
            return only.count == 1 ? .one(only[0]) : .byURL(byURL)
        }
    }

    /// The tree of each host; `nil` holds URLs without a host.
    private var hosts: [String?: Node] = [:]
    /// Keys whose URL Foundation cannot read, by URL: only an exact URL reaches them, as only
    /// ``Endpoint/url(_:)`` matches them.
    private var unreadable: [String: [CacheKey]] = [:]
    /// How many keys it holds, and those an invalidation under way took out and has not listed
    /// yet (``forgetTaken(_:generation:)``).
    private(set) var count = 0
    /// How many times it was emptied at once (``takeAll()``): keys taken before then are no
    /// longer counted.
    private(set) var generation = 0
    /// How many keys were ever added: a removal in steps that took its keys out first unindexes
    /// what it removes only when keys were added meanwhile (one of them may be a key it removes).
    private(set) var insertions: UInt64 = 0

    /// Adds `key`, unless it is held already.
    /// - Complexity: O(s) in the segments of its path, plus reading its URL.
    mutating func insert(_ key: CacheKey) {
        guard let location = Location(normalizedURL: key.url) else {
            guard unreadable[key.url]?.contains(key) != true else { return }
            unreadable[key.url, default: []].append(key)
            count += 1
            insertions += 1
            return
        }
        if hosts[location.host, default: Node()].insert(key, at: location.segments[...]) {
            count += 1
            insertions += 1
        }
    }

    /// Removes each of `keys` that it holds.
    /// - Complexity: O(k) in the keys, reading each one's URL; one pass over the whole index
    ///   instead when they are a large share of it, which then costs less.
    mutating func remove(_ keys: some Collection<CacheKey>) {
        guard !keys.isEmpty else { return }
        if keys.count > 64 && keys.count > count / 8 {
            let doomed = Set(keys)
            _ = removeAll(where: doomed.contains)
            return
        }
        for key in keys { remove(key) }
    }

    private mutating func remove(_ key: CacheKey) {
        guard let location = Location(normalizedURL: key.url) else {
            guard var list = unreadable[key.url], let position = list.firstIndex(of: key) else { return }
            list.remove(at: position)
            unreadable[key.url] = list.isEmpty ? nil : list
            count -= 1
            return
        }
        guard hosts[location.host] != nil else { return }
        if hosts[location.host]!.remove(key, at: location.segments[...]) { count -= 1 }
        if hosts[location.host]!.isEmpty { hosts[location.host] = nil }
    }

    /// Removes the keys of the normalised URL `url`, every method and identity.
    /// - Returns: the keys removed.
    /// - Complexity: O(s) in the segments of its path, plus O(k) in the keys removed.
    mutating func removeURL(_ url: String) -> [CacheKey] {
        guard let location = Location(normalizedURL: url) else {
            let removed = unreadable.removeValue(forKey: url) ?? []
            count -= removed.count
            return removed
        }
        guard hosts[location.host] != nil else { return [] }
        let removed = hosts[location.host]!.removeURL(url, at: location.segments[...])
        if hosts[location.host]!.isEmpty { hosts[location.host] = nil }
        count -= removed.count
        return removed
    }

    /// The segments a path prefix walks down, and whether the node it reaches keeps its own keys:
    /// `/items/` selects what lies below `/items`, not `/items` itself.
    private static func prefixSegments(_ prefix: String) -> (segments: ArraySlice<String>, keepingOwnKeys: Bool) {
        let segments = Location.segments(of: prefix)[...]
        let keepingOwnKeys = prefix.hasSuffix("/")
        return (keepingOwnKeys ? segments.dropLast() : segments, keepingOwnKeys)
    }

    /// The hosts a path prefix looks at: `host` when given, else every host.
    private func searchedHosts(_ host: String?) -> [String?] {
        host.map { [$0] } ?? Array(hosts.keys)
    }

    /// Removes every key that satisfies `matches`.
    /// - Returns: the keys removed.
    /// - Complexity: O(n) in the keys held.
    mutating func removeAll(where matches: (CacheKey) -> Bool) -> [CacheKey] {
        var removed: [CacheKey] = []
        for host in Array(hosts.keys) {
            hosts[host]!.removeAll(where: matches, into: &removed)
            if hosts[host]!.isEmpty { hosts[host] = nil }
        }
        URLIndex.remove(from: &unreadable, where: matches, into: &removed)
        count -= removed.count
        return removed
    }

    /// Removes the keys `matches` selects from `byURL`, appending them to `removed`, and the URLs
    /// left with none.
    private static func remove(
        from byURL: inout [String: [CacheKey]], where matches: (CacheKey) -> Bool, into removed: inout [CacheKey]
    ) {
        for (url, list) in byURL {
            let kept = list.filter { key in
                guard matches(key) else { return true }
                removed.append(key)
                return false
            }
            byURL[url] = kept.isEmpty ? nil : kept
        }
    }

    /// Removes the keys `endpoint` matches.
    /// - Returns: the keys removed.
    /// - Complexity: as ``take(_:)``, plus O(k) in the keys removed.
    mutating func remove(_ endpoint: Endpoint) -> [CacheKey] {
        let (keys, uncounted) = take(endpoint).list()
        forgetTaken(uncounted, generation: generation)
        return keys
    }

    /// Keys taken out of the index (``take(_:)``), listed once no lock is held: a host's or a path
    /// prefix's subtree leaves in one step, whatever it holds.
    struct Taken: Sendable {
        fileprivate var nodes: [Node] = []
        fileprivate var listed: [CacheKey] = []

        /// The keys taken, and how many of them the index still counts (``forgetTaken(_:)``).
        /// - Complexity: O(k) in the keys taken.
        func list() -> (keys: [CacheKey], uncounted: Int) {
            var keys = listed
            for node in nodes { node.forEachKey { keys.append($0) } }
            return (keys, keys.count - listed.count)
        }

        init(listed: [CacheKey] = []) {
            self.listed = listed
        }
    }

    /// Takes the keys `endpoint` matches out of the index, as `remove(_:)` of an endpoint does,
    /// leaving them to list (``Taken/list()``) and count (``forgetTaken(_:generation:)``) once its
    /// lock is released.
    /// A path prefix selects what lies at or below it, segment by segment, as
    /// ``Endpoint/pathPrefix(_:host:)`` matches it: on its host when given, else on every host.
    /// - Complexity: O(1) for a host; O(h × s) in the hosts searched and the prefix's segments for
    ///   a path prefix; O(s) in the URL's path segments plus O(k) in the keys taken for an exact
    ///   URL. Never for a predicate, which is asked about the keys with no lock held, before.
    mutating func take(_ endpoint: Endpoint) -> Taken {
        var taken = Taken()
        switch endpoint.selection {
        case .host(let host):
            if let node = hosts.removeValue(forKey: host) { taken.nodes.append(node) }
        case .pathPrefix(let prefix, let host):
            let (segments, keepingOwnKeys) = Self.prefixSegments(prefix)
            for host in searchedHosts(host) where hosts[host] != nil {
                if let node = hosts[host]!.take(segments, keepingOwnKeys: keepingOwnKeys) { taken.nodes.append(node) }
                if hosts[host]!.isEmpty { hosts[host] = nil }
            }
        case .url(let url):
            // Counted off already by `removeURL(_:)`.
            taken.listed = removeURL(url)
        case .predicate:
            // The app's code, never asked under a lock: ``Committer`` asks it first, and invalidates
            // the keys it matched.
            preconditionFailure("an endpoint's predicate is asked before its invalidation takes the index")
        }
        return taken
    }

    /// Takes `taken`'s `count` keys off the count, once they are listed: until then the count
    /// includes them.
    mutating func forgetTaken(_ count: Int, generation: Int) {
        guard generation == self.generation else { return }
        self.count -= count
    }

    /// Takes every key out at once, leaving it empty; what it took is returned, to free once no
    /// lock is held. It goes on counting ``insertions``.
    mutating func takeAll() -> URLIndex {
        var emptied = URLIndex()
        emptied.insertions = insertions
        emptied.generation = generation + 1
        swap(&self, &emptied)
        return emptied
    }

    /// The keys `endpoint` matches, found as `remove(_:)` of an endpoint finds them, without removing
    /// them; nil for a predicate, which the caller asks about every key (``keys``) outside the lock
    /// that guards the index.
    /// - Complexity: as `remove(_:)` of an endpoint.
    func keys(_ endpoint: Endpoint) -> [CacheKey]? {
        var found: [CacheKey] = []
        switch endpoint.selection {
        case .url(let url):
            guard let location = Location(normalizedURL: url) else { return unreadable[url] ?? [] }
            return hosts[location.host]?.node(at: location.segments[...])?.keys(of: url) ?? []
        case .pathPrefix(let prefix, let host):
            let (segments, keepingOwnKeys) = Self.prefixSegments(prefix)
            for host in searchedHosts(host) {
                guard let node = hosts[host]?.node(at: segments) else { continue }
                if keepingOwnKeys {
                    for child in node.children.values { child.forEachKey { found.append($0) } }
                } else {
                    node.forEachKey { found.append($0) }
                }
            }
        case .host(let host):
            hosts[host]?.forEachKey { found.append($0) }
        case .predicate:
            return nil
        }
        return found
    }

    /// Every key held, in no particular order.
    /// - Complexity: O(n).
    var keys: [CacheKey] {
        var keys: [CacheKey] = []
        keys.reserveCapacity(count)
        for node in hosts.values { node.forEachKey { keys.append($0) } }
        for list in unreadable.values { keys.append(contentsOf: list) }
        return keys
    }
}
