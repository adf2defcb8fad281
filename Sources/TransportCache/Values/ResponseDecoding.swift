import Foundation

/// Decodes a value from a response body: `JSONDecoder`, `PropertyListDecoder`, or a decoder of
/// your own.
///
/// ``CachedTransport/value(_:for:decoder:)`` keeps one decoded value per stored entry, type and
/// decoder *settings*, so the idiom most code writes shares one decode:
///
/// ```swift
/// let articles = try await transport.value([Article].self, for: request, decoder: JSONDecoder())
/// ```
///
/// Decoders whose ``decodingSettings`` are equal (and of the same class) share values; a
/// decoder whose settings are nil has values of its own, kept per *instance*, and the kept value
/// holds that instance so that its identity is never taken by another decoder while the value
/// lives. Do not change a decoder's settings while calls that use it are under way.
///
/// - `JSONDecoder` compares its key, date, data and non-conforming float strategies and its
///   `allowsJSON5` and `assumesTopLevelDictionary` options. A `.custom` strategy (a closure),
///   a `.formatted` date strategy (a mutable formatter) or a non-empty `userInfo` cannot be
///   compared: such a decoder is kept per instance. Keep one of those per set of settings, for
///   example an app-wide `static let`, and pass that same instance on every call.
/// - `PropertyListDecoder` has no options; its decoders share values while `userInfo` is empty.
/// - Subclasses of either are kept per instance: an override may decode differently.
/// - A decoder of your own is kept per instance unless it declares its ``decodingSettings``.
///
/// A class, so that an instance can key decoded values when its settings cannot be compared;
/// `Sendable`, because decoding runs off the caller's actor.
public protocol ResponseDecoding: AnyObject, Sendable {
    /// Decodes a value of `type` from `data`.
    /// - Throws: the decoder's error (a `DecodingError` for the Foundation decoders).
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value

    /// Everything that shapes what this decoder produces from given bytes, as one hashable value,
    /// or nil when that cannot be compared.
    ///
    /// Two decoders of the same class whose settings are equal must decode the same bytes into
    /// equal values: they share one decoded value per entry and type. Return nil (the default)
    /// when the decoder's behaviour depends on something that cannot be compared, such as a
    /// closure; its values are then kept per instance.
    ///
    /// It is read on every ``CachedTransport/value(_:for:decoder:)`` call, including hits: keep
    /// it cheap (a few stored properties, no allocation). Its `hash(into:)` and `==` run with none
    /// of the transport's locks held; each distinct value is remembered for the life of the
    /// process, so settings should take a few values, not one per call.
    ///
    /// ```swift
    /// final class CSVDecoder: ResponseDecoding {
    ///     let separator: Character
    ///     var decodingSettings: (any Hashable & Sendable)? { String(separator) }
    ///     …
    /// }
    /// ```
    var decodingSettings: (any Hashable & Sendable)? { get }
}

extension ResponseDecoding {
    /// Nil: values are kept per decoder instance.
    public var decodingSettings: (any Hashable & Sendable)? { nil }
}

extension JSONDecoder: ResponseDecoding {
    /// The decoder's strategies and format options when all of them can be compared; nil for a
    /// `.custom` or `.formatted` strategy, a non-empty `userInfo`, or a subclass. See
    /// ``ResponseDecoding``.
    public var decodingSettings: (any Hashable & Sendable)? {
        guard type(of: self) == JSONDecoder.self else { return nil }
        return JSONDecoderSettings(self)
    }
}

extension PropertyListDecoder: ResponseDecoding {
    /// A fixed value while `userInfo` is empty (the decoder has no other options; the format is
    /// read from the data); nil otherwise, or for a subclass. See ``ResponseDecoding``.
    public var decodingSettings: (any Hashable & Sendable)? {
        guard type(of: self) == PropertyListDecoder.self, userInfo.isEmpty else { return nil }
        return PropertyListDecoderSettings()
    }
}
