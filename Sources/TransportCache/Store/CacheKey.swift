import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What identifies one stored response: the method, the normalised URL (query included) and the
/// values of the request headers that select a representation.
///
/// Requests that differ in any identity header (`Authorization`, `Cookie`, `Accept`,
/// `Accept-Language` and the configured extras) get different keys, so they never share an entry
/// or an in-flight fetch. Headers a stored response names in `Vary` are checked on top of the key
/// by the store, against the request that stored it.
struct CacheKey: Hashable, Sendable {
    /// `GET` or `HEAD`, or `POST` for a query (``CachedTransport/Configuration/Network/queryEndpoints``).
    let method: String
    /// The URL with scheme and host lowercased, the default port and the fragment dropped.
    let url: String
    /// One value per name in ``KeyHeaders/names`` (nil where absent); empty when all are absent,
    /// so the common request without identity headers allocates nothing here. A query `POST`'s
    /// body follows them.
    let identity: [String?]
    /// The three above folded into one word when the key is made (see ``KeyDigest``).
    private let digest: UInt64

    init(method: String, url: String, identity: [String?]) {
        self.init(method: method, url: url, identity: KeyIdentity(identity))
    }

    /// A key whose identity was digested before: the identity an account or a keyed header
    /// shares among its keys is digested once (``KeyIdentity``), not on every hit.
    init(method: String, url: String, identity: KeyIdentity) {
        var digest = KeyDigest()
        digest.add(url)
        self.init(method: method, url: url, urlDigest: digest, identity: identity)
    }

    /// A key whose URL was digested before: as it was scanned for its normal form
    /// (``URLNormalization/keyed(_:)``), or as written (``KeyDigest/digested(_:)``). Either way
    /// the URL's bytes are read once.
    @inline(__always)
    private init(method: String, url: String, urlDigest: KeyDigest, identity: KeyIdentity) {
        self.method = method
        self.url = url
        self.identity = identity.values
        var digest = urlDigest
        digest.add(method: method)
        if !identity.isEmpty { digest.add(word: identity.digest) }
        self.digest = digest.value
    }

    /// The partition the request belongs to (``Credentials/init(_:credential:limit:partition:)``),
    /// kept in ``identity`` behind its marker; nil without one.
    var partition: String? {
        account.flatMap(KeyHeaders.partition(ofMarker:))
    }

    /// The account the key was made for (see ``KeyHeaders/identity(values:account:headers:)``): the
    /// marker of a partition or of a credential the app set; nil for a request keyed by its own
    /// headers only. A query's body follows it. Not read by a hit.
    var account: String? {
        for case let value? in identity.reversed() where value.hasPrefix(KeyHeaders.accountMarker) {
            return value
        }
        return nil
    }

    /// Feeds `Hasher` one word instead of every byte of the URL: SipHash over the URL cost more
    /// than the rest of a hit.
    func hash(into hasher: inout Hasher) {
        hasher.combine(digest)
    }

    /// The hash a `Dictionary` or `Set` of keys asks for: the digest, already spread and seeded
    /// per process (``KeyDigest``), mixed with the table's own seed in one round, rather than
    /// SipHash run over it. SipHash's rounds, and the dynamic exclusivity check its inlined
    /// reading of the process's hashing seed costs, were a tenth of a hit.
    func _rawHashValue(seed: Int) -> Int {
        Int(truncatingIfNeeded: KeyDigest.mix(digest, UInt64(UInt(bitPattern: seed))))
    }

    static func == (left: CacheKey, right: CacheKey) -> Bool {
        left.digest == right.digest && left.url == right.url && left.method == right.method
            && left.identity == right.identity
    }
}

/// A fast 64-bit digest of a key's strings, eight bytes per multiplication.
///
/// It only spreads keys before `Hasher` (SipHash, seeded per process) hashes the digest, so what
/// it must do is make equal digests rare: it starts from a per-process seed taken from `Hasher`
/// (fixed when `SWIFT_DETERMINISTIC_HASHING` is set), so colliding keys cannot be prepared in
/// advance, and keys whose digests do collide still compare unequal.
struct KeyDigest {
    private static let seed: UInt64 = {
        var hasher = Hasher()
        hasher.combine(0x7472_616E_7370_6F72 as UInt64)
        return UInt64(truncatingIfNeeded: hasher.finalize())
    }()

    private(set) var value = KeyDigest.seed

    /// Adds a word digested before, such as ``KeyIdentity/digest``.
    mutating func add(word: UInt64) {
        value = Self.mix(value, word)
    }

