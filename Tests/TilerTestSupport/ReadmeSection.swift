import Foundation

/// One section of README.md, from its heading to the next heading of the same or a higher
/// level (fenced code skipped), and the rows of the settings tables in it:
/// `` | `--flag VALUE` | `VARIABLE` | default … | ``. Tests hold the rows to the settings
/// the code declares (`SettingTable`): a row for each, naming its variable and its default.
public struct ReadmeSection: Sendable {
    public let heading: String
    /// The section's lines, its heading first.
    public let lines: [Substring]

    /// The section whose heading line starts with `heading`, e.g. `## Cutting`.
    public init(_ heading: String) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        var inCode = false
        var headings: [(index: Int, level: Int)] = []
        let all = readme.split(separator: "\n", omittingEmptySubsequences: false)
        for (i, line) in all.enumerated() {
            if line.hasPrefix("```") { inCode.toggle() }
            let level = line.prefix { $0 == "#" }.count
            if !inCode, level > 0, line.dropFirst(level).hasPrefix(" ") { headings.append((i, level)) }
        }
        guard let start = headings.firstIndex(where: { all[$0.index].hasPrefix(heading) }) else {
            throw SupportError(description: "README.md has no heading '\(heading)'")
        }
        let (first, level) = headings[start]
        let end = headings[(start + 1)...].first { $0.level <= level }?.index ?? all.count
        self.heading = heading
        lines = Array(all[first..<end])
    }

    /// The cells of each table row for `flag` (`` | `--flag` `` or `` | `--flag VALUE` ``).
    public func rows(flag: String) -> [[String]] {
        lines.filter { $0.hasPrefix("| `\(flag)`") || $0.hasPrefix("| `\(flag) ") }.map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().map {
                $0.trimmingCharacters(in: .whitespaces)
            }
        }
    }

    /// The flags whose rows name a `TILER_*` variable, with the variables they name.
    public var variablesByFlag: [String: Set<String>] {
        var found: [String: Set<String>] = [:]
        for line in lines where line.hasPrefix("| `--") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().map(String.init)
            guard cells.count >= 2, let flag = cells[0].split(whereSeparator: { $0 == "`" || $0 == " " }).first else { continue }
            let variables = cells[1].split(separator: "`").filter { $0.hasPrefix("TILER_") }.map { String($0.split(separator: "=")[0]) }
            if !variables.isEmpty { found[String(flag), default: []].formUnion(variables) }
        }
        return found
    }

    /// What is wrong with the rows for `flag`: none; none naming `variable`; none whose
    /// default cell holds each of `defaultMentions` (the default, a range).
    public func problems(flag: String, variable: String?, defaultMentions: [String]) -> [String] {
        let rows = rows(flag: flag)
        guard !rows.isEmpty else { return ["\(heading): no row for \(flag)"] }
        var problems: [String] = []
        if let variable, !rows.contains(where: { $0.count > 1 && $0[1].contains("`\(variable)") }) {
            problems.append("\(heading): no row for \(flag) names \(variable): \(rows)")
        }
        for text in defaultMentions where !rows.contains(where: { $0.count > 2 && $0[2].contains(text) }) {
            problems.append("\(heading): the default of \(flag) does not say \(text): \(rows)")
        }
        return problems
    }
}
