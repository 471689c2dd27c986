import Foundation
import TilerCore

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The Dublin Core fields tiler keeps from an XMP packet (`xmp-data`): `dc:title`,
/// `dc:description`, `dc:creator` and `dc:rights`, read with an XML parser (Foundation's
/// `XMLParser`, libxml2 underneath), never by matching text.
///
/// A packet is refused whole, before any parsing, when it is larger than
/// `PhotoMetadata.maximumBlockBytes` or declares a document type (`<!DOCTYPE`): XMP
/// has no use for a DTD, and a DTD is where entity bombs ("billion laughs") and external
/// entities (a local file's content pulled into a title) live. The parser is also told
/// not to resolve external entities, and the reading stops past
/// ``maximumDepth`` nested elements or ``maximumItems`` list items; a packet the parser
/// finds malformed, or that ends inside an element, is refused whole. Texts are collected only up to their field's bound.
struct XMPReader {
    /// Why a packet was not read.
    enum Refusal: Error, Equatable, CustomStringConvertible {
        case tooLarge(Int)
        case documentType
        case malformed(String)
        case tooDeep
        case tooManyItems

        var description: String {
            switch self {
            case let .tooLarge(bytes):
                "its XMP packet is \(bytes) bytes, more than the \(PhotoMetadata.maximumBlockBytes) read; ignored"
            case .documentType: "its XMP packet declares a document type (entities); ignored"
            case let .malformed(why): "its XMP packet is not well-formed XML (\(why)); ignored"
            case .tooDeep: "its XMP packet nests elements deeper than \(XMPReader.maximumDepth); ignored"
            case .tooManyItems: "its XMP packet has more than \(XMPReader.maximumItems) list items; ignored"
            }
        }
    }

    /// The deepest element nesting read (real packets nest about 6 deep).
    static let maximumDepth = 64
    /// The most `rdf:li` items read in the whole packet.
    static let maximumItems = 4096

    /// `dc:title`, the `x-default` alternative else the first.
    private(set) var title: String?
    private(set) var description: String?
    /// `dc:creator`'s items, joined by ", ".
    private(set) var creator: String?
    private(set) var rights: String?

    init(_ packet: [UInt8]) throws(Refusal) {
        guard packet.count <= PhotoMetadata.maximumBlockBytes else { throw .tooLarge(packet.count) }
        if Self.contains(Array("<!DOCTYPE".utf8), in: packet) { throw .documentType }
        let parser = XMLParser(data: Data(packet))
        parser.shouldProcessNamespaces = true
        parser.shouldReportNamespacePrefixes = false
        parser.shouldResolveExternalEntities = false
        let collector = Collector()
        parser.delegate = collector
        let parsed = parser.parse()
        if let refusal = collector.refusal { throw refusal }
        guard parsed else {
            throw .malformed(parser.parserError.map { "libxml2 error \(($0 as NSError).code)" } ?? "unknown")
        }
        // libxml2, fed the whole packet at once, does not report one cut short.
        guard collector.elements > 0, collector.depth == 0 else { throw .malformed("it ends inside an element") }
        func chosen(_ name: String) -> String? {
            guard let items = collector.items[name], !items.isEmpty else { return nil }
            return (items.first { $0.language == "x-default" } ?? items[0]).text
        }
        title = chosen("title")
        description = chosen("description")
        rights = chosen("rights")
        if let creators = collector.items["creator"], !creators.isEmpty {
            creator = creators.map(\.text).joined(separator: ", ")
        }
    }

    private static func contains(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        var i = 0
        while i + needle.count <= haystack.count {
            if haystack[i] == needle[0], haystack[i..<i + needle.count].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }

    /// One item of a Dublin Core property: its text and `xml:lang`.
    struct Item {
        var text: String
        var language: String?
    }

    /// The parser's delegate: follows the element stack and collects the text of each
    /// `rdf:li` (or the property's own text) under the four `dc:` properties.
    private final class Collector: NSObject, XMLParserDelegate {
        static let dublinCore = "http://purl.org/dc/elements/1.1/"
        static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
        static let properties: Set<String> = ["title", "description", "creator", "rights"]

        var items: [String: [Item]] = [:]
        var refusal: Refusal?
        /// Elements open now, and seen in all.
        private(set) var depth = 0
        private(set) var elements = 0
        private var itemCount = 0
        /// The `dc:` property being read and the depth of its element.
        private var property: (name: String, depth: Int)?
        /// The text being collected (an `rdf:li`, or the property itself) and its bound.
        private var current: Item?
        private var currentLimit = 0
        private var currentBytes = 0

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            elements += 1
            guard depth <= XMPReader.maximumDepth else { return stop(parser, .tooDeep) }
            if property == nil, namespaceURI == Self.dublinCore, Self.properties.contains(name) {
                property = (name, depth)
                begin(language: attributes["xml:lang"])
            } else if let property, namespaceURI == Self.rdf, name == "li" {
                itemCount += 1
                guard itemCount <= XMPReader.maximumItems else { return stop(parser, .tooManyItems) }
                // An item replaces the property's own (white-space) text.
                if current?.text.allSatisfy(\.isWhitespace) == true, depth > property.depth { current = nil }
                begin(language: attributes["xml:lang"])
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard current != nil, currentBytes < currentLimit else { return }
            // Up to the bound, cut at a character boundary (libxml2 may hand over a long
            // text in one piece).
            var end = string.endIndex
            if currentBytes + string.utf8.count > currentLimit {
                end = string.startIndex
                for c in string {
                    guard currentBytes + c.utf8.count <= currentLimit else { break }
                    currentBytes += c.utf8.count
                    end = string.index(after: end)
                }
                currentBytes = currentLimit
            } else {
                currentBytes += string.utf8.count
            }
            current?.text += string[..<end]
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            defer { depth -= 1 }
            guard let property else { return }
            if namespaceURI == Self.rdf, name == "li" {
                finish(property.name)
            } else if depth == property.depth {
                finish(property.name)
                self.property = nil
            }
        }

        private func begin(language: String?) {
            current = Item(text: "", language: language)
            currentBytes = 0
            currentLimit =
                property?.name == "description" ? PhotoMetadata.maximumDescriptionBytes : PhotoMetadata.maximumFieldBytes
        }

        private func finish(_ name: String) {
            guard let item = current else { return }
            current = nil
            if !item.text.allSatisfy(\.isWhitespace) { items[name, default: []].append(item) }
        }

        private func stop(_ parser: XMLParser, _ why: Refusal) {
            refusal = why
            parser.abortParsing()
        }
    }
}
