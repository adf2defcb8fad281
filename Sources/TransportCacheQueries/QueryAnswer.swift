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
    let outcome: CacheOutcome?
}

extension QueryAnswer where Value: Decodable {
    /// Loads `request` through `transport` (or refreshes it), then takes its value from what the
    /// transport stored, decoded once for every query on it; an answer the transport did not store
    /// is decoded here. Runs off the caller's actor, so a large body never decodes on the main
    /// thread.
    @concurrent
    static func load(
        _ request: URLRequest, refreshing: Bool, from transport: CachedTransport, decoder: any ResponseDecoding
    ) async throws -> QueryAnswer {
        let (data, response) =
            refreshing ? try await transport.refresh(request) : try await transport.data(for: request)
        let outcome = response.cacheOutcome
        if isStored(outcome) {
            var stored = request
            stored.cachePolicy = .returnCacheDataDontLoad
            do {
                let value = try await transport.value(Value.self, for: stored, decoder: decoder)
                return QueryAnswer(value: value, data: data, outcome: outcome)
            } catch let error as URLError where error.code == .resourceUnavailable {
                // Dropped since it was stored: the bytes in hand are decoded below.
            }
        }
        return QueryAnswer(value: try decode(data, response: response, decoder: decoder), data: data, outcome: outcome)
    }

    /// Whether the answer is the entry the transport now holds for the request's key.
    private static func isStored(_ outcome: CacheOutcome?) -> Bool {
        switch outcome?.source {
        case .memory, .revalidated: return true
        case .network: if case .stored = outcome?.storage { return true } else { return false }
        case .passedThrough, .cacheOnlyMiss, nil: return false
        }
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

/// The decoder of a query made without one: a plain `JSONDecoder`, made once and shared, rather
/// than one made and released with each query.
@usableFromInline
let defaultQueryDecoder = JSONDecoder()
