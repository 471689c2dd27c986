import Foundation

/// The files and folders a cut, pack or unpack is still writing (its hidden partial
/// folder or file, ``StagedOutput``), so that a signal can remove them even while the
/// cut itself is stuck inside a libvips call (a header that takes long to read, a
/// progressive JPEG decoded whole before its first row) and cannot notice.
///
/// Removal first renames each path to a new hidden name and then deletes that: once
/// renamed, every later write of the cut to the old path fails (the cutter creates
/// nothing with intermediate folders), so nothing is re-created behind the removal.
/// Renames that publish output (the install of a finished pyramid) run under the same
/// lock, so a pyramid is either installed whole or removed, never half.
public final class UnfinishedOutput: @unchecked Sendable {
    /// The process's registry.
    public static let shared = UnfinishedOutput()

    private let lock = NSLock()
    private var paths: [Int: String] = [:]
    private var cleanups: [Int: @Sendable () -> Void] = [:]
    private var nextToken = 0

    /// Registers `path`; the token unregisters it.
    public func register(_ path: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return insert(path)
    }

    public func unregister(_ token: Int) {
        lock.lock()
        paths[token] = nil
        cleanups[token] = nil
        lock.unlock()
    }

    /// Registers work to do on the way to `_exit` besides removing paths (abort a
    /// multipart upload, so that its parts are freed and no object appears); the token
    /// unregisters it. The action must be bounded in time.
    public func registerCleanup(_ action: @escaping @Sendable () -> Void) -> Int {
        lock.lock()
        defer { lock.unlock() }
        nextToken += 1
        cleanups[nextToken] = action
        return nextToken
    }

    /// Runs `body` (renames that create or publish output) with no removal under way;
    /// `register` inside it registers without taking the lock again.
    public func withLock<R>(_ body: (_ register: (String) -> Int) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body { self.insert($0) }
    }

    private func insert(_ path: String) -> Int {
        nextToken += 1
        paths[nextToken] = path
        return nextToken
    }

    /// Moves every registered path out of the way and deletes it. Keeps the lock, so no
    /// output is published afterwards: call this only on the way to `_exit`.
    public func removeAllForExit() {
        lock.lock()
        for action in cleanups.values { action() }
        cleanups.removeAll()
        for path in paths.values {
            let aside = path + "-removing"
            let target = rename(path, aside) == 0 ? aside : path
            // Writers that had resolved the old path just before the rename may still add
            // a file or two; a few passes take those too.
            for _ in 0..<5 {
                try? FileManager.default.removeItem(atPath: target)
                if access(target, F_OK) != 0 { break }
            }
        }
        paths.removeAll()
    }
}
