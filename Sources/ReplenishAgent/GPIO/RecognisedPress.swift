/// A press the input pipeline recognised, and the request whose edge started it (`InputEdge.request`; nil:
/// hardware, or no request): what the pipeline hands to its handler.
struct RecognisedPress: Sendable, Equatable {
    var press: ButtonPress
    var request: Int?
}
