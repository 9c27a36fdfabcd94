import Testing

@testable import ReplenishAgent

/// `occurrences(of:)` and `containsText(_:)` stand in for `_StringProcessing`'s `ranges(of:)` and `contains(_:)`
/// (issue #21): the same answers on what the agent searches, byte for byte.
@Suite(.tags(.unit)) struct TextSearchTests {
    @Test func findsEveryOccurrenceLeftToRightWithoutOverlaps() {
        let text = "a.tmp-1.tmp-22"
        let found = text.occurrences(of: ".tmp-").map { text[$0.lowerBound...].prefix(7) }
        #expect(found == [".tmp-1.", ".tmp-22"])
        #expect("aaaa".occurrences(of: "aa").count == 2)
        #expect("fe80::1::".occurrences(of: "::").count == 2)
    }

    @Test func emptyOrLongerNeedlesAndMissesFindNothing() {
        #expect("abc".occurrences(of: "").isEmpty)
        #expect("ab".occurrences(of: "abc").isEmpty)
        #expect("".occurrences(of: "a").isEmpty)
        #expect(!"not subscribe".containsText("not subscribed"))
    }

    @Test func matchesBytesAtTheEdgesAndInsideMultibyteText() {
        #expect("token".containsText("token"))
        #expect("invalid token".containsText("token"))
        #expect("token expired".containsText("expired"))
        #expect("café ::1".occurrences(of: "::").count == 1)
        let text = "ünïcode.corrupt-1"
        let range = text.occurrences(of: ".corrupt-").first
        #expect(range.map { String(text[..<$0.lowerBound]) } == "ünïcode")
        #expect(text.containsText(Substring(".corrupt-")))
    }

    @Test func theStateDirectoryNamesItReadsAreTheSameAsBefore() {
        #expect(StateDirectory.isTempFile("tokens.json.tmp-123"))
        #expect(StateDirectory.isTempFile("a.tmp-1.tmp-22"))
        #expect(!StateDirectory.isTempFile(".tmp-123"))
        #expect(!StateDirectory.isTempFile("tokens.json.tmp-"))
        #expect(!StateDirectory.isTempFile("tokens.json.tmp-12a"))
        #expect(StateDirectory.isMovedAside("outbox.json.corrupt-20261125T100000Z"))
        #expect(!StateDirectory.isMovedAside("outbox.json"))
    }
}
