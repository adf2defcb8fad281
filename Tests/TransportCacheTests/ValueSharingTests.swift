import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TransportCache
import TransportCacheTesting

/// Decoded with a key strategy in play: `item_name` fills `itemName` only under
/// `convertFromSnakeCase`.
final class Named: Decodable, Sendable {
    let itemName: String?
}

/// Decoded with a date strategy in play: the same number is another instant under each.
final class Stamp: Decodable, Sendable {
    let at: Date
}

/// A decoder of the app's own that declares its settings: a tag that does not change decoding.
final class TaggedDecoder: ResponseDecoding {
    let tag: String
    private let decodes = Locked(0)

    init(tag: String) {
        self.tag = tag
    }

    var count: Int { decodes.withLock { $0 } }
    var decodingSettings: (any Hashable & Sendable)? { tag }

    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        decodes.withLock { $0 += 1 }
        return try JSONDecoder().decode(type, from: data)
    }
}

/// Another class declaring the same kind of settings.
final class OtherTaggedDecoder: ResponseDecoding {
    let tag: String
    init(tag: String) { self.tag = tag }
    var decodingSettings: (any Hashable & Sendable)? { tag }
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        try JSONDecoder().decode(type, from: data)
    }
}

#if DEBUG
/// Settings that count the times their `==` or `hash(into:)` ran while the transport held a lock
/// of its own.
struct WatchedSettings: Hashable, Sendable {
    let tag: String
    static let underLock = Locked(0)

    static func == (left: WatchedSettings, right: WatchedSettings) -> Bool {
        noteLock()
        return left.tag == right.tag
    }

    func hash(into hasher: inout Hasher) {
        Self.noteLock()
        hasher.combine(tag)
    }

    private static func noteLock() {
        if LockRank.isHoldingAny { underLock.withLock { $0 += 1 } }
    }
}

/// A decoder of the app's own whose settings watch for the transport's locks.
final class WatchedDecoder: ResponseDecoding {
    let tag: String
    init(tag: String) { self.tag = tag }
    var decodingSettings: (any Hashable & Sendable)? { WatchedSettings(tag: tag) }
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        try JSONDecoder().decode(type, from: data)
    }
}
#endif

/// A subclass, which may decode differently from its superclass with the same settings.
final class JSONDecoderSubclass: JSONDecoder, @unchecked Sendable {}

@Suite("Decoders with equal settings share values")
struct ValueSharingTests {
    let url = "https://api.example.com/feed"

    @Test("100 calls each with a new JSONDecoder() decode once and hold one decoded copy")
    func freshDecodersDecodeOnce() async throws {
        let loader = feedLoader(Locked(1))
        let transport = makeTransport(loader: loader)
        let (data, _) = try await transport.data(for: request(url))
        let stored = transport.statistics.bytesHeld
        var values: [Feed] = []
        for _ in 0..<100 {
            values.append(try await transport.value(Feed.self, for: request(url), decoder: JSONDecoder()))
        }
        #expect(values.allSatisfy { $0 === values[0] })
        #expect(transport.statistics.decodes == 1)
        #expect(transport.statistics.decodedHits == 99)
        #expect(await transport.decodedValuesHeld == 1)
        #expect(transport.statistics.bytesHeld == stored + data.count + AnyDecodedValue.overhead)
        #expect(loader.callCount == 1)
    }

