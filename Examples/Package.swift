// swift-tools-version:6.2
// 6.2: the library uses `nonisolated(nonsending)`, which older compilers cannot parse.
import PackageDescription

let package = Package(
    name: "TransportCacheExamples",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LoopbackOrigin", targets: ["LoopbackOrigin"]),
        .executable(name: "transport-demo", targets: ["transport-demo"]),
    ],
    dependencies: [
        .package(name: "TransportCache", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
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
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["LoopbackOrigin", .product(name: "TransportCache", package: "TransportCache")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
