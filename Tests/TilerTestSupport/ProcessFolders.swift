import Foundation
import Synchronization

/// Temporary folders that live as long as the test process: fixtures cut once and shared
/// by a suite, the copies a long-lived test server serves, a browser's profile. Nothing
/// else would remove them (a `static let` is never deinitialised), so the process removes
/// them as it exits, and a machine that runs the tests every day does not fill its
/// temporary folder. A process that is killed leaves them behind.
public enum ProcessFolders {
    private static let registered = Mutex<(paths: [String], actions: [@Sendable () -> Void])>(([], []))
    private static let hook: Void = { atexit { ProcessFolders.removeAll() } }()

    /// A new, empty folder `tiler-NAME-PID` in the temporary folder (whatever an earlier
    /// process with the same id left there is removed first), removed when this process
    /// exits: for a fixture a suite makes once and keeps.
    public static func fresh(named name: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-\(name)-\(getpid())")
        try? FileManager.default.removeItem(at: url)
        removeAtExit(url.path)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Removes `path` (a folder or a file) when the process exits.
    public static func removeAtExit(_ path: String) {
        _ = hook
        registered.withLock { $0.paths.append(path) }
    }

    /// Runs `action` when the process exits, before the folders are removed: a
    /// long-lived server stops rescanning the folder it serves, rather than log that it
    /// has gone.
    public static func beforeRemoving(_ action: @escaping @Sendable () -> Void) {
        _ = hook
        registered.withLock { $0.actions.append(action) }
    }

    /// Runs the actions, then removes every registered path that is still there.
    static func removeAll() {
        let (paths, actions) = registered.withLock { registered in
            defer { registered = ([], []) }
            return registered
        }
        for action in actions { action() }
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
    }
}