    @Test("a value decoded by a fresh decoder does not keep that decoder alive")
    func freshDecoderReleased() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        weak var released: JSONDecoder?
        do {
            let decoder = JSONDecoder()
            released = decoder
            _ = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        }
        #expect(await transport.decodedValuesHeld == 1)
        #expect(released == nil)
    }

    @Test("the default decoder and a new JSONDecoder() share one value")
    func defaultAndFreshShare() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        let implicit = try await transport.value(Feed.self, for: request(url))
        let fresh = try await transport.value(Feed.self, for: request(url), decoder: JSONDecoder())
        #expect(implicit === fresh)
        #expect(transport.statistics.decodes == 1)
    }

    @Test("decoders with different key strategies never share a value")
    func keyStrategiesApart() async throws {
        let transport = makeTransport(loader: fixedLoader(#"{"item_name":"lamp"}"#))
        let plain = try await transport.value(Named.self, for: request(url), decoder: JSONDecoder())
        let snake = try await transport.value(
            Named.self, for: request(url), decoder: jsonDecoder { $0.keyDecodingStrategy = .convertFromSnakeCase })
        #expect(plain.itemName == nil)
        #expect(snake.itemName == "lamp")
        // New decoders with each setting find their own value again.
        let plainAgain = try await transport.value(Named.self, for: request(url), decoder: JSONDecoder())
        let snakeAgain = try await transport.value(
            Named.self, for: request(url), decoder: jsonDecoder { $0.keyDecodingStrategy = .convertFromSnakeCase })
        #expect(plainAgain === plain)
        #expect(snakeAgain === snake)
        #expect(transport.statistics.decodes == 2)
    }

    @Test("decoders with different date strategies never share a value")
    func dateStrategiesApart() async throws {
        let transport = makeTransport(loader: fixedLoader(#"{"at":1000}"#))
        let strategies: [JSONDecoder.DateDecodingStrategy] = [
            .deferredToDate, .secondsSince1970, .millisecondsSince1970,
        ]
        var first: [Stamp] = []
        for strategy in strategies {
            first.append(
                try await transport.value(
                    Stamp.self, for: request(url), decoder: jsonDecoder { $0.dateDecodingStrategy = strategy }))
        }
        #expect(Set(first.map(\.at)).count == 3)
        #expect(first[1].at == Date(timeIntervalSince1970: 1000))
        #expect(first[2].at == Date(timeIntervalSince1970: 1))
        for (index, strategy) in strategies.enumerated() {
            let again = try await transport.value(
                Stamp.self, for: request(url), decoder: jsonDecoder { $0.dateDecodingStrategy = strategy })
            #expect(again === first[index])
        }
        #expect(transport.statistics.decodes == 3)
    }

    /// Every setting a `JSONDecoder` compares, one change at a time from the defaults.
    static let comparedSettings: [(name: String, configure: @Sendable (JSONDecoder) -> Void)] = [
        ("defaults", { _ in }),
        ("snake-case keys", { $0.keyDecodingStrategy = .convertFromSnakeCase }),
        ("dates in seconds", { $0.dateDecodingStrategy = .secondsSince1970 }),
        ("dates in milliseconds", { $0.dateDecodingStrategy = .millisecondsSince1970 }),
        ("ISO 8601 dates", { $0.dateDecodingStrategy = .iso8601 }),
        ("data left to Data", { $0.dataDecodingStrategy = .deferredToData }),
        (
            "floats from strings",
            {
                $0.nonConformingFloatDecodingStrategy = .convertFromString(
                    positiveInfinity: "+", negativeInfinity: "-", nan: "n")
            }
        ),
        (
            "floats from other strings",
            {
                $0.nonConformingFloatDecodingStrategy = .convertFromString(
                    positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
            }
        ),
        ("JSON5", { $0.allowsJSON5 = true }),
        ("top-level dictionary assumed", { $0.assumesTopLevelDictionary = true }),
    ]

    @Test("each compared JSONDecoder setting keys values apart, and equal settings key them together")
    func everyComparedSettingCounts() {
        let keys = Self.comparedSettings.map { DecodedValueKey(Feed.self, decoder: jsonDecoder($0.configure)) }
        let again = Self.comparedSettings.map { DecodedValueKey(Feed.self, decoder: jsonDecoder($0.configure)) }
        #expect(keys == again)
        #expect(Set(keys).count == Self.comparedSettings.count)
        #expect(
            Self.comparedSettings.indices.filter { keys[$0].settings.isInstance }.map { Self.comparedSettings[$0].name }
                == [])
        #expect(!keys.contains(DecodedValueKey(Feed.self, decoder: PropertyListDecoder())))
        #expect(
            DecodedValueKey(Feed.self, decoder: JSONDecoder())
                != DecodedValueKey(FeedNames.self, decoder: JSONDecoder()))
    }

    /// Decoders whose settings cannot be compared.
    static let uncomparable: [String: @Sendable () -> JSONDecoder] = [
        "custom keys": { jsonDecoder { $0.keyDecodingStrategy = .custom { $0.last! } } },
        "custom dates": { jsonDecoder { $0.dateDecodingStrategy = .custom { _ in Date(timeIntervalSince1970: 0) } } },
        "formatted dates": { jsonDecoder { $0.dateDecodingStrategy = .formatted(DateFormatter()) } },
        "custom data": { jsonDecoder { $0.dataDecodingStrategy = .custom { _ in Data() } } },
        "user info": { jsonDecoder { $0.userInfo[CodingUserInfoKey(rawValue: "tenant")!] = "a" } },
        "a subclass": { JSONDecoderSubclass() },
    ]

    @Test(
        "a decoder whose settings cannot be compared is kept apart, per instance", arguments: uncomparable.keys.sorted()
    )
    func uncomparableKeptApart(kind: String) async throws {
        let make = try #require(Self.uncomparable[kind])
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        let shared = try await transport.value(Feed.self, for: request(url))
        let one = make()
        let other = make()
        #expect(one.decodingSettings == nil)
        let a = try await transport.value(Feed.self, for: request(url), decoder: one)
        let b = try await transport.value(Feed.self, for: request(url), decoder: other)
        let aAgain = try await transport.value(Feed.self, for: request(url), decoder: one)
        #expect(a !== shared && b !== shared && a !== b)
        #expect(aAgain === a)
        #expect(transport.statistics.decodes == 3)
    }

    @Test("a decoder kept per instance lives as long as its value, so its identity is never reused")
    func instanceRetainedByValue() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        weak var held: JSONDecoder?
        do {
            let decoder = jsonDecoder { $0.keyDecodingStrategy = .custom { $0.last! } }
            held = decoder
            _ = try await transport.value(Feed.self, for: request(url), decoder: decoder)
        }
        #expect(held != nil)
        transport.invalidate(request(url))
        #expect(held == nil)
    }

    @Test("property list decoders with empty user info share one value")
    func propertyListDecodersShare() async throws {
        let body = try PropertyListEncoder().encode(FeedBody(items: [.init(id: 4, name: "four")]))
        let transport = makeTransport(
            loader: ScriptedOrigin { request, _ in ScriptedOrigin.Reply(status: 200, body: body) })
        let a = try await transport.value(Feed.self, for: request(url), decoder: PropertyListDecoder())
        let b = try await transport.value(Feed.self, for: request(url), decoder: PropertyListDecoder())
        let json = await thrownError { try await transport.value(Feed.self, for: request(url), decoder: JSONDecoder()) }
        #expect(a === b)
        #expect(a.version == 4)
        #expect(json is ValueDecodingError)
        #expect(transport.statistics.decodes == 2)
    }

    @Test("a decoder of your own shares values with decoders of its class that declare equal settings")
    func declaredSettingsShare() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        let first = TaggedDecoder(tag: "a")
        let same = TaggedDecoder(tag: "a")
        let different = TaggedDecoder(tag: "b")
        let otherClass = OtherTaggedDecoder(tag: "a")
        let a = try await transport.value(Feed.self, for: request(url), decoder: first)
        let b = try await transport.value(Feed.self, for: request(url), decoder: same)
        let c = try await transport.value(Feed.self, for: request(url), decoder: different)
        let d = try await transport.value(Feed.self, for: request(url), decoder: otherClass)
        #expect(a === b)
        #expect(c !== a && d !== a && d !== c)
        #expect(first.count + same.count == 1)
        #expect(different.count == 1)
        #expect(transport.statistics.decodes == 3)
    }

    #if DEBUG
    @Test("a decoder's declared settings are compared with none of the transport's locks held")
    func declaredSettingsOutsideLocks() async throws {
        let transport = makeTransport(loader: feedLoader(Locked(1)))
        var values: [Feed] = []
        for round in 0..<20 {
            let decoder = WatchedDecoder(tag: round.isMultiple(of: 2) ? "even" : "odd")
            values.append(try await transport.value(Feed.self, for: request(url), decoder: decoder))
            if let cached = try transport.cachedValue(Feed.self, for: request(url), decoder: decoder) {
                values.append(cached.value)
            }
        }
        #expect(WatchedSettings.underLock.withLock { $0 } == 0)
        #expect(transport.statistics.decodes == 2)
        #expect(values.count == 40)
        #expect(values[0] === values[4] && values[2] === values[6] && values[0] !== values[2])
    }
    #endif
}

/// The shape of ``Feed``, to encode a property list body.
struct FeedBody: Encodable {
    struct Entry: Encodable {
        let id: Int
        let name: String
    }

    let items: [Entry]
}
