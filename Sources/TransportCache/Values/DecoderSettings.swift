import Foundation

/// What a decoded value is kept under besides its type: the settings of the decoder that made it,
/// or that decoder itself when its settings cannot be compared.
///
/// Computed on every value call, hits included, so the Foundation decoders are recognised by
/// their exact class and read directly (a few property reads, no allocation); only a decoder of
/// another class goes through ``ResponseDecoding/decodingSettings`` and a type-erased box.
enum DecoderSettings: Hashable, Sendable {
    /// A decoder whose settings cannot be compared: only this instance may reuse its values.
    case instance(ObjectIdentifier)
    case json(JSONDecoderSettings)
    case propertyList
    /// Settings a decoder of another class declared. Its class is part of the key: two classes
    /// may declare equal settings and still decode differently.
    case declared(decoderClass: ObjectIdentifier, settings: DeclaredSettings)

    init(of decoder: any ResponseDecoding) {
        let decoderClass = ObjectIdentifier(type(of: decoder))
        if decoderClass == ObjectIdentifier(JSONDecoder.self) {
            let json = unsafeDowncast(decoder as AnyObject, to: JSONDecoder.self)
            self = JSONDecoderSettings(json).map(Self.json) ?? .instance(ObjectIdentifier(decoder))
        } else if decoderClass == ObjectIdentifier(PropertyListDecoder.self) {
            let propertyList = unsafeDowncast(decoder as AnyObject, to: PropertyListDecoder.self)
            self = propertyList.userInfo.isEmpty ? .propertyList : .instance(ObjectIdentifier(decoder))
        } else if let settings = decoder.decodingSettings {
            self = .declared(decoderClass: decoderClass, settings: DeclaredSettings(settings, of: decoderClass))
        } else {
            self = .instance(ObjectIdentifier(decoder))
        }
    }

    /// Whether the key names a decoder instance, which the kept value must then hold.
    var isInstance: Bool {
        if case .instance = self { return true }
        return false
    }
}

/// A `JSONDecoder`'s settings, when every one of them can be compared.
///
/// The strategies are Foundation enums that are neither `Equatable` nor frozen, and some carry
/// closures; each comparable case is read into a small code with `if case`, which compiles the
/// same on every platform whatever cases a Foundation adds (an unknown case is not comparable).
struct JSONDecoderSettings: Hashable, Sendable {
    /// The key, date and data strategies and the two format options, packed.
    private let options: UInt16
    /// The strings of a `.convertFromString` float strategy; nil for `.throw`.
    private let nonConformingFloats: [String]?

    /// Nil when a strategy is `.custom` (or `.formatted`, a mutable `DateFormatter`; on Linux that
    /// one is a `.custom` closure) or `userInfo` is not empty: those cannot be compared.
    init?(_ decoder: JSONDecoder) {
        guard Self.userInfoIsEmpty(decoder) else { return nil }
        let keys: UInt16
        switch decoder.keyDecodingStrategy {
        case .useDefaultKeys: keys = 0
        case .convertFromSnakeCase: keys = 1
        default: return nil
        }
        let dates: UInt16
        let date = decoder.dateDecodingStrategy
        if case .deferredToDate = date {
            dates = 0
        } else if case .secondsSince1970 = date {
            dates = 1
        } else if case .millisecondsSince1970 = date {
            dates = 2
        } else if case .iso8601 = date {
            dates = 3
        } else {
            return nil
        }
        let data: UInt16
        let dataStrategy = decoder.dataDecodingStrategy
        if case .base64 = dataStrategy {
            data = 0
        } else if case .deferredToData = dataStrategy {
            data = 1
        } else {
            return nil
        }
        let floats = decoder.nonConformingFloatDecodingStrategy
        if case .throw = floats {
            nonConformingFloats = nil
        } else if case .convertFromString(let positiveInfinity, let negativeInfinity, let nan) = floats {
            nonConformingFloats = [positiveInfinity, negativeInfinity, nan]
        } else {
            return nil
        }
        options =
            keys | dates << 2 | data << 5
            | (decoder.allowsJSON5 ? 1 << 7 : 0)
            | (decoder.assumesTopLevelDictionary ? 1 << 8 : 0)
    }
}

extension JSONDecoderSettings {
    /// swift-foundation keeps `assumesTopLevelDictionary` in `userInfo`, under this key, once
    /// the option has been set (even back to false); the option is compared on its own.
    private static let assumesTopLevelDictionaryKey = CodingUserInfoKey(rawValue: "_NSAssumesTopLevelDictionaryJSON5")

    /// Whether `decoder.userInfo` holds nothing but Foundation's own entry for an option.
    private static func userInfoIsEmpty(_ decoder: JSONDecoder) -> Bool {
        let userInfo = decoder.userInfo
        if userInfo.isEmpty { return true }
        return userInfo.count == 1 && userInfo.keys.first == assumesTopLevelDictionaryKey
    }
}

/// The settings of a `PropertyListDecoder` with an empty `userInfo`: it has no others.
struct PropertyListDecoderSettings: Hashable, Sendable {}

/// Settings a decoder declared through ``ResponseDecoding/decodingSettings``, as a number: equal
/// settings of one decoder class get one number, so that the store, which compares keys of
/// decoded values under its lock, compares numbers there, never the app's `==`.
struct DeclaredSettings: Hashable, Sendable {
    private let number: Int

    /// The number of `settings`, declared by a decoder of `decoderClass`: found by the settings'
    /// own `hash(into:)` and `==`, asked with no lock held.
    init(_ settings: any Hashable & Sendable, of decoderClass: ObjectIdentifier) {
        number = Self.numbering.number(of: Settings(settings), declaredBy: decoderClass)
    }

    private static let numbering = Numbering()

    /// `@unchecked Sendable` is safe here: the box is made only from an `any Hashable & Sendable`
    /// and never mutated; `AnyHashable` is not `Sendable` only because it may hold anything.
    private struct Settings: @unchecked Sendable {
        let value: AnyHashable

        init(_ value: any Hashable & Sendable) {
            self.value = AnyHashable(value)
        }
    }

    /// The numbers given so far, for the life of the process: the distinct settings an app's
    /// decoders declare, a handful.
    private final class Numbering: Sendable {
        /// Settings of one class with one hash value, which only their `==` tells apart.
        private struct Bucket: Hashable {
            let decoderClass: ObjectIdentifier
            let hash: Int
        }

        private struct State {
            var buckets: [Bucket: [(settings: Settings, number: Int)]] = [:]
            var last = 0
        }

        private let state = Locked(State(), rank: .leaf)

        /// The number of `settings`: one given before to equal settings, or a new one. The app's
        /// `hash(into:)` and `==` run between two holds of the lock, never under it: a number is
        /// given only when the bucket compared with is still as it was, else it compares again.
        func number(of settings: Settings, declaredBy decoderClass: ObjectIdentifier) -> Int {
            let bucket = Bucket(decoderClass: decoderClass, hash: settings.value.hashValue)
            while true {
                let known = state.withLock { $0.buckets[bucket] ?? [] }
                if let found = known.first(where: { $0.settings.value == settings.value }) { return found.number }
                let given = state.withLock { state -> Int? in
                    guard state.buckets[bucket]?.count ?? 0 == known.count else { return nil }
                    state.last += 1
                    state.buckets[bucket, default: []].append((settings, state.last))
                    return state.last
                }
                if let given { return given }
            }
        }
    }
}
