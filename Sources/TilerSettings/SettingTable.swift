/// A command's settings declared as one table: each case is a flag (`--NAME`, its raw
/// value), the variable that can set it instead, what it means, how its text is read
/// (its range), and its default. The help text is made from the table (`help`), the
/// values are read from flags and the environment by one mechanism
/// (`read(flags:environment:into:)`), and the README's rows are tested against it.
/// `tiler serve`'s table is `ServerConfiguration.Setting`; `cut`, `rm` and
/// `healthcheck` declare theirs beside their commands. What a library reads from the
/// environment alone is a table without flags (`takesFlags`), beside what it sets:
/// `S3Configuration.Setting` (`TILER_S3_*`), `PNGSettings.Setting` (`TILER_PNG_*`),
/// `CMYKProfile.Setting` (`TILER_CMYK_PROFILE`).
public protocol SettingTable: CaseIterable, Hashable, Sendable, RawRepresentable where RawValue == String {
    /// Where the command keeps the values it reads.
    associatedtype Values

    /// The variable that sets this setting when its flag is not given, or nil for a
    /// flag alone.
    var variable: String? { get }

    /// What this setting means, how its text is read and where it goes.
    var declaration: SettingDeclaration<Values> { get }

    /// The values when nothing is set: the defaults the help text gives.
    static var defaults: Values { get }

    /// Whether each case is also a flag, `--NAME`; false for a table of variables alone,
    /// whose raw values only name the cases (and whose `flags` are never read). True
    /// unless the table says otherwise.
    static var takesFlags: Bool { get }
}

/// One row of a settings table, apart from its flag and variable: what the setting means,
/// how its text is read and checked, and its default where `SettingTable.defaults` does
/// not say it.
public struct SettingDeclaration<Values> {
    /// What the setting does, for the help text (which adds the variable and the default).
    public var summary: String
    public var value: SettingValue<Values>
    /// The value's name in the usage line (`--tile-size <PIXELS>`), where the kind of value
    /// does not say it.
    public var valueName: String?
    /// The default in words, where the default values do not say it ("one per core").
    public var defaultText: String?
    /// The values accepted, in words, where the kind of value does not say them
    /// (`1–100`, `none, sub, up`).
    public var rangeText: String?

    public init(
        summary: String, value: SettingValue<Values>, valueName: String? = nil, defaultText: String? = nil,
        rangeText: String? = nil
    ) {
        self.summary = summary
        self.value = value
        self.valueName = valueName
        self.defaultText = defaultText
        self.rangeText = rangeText
    }
}

/// How a setting's text is read and where its value goes.
public enum SettingValue<Values> {
    /// An integer in the range.
    case integer(WritableKeyPath<Values, Int>, ClosedRange<Int>)
    /// Given in MiB, kept in bytes.
    case mebibytes(WritableKeyPath<Values, Int>, ClosedRange<Int>)
    /// Seconds, a decimal number in the range (NaN and infinities are outside every range).
    case seconds(WritableKeyPath<Values, Double>, ClosedRange<Double>)
    /// An on/off flag (`--keep`), not one that takes a value; its variable is on for `1`,
    /// `true`, `yes` or `on` and off for `0`, `false`, `no` or `off`.
    case toggle(WritableKeyPath<Values, Bool>)
    /// Anything else: whether an empty variable is a value (an empty header: none) rather
    /// than unset, and how the text is checked and applied.
    case other(emptyIsValue: Bool, (inout Values, String, _ source: String) throws(SettingError) -> Void)
}

/// A setting's value that cannot be used: which flag or variable, and why.
public struct SettingError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension SettingTable {
    public static var takesFlags: Bool { true }

    /// `--NAME`.
    public var flag: String { "--" + rawValue }

    /// Whether this is an on/off flag rather than one that takes a value.
    public var isSwitch: Bool {
        if case .toggle = declaration.value { return true }
        return false
    }

    /// What the flag's value is, for the usage line (`--idle-timeout <seconds>`).
    public var valueName: String {
        let declaration = declaration
        if let name = declaration.valueName { return name }
        switch declaration.value {
        case .seconds: return "seconds"
        case .mebibytes: return "MiB"
        case .integer, .toggle, .other: return "n"
        }
    }

    /// The default, in words where the number alone would mislead ("one per core").
    public var defaultDescription: String {
        let declaration = declaration
        if let text = declaration.defaultText { return text }
        let d = Self.defaults
        switch declaration.value {
        case let .integer(keyPath, _): return "\(d[keyPath: keyPath])"
        case let .mebibytes(keyPath, _): return "\(d[keyPath: keyPath] >> 20)"
        case let .seconds(keyPath, _): return SettingText.decimal(d[keyPath: keyPath])
        case let .toggle(keyPath): return d[keyPath: keyPath] ? "on" : "off"
        case .other: return "none"
        }
    }

