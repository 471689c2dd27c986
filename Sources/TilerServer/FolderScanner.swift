import Foundation
import ObjectStorage
import TilerCore
import TilerStorage
import TilerSystem

/// The pyramids of a ROOT folder: folders `ROOT/ID/` with a manifest, then archives
/// `ROOT/ID.pmtiles` whose id no such folder has (what counts as a pyramid is
/// `PyramidLayout`'s rule, which `tiler ls` follows too). A scan opens ROOT once and stats
/// each pyramid folder's manifest (about 6 µs a pyramid, 0.12 s for 20,000) and each
/// archive; a name the snapshot does not know is looked up by `load`.
///
/// **Loading a pyramid happens here, in one place** (`entry`): a folder's `pyramid.json`
/// read beneath ROOT without following links (regular file, at most 16 MiB), decoded and
/// validated; an archive opened and checked (`ArchivedPyramid`). A changed archive
/// (another inode, size or modification time) is opened as a new `Pyramid`: requests that
/// hold the old one finish reading the old file (its descriptor keeps the old inode).
struct FolderScanner: CatalogScanner {
    /// What a scan found under one id.
    enum Candidate {
        /// `ROOT/ID/` (its manifest is stat'ed when loading).
        case folder
        /// `ROOT/ID.pmtiles`, as `lstat` saw it.
        case archive(FileInfo)
    }

    /// `ROOT` without trailing slashes.
    let root: String
    /// Whether `--sources` is served too: then a missing ROOT is no fault to log.
    let servesSources: Bool
    let writer: CatalogWriter
    /// Leaf directories of every archive, shared.
    let directories: DirectoryCache

    func scan(_ pass: CatalogPass, into next: inout [String: CatalogEntry]) -> Bool {
        var names: [String] = []
        do throws(RootedFileError) {
            let folder = try RootedFolder(root: root)
            names = try folder.names()
            writer.clearReport("")
            next.reserveCapacity(pass.old.count)
            var archives: [(PyramidID, String)] = []
            for name in names {
                if let id = PyramidLayout.archive.id(named: name) { archives.append((id, name)) }
                guard let id = PyramidLayout.folder.id(named: name) else { continue }
                guard let found = entry(for: id, candidate: .folder, in: folder, previous: pass.old[name]) else { continue }
                next[name] = found
            }
            // The folder of an id is served over its archive (`PyramidLayout.served`).
            for (id, name) in archives where next[id.rawValue] == nil {
                let info: FileInfo
                do {
                    info = try folder.info(name)
                } catch {
                    writer.reportIfOperatorsFault(
                        id.rawValue, error, "cannot look at \(root)/\(name): \(error); image '\(id)' is not served")
                    continue
                }
                guard let found = entry(for: id, candidate: .archive(info), in: folder, previous: pass.old[id.rawValue]) else {
                    continue
                }
                next[id.rawValue] = found
            }
        } catch {
            if isAbsentRootOfSources(error) {
                writer.clearReport("")
            } else {
                writer.report("", "root-\(error.kind)", "cannot read ROOT '\(root)': \(error); no image is served until it can")
            }
        }
        if writer.reportedNames.contains(where: { !$0.isEmpty && !$0.hasPrefix("source:") }) {
            let suffix = "." + PyramidLayout.archiveExtension
            let present = Set(names.map { $0.hasSuffix(suffix) ? String($0.dropLast(suffix.count)) : $0 } + names)
            writer.pruneReports { $0.isEmpty || $0.hasPrefix("source:") || present.contains($0) }
        }
        return true
    }

    /// Looks `id` up in ROOT (may block): its folder, else its archive; nil when it is
    /// not a pyramid.
    func load(_ id: PyramidID) -> CatalogEntry? {
        let folder: RootedFolder
        do throws(RootedFileError) {
            folder = try RootedFolder(root: root)
        } catch {
            if !isAbsentRootOfSources(error) { writer.report("", "root-\(error.kind)", "cannot open ROOT '\(root)': \(error)") }
            return nil
        }
        if let found = entry(for: id, candidate: .folder, in: folder, previous: nil) { return found }
        guard let info = try? folder.info("\(id.rawValue).\(PyramidLayout.archiveExtension)") else { return nil }
        return entry(for: id, candidate: .archive(info), in: folder, previous: nil)
    }

    /// Whether `error` only says that ROOT does not exist while `--sources` is served:
    /// `tiler serve --sources DIR` needs no folder of pyramids (ROOT's pyramids are
    /// served once it appears), so that is no fault to log.
    private func isAbsentRootOfSources(_ error: RootedFileError) -> Bool {
        servesSources && error.kind == .missing
    }

