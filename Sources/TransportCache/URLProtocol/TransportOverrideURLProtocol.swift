import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The header override as installed in a ``CachedTransport``'s session.
///
/// Protocol classes are configured per class, but every transport has its own override and its
/// own inner session. The transport's loader tags each request with a private header naming its
/// route; this class looks the route up, and strips the header before the request leaves.
final class TransportOverrideURLProtocol: CacheOverrideURLProtocol {
    static let routeHeader = "X-TransportCache-Route"

    struct Route: Sendable {
        let override: CacheOverride?
        let session: URLSession
    }

    private static let routes = Locked([Int: Route]())
    private static let lastRouteID = Locked(0)

    /// Registers a transport's route. - Returns: the value its requests carry in ``routeHeader``.
    static func register(_ route: Route) -> Int {
        let id = lastRouteID.withLock { id in
            id += 1
            return id
        }
        routes.withLock { $0[id] = route }
        return id
    }

    static func unregister(_ id: Int) {
        routes.withLock { $0[id] = nil }
    }

    override class func route(for request: URLRequest) -> (override: CacheOverride?, session: URLSession)? {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let value = request.value(forHTTPHeaderField: routeHeader), let id = Int(value),
              let route = routes.withLock({ $0[id] })
        else { return nil }
        return (route.override, route.session)
    }

    override class func outgoingRequest(for request: URLRequest) -> URLRequest {
        var request = request
        request.setValue(nil, forHTTPHeaderField: routeHeader)
        return request
    }
}
