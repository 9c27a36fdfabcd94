/// What an input's state machine recognised: a short or long press of a button, or a level sensor finding
/// the supply low.
struct ButtonPress: Sendable, Equatable {
    /// `refilled`: a level sensor that went low is full again (stayed inactive long enough).
    enum Kind: String, Sendable { case short, long, low, refilled }
    var input: String
    var kind: Kind
}