    mutating func add(_ string: String?) {
        guard let string else {
            value = Self.mix(value, 0x6E6F_6E65)
            return
        }
        // Borrowed where the string stores its bytes contiguously (any native string); a copy of
        // the string, as `withUTF8` makes, would cost a retain and a release.
        if string.utf8.withContiguousStorageIfAvailable({ add(UnsafeRawBufferPointer($0)) }) == nil {
            var copy = string
            copy.withUTF8 { add(UnsafeRawBufferPointer($0)) }
        }
    }

    /// `string`, a key's URL, with the digest a key begins with (``add(_:)``).
    static func digested(_ string: consuming String) -> (String, KeyDigest) {
        var digest = KeyDigest()
        // Not through ``reading(_:_:)``, whose generic result cost a hit 5 to 20 instructions.
        if string.utf8.withContiguousStorageIfAvailable({ digest.add(UnsafeRawBufferPointer($0)) }) == nil {
            readingMadeContiguous(&string) { digest.add(UnsafeRawBufferPointer($0)) }
        }
        return (string, digest)
    }

    /// `body` of `string`'s UTF-8 bytes, read where they are: a string that does not store them
    /// contiguously (one bridged from an `NSString`) is made to first, rather than copied.
    @inline(__always)
    static func reading<Result>(_ string: inout String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = string.utf8.withContiguousStorageIfAvailable(body) { return result }
        return readingMadeContiguous(&string, body)
    }

    /// ``reading(_:_:)`` of a string that does not store its bytes contiguously.
    @inline(never)
    private static func readingMadeContiguous<Result>(
        _ string: inout String, _ body: (UnsafeBufferPointer<UInt8>) -> Result
    ) -> Result {
        string.makeContiguousUTF8()
        return string.withUTF8(body)
    }

    /// Adds a key's method: the two a hit can have as one word each, any other as its bytes.
    @inline(__always)
    mutating func add(method: String) {
        switch method {
        case "GET": add(word: 0x4745_54)
        case "HEAD": add(word: 0x4845_4144)
        default: add(method)
        }
    }

    /// Adds `bytes`, and says whether `byte` (not zero) is among them: a key's URL is digested and
    /// searched for a fragment (``URLNormalization/keyed(_:)``) in one pass, eight bytes at a time.
    mutating func add(_ bytes: UnsafeRawBufferPointer, finding byte: UInt8) -> Bool {
        digest(bytes, finding: byte)
    }

    /// Adds `bytes`: the digest ``add(_:finding:)`` makes, with no search.
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        digest(bytes, finding: nil)
    }

    @inline(__always)
    @discardableResult
    private mutating func digest(_ bytes: UnsafeRawBufferPointer, finding byte: UInt8?) -> Bool {
        assert(byte != 0)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let pattern = ones &* UInt64(byte ?? 0)
        var state = Self.mix(value, UInt64(bytes.count))
        var found: UInt64 = 0
        var offset = 0
        while offset &+ 8 <= bytes.count {
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            state = Self.mix(state, word)
            if byte != nil {
                // A byte of `word ^ pattern` is zero where `word` holds `byte` (exact as a whole).
                let matched = word ^ pattern
                found |= (matched &- ones) & ~matched & (ones &<< 7)
            }
            offset &+= 8
        }
        let remaining = bytes.count &- offset
        if remaining > 0 {
            var tail: UInt64 = 0
            if bytes.count >= 8 {
                // The last eight bytes, those digested already shifted out.
                let last = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: bytes.count &- 8, as: UInt64.self))
                tail = last >> (UInt64(8 &- remaining) &* 8)
                if byte != nil {
                    // The bytes shifted in above the tail are zero: no match for a byte that is not.
                    let matched = tail ^ pattern
                    found |= (matched &- ones) & ~matched & (ones &<< 7)
                }
            } else {
                for index in offset..<bytes.count {
                    tail |= UInt64(bytes[index]) << (UInt64(index &- offset) &* 8)
                    if bytes[index] == byte { found = 1 }
                }
            }
            state = Self.mix(state, tail)
        }
        value = state
        return found != 0
    }

    /// One round: the two halves of a full-width product, as wyhash mixes.
    static func mix(_ state: UInt64, _ word: UInt64) -> UInt64 {
        let product = (state ^ word ^ 0xA076_1D64_78BD_642F).multipliedFullWidth(by: 0xE703_7ED1_A0B4_28DB)
        return product.high ^ product.low
    }
}

