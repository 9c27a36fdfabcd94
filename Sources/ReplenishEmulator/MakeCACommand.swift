import ArgumentParser
import Foundation

/// `replenish-emulator make-ca`: a throwaway CA and a server certificate for `localhost` and `127.0.0.1`,
/// made with the `openssl` command line tool.
struct MakeCACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "make-ca", abstract: "Write DIR/ca.pem, DIR/server.pem and DIR/server.key (if missing).")

    @Option(help: "Directory for ca.pem, server.pem and server.key.")
    var dir: String

    static let openSSLConfig = """
        [req]
        distinguished_name = dn
        prompt = no
        [dn]
        CN = replenish-emulator
        [v3_ca]
        basicConstraints = critical,CA:TRUE
        keyUsage = critical,keyCertSign,cRLSign
        subjectKeyIdentifier = hash
        [v3_server]
        basicConstraints = critical,CA:FALSE
        keyUsage = critical,digitalSignature,keyEncipherment
        extendedKeyUsage = serverAuth
        subjectAltName = DNS:localhost,IP:127.0.0.1
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid

        """

    func run() throws {
        let fm = FileManager.default
        let outputs = ["ca.pem", "server.pem", "server.key"]
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        if outputs.allSatisfy({ fm.fileExists(atPath: "\(dir)/\($0)") }) {
            print("make-ca: \(dir) already has ca.pem, server.pem and server.key")
            return
        }
        // Everything is made in a private work folder and moved into place only when all of it worked.
        let work = "\(dir)/.make-ca-\(getpid())"
        try? fm.removeItem(atPath: work)
        try fm.createDirectory(atPath: work, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? fm.removeItem(atPath: work) }
        let cnf = "\(work)/openssl.cnf"
        try Data(Self.openSSLConfig.utf8).write(to: URL(fileURLWithPath: cnf))
        let ecKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try OpenSSLTool.run(
            ["req", "-config", cnf, "-x509"] + ecKey + [
                "-keyout", "\(work)/ca.key", "-out", "\(work)/ca.pem", "-days", "3650", "-sha256",
                "-extensions", "v3_ca", "-subj", "/CN=replenish-emulator throwaway CA",
            ])
        try OpenSSLTool.run(
            ["req", "-config", cnf, "-new"] + ecKey + [
                "-keyout", "\(work)/server.key", "-out", "\(work)/server.csr", "-subj", "/CN=localhost",
            ])
        let serial = "0x" + (0..<16).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
        try OpenSSLTool.run([
            "x509", "-req", "-in", "\(work)/server.csr", "-CA", "\(work)/ca.pem", "-CAkey", "\(work)/ca.key",
            "-set_serial", serial, "-days", "825", "-sha256", "-extfile", cnf, "-extensions", "v3_server",
            "-out", "\(work)/server.pem",
        ])
        try fm.setAttributes([.posixPermissions: 0o600], ofItemAtPath: "\(work)/server.key")
        for name in outputs {
            let target = "\(dir)/\(name)"
            guard rename("\(work)/\(name)", target) == 0 else {
                throw ValidationError("cannot move \(name) into \(dir): \(String(cString: strerror(errno)))")
            }
        }
        print("make-ca: wrote \(dir)/ca.pem, \(dir)/server.pem, \(dir)/server.key")
    }
}
