/// An answer a check has already decided (an invalid token, a missing version header, a body that is not a JSON
/// object), thrown out of a handler's checks; the router sends it in the handler's place.
struct Refusal: Error {
    var answer: EmulatorResponse

    init(_ answer: EmulatorResponse) { self.answer = answer }
}
