#!/usr/bin/env bash
# Checks that the README and docs/ cannot rot silently (scripts/test.sh runs it; the configuration reference's
# keys are checked against the decoder by ConfigurationReferenceTests):
#   - every relative link in README.md and docs/*.md resolves to a file of the repository;
#   - no link or path leaves the repository for notes outside it (../shared);
#   - no comment in Sources/ or Tests/ cites notes outside the repository (PROTOCOL.md, CONTRACT.md);
#   - every `replenish-agent SUBCOMMAND` in a fenced code block is a subcommand (its --help shows its usage);
#   - every table row of docs/benchmarks.md that holds a figure names the command that produced it;
#   - the licence files match the build (scripts/check-license.sh: every package of Package.resolved is in
#     packaging/debian/copyright).
# Usage: scripts/check-docs.sh [AGENT]  (AGENT: a built replenish-agent; default: the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
agent=${1:-$(swift build --show-bin-path)/replenish-agent}
[ -x "$agent" ] || { echo "check-docs: no $agent: swift build first" >&2; exit 1; }
failures=0
fail() {
  echo "check-docs: $*" >&2
  failures=$((failures + 1))
}
files=(README.md docs/*.md)

# Links: [text](target) and <img src="target">, outside code; http(s), mailto and in-page anchors are not files.
for file in "${files[@]}"; do
  dir=$(dirname "$file")
  while IFS= read -r target; do
    target=${target%%#*}
    [ -n "$target" ] || continue
    case "$target" in http://* | https://* | mailto:* | man:*) continue ;; esac
    [ -e "$dir/$target" ] || fail "$file: the link '$target' leads nowhere"
  done < <(awk '/^```/ { code = !code; next } !code' "$file" | grep -oE '\]\([^) ]+\)|src="[^"]+"' |
    sed -E 's/^\]\(//; s/\)$//; s/^src="//; s/"$//')
done

# Nothing points at notes outside the repository.
if grep -nE '\.\./shared|shared/(PROTOCOL|CONTRACT|MACHINE-NOTES)' "${files[@]}"; then
  fail "the lines above point outside the repository"
fi
# No source cites notes that are not in the repository: the calls are in docs/protocol.md, the promises in docs/.
if grep -rnE '(PROTOCOL|CONTRACT|MACHINE-NOTES)\.md|\.\./shared/' Sources Tests; then
  fail "the source lines above cite notes outside the repository (cite docs/protocol.md or another docs/ page)"
fi

# Subcommands named in code blocks.
subcommands=$(awk 'FNR == 1 { code = 0 } /^```/ { code = !code; next } code' "${files[@]}" |
  grep -oE '(^|[ /$(])replenish-agent +[a-z][a-z-]*' | awk '{ print $NF }' | sort -u)
[ -n "$subcommands" ] || fail "no code block names a replenish-agent subcommand (the scan finds nothing)"
for subcommand in $subcommands; do
  # (An unknown word's --help prints the top level's help and exits 0: the usage line names the subcommand.)
  usage=$("$agent" "$subcommand" --help 2>&1 | grep -m1 '^USAGE:' || true)
  [[ "$usage" == "USAGE: replenish-agent $subcommand"* ]] ||
    fail "'replenish-agent $subcommand' in a code block is not a subcommand (its --help says '${usage:-nothing}')"
done

# Benchmarks: a table row with a figure (a number that is not part of a name such as arm64) names its command; a
# table's header row (the one above its |---| line) is not a figure.
if [ -f docs/benchmarks.md ]; then
  rows=0
  while IFS= read -r row; do
    rows=$((rows + 1))
    grep -qE '`(scripts/|make )' <<<"$row" || fail "docs/benchmarks.md: a figure without its command: $row"
  done < <(awk '/^\|/ { if (held != "" && $0 !~ /^\|[ :|-]+$/) print held; held = ($0 ~ /^\|[ :|-]+$/) ? "" : $0; next }
    { if (held != "") print held; held = "" } END { if (held != "") print held }' docs/benchmarks.md |
    sed -E 's/(amd|arm)64|x86-64|aarch64|[A-Za-z_-]+[0-9]+[A-Za-z_-]*//g' | grep -E '[0-9]' || true)
  [ "$rows" -gt 0 ] || fail "docs/benchmarks.md has no table row with a figure"
else
  fail "docs/benchmarks.md is missing"
fi

# The licence files (LICENSE, packaging/debian/copyright against Package.resolved).
bash scripts/check-license.sh >&2 || fail "scripts/check-license.sh failed (above)"

[ "$failures" -eq 0 ] || { echo "check-docs: $failures problem(s)" >&2; exit 1; }
echo "ok: docs: links resolve, nothing points outside the repository (docs or sources), $(wc -w <<<"$subcommands") subcommands named in code blocks exist, every benchmark figure names its command, the licence files cover Package.resolved"
