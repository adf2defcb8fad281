// swift-tools-version:6.2
// 6.2: the library uses `nonisolated(nonsending)` (package traits alone would need 6.1).
import PackageDescription

let package = Package(
    name: "TransportCacheBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "TransportCache", path: ".."),
        .package(name: "TransportCacheExamples", path: "../Examples"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .target(
            name: "BenchmarkSupport",
            dependencies: [
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "LoopbackOrigin", package: "TransportCacheExamples"),
            ],
            path: "Sources/BenchmarkSupport"
        ),
        .target(name: "CallgrindControl", path: "Sources/CallgrindControl"),
        // Runs one path many times without the harness, for profilers; see its main.swift.
        .executableTarget(
            name: "PathWorkload",
            dependencies: [
                "BenchmarkSupport",
                "CallgrindControl",
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "LoopbackOrigin", package: "TransportCacheExamples"),
            ],
            path: "Sources/PathWorkload"
        ),
        // The observable queries' paths on the main actor, for profilers; see its main.swift.
        .executableTarget(
            name: "QueryWorkload",
            dependencies: [
                "CallgrindControl",
                .product(name: "TransportCache", package: "TransportCache"),
                .product(name: "TransportCacheQueries", package: "TransportCache"),
                .product(name: "TransportCacheTesting", package: "TransportCache"),
            ],
            path: "Sources/QueryWorkload"
        ),
    ]
        + [
            "HitPath", "MissPath", "Coalescing", "Storage", "ChangeFanOut", "Values", "Revalidation", "Scale",
            "Queries", "Prefetching",
        ]
        .map { suite in
            // Only the suite of the observable queries needs their product.
            let queries: [Target.Dependency] =
                suite == "Queries"
                ? [
                    .product(name: "TransportCacheQueries", package: "TransportCache"),
                    .product(name: "TransportCacheTesting", package: "TransportCache"),
                ] : []
            return .executableTarget(
                name: suite,
                dependencies: [
                    "BenchmarkSupport",
                    .product(name: "Benchmark", package: "benchmark"),
                    .product(name: "TransportCache", package: "TransportCache"),
                    .product(name: "LoopbackOrigin", package: "TransportCacheExamples"),
                ] + queries,
                path: "Benchmarks/\(suite)",
                plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
            )
        },
    swiftLanguageModes: [.v6]
)