    /// The values accepted, as the README gives them: `16–8192` for an integer (MiB for
    /// MiB) or seconds in a range, the declaration's words where it has them, nil for an
    /// integer with no upper bound and for anything else.
    public var rangeDescription: String? {
        let declaration = declaration
        if let text = declaration.rangeText { return text }
        switch declaration.value {
        case let .integer(_, range) where range.upperBound != .max, let .mebibytes(_, range) where range.upperBound != .max:
            return "\(range.lowerBound)–\(range.upperBound)"
        case let .seconds(_, range): return "\(SettingText.decimal(range.lowerBound))–\(SettingText.decimal(range.upperBound))"
        case .integer, .mebibytes, .toggle, .other: return nil
        }
    }

    /// The help text: what it does, its variable and its default.
    public var help: String {
        let env = variable.map { isSwitch ? "env \($0)=1; " : "env \($0); " } ?? ""
        return "\(declaration.summary) (\(env)default: \(defaultDescription))."
    }

    /// Whether an empty variable is a value rather than unset.
    var emptyIsValue: Bool {
        if case let .other(emptyIsValue, _) = declaration.value { return emptyIsValue }
        return false
    }

    /// This setting's text and where it came from: its flag in `flags` (as typed, a
    /// switch as `1` or `0`; never for a table without flags), else its variable in
    /// `environment` (an empty one is unset, except where empty means none), else nil.
    public func given(flags: [Self: String], environment: [String: String]) -> (text: String, source: String)? {
        if Self.takesFlags, let text = flags[self] { return (text, flag) }
        if let variable, let text = environment[variable], !text.isEmpty || emptyIsValue { return (text, variable) }
        return nil
    }

    /// `text` (from `source`, a flag or a variable) checked and applied to `values`.
    public func apply(_ text: String, from source: String, to values: inout Values) throws(SettingError) {
        switch declaration.value {
        case let .integer(keyPath, range):
            values[keyPath: keyPath] = try SettingText.integer(text, from: source, in: range)
        case let .mebibytes(keyPath, range):
            values[keyPath: keyPath] = try SettingText.integer(text, from: source, in: range) << 20
        case let .seconds(keyPath, range):
            values[keyPath: keyPath] = try SettingText.seconds(text, from: source, in: range)
        case let .toggle(keyPath):
            values[keyPath: keyPath] = try SettingText.isOn(text, from: source)
        case let .other(_, apply):
            try apply(&values, text, source)
        }
    }

    /// Every setting of the table, in its order, from `flags` else `environment`
    /// (`given(flags:environment:)`) applied to `values`; the first value that cannot be
    /// used throws, naming its flag or variable. Returns where each setting given came from.
    @discardableResult
    public static func read(
        flags: [Self: String], environment: [String: String], into values: inout Values
    ) throws(SettingError) -> [Self: String] {
        var sources: [Self: String] = [:]
        for setting in allCases {
            guard let (text, source) = setting.given(flags: flags, environment: environment) else { continue }
            try setting.apply(text, from: source, to: &values)
            sources[setting] = source
        }
        return sources
    }
}

/// How every settings table reads text, and the messages it refuses text with: each
/// names the flag or variable the text came from.
public enum SettingText {
    /// An integer in `range`.
    public static func integer(_ text: String, from source: String, in range: ClosedRange<Int>) throws(SettingError) -> Int {
        guard let value = Int(text) else { throw SettingError("\(source)='\(text)' is not an integer") }
        guard range.contains(value) else {
            let bounds = range.upperBound == .max ? "at least \(range.lowerBound)" : "\(range.lowerBound)...\(range.upperBound)"
            throw SettingError("\(source) must be \(bounds), not \(value)")
        }
        return value
    }

    /// A number of seconds in `range`; NaN and infinities are outside every range.
    public static func seconds(_ text: String, from source: String, in range: ClosedRange<Double>) throws(SettingError) -> Double {
        guard let value = Double(text) else { throw SettingError("\(source)='\(text)' is not a number") }
        guard range.contains(value) else {
            throw SettingError(
                "\(source) must be a number of seconds from \(decimal(range.lowerBound)) to \(decimal(range.upperBound)), not \(text)")
        }
        return value
    }

    /// On for `1`, `true`, `yes` or `on`, off for `0`, `false`, `no` or `off`, in any case.
    public static func isOn(_ text: String, from source: String) throws(SettingError) -> Bool {
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw SettingError("\(source)='\(text)' is neither on (1, true, yes, on) nor off (0, false, no, off)")
        }
    }

    /// `10` for 10.0, `0.001` for 0.001.
    public static func decimal(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value))" : "\(value)"
    }
}