/// The identity values of a key (``CacheKey/identity``) with their digest, made once where many
/// keys share them: an account's (``AccountIdentity/alone``), or a keyed header's value.
struct KeyIdentity: Sendable {
    let values: [String?]
    let digest: UInt64
    /// Whether ``values`` is empty, known without reading the array.
    let isEmpty: Bool

    init(_ values: [String?]) {
        self.values = values
        var digest = KeyDigest()
        for value in values { digest.add(value) }
        self.digest = digest.value
        isEmpty = values.isEmpty
    }

    /// The identity of a request with no key header, in no account: its digest is not read.
    @inline(__always)
    init(none: Void) {
        values = []
        digest = 0
        isEmpty = true
    }

    static let none = KeyIdentity(none: ())
}

/// The request headers that join the key, lowercased and sorted so keys are stable.
struct KeyHeaders: Sendable {
    static let standard = ["accept", "accept-language", "authorization", "cookie"]

    let names: [String]
    /// The place of `authorization` in ``names``.
    private let authorization: Int?

    /// The lengths of ``names`` (``ASCII/lengthBit(_:)``).
    let lengths: UInt64

    init(extra: some Sequence<String>) {
        var all = Set(Self.standard)
        for name in extra { all.insert(name.lowercased()) }
        names = all.sorted()
        authorization = names.firstIndex(of: "authorization")
        lengths = names.reduce(0) { $0 | ASCII.lengthBit($1) }
    }

    /// What begins an account among the identity values: a header value holds no control
    /// character, so no header's value can pass for an account.
    static let accountMarker = "\u{0}"
    /// The account of a declared partition: this, then the partition's name.
    static let partitionPrefix = "\u{0}partition "
    /// The account of a credential the app set, without partitions: this, then a number that
    /// credential and its refreshes share, and no other.
    static let credentialPrefix = "\u{0}credential "

    /// The partition an account marker names; nil for the marker of a credential's own account.
    static func partition(ofMarker marker: String) -> String? {
        guard marker.hasPrefix(partitionPrefix) else { return nil }
        return String(marker.dropFirst(partitionPrefix.count))
    }

    /// The identity of a request whose key headers' values are `values` (``values(in:)``), made
    /// for `account` (see ``RequestPreparation/keyed(_:)``): the values of the key headers, then
    /// the account's marker. A request with no key header of its own holds the account alone,
    /// made and digested once for every key of it, so that a hit with credentials builds no array.
    /// A request that carries its own `Authorization` is the app's to authenticate: keyed by that
    /// header, in no account.
    ///
    /// The values of keyed headers (`headers`, not set on the request yet) replace the request's
    /// own values of their names.
    @inline(__always)
    func identity(values: [String?], account: AccountIdentity?, headers: KeyedHeaders? = nil) -> KeyIdentity {
        if let headers {
            // A request with no key header of its own, the common case: the identity the keyed
            // headers' values make for their account was made with them.
            if values.isEmpty, headers.account === account { return headers.alone }
            return identity(values: values, account: account, setting: headers)
        }
        if values.isEmpty { return account?.alone ?? KeyIdentity(none: ()) }
        return identity(values, appending: account)
    }

    /// Whether a request whose key headers' values are `values` carries its own `Authorization`.
    @inline(__always)
    func carriesAuthorization(_ values: [String?]) -> Bool {
        guard let authorization, !values.isEmpty else { return false }
        return values[authorization] != nil
    }

    /// The identity of a request with key headers of its own (`values`, not empty).
    @inline(never)
    private func identity(_ values: [String?], appending account: AccountIdentity?) -> KeyIdentity {
        guard let account, !carriesAuthorization(values) else { return KeyIdentity(values) }
        return KeyIdentity(values + [account.marker])
    }

    @inline(never)
    private func identity(values: [String?], account: AccountIdentity?, setting headers: KeyedHeaders) -> KeyIdentity {
        identity(
            values: values, account: account, settingEach: headers.adapters, first: headers.first,
            others: headers.others)
    }

    /// The identity of a request whose own key headers' values are `values`, each keyed header of
    /// `adapters` set to its value (`first`, then `others`), for `account`.
    func identity(
        values: [String?], account: AccountIdentity?, settingEach adapters: [HeaderAdapter], first: String?,
        others: [String?]
    ) -> KeyIdentity {
        var values = values
        for (index, value) in ([first] + others).enumerated() {
            let adapter = adapters[index]
            if values.isEmpty {
                if value == nil { continue }
                values = Array(repeating: nil, count: names.count)
            }
            values[adapter.position] = value.map { Vary.normalized($0, lowercasedName: names[adapter.position]) }
        }
        if !values.isEmpty, !values.contains(where: { $0 != nil }) { values = [] }
        return identity(values: values, account: account)
    }

