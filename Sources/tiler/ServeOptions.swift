import ArgumentParser
import Foundation
import TilerServer
import TilerSettings
import TilerStorage

/// `tiler serve`'s arguments. Only declared here: what each setting means, its variable,
/// range and default are the library's (`ServerConfiguration.Setting`), which also reads
/// the environment and checks every value (`ServerConfiguration(root:flags:environment:)`).
struct ServeOptions: ParsableArguments {
    typealias Setting = ServerConfiguration.Setting

    @Argument(
        help:
            "The folder of pyramids (folders and .pmtiles archives), as written by `tiler cut --output`, or s3://BUCKET/PREFIX (env \(DefaultRoot.variable); default: \(DefaultRoot.folder), where `tiler cut` writes by default)."
    )
    var root: String?

    @Option(name: .setting(.sources), help: .setting(.sources)) var sources: String?
    @Option(name: .setting(.sourcesFormat), help: .setting(.sourcesFormat)) var sourcesFormat: String?
    @Option(name: .setting(.sourcesQuality), help: .setting(.sourcesQuality)) var sourcesQuality: String?
    @Option(name: .setting(.sourcesCacheMB), help: .setting(.sourcesCacheMB)) var sourcesCacheMB: String?
    @Option(name: .setting(.sourcesSpillMB), help: .setting(.sourcesSpillMB)) var sourcesSpillMB: String?
    @Option(name: .setting(.maxPixels), help: .setting(.maxPixels)) var maxPixels: String?
    @Flag(name: .setting(.allowVector), help: .setting(.allowVector)) var allowVector = false
    @Flag(name: .setting(.keep), help: .setting(.keep)) var keep = false
    @Option(name: .setting(.s3Endpoint), help: .setting(.s3Endpoint)) var s3Endpoint: String?
    @Option(name: .setting(.storageTimeout), help: .setting(.storageTimeout)) var storageTimeout: String?
    @Option(name: .setting(.storageThreads), help: .setting(.storageThreads)) var storageThreads: String?
    @Option(name: .setting(.maxQueuedStorageReads), help: .setting(.maxQueuedStorageReads)) var maxQueuedStorageReads: String?
    @Option(name: .setting(.directoryCacheEntries), help: .setting(.directoryCacheEntries)) var directoryCacheEntries: String?
    @Option(name: .setting(.host), help: .setting(.host)) var host: String?
    @Option(name: .setting(.port), help: .setting(.port)) var port: String?
    @Option(name: .setting(.threads), help: .setting(.threads)) var threads: String?
    @Option(name: .setting(.blockingThreads), help: .setting(.blockingThreads)) var blockingThreads: String?
    @Option(name: .setting(.renderThreads), help: .setting(.renderThreads)) var renderThreads: String?
    @Option(name: .setting(.maxQueuedReads), help: .setting(.maxQueuedReads)) var maxQueuedReads: String?
    @Option(name: .setting(.maxQueuedRenders), help: .setting(.maxQueuedRenders)) var maxQueuedRenders: String?
    @Option(name: .setting(.cacheMB), help: .setting(.cacheMB)) var cacheMB: String?
    @Option(name: .setting(.openTiles), help: .setting(.openTiles)) var openTiles: String?
    @Option(name: .setting(.cacheControl), help: .setting(.cacheControl)) var cacheControl: String?
    @Option(name: .setting(.corsOrigin), help: .setting(.corsOrigin)) var corsOrigin: String?
    @Option(name: .setting(.maxConnections), help: .setting(.maxConnections)) var maxConnections: String?
    @Option(name: .setting(.idleTimeout), help: .setting(.idleTimeout)) var idleTimeout: String?
    @Option(name: .setting(.headerTimeout), help: .setting(.headerTimeout)) var headerTimeout: String?
    @Option(name: .setting(.writeTimeout), help: .setting(.writeTimeout)) var writeTimeout: String?
    @Option(name: .setting(.shutdownGrace), help: .setting(.shutdownGrace)) var shutdownGrace: String?
    @Option(name: .setting(.maxRequestLine), help: .setting(.maxRequestLine)) var maxRequestLine: String?
    @Option(name: .setting(.maxHeaderBytes), help: .setting(.maxHeaderBytes)) var maxHeaderBytes: String?
    @Option(name: .setting(.maxHeaders), help: .setting(.maxHeaders)) var maxHeaders: String?
    @Option(name: .setting(.maxVisibleTiles), help: .setting(.maxVisibleTiles)) var maxVisibleTiles: String?
    @Option(name: .setting(.viewerMaxZoom), help: .setting(.viewerMaxZoom)) var viewerMaxZoom: String?
    @Option(name: .setting(.frameAncestors), help: .setting(.frameAncestors)) var frameAncestors: String?
    @Option(name: .setting(.iiifMaxWidth), help: .setting(.iiifMaxWidth)) var iiifMaxWidth: String?
    @Option(name: .setting(.iiifMaxHeight), help: .setting(.iiifMaxHeight)) var iiifMaxHeight: String?
    @Option(name: .setting(.iiifMaxArea), help: .setting(.iiifMaxArea)) var iiifMaxArea: String?
    @Option(name: .setting(.renderMemoryMB), help: .setting(.renderMemoryMB)) var renderMemoryMB: String?
    @Option(name: .setting(.renderWait), help: .setting(.renderWait)) var renderWait: String?
    @Option(name: .setting(.rescanInterval), help: .setting(.rescanInterval)) var rescanInterval: String?
    @Option(name: .setting(.baseURL), help: .setting(.baseURL)) var baseURL: String?
    @Flag(name: .setting(.trustProxy), inversion: .prefixedNo, help: .setting(.trustProxy)) var trustProxy: Bool?
    @Option(name: .setting(.access), help: .setting(.access)) var access: String?
    @Option(name: .setting(.tokenCache), help: .setting(.tokenCache)) var tokenCache: String?
    @Flag(name: .setting(.accessLog), inversion: .prefixedNo, help: .setting(.accessLog)) var accessLog: Bool?
    @Option(name: .setting(.logFormat), help: .setting(.logFormat)) var logFormat: String?
    @Option(name: .setting(.metricsPort), help: .setting(.metricsPort)) var metricsPort: String?

