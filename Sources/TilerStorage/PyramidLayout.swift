import TilerCore
import TilerSystem

/// Pyramid layouts and where each lives under ROOT.
public enum PyramidLayout: String, Sendable, CaseIterable {
    /// `ROOT/ID/LEVEL/ROW/COLUMN.EXT`, `ROOT/ID/thumbnail.EXT`, `ROOT/ID/pyramid.json`.
    case folder
    /// `ROOT/ID.pmtiles`.
    case archive

    /// The file name extension of archives.
    public static let archiveExtension = "pmtiles"

    /// The other layout.
    public var other: PyramidLayout { self == .folder ? .archive : .folder }

    /// The id of the pyramid a name directly under ROOT (or a bucket's PREFIX/) would be
    /// in this layout: `ID` for a folder, `ID.pmtiles` for an archive; nil for any other
    /// name (hidden names, which cuts and removals use while they work, are no ids).
    /// With `isPyramid`, the one rule of what is a pyramid under ROOT, which `tiler serve`
    /// and `tiler ls` share.
    public func id(named name: some StringProtocol) -> PyramidID? {
        switch self {
        case .folder: return PyramidID(String(name))
        case .archive:
            let suffix = "." + Self.archiveExtension
            guard name.hasSuffix(suffix) else { return nil }
            return PyramidID(String(name.dropLast(suffix.count)))
        }
    }

    /// Whether the file that makes a pyramid in this layout, as `lstat` describes it,
    /// makes one: `ROOT/ID/pyramid.json` for a folder, `ROOT/ID.pmtiles` for an archive.
    /// Either must be a regular file: a symbolic link is never followed, by the server or
    /// by `ls`.
    public static func isPyramid(_ file: FileInfo) -> Bool { file.isRegularFile }

    /// Of a folder and an archive with the same id, the pyramid served: the folder (the
    /// archive is shadowed).
    public static let served = PyramidLayout.folder

    /// `ROOT/ID` or `ROOT/ID.pmtiles`.
    public func path(of id: PyramidID, in root: String) -> String {
        switch self {
        case .folder: "\(root)/\(id.rawValue)"
        case .archive: "\(root)/\(id.rawValue).\(Self.archiveExtension)"
        }
    }

    /// A new sink for pyramid `id` in this layout.
    public func makeSink(
        root: String, id: PyramidID, geometry: PyramidGeometry,
        format: TileFormat
    ) throws(StorageError) -> any PyramidSink {
        switch self {
        case .folder: try FolderSink(root: root, id: id, format: format)
        case .archive: try ArchiveSink(root: root, id: id, geometry: geometry, format: format)
        }
    }
}
