import Foundation
import Testing

@testable import ReplenishAgent

/// Program alexa end to end: the agent on the simulated board reports to the emulator's maker's cloud behind
/// nginx doing mutual TLS (the unit's certificate from the maker's CA; the certificate's subject passed on as a
/// load balancer's mTLS verify mode passes it), the customer's claim from `replenish-companion claim`.
@Suite(.tags(.process), .serialized) struct AlexaProgramTests {
    /// A maker's cloud on this machine: the emulator behind nginx.
    struct Cloud {
        var url: String
        var emulator: String
        var directory: String
        var unitCertificate: String { directory + "/unit.pem" }
        var unitKey: String { directory + "/unit.key" }
    }

    static func openssl(_ harness: Harness, _ arguments: [String]) throws {
        let result = try harness.run("/usr/bin/openssl", arguments)
        guard result.status == 0 else {
            throw AgentError(.server, "openssl \(arguments.prefix(2).joined(separator: " ")): \(result.error)")
        }
    }

    /// A CA (`name`-ca.pem, its key) and a unit certificate with CN `unit` that it signs (`name`.pem, `name`.key).
    static func makeUnitCertificate(_ harness: Harness, directory: String, name: String, unit: String) throws {
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try openssl(
            harness,
            ["req", "-x509"] + ec + [
                "-keyout", "\(directory)/\(name)-ca.key", "-out", "\(directory)/\(name)-ca.pem", "-subj",
                "/CN=\(name) maker CA", "-days", "2",
            ])
        try openssl(
            harness,
            ["req", "-new"] + ec + [
                "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).csr", "-subj", "/CN=\(unit)",
            ])
        try openssl(
            harness,
            [
                "x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", "\(directory)/\(name)-ca.pem", "-CAkey",
                "\(directory)/\(name)-ca.key", "-CAcreateserial", "-out", "\(directory)/\(name).pem", "-days", "2",
            ])
        chmod("\(directory)/\(name).key", 0o600)
    }

    /// nginx in the foreground, its files in `nginx`, and the opening of its `http` block (closed by the caller).
    /// A server block's TLS lines: `port` on loopback, the test's server certificate, and the client certificate
    /// required and checked against the units' CA (`unit-ca.pem` in `directory`).
    static func nginxMutualTLS(port: Int, directory: String) -> String {
        """
        listen 127.0.0.1:\(port) ssl;
            ssl_certificate \(directory)/tls/server.pem;
            ssl_certificate_key \(directory)/tls/server.key;
            ssl_client_certificate \(directory)/unit-ca.pem;
            ssl_verify_client on;
        """
    }

    static func nginxPrelude(_ nginx: String) -> String {
        """
        daemon off;
        master_process off;
        pid \(nginx)/nginx.pid;
        error_log \(nginx)/error.log notice;
        events {}
        http {
          access_log off;
          client_body_temp_path \(nginx)/body;
          proxy_temp_path \(nginx)/proxy;
          fastcgi_temp_path \(nginx)/fastcgi;
          uwsgi_temp_path \(nginx)/uwsgi;
          scgi_temp_path \(nginx)/scgi;
        """
    }

    /// The emulator, the unit registered with the label's key, nginx in front with mutual TLS.
    static func startCloud(_ harness: Harness, unit: String = "TEST0001") throws -> Cloud {
        let directory = harness.directory + "/cloud"
        try FileManager.default.createDirectory(atPath: directory + "/nginx", withIntermediateDirectories: true)
        let made = try harness.run("replenish-emulator", ["make-ca", "--dir", directory + "/tls"])
        guard made.status == 0 else { throw AgentError(.server, "make-ca: \(made.error)") }
        try makeUnitCertificate(harness, directory: directory, name: "unit", unit: unit)
        let emulator = try harness.startEmulator()
        let key = try harness.writeSetupKey()
        let keyHex = try String(contentsOfFile: key, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try harness.emulator(emulator, .post, "/admin/units", body: #"{"unit":"\#(unit)","setupKey":"\#(keyHex)"}"#)
        let port = try FreePorts.take()
        let nginx = directory + "/nginx"
        let conf = """
            \(nginxPrelude(nginx))
              server {
                \(nginxMutualTLS(port: port, directory: directory))
                error_page 495 496 = @refused;
                location @refused {
                  default_type application/json;
                  return 403 '{"message":"the client certificate was refused"}';
                }
                location / {
                  proxy_pass \(harness.plainURL(emulator));
                  proxy_set_header X-Amzn-Mtls-Clientcert-Subject $ssl_client_s_dn;
                }
              }
            }
            """
        try conf.write(toFile: nginx + "/nginx.conf", atomically: true, encoding: .utf8)
        try harness.start(
            "/usr/sbin/nginx", ["-p", nginx, "-c", nginx + "/nginx.conf", "-e", nginx + "/error.log"], log: "nginx.log")
        let url = "https://127.0.0.1:\(port)"
        let cloud = Cloud(url: url, emulator: emulator, directory: directory)
        try harness.waitUntil("nginx in front of the cloud") {
            try CurlEasy(
                options: .init(
                    caFile: directory + "/tls/ca.pem", clientCertificateFile: cloud.unitCertificate,
                    clientKeyFile: cloud.unitKey)
            ).perform(HTTPRequest(method: .get, url: url + "/v1/units/\(unit)")).status == 200
        }
        return cloud
    }

    static func writeConfig(_ harness: Harness, cloud: Cloud, certificate: String? = nil, key: String? = nil)
        throws -> String
    {
        let text = """
            {"program":"alexa","device":{"serial":"TEST0001","model":"model-1","phase":"test"},
             "alexa":{"cloudURL":"\(cloud.url)","certificateFile":"\(certificate ?? cloud.unitCertificate)",
                      "keyFile":"\(key ?? cloud.unitKey)"},
             "tls":{"caFile":"\(cloud.directory)/tls/ca.pem"},
             "stateDirectory":"\(harness.directory)/state","runtimeDirectory":"\(harness.directory)/run",
             "board":"\(packageRoot())/board/simulated.json",
             "buttons":[{"input":"button","slot":"pods","usage":{"unitsPerPress":2},"dashReplenishmentId":"drid-pods"},
                        {"input":"tank","slot":"tank","level":{"measurement":"Percentage","low":10,"full":100}}]}
            """
        let path = harness.directory + "/agent.json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// What the cloud applied for the unit: the reports, in order.
    static func applied(_ harness: Harness, _ cloud: Cloud) throws -> [[String: Any]] {
        try harness.emulator(cloud.emulator, .get, "/admin/units/TEST0001")["applied"] as? [[String: Any]] ?? []
    }

    static func supplies(_ reports: [[String: Any]]) -> [[String: Any]] {
        reports.flatMap { $0["supplies"] as? [[String: Any]] ?? [] }
    }

    static func usage(_ reports: [[String: Any]]) -> Double {
        supplies(reports).compactMap { ($0["usage"] as? [String: Any])?["value"] as? Double }.reduce(0, +)
    }

    static func alexaStatus(_ harness: Harness, config: String) throws -> [String: Any] {
        try harness.statusJSON(config: config)["alexa"] as? [String: Any] ?? [:]
    }

    @Test func aPressIsOneUsageReportAndALevelChangeOneLevelReport() throws {
        let harness = Harness()
        let cloud = try Self.startCloud(harness)
        let config = try Self.writeConfig(harness, cloud: cloud)
        try harness.startAgent(config: config)
        try harness.waitForControlSocket()
        let press = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(press.status == 0 && press.output.contains("2 used of pods"))
        try harness.waitUntil("the usage report") { Self.usage(try Self.applied(harness, cloud)) == 2 }
        let level = try harness.run("replenish-agent", ["level", "tank", "low", "--config", config])
        #expect(level.status == 0)
        try harness.waitUntil("the level report", timeout: 60) {
            Self.supplies(try Self.applied(harness, cloud)).contains {
                ($0["level"] as? [String: Any])?["@type"] as? String == "Percentage"
                    && ($0["level"] as? [String: Any])?["value"] as? Double == 10 && $0["slot"] as? String == "tank"
            }
        }
        let usage = Self.supplies(try Self.applied(harness, cloud)).first { $0["usage"] != nil }
        #expect(usage?["dashReplenishmentId"] as? String == "drid-pods")
        try harness.waitUntil("every report acknowledged") {
            let status = try Self.alexaStatus(harness, config: config)
            return status["reportInFlight"] is NSNull
                && (status["cloud"] as? String)?.contains("every report acknowledged") == true
        }
        // The claim: a wrong proof changes nothing; the label's key claims it, and the unit learns it (a long press
        // asks at once).
        let wrong = try harness.run(
            "replenish-companion",
            [
                "claim", "--setup", "RPL1:TEST0001:" + String(repeating: "0", count: 32), "--cloud",
                harness.plainURL(cloud.emulator),
                "--customer", "customer-1",
            ])
        #expect(wrong.status != 0 && wrong.error.contains("403"))
        let claim = try harness.run(
            "replenish-companion",
            [
                "claim", "--setup", try #require(harness.setupPayload), "--cloud", harness.plainURL(cloud.emulator),
                "--customer", "customer-1",
            ])
        #expect(claim.status == 0, "\(claim.error)")
        _ = try harness.run("replenish-agent", ["press", "button", "--hold", "6", "--config", config], timeout: 60)
        try harness.waitUntil("the unit to learn it is claimed") {
            try Self.alexaStatus(harness, config: config)["claimed"] as? Bool == true
        }
        #expect(!harness.agentLogs.contains(try #require(harness.setupKey?.hex)))
    }

    @Test func aLostAcknowledgementAndASIGKILLCountThePressOnce() throws {
        let harness = Harness()
        let cloud = try Self.startCloud(harness)
        let config = try Self.writeConfig(harness, cloud: cloud)
        let agent = try harness.startAgent(config: config)
        try harness.waitForControlSocket()
        try harness.waitUntil("the first daily report") { try Self.applied(harness, cloud).count == 1 }
        // The cloud applies every report but no answer reaches the unit; the agent is killed in between.
        try harness.injectFault(
            cloud.emulator, path: "/v1/units/TEST0001/reports", count: 1000, #"{"kind":"dropAfterWork"}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the press applied, its answer lost") {
            Self.usage(try Self.applied(harness, cloud)) == 2
        }
        kill(agent.processIdentifier, SIGKILL)
        try harness.waitUntil("the agent gone") { !agent.isRunning }
        _ = try harness.emulator(cloud.emulator, .delete, "/admin/faults")
        try harness.startAgent(config: config)
        try harness.waitUntil("the report acknowledged after the restart") {
            try Self.alexaStatus(harness, config: config)["reportInFlight"] is NSNull
                && (try harness.emulator(cloud.emulator, .get, "/admin/units/TEST0001")["duplicates"] as? Double ?? 0)
                    >= 1
        }
        #expect(Self.usage(try Self.applied(harness, cloud)) == 2)
        try harness.waitForControlSocket()
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the next press") { Self.usage(try Self.applied(harness, cloud)) == 4 }
    }

    @Test func aRefusedCertificateIsAClearErrorAndLosesNothing() throws {
        let harness = Harness()
        let cloud = try Self.startCloud(harness)
        // A certificate for the same unit from a CA the cloud does not trust.
        try Self.makeUnitCertificate(harness, directory: cloud.directory, name: "stranger", unit: "TEST0001")
        let config = try Self.writeConfig(
            harness, cloud: cloud, certificate: cloud.directory + "/stranger.pem",
            key: cloud.directory + "/stranger.key")
        let agent = try harness.startAgent(config: config)
        try harness.waitForControlSocket()
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the refusal in status") {
            let text = try harness.run("replenish-agent", ["status", "--config", config]).output
            return text.contains("last error") && text.contains("refused")
        }
        #expect(try Self.applied(harness, cloud).isEmpty)
        #expect(try Self.alexaStatus(harness, config: config)["reportInFlight"] as? Int != nil)
        // The maker installs the right certificate: the press arrives.
        kill(agent.processIdentifier, SIGTERM)
        try harness.waitUntil("the agent stopped") { !agent.isRunning }
        let fixed = try Self.writeConfig(harness, cloud: cloud)
        try harness.startAgent(config: fixed)
        try harness.waitUntil("the press delivered", timeout: 60) { Self.usage(try Self.applied(harness, cloud)) == 2 }
    }
}
