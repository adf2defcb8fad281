// swift-tools-version: 6.2
// 6.2 is the floor: the sources use `nonisolated(nonsending)`, which older compilers cannot parse.
import PackageDescription

let package = Package(
    name: "TransportCache",
    // `Duration` and `ContinuousClock` set the floor.
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "TransportCache", targets: ["TransportCache"]),
        // For an app's tests: an in-process origin to drive a transport with no server.
        .library(name: "TransportCacheTesting", targets: ["TransportCacheTesting"]),
        // For SwiftUI screens: observable queries, mutations and paged lists over a transport.
        .library(name: "TransportCacheQueries", targets: ["TransportCacheQueries"]),
    ],
    targets: [
        .target(name: "TransportCache"),
        .target(name: "TransportCacheTesting", dependencies: ["TransportCache"]),
        .target(name: "TransportCacheQueries", dependencies: ["TransportCache"]),
        // The queries too: the random histories run screens' queries beside every other call.
        .testTarget(
            name: "TransportCacheTests",
            dependencies: ["TransportCache", "TransportCacheTesting", "TransportCacheQueries"]),
        .testTarget(
            name: "TransportCacheQueriesTests",
            dependencies: ["TransportCacheQueries", "TransportCache", "TransportCacheTesting"]),
        // Every Swift block of the README and the DocC articles, compiled as a reader copies it.
        .testTarget(
            name: "DocumentationExamplesTests",
            dependencies: ["TransportCache", "TransportCacheTesting", "TransportCacheQueries"]),
    ],
    swiftLanguageModes: [.v6]
)
