import Foundation
import Synchronization
import TilerSystem

/// A pyramid being written into ROOT under a hidden name, `ROOT/.NAME.partial-PID-XXXXXX`,
/// and made visible as `ROOT/NAME` by one rename when complete: a reader never sees half
/// a pyramid, and a failed or interrupted write leaves nothing that looks like one.
///
/// The hidden folder or file is locked (`flock`) for as long as it is being written; the
/// kernel drops the lock when the process dies, so the next write of the same NAME can
/// tell a partial left by a killed process (unlocked: removed) from one a live process
/// in this or another container is still writing (locked: left alone). It is also
/// registered with ``UnfinishedOutput``, so that a signal the writer cannot notice in
/// time removes it; the renames that make it appear run under that registry's lock, so a
/// signal finds either the partial or the finished pyramid, never half.
final class StagedOutput: Sendable {
    enum Kind {
        /// A pyramid folder, `ROOT/ID`.
        case folder
        /// A single file, `ROOT/ID.pmtiles`.
        case file
    }

    let kind: Kind
    let root: String
    /// `ROOT/NAME`, where the pyramid appears.
    let destination: String
    /// The hidden path being written.
    let path: String
    /// The file being written (`.file`), or the partial folder opened for its lock
    /// (`.folder`); holds the lock.
    let descriptor: FileDescriptor
    private let registration: Int
    /// Installed or discarded: nothing is left to remove.
    private let finished = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)

    /// Makes the hidden, locked folder or file for `name` in `root` (creating `root` if
    /// need be), after removing partials of `name` left by killed processes. Files and
    /// folders get the usual modes less the umask (0666 and 0777, so 0644 and 0755 under
    /// umask 022): a server running as another user can read them.
    ///
    /// `alsoClearing`: another name whose abandoned partials go too (an archive's cut
    /// clears those of the folder of its id, which a killed removal may have left).
    init(root: String, name: String, kind: Kind, alsoClearing other: String? = nil) throws(StorageError) {
        self.kind = kind
        self.root = root
        destination = root + "/" + name
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw .io(path: root, reason: Self.reason(error))
        }
        Self.removeAbandonedPartials(of: name, in: root)
        if let other { Self.removeAbandonedPartials(of: other, in: root) }

        // Made under a name the clean-up above never matches, locked, then renamed: a
        // partial is locked from the moment another process can take it for abandoned.
        let made: Result<(String, FileDescriptor, Int), StorageError> = UnfinishedOutput.shared.withLock { register in
            var staging = ""
            var opened: Result<FileDescriptor, SystemCallError> = .failure(SystemCallError("open", errno: EEXIST))
            for _ in 0..<100 {
                staging = "\(root)/.\(name).staging-\(Self.randomSuffix())"
                opened = Self.make(staging, kind: kind)
                if case .failure(let error) = opened, error.errno == EEXIST { continue }
                break
            }
            let fd: FileDescriptor
            switch opened {
            case .success(let descriptor): fd = descriptor
            case .failure(let error):
                return .failure(.system(staging, error, "cannot create a working \(kind == .folder ? "folder" : "file")"))
            }
            let partial = "\(root)/.\(name).partial-\(getpid())-\(staging.suffix(8))"
            do throws(SystemCallError) {
                guard try fd.tryLockExclusive() else { throw SystemCallError("flock", errno: EWOULDBLOCK) }
                try FileSystem.rename(staging, to: partial)
            } catch {
                fd.close()
                Self.remove(staging, kind: kind)
                return .failure(.system(staging, error))
            }
            return .success((partial, fd, register(partial)))
        }
        (path, descriptor, registration) = try made.get()
    }

    /// Makes and opens the working folder or file `path`.
    private static func make(_ path: String, kind: Kind) -> Result<FileDescriptor, SystemCallError> {
        Result { () throws(SystemCallError) in
            switch kind {
            case .folder:
                try FileSystem.makeDirectory(path)
                do throws(SystemCallError) {
                    return try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY)
                } catch {
                    try? FileSystem.removeDirectory(path)
                    throw error
                }
            case .file:
                return try FileDescriptor.open(path, O_RDWR | O_CREAT | O_EXCL)
            }
        }
    }

    deinit {
        discard()  // nothing when it was installed or discarded already
        closeDescriptor()
    }

    /// Moves the finished pyramid to `destination`. Without `replace`, an existing
    /// destination is an error (`.exists`) and is left alone; with it, the new pyramid
    /// takes the old one's place in one step (a rename for a file, `RENAME_EXCHANGE` for
    /// a folder) and the old one is then deleted.
    func install(replace: Bool) throws(StorageError) {
        let outcome: Result<(path: String, token: Int?)?, StorageError> = UnfinishedOutput.shared.withLock { register in
            do throws(StorageError) {
                switch kind {
                case .file:
                    try installFile(replace: replace)
                    return .success(nil)
                case .folder:
                    return .success(try installFolder(replace: replace, register: register))
                }
            } catch {
                return .failure(error)
            }
        }
        let leftover = try outcome.get()
        finished.store(true, ordering: .sequentiallyConsistent)
        closeDescriptor()
        // The old pyramid, swapped out: still registered, so a signal now removes it too.
        if let leftover {
            Self.remove(leftover.path, kind: .folder)
            if let token = leftover.token { UnfinishedOutput.shared.unregister(token) }
        }
        UnfinishedOutput.shared.unregister(registration)
    }

    /// Removes the partial folder or file (after a failure or an interrupt).
    func discard() {
        guard !finished.exchange(true, ordering: .sequentiallyConsistent) else { return }
        Self.remove(path, kind: kind)
        UnfinishedOutput.shared.unregister(registration)
        closeDescriptor()
    }

    private func closeDescriptor() {
        guard !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        descriptor.close()
    }

    private func installFile(replace: Bool) throws(StorageError) {
        do throws(SystemCallError) {
            if replace {
                try FileSystem.rename(path, to: destination)
                return
            }
            do {
                try FileSystem.renameWithoutReplacing(path, to: destination)
                return
            } catch  where error.errno == EINVAL || error.errno == ENOSYS {
                // No RENAME_NOREPLACE here: link(2) also refuses an existing name, atomically.
                try FileSystem.link(path, to: destination)
                try? FileSystem.unlink(path)
            }
        } catch  where error.errno == EEXIST {
            throw .exists(path: destination)
        } catch {
            throw .system(destination, error)
        }
    }

    /// Renames the partial folder into place; returns an old pyramid to delete (and its
    /// registration, if it is not at `path`).
    private func installFolder(replace: Bool, register: (String) -> Int) throws(StorageError) -> (path: String, token: Int?)? {
        do {
            try FileSystem.rename(path, to: destination)
            return nil
        } catch {
            let occupied = error.errno == EEXIST || error.errno == ENOTEMPTY
            guard replace, occupied || error.errno == EISDIR || error.errno == ENOTDIR else {
                if occupied { throw .exists(path: destination) }
                throw .system(destination, error)
            }
        }
        // `path` holds the old pyramid after the exchange, and stays registered.
        if (try? FileSystem.exchange(path, destination)) != nil { return (path, nil) }
        // No atomic exchange here: move the old one aside, the new one in, delete the old.
        let aside = "\(root)/.\((destination as NSString).lastPathComponent).partial-\(getpid())-old-\(Self.randomSuffix())"
        do {
            try FileSystem.rename(destination, to: aside)
        } catch {
            throw .system(destination, error)
        }
        do {
            try FileSystem.rename(path, to: destination)
        } catch {
            try? FileSystem.rename(aside, to: destination)
            throw .system(destination, error)
        }
        return (aside, register(aside))
    }

    /// Removes `ROOT/.NAME.partial-*` left by processes that were killed outright
    /// (SIGKILL, the OOM killer, power loss): those whose lock can be taken.
    private static func removeAbandonedPartials(of name: String, in root: String) {
        let prefix = ".\(name).partial-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return }
        for entry in names where entry.hasPrefix(prefix) {
            let path = root + "/" + entry
            guard let fd = try? FileDescriptor.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) else { continue }
            if (try? fd.tryLockExclusive()) == true {
                let isFolder = (try? fd.info())?.isDirectory == true
                remove(path, kind: isFolder ? .folder : .file)
            }
            fd.close()
        }
    }

    private static func remove(_ path: String, kind: Kind) {
        switch kind {
        case .file: try? FileSystem.unlink(path)
        case .folder: try? FileManager.default.removeItem(atPath: path)
        }
    }

    private static func randomSuffix() -> String {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        return String(decoding: (0..<8).map { _ in letters.randomElement()! }, as: UTF8.self)
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? CocoaError, let underlying = error.underlying as? POSIXError {
            return SystemCallError.reason(underlying.code.rawValue)
        }
        return String(describing: error)
    }
}
