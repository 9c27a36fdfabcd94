#ifndef CBUILDINFO_H
#define CBUILDINFO_H
// Which build this binary is, for `replenish-agent --version`: the git commit it was built from and the Debian
// package version that build gets. scripts/build-info.sh writes them into Sources/CBuildInfo/commit.h (not
// committed; scripts/deb.sh and scripts/arm64.sh run it before building); without that file (a clean clone, a
// plain `swift build`) both are "unknown". A C target because a header that may or may not exist is what
// `__has_include` decides at compile time, with no build plugin and nothing for Swift to read at run time.

/// The commit (12 hex digits, "-dirty" when the tree had changes), or "unknown".
const char *cbuildinfo_commit(void);
/// The package version (`VERSION` + `+<commits>.g<hash>`, as scripts/deb.sh names the .deb), or "unknown".
const char *cbuildinfo_package_version(void);

#endif
