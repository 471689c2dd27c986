import Foundation
import Synchronization
import TilerSystem

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
public final class UnfinishedOutput: Sendable {
    /// The process's registry.
    public static let shared = UnfinishedOutput()

    private struct Registry {
        var paths: [Int: String] = [:]
        var cleanups: [Int: @Sendable () -> Void] = [:]
        var nextToken = 0

        mutating func insert(_ path: String) -> Int {
            nextToken += 1
            paths[nextToken] = path
            return nextToken
        }
    }

    private let registry = Mutex(Registry())

    /// Registers `path`; the token unregisters it.
    public func register(_ path: String) -> Int {
        registry.withLock { $0.insert(path) }
    }

    public func unregister(_ token: Int) {
        registry.withLock { r in
            r.paths[token] = nil
            r.cleanups[token] = nil
        }
    }

    /// Registers work to do on the way to `_exit` besides removing paths (abort a
    /// multipart upload, so that its parts are freed and no object appears); the token
    /// unregisters it. The action must be bounded in time.
    public func registerCleanup(_ action: @escaping @Sendable () -> Void) -> Int {
        registry.withLock { r in
            r.nextToken += 1
            r.cleanups[r.nextToken] = action
            return r.nextToken
        }
    }

    /// Runs `body` (renames that create or publish output) with no removal under way;
    /// `register` inside it registers without taking the lock again.
    public func withLock<R, E: Error>(_ body: (_ register: (String) -> Int) throws(E) -> R) throws(E) -> R {
        try registry.withLock { (r) throws(E) -> R in
            try body { r.insert($0) }
        }
    }

    /// Runs the registered cleanups, moves every registered path out of the way and
    /// deletes it, then calls `exit` without letting go of the lock: no output is
    /// published afterwards.
    public func removeAllForExit(then exit: () -> Never) -> Never {
        registry.withLock { r -> Never in
            for action in r.cleanups.values { action() }
            r.cleanups.removeAll()
            for path in r.paths.values {
                let aside = path + "-removing"
                let target = (try? FileSystem.rename(path, to: aside)) != nil ? aside : path
                // Writers that had resolved the old path just before the rename may still
                // add a file or two; a few passes take those too.
                for _ in 0..<5 {
                    try? FileManager.default.removeItem(atPath: target)
                    if (try? FileSystem.info(target, followingLinks: false)) == nil { break }
                }
            }
            exit()
        }
    }
}
