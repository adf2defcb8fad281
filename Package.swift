// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "TransportCache",
    // `Synchronization.Mutex` guards the store that the hit path reads without an actor hop.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "TransportCache", targets: ["TransportCache"]),
    ],
    targets: [
        .target(name: "TransportCache"),
        .testTarget(name: "TransportCacheTests", dependencies: ["TransportCache"]),
    ],
    swiftLanguageModes: [.v6]
)
