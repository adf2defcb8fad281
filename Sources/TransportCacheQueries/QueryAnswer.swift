import Foundation
import TransportCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One answer a query shows: the decoded value, the bytes it came from (to tell a real change from
/// the same bytes again) and how the transport answered.
struct QueryAnswer<Value: Sendable>: Sendable {
    let value: Value
    let data: Data
    let outcome: CacheOutcome
}

/// An answer the transport gave that yields no value (a status outside 200-299, a body that does
/// not decode), with how the transport gave it: the `ValueDecodingError` that
/// `CachedTransport.value(_:for:decoder:)` throws does not carry the outcome, as a `URLError` the
/// transport throws does, and a query shows the outcome of every answer, failures included.
struct FailedAnswer: Error {
    let error: any Error
    let outcome: CacheOutcome
}

extension QueryAnswer where Value: Decodable {
    /// Loads `request` through `transport` (or refreshes it), then takes its value from what the
    /// transport stored, decoded once for every query on it; an answer the transport did not store
    /// is decoded here. Runs off the caller's actor, so a large body never decodes on the main
    /// thread.
    /// - Throws: the transport's error, or a ``FailedAnswer`` for an answer that gave no value.
    @concurrent
    static func load(
        _ request: URLRequest, refreshing: Bool, from transport: CachedTransport, decoder: any ResponseDecoding
    ) async throws -> QueryAnswer {
        let (data, response) =
            refreshing ? try await transport.refresh(request) : try await transport.data(for: request)
        // Only the non-HTTP answer of another scheme carries no outcome: it passed through, as
        // `CachedTransport.response(for:)` and the transport's events say.
        let outcome = response.cacheOutcome ?? CacheOutcome(source: .passedThrough(.notHTTP))
        do {
            let value = try await decodedValue(
                of: request, data: data, response: response, outcome: outcome, from: transport, decoder: decoder)
            return QueryAnswer(value: value, data: data, outcome: outcome)
        } catch {
            throw FailedAnswer(error: error, outcome: outcome)
        }
    }

    /// The value of an answer: the one shared through the stored entry when the answer is that
    /// entry, or decoded here.
    private static func decodedValue(
        of request: URLRequest, data: Data, response: URLResponse, outcome: CacheOutcome,
        from transport: CachedTransport, decoder: any ResponseDecoding
    ) async throws -> Value {
        if outcome.isStoredEntry {
            var stored = request
            stored.cachePolicy = .returnCacheDataDontLoad
            do {
                return try await transport.value(Value.self, for: stored, decoder: decoder)
            } catch let error as URLError where error.code == .resourceUnavailable {
                // Dropped since it was stored: the bytes in hand are decoded below.
            }
        }
        return try decode(data, response: response, decoder: decoder)
    }

    /// Decodes an answer the transport did not store, with the errors `CachedTransport.value(_:for:decoder:)`
    /// throws.
    private static func decode(_ data: Data, response: URLResponse, decoder: any ResponseDecoding) throws -> Value {
        let url = response.url ?? URL(fileURLWithPath: "/")
        let status = (response as? HTTPURLResponse)?.statusCode
        if let status, !(200..<300).contains(status) {
            throw ValueDecodingError(.unacceptableStatus, type: Value.self, url: url, statusCode: status)
        }
        do {
            return try decoder.decode(Value.self, from: data)
        } catch {
            throw ValueDecodingError(
                .decodingFailed, type: Value.self, url: url, statusCode: status, underlyingError: error)
        }
    }
}

extension CacheOutcome {
    /// Whether the answer is the entry the transport now holds for the request's key.
    var isStoredEntry: Bool {
        switch source {
        case .memory, .revalidated: return true
        case .network: if case .stored = storage { return true } else { return false }
        case .passedThrough, .cacheOnlyMiss: return false
        }
    }
}

/// The decoder of a query made without one: a plain `JSONDecoder`, made once and shared, rather
/// than one made and released with each query.
@usableFromInline
let defaultQueryDecoder = JSONDecoder()
