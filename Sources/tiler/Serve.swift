import ArgumentParser
import Foundation
import Logging
import ObjectStorage
import TilerHTTP
import TilerServer
import TilerSettings
import TilerStorage
import TilerSystem

extension Tiler {
    /// `tiler serve [ROOT]`: serve every pyramid under ROOT over HTTP until SIGTERM/SIGINT.
    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the pyramids under ROOT over HTTP: tiles, manifests, visible tiles, DeepZoom, IIIF and a web viewer.",
            discussion: """
                Routes: the image API (/images, /images/ID, /images/ID/tiles/L/R/C.EXT, \
                /images/ID/visible); DeepZoom for OpenSeadragon (/images/ID.dzi); IIIF Image API 3.0 \
                (/iiif/3/ID/info.json); IIIF Presentation API 3.0 for Mirador and Universal Viewer \
                (/iiif/3/ID/manifest.json, /iiif/3/collection.json); and a web viewer at / (an album \
                of every image and a deep-zoom view of one). Behind a reverse proxy, --base-url \
                names the public address (a path prefix included).

                Every option can also be set by the environment variable named after it \
                (e.g. TILER_PORT, TILER_HOST, \(DefaultRoot.variable), TILER_CACHE_MB, TILER_ACCESS_LOG=1); \
                a flag wins over its variable. Pyramids cut into ROOT while the server runs are \
                served without a restart. SIGTERM or SIGINT stops accepting, finishes the \
                responses in flight and exits 0. Prints `tiler: serving ROOT at URL` on start \
                (`tiler: serving ROOT and the images in DIR at URL` with --sources).

                With --sources DIR, image files are served without cutting them (tiles made on \
                demand, JPEG for images without alpha and PNG for those with it by default, \
                --sources-format), beside ROOT's pyramids. No ROOT is needed then: when none is \
                named and ./\(DefaultRoot.folder) does not exist, only DIR is served (`tiler: \
                serving the images in DIR at URL`), and pyramids cut into ./\(DefaultRoot.folder) \
                later are served as they appear.

                ROOT holds pyramid folders (ROOT/ID/) and archives (ROOT/ID.pmtiles, from \
                `tiler cut --archive` or `tiler pack`); a folder wins over an archive of the same \
                id. ROOT may be s3://BUCKET/PREFIX: every PREFIX/ID.pmtiles is served by range \
                requests, with the credentials and endpoint every S3 tool reads \
                (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, \
                AWS_ENDPOINT_URL or --s3-endpoint) and the TILER_S3_* request bounds.
                """)

        @OptionGroup var options: ServeOptions

        /// Settings that cannot be used are usage errors, with `tiler serve`'s usage.
        func validate() throws {
            _ = try options.configuration()
        }

        func run() throws {
            let config = try options.configuration()
            // Without a ROOT named, `--sources DIR` needs no folder of pyramids: when the
            // default one is missing, only DIR is served (and ROOT's pyramids once it exists).
            var rootAbsent = false
            if let s3 = config.s3 {
                try Self.checkBucket(config.root, s3, within: config.storageTimeout)
            } else {
                var isDirectory: ObjCBool = false
                let exists = FileManager.default.fileExists(atPath: config.root, isDirectory: &isDirectory)
                let named = options.root != nil || DefaultRoot.named() != nil
                if !exists, !named, config.sources != nil {
                    rootAbsent = true
                } else if !exists || !isDirectory.boolValue {
                    if !named {
                        throw ValidationError(
                            "there is no folder '\(config.root)' here, the default ROOT: cut images into it first (`tiler cut IMAGE` writes ./\(DefaultRoot.folder)), serve a folder of images without cutting them (`tiler serve --sources DIR`), or name the folder of pyramids: `tiler serve ROOT`"
                        )
                    }
                    throw ValidationError("ROOT '\(config.root)' is not a folder; pass the --output folder of `tiler cut`")
                }
            }
            if let sources = config.sources {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: sources.directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw ValidationError("--sources '\(sources.directory)' is not a folder; name the folder of image files to serve")
                }
                // Sources without random access (JPEG, PNG, strip-less formats) are decoded
                // once to a temporary file that libvips reads regions of, never to memory.
                if ProcessInfo.processInfo.environment["VIPS_DISC_THRESHOLD"] == nil { setenv("VIPS_DISC_THRESHOLD", "0", 1) }
            }
            let signals = try TerminationSignals()  // before any thread starts
            // ROOT is read in the background while the server already listens: thousands of
            // archives, or a store whose reads hang, never keep the port closed or a
            // SIGTERM waiting (`/healthz` says `"catalog":"loading"` meanwhile, `/readyz` 503).
            let json = config.logFormat == .json
            func logger(_ label: String) -> Logger {
                Logger(label: label) { label -> any LogHandler in
                    json ? JSONLogHandler.standardError(label: label) : StreamLogHandler.standardError(label: label)
                }
            }
            let log = logger("tiler")
            // A policy that does not load keeps the server from starting: never serve
            // private images as public because of a typo.
            var access: AccessControl?
            if let policy = config.accessPolicy {
                do {
                    access = try AccessControl(path: policy, tokenCacheEntries: config.tokenCacheEntries, log: log)
                } catch {
                    throw ValidationError("--access: \(error)")
                }
                access?.startWatching(every: AccessControl.watchInterval)
            }
            let server = TileServer(
                configuration: config, accessLog: config.accessLog ? logger("tiler.access") : nil, log: log,
                loadingFirst: false, access: access)
            do {
                try server.start()
            } catch {
                // A run-time failure, not a usage mistake: no usage text after it.
                let hint =
                    error.errno == EADDRINUSE
                    ? " (another server is using that port; choose one with \(ServeOptions.Setting.port.flag) or \(ServeOptions.Setting.port.variable!))"
                    : ""
                throw ServeError(description: "cannot listen: \(error)\(hint)")
            }
            let shownHost = config.http.host.contains(":") ? "[\(config.http.host)]" : config.http.host
            let url = "http://\(shownHost):\(server.port)/"
            let metricsURL = server.metricsPort.map { "http://\(shownHost):\($0)/metrics" }
            // Unbuffered, so a parent reading our stdout sees the URL at once.
            let served =
                switch (config.sources?.directory, rootAbsent) {
                case (nil, _): config.root
                case let (sources?, true): "the images in \(sources)"
                case let (sources?, false): "\(config.root) and the images in \(sources)"
                }
            if json {
                var fields: Logger.Metadata = ["root": .string(config.root), "url": .string(url)]
                if rootAbsent { fields["root"] = nil }
                if let sources = config.sources?.directory { fields["sources"] = .string(sources) }
                if let base = config.baseURL { fields["public_url"] = .string("\(base)/") }
                if let metricsURL { fields["metrics_url"] = .string(metricsURL) }
                FileHandle.standardOutput.write(
                    Data(JSONLogHandler.line(message: "serving", label: "tiler", level: .info, metadata: fields)))
            } else {
                let publicAddress = config.baseURL.map { " (public address \($0)/)" } ?? ""
                let metrics = metricsURL.map { " (metrics at \($0))" } ?? ""
                FileHandle.standardOutput.write(Data("tiler: serving \(served) at \(url)\(publicAddress)\(metrics)\n".utf8))
            }
            if config.s3 == nil, config.sources == nil, let hint = EmptyRootHint.hint(root: config.root) {
                if json { log.warning("\(hint)") } else { FileHandle.standardError.write(Data("tiler: serve: \(hint)\n".utf8)) }
            }
            let signal = signals.wait()
            if json {
                log.info("finishing in-flight requests", metadata: ["signal": .stringConvertible(signal)])
            } else {
                FileHandle.standardError.write(Data("tiler: signal \(signal), finishing in-flight requests\n".utf8))
            }
            server.stop()
            server.wait()
            if json { log.info("stopped") }
        }

        /// Lists the bucket's prefix once (one key) before serving: refused credentials or a
        /// missing bucket end the command with one line (exit 1); storage that does not
        /// answer only gets a warning, since the server recovers by itself when it returns.
        static func checkBucket(_ root: String, _ configuration: S3Configuration, within seconds: Double) throws {
            guard let location = try? S3Location(parsing: root) else { return }
            do throws(S3Error) {
                _ = try StorageDeadline(seconds: seconds).run { () throws(S3Error) in
                    try S3Client(configuration: configuration).list(bucket: location.bucket, prefix: location.listPrefix, maxKeys: 1)
                }
            } catch {
                if error.isUnavailable {
                    FileHandle.standardError.write(
                        Data("tiler: warning: \(error); serving anyway, images appear when storage answers\n".utf8))
                    return
                }
                throw ServeError(description: "cannot serve \(root): \(error)")
            }
        }
    }
}

/// A failure of `tiler serve` after its arguments were accepted.
struct ServeError: Error, CustomStringConvertible {
    let description: String
}
