/// The result of a check that either yields a value or has already decided the answer (a refusal).
enum Outcome<Value> {
    case success(Value)
    case failure(EmulatorResponse)
}
