import Foundation
import Synchronization

/// Temporary folders that live as long as the test process: fixtures cut once and shared
/// by a suite, the copies a long-lived test server serves, a browser's profile. Nothing
/// else would remove them (a `static let` is never deinitialised), so the process removes
/// them as it exits, and a machine that runs the tests every day does not fill its
/// temporary folder. A process that is killed leaves them behind.
public enum ProcessFolders {
    private static let registered = Mutex<[String]>([])
    private static let hook: Void = { atexit { ProcessFolders.removeAll() } }()

    /// Removes `path` (a folder or a file) when the process exits.
    public static func removeAtExit(_ path: String) {
        _ = hook
        registered.withLock { $0.append(path) }
    }

    /// Removes every registered path that is still there.
    static func removeAll() {
        let paths = registered.withLock { paths in
            defer { paths.removeAll() }
            return paths
        }
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
    }
}
