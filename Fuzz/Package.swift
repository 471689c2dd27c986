// swift-tools-version: 6.0
// libFuzzer harnesses for tiler's hostile-input surfaces. Kept out of the main build:
// the main package does not depend on this one and `swift test` never builds it.
// Build and run with `scripts/fuzz [target] [seconds]`, which calls
//   swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library \
//     --package-path Fuzz --scratch-path Fuzz/.build
import PackageDescription

let package = Package(
    name: "tiler-fuzz",
    platforms: [.macOS(.v13)],
    dependencies: [.package(name: "tiler", path: "..")],
    targets: [
        // Raw bytes into HTTPRequestParser, whole and byte by byte (they must agree).
        .executableTarget(name: "FuzzHTTPParser", dependencies: [.product(name: "TilerHTTP", package: "tiler")]),
        // A request target through the parser, then path splitting, percent-decoding and query items.
        .executableTarget(name: "FuzzURL", dependencies: [
            .product(name: "TilerHTTP", package: "tiler"), .product(name: "TilerServer", package: "tiler"),
        ]),
        // A request target through the parser and the full Router over a real pyramid folder.
        .executableTarget(name: "FuzzRouter", dependencies: [
            .product(name: "TilerHTTP", package: "tiler"), .product(name: "TilerServer", package: "tiler"),
            .product(name: "TilerCore", package: "tiler"),
        ]),
        // Query items into VisibleTilesQuery(queryItems:) and visibleTiles over a fuzzed geometry.
        .executableTarget(name: "FuzzVisible", dependencies: [.product(name: "TilerCore", package: "tiler")]),
    ]
)
