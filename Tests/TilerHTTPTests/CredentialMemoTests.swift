import Testing

@testable import TilerHTTP

/// A connection's memo: a note is found for its number only, within its scope, for its
/// subject (or every subject when noted for 0) and while it holds; a kept query token is
/// known by its exact bytes, and a new one gets a new number that is never the parser's.
@Suite struct CredentialMemoTests {
    @Test func aNoteHoldsForItsNumberScopeSubjectAndTime() {
        let memo = CredentialMemo()
        #expect(!memo.recalls(oneOf: 0, 0, 0, scope: 0, subject: 0, at: 0), "nothing noted")
        memo.note(3, scope: 7, subject: 11, validFrom: 100, validUntil: 200)
        #expect(memo.recalls(oneOf: 3, 0, 0, scope: 7, subject: 11, at: 100))
        #expect(memo.recalls(oneOf: 0, 3, 0, scope: 7, subject: 11, at: 150))
        #expect(memo.recalls(oneOf: 1, 2, 3, scope: 7, subject: 11, at: 199.9))
        #expect(!memo.recalls(oneOf: 4, 0, 0, scope: 7, subject: 11, at: 150), "another number")
        #expect(!memo.recalls(oneOf: 0, 0, 0, scope: 7, subject: 11, at: 150), "no number")
        #expect(!memo.recalls(oneOf: 3, 0, 0, scope: 8, subject: 11, at: 150), "another scope")
        #expect(!memo.recalls(oneOf: 3, 0, 0, scope: 7, subject: 12, at: 150), "another subject")
        #expect(!memo.recalls(oneOf: 3, 0, 0, scope: 7, subject: 11, at: 99.9), "not yet")
        #expect(!memo.recalls(oneOf: 3, 0, 0, scope: 7, subject: 11, at: 200), "expired")
        memo.note(5, scope: 7, subject: 0, validFrom: 100, validUntil: 200)
        #expect(memo.recalls(oneOf: 5, 0, 0, scope: 7, subject: 12, at: 150), "every subject")
        #expect(!memo.recalls(oneOf: 3, 0, 0, scope: 7, subject: 11, at: 150), "the last note only")
    }

    @Test func aKeptQueryTokenIsKnownByItsExactBytes() {
        let memo = CredentialMemo()
        func number(_ text: String) -> UInt64 { Array(text.utf8).withUnsafeBytes { memo.number(ofQueryToken: $0) } }
        func keep(_ text: String) -> UInt64 { Array(text.utf8).withUnsafeBytes { memo.keep(queryToken: $0) } }
        #expect(number("abc") == 0, "nothing kept")
        let first = keep("abc.def.ghi")
        #expect(first >= 1 << 63, "never a parser's number")
        #expect(number("abc.def.ghi") == first)
        #expect(number("abc.def.ghj") == 0 && number("abc.def.gh") == 0 && number("abc.def.ghii") == 0)
        let long = String(repeating: "x", count: 5000)
        let second = keep(long)
        #expect(second != first && second >= 1 << 63)
        #expect(number(long) == second && number("abc.def.ghi") == 0)
        #expect(number(String(long.dropLast()) + "y") == 0)
        let third = keep("abc.def.ghi")
        #expect(third != first && third != second && number("abc.def.ghi") == third, "kept again: a new number")
    }
}
