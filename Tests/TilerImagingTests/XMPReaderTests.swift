import Foundation
import Testing
import TilerCore
@testable import TilerImaging

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// XMP read with an XML parser: the Dublin Core fields as a photo tool writes them, and
/// hostile packets (entity bombs, external entities, oversized, deep) refused, never
/// expanded.
@Suite struct XMPReaderTests {
    static func packet(_ description: String, doctype: String = "") -> [UInt8] {
        Array(
            """
            <?xpacket begin="\u{FEFF}" id="W5M0MpCehiHzreSzNTczkc9d"?>\(doctype)
            <x:xmpmeta xmlns:x="adobe:ns:meta/">
             <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
              <rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/">
            \(description)
              </rdf:Description>
             </rdf:RDF>
            </x:xmpmeta>
            <?xpacket end="w"?>
            """.utf8)
    }

    @Test func dublinCoreFieldsAsWritten() throws {
        let xmp = try XMPReader(
            Self.packet(
                """
                <dc:title><rdf:Alt><rdf:li xml:lang="de">Brücke</rdf:li><rdf:li xml:lang="x-default">Bridge &amp; river</rdf:li></rdf:Alt></dc:title>
                <dc:description><rdf:Alt><rdf:li xml:lang="x-default">Line one
                line two</rdf:li></rdf:Alt></dc:description>
                <dc:creator><rdf:Seq><rdf:li>Ada Lovelace</rdf:li><rdf:li>Charles Babbage</rdf:li></rdf:Seq></dc:creator>
                <dc:rights><rdf:Alt><rdf:li xml:lang="en">CC BY 4.0</rdf:li></rdf:Alt></dc:rights>
                """))
        #expect(xmp.title == "Bridge & river")
        #expect(xmp.description == "Line one\nline two")
        #expect(xmp.creator == "Ada Lovelace, Charles Babbage")
        #expect(xmp.rights == "CC BY 4.0")
    }

    /// A packet with a plain text property (not the list XMP asks for) still gives it;
    /// one with only other namespaces gives nothing.
    @Test func plainPropertiesAndOtherNamespaces() throws {
        let plain = try XMPReader(Self.packet("<dc:title>Just text</dc:title>"))
        #expect(plain.title == "Just text")
        let other = try XMPReader(
            Self.packet(#"<ex:title xmlns:ex="http://example.org/">Not Dublin Core</ex:title>"#))
        #expect(other.title == nil && other.creator == nil)
    }

    /// Billion laughs: refused before the parser sees it, and in well under a second.
    @Test func billionLaughsIsRefused() {
        var entities = #"<!ENTITY lol "lol">"#
        var previous = "lol"
        for i in 1...9 {
            entities += "<!ENTITY lol\(i) \"" + String(repeating: "&\(previous);", count: 10) + "\">"
            previous = "lol\(i)"
        }
        let bomb = Self.packet("<dc:title>&\(previous);</dc:title>", doctype: "<!DOCTYPE x:xmpmeta [\(entities)]>")
        let started = Date()
        #expect(throws: XMPReader.Refusal.documentType) { try XMPReader(bomb) }
        #expect(Date().timeIntervalSince(started) < 1)
    }

    /// An external entity naming a local file: refused, and the file's content appears
    /// nowhere.
    @Test func externalEntitiesAreRefused() throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-xmp-secret-\(UUID().uuidString)")
        try "SECRET-CONTENT-\(UUID().uuidString)".write(to: secret, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: secret) }
        let packet = Self.packet(
            "<dc:title>&xxe;</dc:title>", doctype: "<!DOCTYPE x:xmpmeta [<!ENTITY xxe SYSTEM \"file://\(secret.path)\">]>")
        #expect(throws: XMPReader.Refusal.documentType) { try XMPReader(packet) }
    }

    /// The same packets given straight to the parser (as if the DOCTYPE check were
    /// gone): Foundation's `XMLParser` neither pulls in the file nor expands the bomb.
    /// This is what the reader relies on as its second line.
    @Test func theParserItselfResolvesNoEntity() throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("tiler-xmp-secret-\(UUID().uuidString)")
        let content = "SECRET-CONTENT-\(UUID().uuidString)"
        try content.write(to: secret, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: secret) }
        final class Text: NSObject, XMLParserDelegate {
            var text = ""
            func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
        }
        var entities = #"<!ENTITY lol "lol">"#
        var previous = "lol"
        for i in 1...9 {
            entities += "<!ENTITY lol\(i) \"" + String(repeating: "&\(previous);", count: 10) + "\">"
            previous = "lol\(i)"
        }
        for document in [
            "<?xml version=\"1.0\"?><!DOCTYPE t [<!ENTITY xxe SYSTEM \"file://\(secret.path)\">]><t>[&xxe;]</t>",
            "<?xml version=\"1.0\"?><!DOCTYPE t [\(entities)]><t>&\(previous);</t>",
        ] {
            let parser = XMLParser(data: Data(document.utf8))
            parser.shouldResolveExternalEntities = false
            let text = Text()
            parser.delegate = text
            _ = parser.parse()
            #expect(!text.text.contains("SECRET-CONTENT"))
            #expect(text.text.utf8.count < 1000, "\(text.text.utf8.count) bytes expanded")
        }
    }

    @Test func oversizedPacketsAreRefusedUnread() {
        let big = Self.packet(
            "<dc:title>" + String(repeating: "x", count: 10 << 20) + "</dc:title>")
        #expect(throws: XMPReader.Refusal.tooLarge(big.count)) { try XMPReader(big) }
    }

    /// Texts are kept only up to their field's bound, however long the packet's.
    @Test func longTextsAreBounded() throws {
        let long = String(repeating: "é", count: 200_000)
        let xmp = try XMPReader(Self.packet("<dc:title><rdf:Alt><rdf:li xml:lang=\"x-default\">\(long)</rdf:li></rdf:Alt></dc:title>"))
        let title = try #require(xmp.title)
        #expect(title.utf8.count == PhotoMetadata.maximumFieldBytes)
        let cleaned = try #require(PhotoMetadata.cleaned(title, maximumBytes: PhotoMetadata.maximumFieldBytes))
        #expect(cleaned.utf8.count == PhotoMetadata.maximumFieldBytes)
    }

    @Test func deepNestingAndMalformedPacketsAreRefused() {
        let deep = Self.packet(String(repeating: "<a>", count: 200) + String(repeating: "</a>", count: 200))
        #expect(throws: XMPReader.Refusal.tooDeep) { try XMPReader(deep) }
        #expect(throws: XMPReader.Refusal.self) { try XMPReader(Array("<x:xmpmeta><dc:title>".utf8)) }
    }
}
