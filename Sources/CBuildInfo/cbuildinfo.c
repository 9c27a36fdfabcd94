#include "cbuildinfo.h"

// commit.h is generated (scripts/build-info.sh) and git-ignored; a clean clone builds with the defaults below.
// build-info.sh touches this file whenever it changes commit.h, so an incremental build recompiles it even
// when commit.h is new (a header that did not exist at the last build is in no dependency file).
#if __has_include("commit.h")
#include "commit.h"
#endif

#ifndef CBUILDINFO_COMMIT
#define CBUILDINFO_COMMIT "unknown"
#endif
#ifndef CBUILDINFO_PACKAGE_VERSION
#define CBUILDINFO_PACKAGE_VERSION "unknown"
#endif

const char *cbuildinfo_commit(void) { return CBUILDINFO_COMMIT; }
const char *cbuildinfo_package_version(void) { return CBUILDINFO_PACKAGE_VERSION; }
