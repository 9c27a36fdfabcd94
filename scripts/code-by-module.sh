#!/usr/bin/env bash
# Where the device binary's code comes from: the size of its functions (`nm -S`, the unstripped binary), summed by
# the Swift module their mangled name starts with; C and C++ (the Swift runtime, libdispatch, the C shims)
# apart. A name that starts with a standard type (`$sSa…`, `$sSD…`) and no module is the standard library's only
# when the toolchain's libswiftCore.a defines it; otherwise it is a specialization or thunk that the agent's or a
# package's module compiled for its own types, counted apart. README "Benchmarks" (issue #21) quotes it for what a smaller binary would have to drop.
#
# Usage: scripts/code-by-module.sh [BINARY]   (default: the release build bench.sh and make deb use,
# .build-deb/release/replenish-agent)
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build-deb/release/replenish-agent}
[ -f "$binary" ] || { echo "no $binary: build it first (make deb, or scripts/bench.sh)" >&2; exit 1; }
stdlib=$(dirname "$(readlink -f "$(command -v swiftc)")")/../lib/swift_static/linux/libswiftCore.a
[ -f "$stdlib" ] || { echo "no $stdlib: the toolchain's static standard library" >&2; exit 1; }
stdlib_names=$(mktemp)
trap 'rm -f "$stdlib_names"' EXIT
nm --defined-only "$stdlib" 2>/dev/null | awk 'NF == 3 {print $3}' >"$stdlib_names"
nm -S -t d --defined-only "$binary" | python3 -c '
import collections, re, sys
stdlib = set(open(sys.argv[2]).read().split())
sizes = collections.Counter()
for line in sys.stdin:
    fields = line.split()
    if len(fields) != 4 or fields[2] not in "tTwW":
        continue
    size, name = int(fields[1]), fields[3]
    match = re.match(r"^\$s(\d+)([A-Za-z_]\w*)", name)
    if match and len(match.group(2)) >= int(match.group(1)):
        module = match.group(2)[: int(match.group(1))]
    elif name.startswith("$s"):
        module = "Swift (standard library)" if name in stdlib else "specializations of standard types, in the modules that use them"
    elif name.startswith("_Z"):
        module = "C++ (Swift runtime)"
    else:
        module = "C"
    sizes[module] += size
total = sum(sizes.values())
print(f"{total / 1e6:6.2f} MB of functions in {sys.argv[1]}")
for module, size in sizes.most_common(15):
    print(f"{size / 1e6:6.2f} MB  {module}")
' "$binary" "$stdlib_names"