    /// The values of the key headers in `fields`, aligned with ``names``; empty when none is set.
    ///
    /// Header names compare without regard to case, and values are normalised as `Vary` selects
    /// (``Vary/normalized(_:lowercasedName:)``). When a dictionary holds the same name in two
    /// spellings, their values are joined in sorted order, so the key does not depend on
    /// dictionary order.
    func values(in fields: [String: String]?) -> [String?] {
        guard let fields, !fields.isEmpty else { return [] }
        var values: [String?] = []
        for (field, value) in fields { read(field, value, into: &values) }
        return values
    }

    /// Puts the value of `field` into `values` when `field` is a key header (see
    /// ``values(in:)``); ``RequestFields`` reads every field once for all it needs.
    @inline(__always)
    func read(_ field: String, _ value: String, into values: inout [String?]) {
        guard lengths & ASCII.lengthBit(field) != 0 else { return }
        readNamed(field, value, into: &values)
    }

    @inline(never)
    private func readNamed(_ field: String, _ value: String, into values: inout [String?]) {
        guard let position = names.firstIndex(where: { ASCII.equalsIgnoringCase($0, field) }) else { return }
        if values.isEmpty { values = Array(repeating: nil, count: names.count) }
        let value = Vary.normalized(value, lowercasedName: names[position])
        if let existing = values[position] {
            values[position] = [existing, value].sorted().joined(separator: ", ")
        } else {
            values[position] = value
        }
    }
}

extension CacheKey {
    /// The key of a request sent with `method` to `url`, whose key headers' values are `values`
    /// (``KeyHeaders/values(in:)``), for `account`, or nil for another scheme or a URL that cannot
    /// be normalised. Every key of a request is made here, but for the one a lookup tries first
    /// (``init(method:writtenURL:values:account:keyHeaders:headers:)``).
    init?(
        method: String, url: borrowing URL, values: [String?], account: AccountIdentity?, keyHeaders: KeyHeaders,
        headers: KeyedHeaders? = nil
    ) {
        guard let (normalized, digest) = URLNormalization.keyed(url) else { return nil }
        self.init(
            method: method, url: normalized, urlDigest: digest,
            identity: keyHeaders.identity(values: values, account: account, headers: headers))
    }

    /// The key a request sent with `method` to `url` would have if `url` were in its normal form
    /// already: made from the URL as written, not checked, for the rest as
    /// ``init(method:url:values:account:keyHeaders:headers:)`` makes it. A stored key's URL is
    /// the normal form of its request's URL, and a normal form normalised again is itself, so a
    /// key made so that equals a stored key is that key: a hit looks its key up so, and reads the
    /// URL's bytes once, to digest them.
    @inline(__always)
    init(
        method: String, writtenURL url: borrowing URL, values: [String?], account: AccountIdentity?,
        keyHeaders: KeyHeaders, headers: KeyedHeaders? = nil
    ) {
        let (written, digest) = KeyDigest.digested(url.absoluteString)
        self.init(
            method: method, url: written, urlDigest: digest,
            identity: keyHeaders.identity(values: values, account: account, headers: headers))
    }

    /// The key of a request with header fields `fields`; see
    /// ``init(method:url:values:account:keyHeaders:headers:)``.
    init?(
        method: String, url: URL, fields: [String: String]?, account: AccountIdentity?, keyHeaders: KeyHeaders
    ) {
        self.init(
            method: method, url: url, values: keyHeaders.values(in: fields), account: account, keyHeaders: keyHeaders)
    }

    /// The key of `request` for `account`; see ``init(method:url:values:account:keyHeaders:headers:)``.
    init?(_ request: URLRequest, account: AccountIdentity? = nil, keyHeaders: KeyHeaders) {
        guard let url = request.url else { return nil }
        self.init(
            method: request.httpMethod ?? "GET", url: url, fields: request.allHTTPHeaderFields, account: account,
            keyHeaders: keyHeaders)
    }
}

/// An account as keys hold it (see ``KeyHeaders/accountMarker``), with the identity of a request
/// that carries no key header of its own, made once.
final class AccountIdentity: Sendable {
    let marker: String
    let alone: KeyIdentity
    /// Why a credential has no account (``KeyAccount``): then no request is keyed with it.
    let failure: AuthenticationError?

    init(_ marker: String) {
        self.marker = marker
        alone = KeyIdentity([marker])
        failure = nil
    }

    init(failure: AuthenticationError) {
        marker = ""
        alone = .none
        self.failure = failure
    }
}
