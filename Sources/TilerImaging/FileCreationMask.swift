import Foundation

/// The process's umask, read without changing it (`umask(2)` can only be read by setting
/// it, which would race with threads creating files): from `/proc/self/status`, or by
/// setting and restoring it when that is unavailable.
enum FileCreationMask {
    static let current: mode_t = {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
           let value = mode_t(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8) {
            return value
        }
        let mask = umask(0o022)
        umask(mask)
        return mask
    }()
}
