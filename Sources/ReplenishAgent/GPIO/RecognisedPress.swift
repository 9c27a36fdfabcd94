/// A press an input's line settled (`InputLine`), and the request whose edge started it (`InputEdge.request`; nil:
/// hardware, or no request): the pipeline hands the press to its handler, and the outcome to that request's waiter.
struct RecognisedPress: Sendable, Equatable {
    var press: ButtonPress
    var request: Int?
}
