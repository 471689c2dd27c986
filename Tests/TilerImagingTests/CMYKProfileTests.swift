import Foundation
import Testing
import TilerImaging
import TilerTestSupport

/// Which CMYK profile untagged CMYK input is read through: `TILER_CMYK_PROFILE` first,
/// then the first known location that holds a readable file, else libvips' built-in one.
@Suite struct CMYKProfileTests {
    @Test func theChoiceFollowsTheVariableThenTheKnownLocations() throws {
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        let profile = scratch.path("press.icc")
        try Data([0]).write(to: URL(fileURLWithPath: profile))
        let absent = scratch.path("absent.icc")
        let folder = scratch.url.path

        #expect(CMYKProfile(environment: [:], locations: [absent, profile]) == .file(profile))
        // Without any of them (Ghostscript's profile not installed): libvips' own.
        #expect(CMYKProfile(environment: [:], locations: [absent, folder]) == .builtin)
        #expect(CMYKProfile(environment: ["TILER_CMYK_PROFILE": ""], locations: []) == .builtin)
        #expect(CMYKProfile(environment: ["TILER_CMYK_PROFILE": "builtin"], locations: [profile]) == .builtin)
        #expect(CMYKProfile(environment: ["TILER_CMYK_PROFILE": profile], locations: []) == .file(profile))
        #expect(CMYKProfile(environment: ["TILER_CMYK_PROFILE": absent], locations: [profile]) == .unreadable(absent))
        #expect(CMYKProfile(environment: ["TILER_CMYK_PROFILE": folder], locations: [profile]) == .unreadable(folder))
        #expect(CMYKProfile.knownLocations == ["/usr/share/color/icc/ghostscript/default_cmyk.icc"])
    }
}
