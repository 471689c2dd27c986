// swift-tools-version: 6.0
// The cut floor: each piece of a cut timed alone on this machine (decode, the 2×2
// shrinks, the encoding of every tile, the creation of every file), and the PNG encoders
// tiler does not use (libspng, and libdeflate behind a PNG writer of our own) on the same
// tiles. Kept out of the main build: the main package does not depend on this one and
// `swift test` never builds it. `scripts/bench` (its floor section) builds and runs it:
//   swift build -c release --package-path Bench --scratch-path Bench/.build
import PackageDescription

let package = Package(
    name: "tiler-bench",
    platforms: [.macOS(.v13)],
    dependencies: [.package(name: "tiler", path: "..")],
    targets: [
        // libjpeg decoding into memory; libspng and libdeflate PNG encoders.
        .target(name: "CFloor", linkerSettings: [
            .linkedLibrary("jpeg"), .linkedLibrary("spng"), .linkedLibrary("deflate"),
        ]),
        .executableTarget(name: "cut-floor", dependencies: [
            "CFloor", .product(name: "TilerImaging", package: "tiler"), .product(name: "TilerCore", package: "tiler"),
        ]),
    ]
)
