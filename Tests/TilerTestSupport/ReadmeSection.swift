import Foundation

/// One section of README.md, from its heading to the next heading of the same or a higher
/// level (fenced code skipped), and the rows of the settings tables in it:
/// `` | `--flag VALUE` | `VARIABLE` | default … | ``, and of a setting without a flag
/// `` | what | `VARIABLE` | default … | ``. Tests hold the rows to the settings the code
/// declares (`SettingTable`): a row for each, naming its variable and its default.
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

    /// The cells of the section's table rows, each trimmed.
    public var tableRows: [[String]] {
        lines.filter { $0.hasPrefix("| ") }.map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().map {
                $0.trimmingCharacters(in: .whitespaces)
            }
        }
    }

    /// The cells of each table row for `flag` (`` | `--flag` `` or `` | `--flag VALUE` ``).
    public func rows(flag: String) -> [[String]] {
        tableRows.filter { $0[0].hasPrefix("`\(flag)`") || $0[0].hasPrefix("`\(flag) ") }
    }

    /// The cells of each table row whose variable cell (the second) starts with
    /// `` `variable` ``: the rows of a setting without a flag.
    public func rows(variable: String) -> [[String]] {
        tableRows.filter { $0.count > 1 && $0[1].hasPrefix("`\(variable)`") }
    }

    /// The variables starting with `prefix` that begin a row's variable cell.
    public func rowVariables(prefix: String) -> Set<String> {
        Set(
            tableRows.compactMap {
                $0.count > 1 && $0[1].hasPrefix("`\(prefix)") ? $0[1].split(separator: "`").first.map(String.init) : nil
            })
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
        var problems = problems(rows, of: flag, defaultMentions: defaultMentions)
        if !rows.isEmpty, let variable, !rows.contains(where: { $0.count > 1 && $0[1].contains("`\(variable)") }) {
            problems.append("\(heading): no row for \(flag) names \(variable): \(rows)")
        }
        return problems
    }

    /// What is wrong with the rows for `variable`, a setting without a flag: none; none
    /// whose default cell holds each of `defaultMentions`.
    public func problems(variable: String, defaultMentions: [String]) -> [String] {
        problems(rows(variable: variable), of: variable, defaultMentions: defaultMentions)
    }

    /// No `rows` for `setting`, or none whose default cell (the third) holds each of
    /// `defaultMentions`.
    func problems(_ rows: [[String]], of setting: String, defaultMentions: [String]) -> [String] {
        guard !rows.isEmpty else { return ["\(heading): no row for \(setting)"] }
        return defaultMentions.filter { text in !rows.contains { $0.count > 2 && $0[2].contains(text) } }.map {
            "\(heading): the default of \(setting) does not say \($0): \(rows)"
        }
    }
}
