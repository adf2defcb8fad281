import Foundation

/// A setting that applies to the URLs of one ``Endpoint``, taking precedence over the
/// configuration's general value for them: a maximum age, a stale-while-revalidate window.
///
/// ```swift
/// configuration.freshness.maximumAges = [EndpointSetting(.host("static.example.com"), .seconds(3600))]
/// ```
public struct EndpointSetting<Value: Sendable>: Sendable {
    /// The URLs it applies to.
    public var endpoint: Endpoint
    /// Its value for them.
    public var value: Value

    /// The setting `value` for the URLs of `endpoint`.
    public init(_ endpoint: Endpoint, _ value: Value) {
        self.endpoint = endpoint
        self.value = value
    }
}

extension Array {
    /// The value of the first setting whose endpoint matches `url`.
    func value<Setting>(for url: URL) -> Setting? where Element == EndpointSetting<Setting> {
        first { $0.endpoint.matches(url) }?.value
    }
}
