// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "tiler",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "tiler", targets: ["tiler"]),
        // Libraries for out-of-tree harnesses (Fuzz/ and Bench/ depend on these by path).
        .library(name: "TilerCore", targets: ["TilerCore"]),
        .library(name: "TilerSystem", targets: ["TilerSystem"]),
        .library(name: "TilerHTTP", targets: ["TilerHTTP"]),
        .library(name: "TilerServer", targets: ["TilerServer"]),
        .library(name: "TilerStorage", targets: ["TilerStorage"]),
        // For Bench/ (the cut floor): the tile encoders and the 2×2 shrink.
        .library(name: "TilerImaging", targets: ["TilerImaging"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Metrics: swift-metrics' API, exposed in the Prometheus text format by swift-prometheus.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Private images: JWT signatures verified (and, by `tiler token`, made) by
        // swift-crypto (HMAC, ECDSA; RSA from its CryptoExtras); no cryptography of our own.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // System libraries: a module map and one header each, nothing else.
        .systemLibrary(name: "CVips", pkgConfig: "vips", providers: [.apt(["libvips-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // Fixed-arity wrappers for the libvips calls Swift cannot make (C varargs).
        // Also JPEG and WebP tiles straight from strip rows with libjpeg and libwebp.
        .target(
            name: "CTilerShims", dependencies: ["CVips", "CPNG"],
            linkerSettings: [.linkedLibrary("jpeg"), .linkedLibrary("webp"), .linkedLibrary("deflate")]),
        // What Glibc's Swift module does not expose (epoll, accept4, preadv2, renameat2,
        // copy_file_range, cachestat...): for TilerSystem only.
        .target(name: "CSystemShims"),
        // The HTTP parser's byte scans, sixteen bytes at a time (SSE2).
        .target(name: "CByteScan"),
        // Fixed-arity wrappers for libcurl's variadic setopt/getinfo.
        .target(name: "CCurlShims", dependencies: ["CCurl"]),

        // The system-call layer under every module that touches files or sockets:
        // descriptors, sockets, epoll, errors from errno, the page-cache probe, atomic
        // file writes, folders read beneath a root. No module above it calls Glibc for
        // file or socket I/O.
        .target(name: "TilerSystem", dependencies: ["CSystemShims"]),
        // Pyramid geometry, visible tiles, manifest model: pure Swift, no I/O.
        .target(name: "TilerCore"),
        // Settings declared as tables (flag, variable, range, default, help) and read from
        // flags and the environment by one mechanism: every command's, and the variables
        // the libraries read alone. Pure Swift, no I/O.
        .target(name: "TilerSettings"),
        // The PMTiles v3 format: header, varints, Hilbert tile ids, directories, gzip.
        // Pure: bytes in, bytes out, no I/O.
        .target(name: "PMTiles", dependencies: ["CZlib"]),
        // The S3 API over libcurl (Signature V4, range reads, multipart uploads,
        // listings), every request bounded in time. Knows nothing of pyramids.
        .target(name: "ObjectStorage", dependencies: ["CCurl", "CCurlShims", "TilerSystem", "TilerSettings"]),
        // Pyramids on disk and in buckets: folders and PMTiles archives written
        // atomically (the sinks the cutter writes into), the archive reader over files
        // and S3 objects, pack and unpack.
        .target(name: "TilerStorage", dependencies: ["TilerCore", "TilerSystem", "PMTiles", "ObjectStorage"]),
        // libvips and libpng behind small Swift types; the pyramid cutter.
        .target(
            name: "TilerImaging",
            dependencies: ["TilerCore", "TilerSystem", "TilerSettings", "TilerStorage", "CVips", "CPNG", "CTilerShims"]),
        // Sockets, HTTP/1.1 parsing and writing, connections, limits.
        .target(
            name: "TilerHTTP",
            dependencies: [
                "TilerSystem", "CByteScan",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Routes: tile store, cache, JSON API, DeepZoom, IIIF, viewer assets. The viewer's
        // files are compiled in as byte arrays (`PackageResources`): the binary needs no
        // bundle beside it.
        .target(
            name: "TilerServer",
            dependencies: [
                "TilerCore", "TilerSystem", "TilerSettings", "TilerHTTP", "TilerImaging", "TilerStorage", "ObjectStorage",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            resources: [
                .embedInCode("Viewer/index.html"), .embedInCode("Viewer/viewer.css"), .embedInCode("Viewer/viewer.js"),
                // The embeddable photo strip and cover flow (`/embed/…`, `/viewer/embed.js`).
                .embedInCode("Viewer/embed.html"), .embedInCode("Viewer/embed.css"), .embedInCode("Viewer/embed.js"),
            ]),
        // The command line: thin, one file per subcommand; the cut's progress line on a
        // terminal and the SIGINT/SIGTERM handling are its own, not the libraries'.
        .executableTarget(
            name: "tiler",
            dependencies: [
                "TilerCore", "TilerSystem", "TilerSettings", "TilerImaging", "TilerServer", "TilerHTTP", "TilerStorage",
                "ObjectStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),

        .testTarget(name: "TilerCoreTests", dependencies: ["TilerCore", "TilerTestSupport"]),
        .testTarget(name: "PMTilesTests", dependencies: ["PMTiles", "TilerTestSupport"]),
        .testTarget(
            name: "ObjectStorageTests",
            dependencies: ["ObjectStorage", "TilerSystem", "TilerSettings", "S3TestSupport", "TilerTestSupport"]),
        .testTarget(
            name: "TilerStorageTests",
            dependencies: ["TilerStorage", "TilerSystem", "PMTiles", "TilerCore", "ObjectStorage", "S3TestSupport", "TilerTestSupport"]),
        .testTarget(
            name: "TilerImagingTests", dependencies: ["TilerImaging", "TilerCore", "TilerSystem", "TilerSettings", "TilerTestSupport"]),
        .testTarget(name: "TilerSystemTests", dependencies: ["TilerSystem", "TilerTestSupport"]),
        .testTarget(name: "TilerHTTPTests", dependencies: ["TilerHTTP", "TilerSystem", "TilerTestSupport"]),
        .testTarget(
            name: "TilerServerTests",
            dependencies: [
                "TilerServer", "TilerCore", "TilerSystem", "TilerHTTP", "TilerImaging", "TilerStorage", "ObjectStorage", "S3TestSupport",
                "TilerTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The end-to-end tests of the built binary, and (`@testable import tiler`) of the
        // command line's own parts: the progress display.
        .testTarget(
            name: "TilerCLITests",
            dependencies: [
                "tiler", "TilerCore", "TilerSettings", "TilerImaging", "TilerHTTP", "TilerServer", "TilerStorage", "ObjectStorage",
                "S3TestSupport", "TilerTestSupport",
            ]),
        // Tests only: starts scripts/s3-test-server (moto) on a loopback port.
        .target(name: "S3TestSupport", dependencies: ["TilerTestSupport"], path: "Tests/S3TestSupport"),
        // Tests only: what several test targets share (a raw HTTP client, polling with a
        // deadline, an overlayfs mount, scratch folders, the built tiler binary, a seeded
        // generator).
        .target(name: "TilerTestSupport", path: "Tests/TilerTestSupport"),
    ]
)
