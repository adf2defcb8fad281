// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "TransportCacheExamples",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LoopbackOrigin", targets: ["LoopbackOrigin"]),
        .executable(name: "transport-demo", targets: ["transport-demo"]),
        .executable(name: "transport-proxy", targets: ["transport-proxy"]),
    ],
    dependencies: [
        .package(name: "TransportCache", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .target(
            name: "LoopbackOrigin",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "transport-demo",
            dependencies: ["LoopbackOrigin", .product(name: "TransportCache", package: "TransportCache")]
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
            dependencies: ["LoopbackOrigin", .product(name: "TransportCache", package: "TransportCache")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
