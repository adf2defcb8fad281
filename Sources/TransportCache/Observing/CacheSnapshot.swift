import Foundation

/// What a ``CachedTransport`` holds at one moment, entry by entry: for a debug screen or a log.
///
/// ```swift
/// print(transport.snapshot())
/// // URL                               VARIANT  AGE  LIFETIME  VALIDATORS  BYTES  HITS  DECODED
/// // https://api.example.com/articles  -        12s         -  ETag "v3"    4096     7  Array<Article>
/// // 1 entries, 4096 bytes
/// ```
public struct CacheSnapshot: Sendable, CustomStringConvertible {
    /// One stored response.
    public struct Entry: Sendable, Hashable {
        /// The URL it is stored for, normalised as the key is (scheme and host lowercased, the
        /// default port and the fragment dropped).
        public let url: URL
        /// `GET` or `HEAD`.
        public let method: String
        /// The request header values this variant was fetched with, for the fields its response's
        /// `Vary` names, by lowercased name; empty when it does not vary. A field the request did
        /// not send shows as an empty value.
        public let variantHeaders: [String: String]
        /// How old it is: by HTTP's age calculation when following HTTP caching, otherwise the
        /// time since it was stored.
        public let age: Duration
        /// How long it stays fresh from when the origin made it; nil when it never expires (the
        /// transport's default, `returnCacheDataElseLoad` without a maximum age).
        public let freshnessLifetime: Duration?
        /// Its `ETag`, sent back as `If-None-Match` to revalidate it.
        public let entityTag: String?
        /// Its `Last-Modified`, sent back as `If-Modified-Since` to revalidate it.
        public let lastModified: String?
        /// The bytes of its body.
        public let bytes: Int
        /// The requests it has answered from memory.
        public let hits: Int
        /// The types decoded from it and kept by decoded-value calls, most recently used first.
        public let decodedTypes: [String]
        /// The partition it belongs to (``Credentials/init(_:credential:limit:partition:)``): what
        /// ``CachedTransport/signOut(partition:)`` drops; nil for none.
        public let partition: String?

        /// True when it is within its freshness lifetime.
        public var isFresh: Bool { freshnessLifetime.map { age < $0 } ?? true }
    }

    /// The entries, most recently used first.
    public let entries: [Entry]

    /// The snapshot as a table, one line per entry.
    public var description: String {
        let header = ["URL", "VARIANT", "AGE", "LIFETIME", "VALIDATORS", "BYTES", "HITS", "DECODED"]
        let rows = entries.map { entry -> [String] in
            let variant =
                entry.variantHeaders.isEmpty
                ? "-"
                : entry.variantHeaders.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            var validators: [String] = []
            if let entityTag = entry.entityTag { validators.append("ETag \(entityTag)") }
            if entry.lastModified != nil { validators.append("Last-Modified") }
            return [
                (entry.partition.map { "[\($0)] " } ?? "") + (entry.method == "GET" ? "" : "\(entry.method) ")
                    + entry.url.absoluteString,
                variant,
                Self.seconds(entry.age),
                entry.freshnessLifetime.map(Self.seconds) ?? "-",
                validators.isEmpty ? "-" : validators.joined(separator: ", "),
                String(entry.bytes),
                String(entry.hits),
                entry.decodedTypes.isEmpty ? "-" : entry.decodedTypes.joined(separator: ", "),
            ]
        }
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        let numeric: Set<Int> = [2, 3, 5, 6]
        let lines = all.map { row in
            row.indices.map { column in
                let padding = String(repeating: " ", count: widths[column] - row[column].count)
                return numeric.contains(column) ? padding + row[column] : row[column] + padding
            }
            .joined(separator: "  ")
            .trimmingCharacters(in: .whitespaces)
        }
        return (lines + ["\(entries.count) entries, \(entries.reduce(0) { $0 + $1.bytes }) bytes"])
            .joined(separator: "\n")
    }

    private static func seconds(_ duration: Duration) -> String {
        "\(duration.components.seconds)s"
    }
}

extension CachedTransport {
    /// Every entry the transport holds now, most recently used first: URL, variant headers, age,
    /// freshness lifetime, validators, bytes, hits and decoded types. `print` it for a table.
    ///
    /// O(n) in the entries, so for a debug screen, not for every request. The store is read a
    /// few entries at a time, and the snapshot built outside its lock, so a hit on another
    /// task never waits for the whole copy; no entry is stored or dropped while it is taken.
    public nonisolated func snapshot() -> CacheSnapshot {
        let now = planner.policy.clock.now
        // Under the lock a hit takes, as little as each entry needs: its variants with what is
        // guarded (hits, decoded types). The key comes from the variant, outside the lock; a key
        // with one variant, the usual case, makes no array.
        let held = inFlight.withLock { _ in
            store.copyHeld { _, variants in
                let all = variants.all
                return (first: HeldVariant(all[0]), others: all.count > 1 ? all.dropFirst().map(HeldVariant.init) : [])
            }
        }
        var entries: [CacheSnapshot.Entry] = []
        entries.reserveCapacity(held.count)
        for (first, others) in held {
            let key = first.stored.key
            guard let url = URL(string: key.url) else { continue }
            entries.append(first.entry(url: url, method: key.method, at: now))
            for variant in others { entries.append(variant.entry(url: url, method: key.method, at: now)) }
        }
        return CacheSnapshot(entries: entries)
    }
}

/// A stored variant with what the store's lock guards, read under it for a snapshot.
private struct HeldVariant {
    let stored: StoredResponse
    let hits: Int
    let decodedTypes: [String]

    init(_ stored: StoredResponse) {
        self.stored = stored
        hits = stored.hits
        decodedTypes = stored.decoded.typeNames
    }

    func entry(url: URL, method: String, at now: ContinuousClock.Instant) -> CacheSnapshot.Entry {
        var variantHeaders: [String: String] = [:]
        for field in stored.selector.fields { variantHeaders[field.name] = field.value ?? "" }
        return CacheSnapshot.Entry(
            url: url,
            method: method,
            variantHeaders: variantHeaders,
            age: stored.currentAge(at: now) ?? now - stored.storedAt,
            freshnessLifetime: stored.expiresAt.map { $0 - stored.storedAt + (stored.initialAge ?? .zero) },
            entityTag: stored.entityTag,
            lastModified: stored.lastModified,
            bytes: stored.data.count,
            hits: hits,
            decodedTypes: decodedTypes,
            partition: stored.key.partition
        )
    }
}
