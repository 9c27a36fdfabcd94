import Foundation
import Testing

@testable import ReplenishAgent

/// `--version`: the version constant agrees with the `VERSION` file the package's version is made from.
@Suite(.tags(.unit)) struct BuildInfoTests {
    @Test func theVersionConstantIsTheVersionFileThePackageIsNamedFrom() throws {
        let file = try String(contentsOfFile: packageRoot() + "/VERSION", encoding: .utf8)
        #expect(BuildInfo.version == file.trimmingCharacters(in: .whitespacesAndNewlines))
        // scripts/build-info.sh (which scripts/deb.sh asks for the package's version) reads that same file.
        let script = try String(contentsOfFile: packageRoot() + "/scripts/build-info.sh", encoding: .utf8)
        #expect(script.contains("base=$(tr -d ' \\n' <VERSION)"))
        let deb = try String(contentsOfFile: packageRoot() + "/scripts/deb.sh", encoding: .utf8)
        #expect(deb.contains("DEB_VERSION=$(bash scripts/build-info.sh package-version)"))
    }

    @Test func theVersionLineNamesTheVersionAndTheCommit() {
        let line = BuildInfo.description
        #expect(line.hasPrefix(BuildInfo.version + " ("))
        #expect(line.contains("commit \(BuildInfo.commit))"))
        #expect(!BuildInfo.commit.isEmpty)
    }
}
