import Foundation
import Testing
@testable import TilerCore

/// The metadata model: texts cleaned and bounded when made, and checked against the same
/// bounds when a stored manifest is read.
@Suite struct PhotoMetadataTests {
    @Test func cleanedTextsAreTrimmedFreeOfControlsAndBounded() {
        #expect(PhotoMetadata.cleaned("  Bridge\tat\u{0}dusk \n", maximumBytes: 100) == "Bridge at dusk")
        #expect(PhotoMetadata.cleaned("one\ntwo", maximumBytes: 100) == "one two")
        #expect(PhotoMetadata.cleaned("one\r\ntwo", maximumBytes: 100, multiline: true) == "one\ntwo")
        #expect(PhotoMetadata.cleaned(" \u{7} ", maximumBytes: 100) == nil)
        // Cut at a character boundary: "é" is two bytes, so five fit in 11.
        #expect(PhotoMetadata.cleaned(String(repeating: "é", count: 100), maximumBytes: 11) == "ééééé")
    }

    @Test func storedMetadataIsCheckedAgainstTheBounds() throws {
        try PhotoMetadata(title: "ok", location: .init(lat: -48.8584, lon: 180)).validate()
        let tooLong = PhotoMetadata(title: String(repeating: "x", count: PhotoMetadata.maximumFieldBytes + 1))
        #expect(throws: ManifestError.self) { try tooLong.validate() }
        let longDescription = PhotoMetadata(description: String(repeating: "x", count: PhotoMetadata.maximumDescriptionBytes))
        try longDescription.validate()
        #expect(throws: ManifestError.self) { try PhotoMetadata(album: "").validate() }
        #expect(throws: ManifestError.self) { try PhotoMetadata(location: .init(lat: 91, lon: 0)).validate() }
        #expect(throws: ManifestError.self) { try PhotoMetadata(location: .init(lat: .nan, lon: 0)).validate() }
    }

    @Test func absentFieldsAreLeftOutOfTheJSON() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(PhotoMetadata(title: "T", dateTaken: "2024-05-01T14:03:22")), as: UTF8.self)
        #expect(json == #"{"dateTaken":"2024-05-01T14:03:22","title":"T"}"#)
        #expect(PhotoMetadata().isEmpty && !PhotoMetadata(album: "a").isEmpty)
    }
}
