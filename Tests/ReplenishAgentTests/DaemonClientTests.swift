import CCurl
import Testing

@testable import ReplenishAgent

/// The owner commands' side of the control socket: what they say when the running agent did not answer.
@Suite(.tags(.unit)) struct DaemonClientTests {
    /// What a command says when the running agent did not answer, from libcurl's code.
    @Test func anUnansweredRequestIsSaidAsItHappened() {
        let socket = "/s/control.sock"
        func said(_ code: Int) -> String {
            let curl = CurlError(operation: "POST", code: CURLcode(UInt32(code)))
            return DaemonClient.unanswered(
                AgentError(.network, "x", cause: curl), pid: 42, socket: socket, timeout: 120)
        }
        #expect(
            said(CurlError.couldNotConnect)
                == "the agent (pid 42) is running but did not take the connection on /s/control.sock (it is starting, stopping or busy); retry in a moment"
        )
        #expect(said(CurlError.gotNothing).contains("closed the connection on /s/control.sock without an answer"))
        #expect(said(CurlError.timedOut).contains("did not answer within 120 s"))
    }
}
