import TilerCore
import TilerImaging
import TilerSystem

/// The image files of the `--sources` folder, served on the fly: each regular file a
/// libvips loader recognises, under the id `tiler cut` would give it, unless ROOT has a
/// pyramid of that id (a cut pyramid wins; a folder kept by `--keep` does not). New and
/// changed files (another inode, size or modification time) are opened (headers only) as
/// a new generation; others keep theirs. Runs after the scan of ROOT, over what it found.
struct SourcesScanner: CatalogScanner {
    let settings: ServerConfiguration.SourceSettings
    let writer: CatalogWriter
    let pixelCache: PixelCache
    /// The temporary disk sources' decoding may take.
    let spillBudget: SpillBudget
    let renderBudget: RenderBudget
    let keeper: KeptTiles?

    func scan(_ pass: CatalogPass, into next: inout [String: CatalogEntry]) -> Bool {
        let names: [String]
        let folder: RootedFolder
        do throws(RootedFileError) {
            folder = try RootedFolder(root: settings.directory)
            names = try folder.names().sorted()
            writer.clearReport("source:")
        } catch {
            writer.report(
                "source:", "sources-\(error.kind)",
                "cannot read the --sources folder '\(settings.directory)': \(error); no source is served until it can")
            return true
        }
        var claimed: [String: String] = [:]
        for name in names where !name.hasPrefix(".") {
            guard let id = PyramidID(deriving: name) else { continue }
            if let existing = next[id.rawValue], existing.pyramid?.manifest.partial != true { continue }
            if let other = claimed[id.rawValue] {
                writer.report(
                    "source:" + name, "duplicate-\(other)",
                    "\(settings.directory)/\(name) would be image '\(id)', which \(other) already is; it is not served (rename it)")
                continue
            }
            guard let info = try? folder.info(name), info.isRegularFile else { continue }
            let signature = SourceSignature.sourceFile(name: name, info)
            if let previous = pass.old[id.rawValue], previous.signature == signature {
                claimed[id.rawValue] = name
                next[id.rawValue] = previous
                continue
            }
            let path = "\(settings.directory)/\(name)"
            do throws(CutError) {
                let pyramid = try SourcePyramid(
                    path: path, id: id, options: settings.cutOptions, cache: pixelCache, spill: spillBudget)
                claimed[id.rawValue] = name
                writer.clearReport("source:" + name)
                let source = SourceFileSource(pyramid: pyramid, info: info, location: path, budget: renderBudget, keeper: keeper)
                next[id.rawValue] = .pyramid(writer.makePyramid(id, pyramid.manifest, pyramid.geometry, source, signature))
            } catch {
                if case let .notAnImage(why) = error, why == SourcePyramid.unrecognised { continue }
                claimed[id.rawValue] = name
                writer.report("source:" + name, "open-\(info.entityTag)", "\(path): \(error); image '\(id)' answers 500")
                next[id.rawValue] = .broken(message: "image '\(id)' cannot be served from its source file", signature: signature)
            }
        }
        let present = Set(names.map { "source:" + $0 })
        writer.pruneReports { !$0.hasPrefix("source:") || $0 == "source:" || present.contains($0) }
        return true
    }
}
