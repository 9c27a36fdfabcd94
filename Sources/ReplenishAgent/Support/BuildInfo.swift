import CBuildInfo

/// Which build this is, for `replenish-agent --version`.
enum BuildInfo {
    /// The release version. The `VERSION` file is the source of truth (scripts/deb.sh builds the package's version
    /// from it); this copy must equal it, which `BuildInfoTests` checks.
    static let version = "0.1.0"

    /// The git commit the binary was built from, or `unknown` (scripts/build-info.sh was not run before the build).
    static var commit: String { String(cString: cbuildinfo_commit()) }

    /// The Debian package version of this build (`0.1.0+412.g1a2b3c4d`), or `unknown`.
    static var packageVersion: String { String(cString: cbuildinfo_package_version()) }

    /// `0.1.0 (package 0.1.0+412.g1a2b3c4d, commit 1a2b3c4d5e6f)`, or `0.1.0 (commit unknown)`.
    static var description: String {
        let package = packageVersion == "unknown" ? "" : "package \(packageVersion), "
        return "\(version) (\(package)commit \(commit))"
    }
}
