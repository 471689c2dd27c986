// Waiting for a state by polling it with a deadline, never by sleeping a guessed time.
import Foundation

/// Polls `condition` every 5 ms until it holds; false if it still does not after
/// `seconds` (a deadline for a broken build, not a timing claim: on a loaded machine the
/// condition simply comes true later).
public func eventually(within seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(5_000)
    }
    return try condition()
}