    /// What `candidate` is for `id`: a pyramid, a broken one (500), or nil for none (not a
    /// pyramid, a link, something the server may not open, which is logged). `previous`
    /// is kept when what it was loaded from has not changed. `folder` is ROOT opened.
    private func entry(
        for id: PyramidID, candidate: Candidate, in folder: RootedFolder, previous: CatalogEntry?
    ) -> CatalogEntry? {
        switch candidate {
        case .folder: folderEntry(for: id, in: folder, previous: previous)
        case let .archive(info): archiveEntry(for: id, info: info, in: folder, previous: previous)
        }
    }

    private func folderEntry(for id: PyramidID, in root: RootedFolder, previous: CatalogEntry?) -> CatalogEntry? {
        let name = id.rawValue
        let manifestPath = { "\(self.root)/\(name)/\(PyramidManifest.fileName)" }
        let info: FileInfo
        do {
            info = try root.info(PyramidManifest.fileName, inFolder: name)
        } catch {
            writer.reportIfOperatorsFault(name, error, "cannot look at \(manifestPath()): \(error); image '\(name)' is not served")
            return nil
        }
        // A link (or anything but a file) named pyramid.json is not a manifest: the folder
        // is not a pyramid.
        guard PyramidLayout.isPyramid(info) else {
            writer.clearReport(name)
            return nil
        }
        if let previous, previous.signature == .folder(manifest: info) { return previous }
        let bytes: [UInt8], readInfo: FileInfo
        do {
            (bytes, readInfo) = try root.folder(name).read(PyramidManifest.fileName, maximumBytes: StoredPyramid.maximumManifestBytes)
        } catch {
            switch error.kind {
            case .missing, .link, .notRegularFile, .changed:
                // Replaced between the look and the read: the next scan sees the new one.
                return nil
            case .denied, .other, .tooLarge:
                writer.report(
                    name, "read-\(error.kind)-\(info.entityTag)",
                    "cannot read \(manifestPath()): \(error); image '\(name)' answers 500")
                return .broken(message: "image '\(name)' cannot be read by the server", signature: .folder(manifest: info))
            }
        }
        let signature = SourceSignature.folder(manifest: readInfo)
        let decoded: (manifest: PyramidManifest, geometry: PyramidGeometry)
        do {
            decoded = try PyramidManifest.decodedWithGeometry(bytes)
        } catch {
            writer.report(
                name, "decode-\(readInfo.entityTag)",
                "\(manifestPath()) cannot be used: \(error); image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has an unreadable pyramid.json", signature: signature)
        }
        let (manifest, geometry) = decoded
        guard manifest.id == id else {
            writer.report(
                name, "id-\(readInfo.entityTag)",
                "\(manifestPath()) is the manifest of '\(manifest.id)', not of '\(name)'; image '\(name)' answers 500")
            return .broken(message: "image '\(name)' has a pyramid.json for another image", signature: signature)
        }
        writer.clearReport(name)
        let source = FolderSource(root: self.root, id: id, manifest: manifest, manifestInfo: readInfo)
        return .pyramid(writer.makePyramid(id, manifest, geometry, source, signature))
    }

    private func archiveEntry(
        for id: PyramidID, info: FileInfo, in root: RootedFolder, previous: CatalogEntry?
    ) -> CatalogEntry? {
        let name = id.rawValue
        let file = "\(id).\(PyramidLayout.archiveExtension)"
        let path = "\(self.root)/\(file)"
        // A link (or anything but a file) is not an archive, as for manifests.
        guard PyramidLayout.isPyramid(info) else {
            writer.clearReport(name)
            return nil
        }
        let signature = SourceSignature.archive(info)
        if let previous, previous.signature == signature { return previous }
        let fd: FileDescriptor
        do throws(SystemCallError) {
            fd = try root.descriptor.open(at: file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            let code = error.errno
            if code == EACCES || code == EPERM || code == EIO {
                writer.report(
                    name, "open-\(code)-\(info.entityTag)",
                    "cannot open \(path): \(error.reason); image '\(name)' answers 500")
                return .broken(message: "image '\(name)' cannot be read by the server", signature: signature)
            }
            return nil  // gone or replaced by a link meanwhile
        }
        let archive: ArchivedPyramid, source: FileArchiveSource
        do {
            source = try FileArchiveSource(descriptor: fd, name: path)
            // Replaced between the look and the open: the next scan sees the new one.
            guard source.info.inode == info.inode else { return previous }
            archive = try ArchivedPyramid(reader: ArchiveReader(source: source, cache: directories))
        } catch {
            return writer.damagedArchive(id, error, version: info.entityTag, signature: signature)
        }
        let served = LocalArchiveSource(archive: archive, file: source)
        return writer.archiveEntry(id, archive, at: path, version: info.entityTag, signature: signature, source: served)
    }
}
