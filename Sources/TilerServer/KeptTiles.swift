import Foundation
import Synchronization
import TilerCore
import TilerHTTP
import TilerImaging
import TilerStorage
import TilerSystem

/// `--keep`: tiles made from sources written into `ROOT/ID/` as a pyramid folder whose
/// manifest says `"partial": true`, each file written under a temporary name and renamed
/// into place, so a later `tiler serve ROOT` (without `--sources`) serves every tile kept
/// and 404s the others. The manifest is written (atomically) before the first tile; a
/// folder kept from another version of the source is replaced. Failures are logged once
/// and never fail the request.
final class KeptTiles: Sendable {
    let root: String
    private let faults: OnceLog
    /// The manifests written, per id; held while one is written.
    private let written = Mutex<[PyramidID: PyramidManifest]>([:])

    init(root: String, faults: OnceLog) {
        self.root = root
        self.faults = faults
    }

    func keep(_ part: PyramidPart, _ bytes: [UInt8], of pyramid: SourcePyramid) {
        var manifest = pyramid.manifest
        manifest.partial = true
        let folder = "\(root)/\(pyramid.id)"
        do {
            try written.withLock { written throws in
                guard written[pyramid.id] != manifest else { return }
                let path = "\(folder)/\(PyramidManifest.fileName)"
                if let old = try? JSONDecoder().decode(PyramidManifest.self, from: Data(contentsOf: URL(fileURLWithPath: path))),
                    old != manifest
                {
                    guard old.partial == true else { throw KeepError("\(folder) holds a cut pyramid; nothing is kept there") }
                    // Kept from another version of the source: out of view, then deleted.
                    let aside = "\(root)/.tiler-kept-\(pyramid.id)-\(UUID().uuidString.prefix(8))"
                    if (try? FileSystem.rename(folder, to: aside)) != nil { try? FileManager.default.removeItem(atPath: aside) }
                }
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                try Self.write(manifest.fileBytes(), to: path)
                written[pyramid.id] = manifest
            }
            let name: String
            switch part {
            case let .tile(t): name = manifest.tilePath(t)
            case .thumbnail: name = manifest.thumbnail.file
            }
            let path = "\(folder)/\(name)"
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent,
                withIntermediateDirectories: true)
            try Self.write(bytes, to: path)
        } catch {
            faults.once("keep/\(pyramid.id)", "cannot keep tiles of image '\(pyramid.id)' in \(folder): \(error)")
        }
    }

    /// `bytes` into `path` through a temporary name in the same folder and a rename.
    private static func write(_ bytes: [UInt8], to path: String) throws {
        let staged = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        do {
            try AtomicFile.write(bytes, to: path, through: staged)
        } catch {
            throw KeepError("\(path): \(error.reason)")
        }
    }
}

struct KeepError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
