// swift-tools-version:6.2
// 6.2: the library uses `nonisolated(nonsending)`, which older compilers cannot parse.
import PackageDescription

let package = Package(
    name: "TransportCacheExamples",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LoopbackOrigin", targets: ["LoopbackOrigin"]),
        .executable(name: "transport-demo", targets: ["transport-demo"]),
        .executable(name: "transport-proxy", targets: ["transport-proxy"]),
        .library(name: "TransportCacheOpenAPI", targets: ["TransportCacheOpenAPI"]),
        .library(name: "TransportCacheLogging", targets: ["TransportCacheLogging"]),
    ],
    dependencies: [
        .package(name: "TransportCache", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-openapi-generator", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .target(
            name: "LoopbackOrigin",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "TransportCache", package: "TransportCache"),
            ]
        ),
        .executableTarget(
            name: "transport-demo",
            dependencies: [
                "LoopbackOrigin",
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "TransportCacheQueries", package: "TransportCache"),
            ]
        ),
        // A SwiftUI screen over the observable queries; compiled on Apple platforms only.
        .target(
            name: "QueriesSwiftUIExample",
            dependencies: [
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "TransportCacheQueries", package: "TransportCache"),
            ]
        ),
        .executableTarget(
            name: "transport-proxy",
            dependencies: [
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "TransportCache", package: "TransportCache"),
            ]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "LoopbackOrigin",
                "TransportCacheLogging",
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "TransportCacheTesting", package: "TransportCache"),
                .product(name: "TransportCacheQueries", package: "TransportCache"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Logs what a `CachedTransport` does through swift-log: a line per request, with its outcome.
        .target(
            name: "TransportCacheLogging",
            dependencies: [
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A `ClientTransport` over `CachedTransport`, for clients made by swift-openapi-generator.
        .target(
            name: "TransportCacheOpenAPI",
            dependencies: [
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // A client generated at build time from the loopback origin's OpenAPI document.
        .target(
            name: "OpenAPIExample",
            dependencies: [.product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        .testTarget(
            name: "OpenAPITests",
            dependencies: [
                "LoopbackOrigin",
                "OpenAPIExample",
                "TransportCacheOpenAPI",
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "TransportCacheTesting", package: "TransportCache"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
