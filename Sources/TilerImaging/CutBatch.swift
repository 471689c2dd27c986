import Foundation
import TilerCore

/// One input's line in `tiler cut --json`.
public struct CutReport: Codable, Sendable, Equatable {
    public var path: String
    public var id: String?
    public var ok: Bool
    public var error: String?
    public var width: Int?
    public var height: Int?
    /// Number of levels, `maxLevel + 1`.
    public var levels: Int?
    public var tiles: Int?
    public var bytes: Int?
    public var seconds: Double?
    /// The pyramid folder.
    public var output: String?
}

/// `tiler cut --json`'s whole output.
public struct CutSummary: Codable, Sendable, Equatable {
    public var images: [CutReport]
    public var succeeded: Int
    public var failed: Int
    public var interrupted: Bool
}

/// What a batch of cuts tells as it goes, for a display (`tiler cut` draws it on a
/// terminal). Calls come one at a time: `begin` and `end` on the thread running the
/// batch, `update` on the thread libvips hands rows over on, while the batch waits.
public protocol CutProgress: AnyObject {
    /// An input's cut starts (`input` as given).
    func begin(_ input: String)
    /// The part of the current input done, from 0 to 1; called often (once per strip of
    /// rows), so a display should throttle its drawing.
    func update(_ fraction: Double)
    /// The current input's cut ended: its result, or nil when it failed or was interrupted.
    func end(_ result: CutResult?)
}

/// Cuts several inputs one after the other: the error of one input is reported and the
/// others are still cut.
public struct CutBatch {
    public let cutter: PyramidCutter
    /// The id for the single input, instead of one derived from its file name.
    public let name: PyramidID?

    public init(cutter: PyramidCutter, name: PyramidID?) {
        self.cutter = cutter
        self.name = name
    }

    /// Cuts every input in order and reports each one.
    ///
    /// - Parameters:
    ///   - progress: gets each input as it starts, its progress, and its end.
    ///   - failed: called once per input that could not be cut, with the reason.
    ///   - made: called once per pyramid made, with its input (as given) and result.
    ///   - isCancelled: stops the batch (and the cut under way) when it turns true.
    public func run(
        _ inputs: [String], progress: (any CutProgress)?, failed: (String, CutError) -> Void,
        made: (String, CutResult) -> Void = { _, _ in }, isCancelled: @escaping @Sendable () -> Bool
    ) -> CutSummary {
        var reports: [CutReport] = []
        var usedIDs = Set<PyramidID>()
        var interrupted = false
        for input in inputs {
            if isCancelled() {
                interrupted = true
                break
            }
            var report = CutReport(path: input, ok: false)
            // Refused before any work: the reason reported and recorded.
            func refuse(_ error: CutError) {
                failed(input, error)
                report.error = error.description
                reports.append(report)
            }
            guard let id = name ?? PyramidID(deriving: input) else {
                refuse(.noUsableName)
                continue
            }
            report.id = id.rawValue
            guard !id.hidesADeepZoomDescriptor else {
                refuse(.hidesDeepZoom(id: id))
                continue
            }
            guard usedIDs.insert(id).inserted else {
                refuse(.duplicate(id: id))
                continue
            }
            progress?.begin(input)
            do {
                let result = try cutter.cut(input, id: id, progress: { progress?.update($0) }, isCancelled: isCancelled)
                progress?.end(result)
                made(input, result)
                report.ok = true
                report.width = result.manifest.width
                report.height = result.manifest.height
                report.levels = result.manifest.levels.count
                report.tiles = result.tiles
                report.bytes = result.bytes
                report.seconds = (result.seconds * 1000).rounded() / 1000
                report.output = result.destination
            } catch {
                progress?.end(nil)
                if case .interrupted = error { interrupted = true }
                failed(input, error)
                report.error = error.description
            }
            reports.append(report)
            if interrupted { break }
        }
        let succeeded = reports.filter(\.ok).count
        return CutSummary(images: reports, succeeded: succeeded, failed: reports.count - succeeded, interrupted: interrupted)
    }
}