    /// The settings given as flags, as typed (a switch as 1 or 0).
    var flags: [Setting: String] {
        func on(_ value: Bool?) -> String? { value.map { $0 ? "1" : "0" } }
        let given: [Setting: String?] = [
            .sources: sources, .sourcesFormat: sourcesFormat, .sourcesQuality: sourcesQuality,
            .sourcesCacheMB: sourcesCacheMB, .sourcesSpillMB: sourcesSpillMB, .maxPixels: maxPixels, .allowVector: allowVector ? "1" : nil,
            .keep: keep ? "1" : nil, .s3Endpoint: s3Endpoint, .storageTimeout: storageTimeout,
            .storageThreads: storageThreads, .maxQueuedStorageReads: maxQueuedStorageReads,
            .directoryCacheEntries: directoryCacheEntries, .host: host, .port: port, .threads: threads,
            .blockingThreads: blockingThreads, .renderThreads: renderThreads, .maxQueuedReads: maxQueuedReads,
            .maxQueuedRenders: maxQueuedRenders, .cacheMB: cacheMB, .openTiles: openTiles,
            .cacheControl: cacheControl, .corsOrigin: corsOrigin, .maxConnections: maxConnections,
            .idleTimeout: idleTimeout, .headerTimeout: headerTimeout, .writeTimeout: writeTimeout,
            .shutdownGrace: shutdownGrace, .maxRequestLine: maxRequestLine, .maxHeaderBytes: maxHeaderBytes,
            .maxHeaders: maxHeaders, .maxVisibleTiles: maxVisibleTiles, .viewerMaxZoom: viewerMaxZoom,
            .frameAncestors: frameAncestors,
            .iiifMaxWidth: iiifMaxWidth,
            .iiifMaxHeight: iiifMaxHeight, .iiifMaxArea: iiifMaxArea, .renderMemoryMB: renderMemoryMB,
            .renderWait: renderWait, .rescanInterval: rescanInterval, .baseURL: baseURL,
            .trustProxy: on(trustProxy), .access: access, .tokenCache: tokenCache, .accessLog: on(accessLog), .logFormat: logFormat,
            .metricsPort: metricsPort,
        ]
        return given.compactMapValues { $0 }
    }

    /// The server's configuration from these flags and the environment; a value that
    /// cannot be used is a usage error naming its flag or variable.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerConfiguration {
        do {
            return try ServerConfiguration(root: root, flags: flags, environment: environment)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

extension NameSpecification {
    /// `serve`'s setting by its case alone, `.setting(.port)`.
    static func setting(_ setting: ServerConfiguration.Setting) -> NameSpecification { setting.argumentName }
}

extension ArgumentHelp {
    /// `serve`'s setting by its case alone, `.setting(.port)`.
    static func setting(_ setting: ServerConfiguration.Setting) -> ArgumentHelp { setting.argumentHelp }
}
