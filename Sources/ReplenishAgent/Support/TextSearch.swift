/// Finding one piece of text in another, byte for byte (UTF-8). The standard library's `contains(_:)`,
/// `firstRange(of:)` and `ranges(of:)` for text live in `_StringProcessing`, the regex engine's module, which
/// the compiler emits as a single section: one call on a hot path put its 0.9 MB (with `_RegexParser`) in the
/// binary and in the working set (docs/benchmarks.md, issue #21). The agent only ever looks for short ASCII
/// markers, where byte equality is the right comparison.
extension StringProtocol {
    /// Where `needle` occurs, left to right, without overlaps; none for an empty needle.
    func occurrences(of needle: some StringProtocol) -> [Range<Index>] {
        let pattern = Array(needle.utf8)
        guard !pattern.isEmpty else { return [] }
        let bytes = utf8
        var found: [Range<Index>] = []
        var start = bytes.startIndex
        while let end = bytes.index(start, offsetBy: pattern.count, limitedBy: bytes.endIndex) {
            if bytes[start..<end].elementsEqual(pattern) {
                found.append(start..<end)
                start = end
            } else {
                start = bytes.index(after: start)
            }
        }
        return found
    }

    /// Whether `needle` occurs at all.
    func containsText(_ needle: some StringProtocol) -> Bool { !occurrences(of: needle).isEmpty }
}
