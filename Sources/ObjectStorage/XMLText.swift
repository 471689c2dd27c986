/// The little XML reading S3's answers need: the content of elements by name, and entity
/// decoding. S3 answers are flat, attribute-free documents (`<ListBucketResult>` with
/// `<Contents><Key>…</Key><Size>…</Size></Contents>` blocks, `<Error><Code>…`), already
/// bounded in size by the transfer that received them.
enum XMLText {
    /// The raw content of every `<name>…</name>` in `text`, in order (`<name/>` gives
    /// an empty content). Elements of the same name nested in one another are not
    /// expected in S3 answers and are not handled.
    static func elements(_ name: String, in text: Substring) -> [Substring] {
        let open = "<\(name)"
        let close = "</\(name)>"
        var found: [Substring] = []
        var rest = text[...]
        while let start = rest.range(of: open) {
            let afterName = rest[start.upperBound...]
            guard let next = afterName.first else { break }
            guard next == ">" || next == "/" || next == " " || next == "\t" || next == "\n" || next == "\r",
                let tagEnd = afterName.firstIndex(of: ">")
            else {
                rest = afterName
                continue
            }
            if afterName[afterName.startIndex..<tagEnd].hasSuffix("/") {
                found.append(afterName[tagEnd..<tagEnd])
                rest = afterName[afterName.index(after: tagEnd)...]
                continue
            }
            let contentStart = afterName.index(after: tagEnd)
            guard let end = afterName[contentStart...].range(of: close) else { break }
            found.append(afterName[contentStart..<end.lowerBound])
            rest = afterName[end.upperBound...]
        }
        return found
    }

    /// The decoded text of the first `<name>` element, or nil.
    static func value(_ name: String, in text: Substring) -> String? {
        elements(name, in: text).first.map(decode)
    }

    /// Replaces the five named entities and numeric character references; CDATA is not
    /// used by S3.
    static func decode(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var out = ""
        var rest = text[...]
        while let amp = rest.firstIndex(of: "&") {
            out += rest[rest.startIndex..<amp]
            let tail = rest[amp...]
            guard let semicolon = tail.prefix(12).firstIndex(of: ";") else {
                out += "&"
                rest = rest[rest.index(after: amp)...]
                continue
            }
            let entity = tail[tail.index(after: amp)..<semicolon]
            var replacement: String?
            switch entity {
            case "amp": replacement = "&"
            case "lt": replacement = "<"
            case "gt": replacement = ">"
            case "quot": replacement = "\""
            case "apos": replacement = "'"
            default:
                if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                    replacement = UInt32(entity.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init).map { String($0) }
                } else if entity.hasPrefix("#") {
                    replacement = UInt32(entity.dropFirst()).flatMap(Unicode.Scalar.init).map { String($0) }
                }
            }
            if let replacement {
                out += replacement
                rest = rest[rest.index(after: semicolon)...]
            } else {
                out += "&"
                rest = rest[rest.index(after: amp)...]
            }
        }
        out += rest
        return out
    }

    /// Escapes text for an element's content.
    static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(c)
            }
        }
        return out
    }
}
