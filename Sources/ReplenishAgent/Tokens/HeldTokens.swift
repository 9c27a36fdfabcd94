/// The pairing as the token manager holds it: its tokens, or none and why the last pairing was lost (nil: there
/// was none in this run, or it is not known).
enum HeldTokens: Sendable {
    case paired(TokenSet)
    case unpaired(lostReason: String?)

    var tokens: TokenSet? {
        if case .paired(let tokens) = self { tokens } else { nil }
    }

    var lostReason: String? {
        if case .unpaired(let reason) = self { reason } else { nil }
    }
}
