import Foundation

/// Decodes a value from a response body: `JSONDecoder`, `PropertyListDecoder`, or a decoder of
/// your own.
///
/// ``CachedTransport/value(_:for:decoder:)`` keeps decoded values per decoder *instance*,
/// because a decoder's settings (key and date strategies, user info) shape the result: two
/// decoders never share a decoded value, even for the same type and bytes. Keep one decoder per
/// set of settings, for example an app-wide `static let`, pass that same instance on every call,
/// and do not change its settings once it has been used.
///
/// ```swift
/// extension JSONDecoder {
///     static let api: JSONDecoder = {
///         let decoder = JSONDecoder()
///         decoder.keyDecodingStrategy = .convertFromSnakeCase
///         decoder.dateDecodingStrategy = .iso8601
///         return decoder
///     }()
/// }
/// let articles = try await transport.value([Article].self, for: request, decoder: JSONDecoder.api)
/// ```
///
/// A class, so that its identity can key decoded values; `Sendable`, because decoding runs off
/// the caller's actor.
public protocol ResponseDecoding: AnyObject, Sendable {
    /// Decodes a value of `type` from `data`.
    /// - Throws: the decoder's error (a `DecodingError` for the Foundation decoders).
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value
}

extension JSONDecoder: ResponseDecoding {}

extension PropertyListDecoder: ResponseDecoding {}
