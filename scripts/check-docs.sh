#!/usr/bin/env bash
# Checks that the README and docs/ cannot rot silently (scripts/test.sh runs it; the configuration reference's
# keys are checked against the decoder by ConfigurationReferenceTests):
#   - every relative link in README.md and docs/*.md resolves to a file of the repository;
#   - no link or path leaves the repository for notes outside it (../shared);
#   - every link leaving the repository goes to an allowed site (allowed_sites);
#   - no commit hash (history is CHANGELOG.md's; example values are listed in allowed_hex);
#   - a measured quantity named in `quantities` is quoted with the same figure on every page;
#   - no comment in Sources/ or Tests/ cites notes outside the repository (PROTOCOL.md, CONTRACT.md);
#   - every `replenish-agent SUBCOMMAND` in a fenced code block is a subcommand (its --help shows its usage);
#   - every table row of docs/benchmarks.md that holds a figure names the command that produced it;
#   - every warning, error and critical log line of Sources/ReplenishAgent is in docs/troubleshooting.md;
#   - every `file.swift:N` citation of docs/architecture.md names a file of the repository and a line it has, and
#     in a walk table's row (`| 3 | GPIO/InputPipeline.swift:123 | `receive` | … |`) that line holds the
#     identifier of the row's third column;
#   - every target (a folder of Sources/) and every folder of Sources/ReplenishAgent/ is named in the folder tables
#     of docs/architecture.md ("What is in the repository?"); each walk's "N hops over M files" is its table's;
#   - the licence files match the build (scripts/check-license.sh: every package of Package.resolved is in
#     packaging/debian/copyright).
# Usage: scripts/check-docs.sh [AGENT]  (AGENT: a built replenish-agent; default: the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
agent=${1:-$(. scripts/cache.sh && swift build --scratch-path "$(tests_scratch)" --show-bin-path)/replenish-agent}
[ -x "$agent" ] || { echo "check-docs: no $agent: swift build first" >&2; exit 1; }
failures=0
fail() {
  echo "check-docs: $*" >&2
  failures=$((failures + 1))
}
files=(README.md docs/*.md)
# The external sites the docs may link to: Amazon's developer documentation, Swift's, Debian's, Raspberry Pi's,
# Apple's and Android's (the companion app's platforms), the standards the agent follows, and the update tools
# docs/production.md names. A link elsewhere (a pull request, a blog) fails: what a maker needs from it belongs in
# the docs' own words.
allowed_sites=(developer.amazon.com www.amazon.com www.swift.org download.swift.org www.debian.org wiki.debian.org
  manpages.debian.org www.raspberrypi.com datatracker.ietf.org www.rfc-editor.org www.apache.org docs.mender.io
  rauc.readthedocs.io sbabic.github.io developer.apple.com developer.android.com)
# Hex words the commit-hash check lets through, each an example value that is not a commit: the Raspberry Pi
# serial of configuration.md's check-config example.
# Example values: a serial, and the test vector's key and nonce (docs/companion-app.md).
allowed_hex=(10000000a1b2c3d4 000102030405060708090a0b0c0d0e0f 00112233445566778899aabbccddeeff
  91cb49fdbb972afc 4b55ae5717fde3139bef65d7af9a6371 486f6d65204e6574 # the test vectors' ids, passphrase and SSID
  9f2c4e1d0a7b3c58 0f1e2d3c4b5a69788796a5b4c3d2e1f0) # docs/protocol.md's report stream and claim nonce

# Links: [text](target) and <img src="target">, outside code; http(s), mailto and in-page anchors are not files.
for file in "${files[@]}"; do
  dir=$(dirname "$file")
  while IFS= read -r target; do
    target=${target%%#*}
    [ -n "$target" ] || continue
    case "$target" in
      http://* | https://*)
        # A link leaving the repository goes to one of the sites a maker needs (allowed_sites below).
        host=${target#*://}
        host=${host%%/*}
        [[ " ${allowed_sites[*]} " == *" $host "* ]] ||
          fail "$file: the link '$target' leaves the repository for $host, not one of the allowed sites"
        continue
        ;;
      mailto:* | man:*) continue ;;
    esac
    [ -e "$dir/$target" ] || fail "$file: the link '$target' leads nowhere"
  done < <(awk '/^```/ { code = !code; next } !code' "$file" | grep -oE '\]\([^) ]+\)|src="[^"]+"' |
    sed -E 's/^\]\(//; s/\)$//; s/^src="//; s/"$//')
done

# Nothing points at notes outside the repository.
if grep -nE '\.\./shared|shared/(PROTOCOL|CONTRACT|MACHINE-NOTES)' "${files[@]}"; then
  fail "the lines above point outside the repository"
fi
# No commit hashes: history is CHANGELOG.md's. A word of 7 to 40 lowercase hex digits with a digit and a letter, that
# is a whole word (not part of a UUID, a version such as 0.1.0+12.gabc1234, an id with dots, 0x…), unless allowed.
while IFS=: read -r where line word; do
  [[ " ${allowed_hex[*]} " == *" $word "* ]] && continue
  fail "$where:$line: '$word' looks like a commit hash (history goes to CHANGELOG.md; an example value goes in allowed_hex)"
done < <(perl -ne 'while (/(?<![\w.+\/-])([0-9a-f]{7,40})(?![\w.+\/-])/g) { my $w = $1;
    print "$ARGV:$.:$w\n" if $w =~ /[0-9]/ && $w =~ /[a-f]/ } close ARGV if eof' "${files[@]}")

# The same measured quantity quoted with one figure everywhere (entries with backticks in single quotes: in double
# quotes the shell would run them). Each entry: the quantity, then Perl patterns (run on
# each page with its line breaks as spaces), all separated by ";;"; a pattern's first group is the figure. Every
# page that quotes the quantity must give the same figure.
quantities=(
  "context switches in the idle minute on the booted devices;;(\d+) context switches (?:measured|in the idle minute);;context switches in the idle minute[^|]*\|[^|]*\| (\d+) on each"
  'the agent RSS on the booted amd64 device;;amd64, Debian bookworm \(booted in QEMU\) \| ([\d,]+) kB;;\| RSS \| booted amd64 device \| ([\d,]+) kB'
  'the agent RSS on the booted arm64 device;;arm64, Debian trixie \(booted in QEMU\) \| ([\d,]+) kB;;\| RSS \| booted arm64 device \| ([\d,]+) kB'
  'the test command time from a clean clone;;(\d+ min \d+ s and \d+ min \d+ s) in two runs'
  'the make check time from a clean clone;;\| `make check` \| (\d+ min \d+ s);;`make check` \(`scripts/check.sh`\) \|[^|]*\| (\d+ min \d+ s) from a clean clone'
)
for entry in "${quantities[@]}"; do
  name=${entry%%;;*}
  found=$(QUANTITY="${entry#*;;}" perl -0777 -ne 's/\s+/ /g; for my $p (split /;;/, $ENV{QUANTITY}) {
      while (/$p/g) { print "$ARGV: $1\n" } }' "${files[@]}")
  if [ "$(sed 's/^[^:]*: //' <<<"$found" | sort -u | grep -c .)" -gt 1 ]; then
    fail "two figures for $name: $(tr '\n' ';' <<<"$found")"
  fi
done

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

# docs/commands.md's count of subcommands ("one binary with twelve subcommands") is the binary's: the lines of its
# --help's SUBCOMMANDS section that start a name (two spaces, then a name; `help` is argument parser's own).
count=$("$agent" --help 2>&1 | sed -n '/^SUBCOMMANDS:/,/^$/p' | grep -cE '^  [a-z][a-z-]* ' || true)
words=(zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
  eighteen nineteen twenty)
said=$(grep -oE 'one binary with [a-z]+ subcommands' docs/commands.md | awk '{ print $4 }' || true)
[ -n "$said" ] || fail "docs/commands.md does not say 'one binary with N subcommands' (the count the check compares)"
[ "${words[$count]:-$count}" = "$said" ] ||
  fail "docs/commands.md says '$said subcommands', the binary has ${words[$count]:-$count} (replenish-agent --help)"

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

# Every log line at warning or above of the device binary is in docs/troubleshooting.md: each fixed part (4 or more
# characters between interpolations) of the message of a logger.warning, .error or .critical call appears in the
# page (whitespace folded); a message that is all interpolation (a text made elsewhere) needs its source file named
# there instead (its path under Sources/ReplenishAgent, in backticks).
log_sites=0
while IFS=$'\t' read -r where kind text; do
  log_sites=$((log_sites + 1))
  fail "$where: the $kind line '$text' is not in docs/troubleshooting.md (add it: the line, its cause, the fix)"
done < <(perl - docs/troubleshooting.md $(grep -rlE 'logger\.(warning|error|critical)\(' Sources/ReplenishAgent) <<'PERL'
local $/;
my $doc = do { open my $h, '<', shift @ARGV or die; <$h> };
$doc =~ s/\s+/ /g;
for my $file (@ARGV) {
  open my $h, '<', $file or die; my $text = <$h>; close $h;
  (my $relative = $file) =~ s{^Sources/ReplenishAgent/}{};
  while ($text =~ /logger\.(warning|error|critical)\(\s*("""\n(.*?)\n\s*"""|(?:"(?:[^"\\]|\\.)*"\s*\+?\s*)+)/sg) {
    my ($level, $literal, $block) = ($1, $2, $3);
    my $line = 1 + (() = substr($text, 0, $-[0]) =~ /\n/g);
    my $message;
    if (defined $block) { ($message = $block) =~ s/\\\n\s*//g; $message =~ s/\n\s*/ /g; $message =~ s/^\s+//; }
    else { $message = join "", $literal =~ /"((?:[^"\\]|\\.)*)"/g; }
    # Interpolations \(…) (with nested parentheses) split the message into its fixed parts.
    my @parts; my $current = ""; my $i = 0;
    while ($i < length $message) {
      if (substr($message, $i, 2) eq "\\(") {
        push @parts, $current; $current = ""; my $depth = 1; $i += 2;
        while ($i < length $message && $depth > 0) {
          my $c = substr($message, $i, 1); $depth++ if $c eq "("; $depth-- if $c eq ")"; $i++;
        }
      } else { $current .= substr($message, $i, 1); $i++; }
    }
    push @parts, $current;
    my @fixed = grep { length >= 4 } map { (my $p = $_) =~ s/\\"/"/g; $p =~ s/\s+/ /g; $p =~ s/^ | $//g; $p } @parts;
    my $shown = $message; $shown =~ s/\t/ /g;
    if (@fixed) {
      for my $part (@fixed) {
        if (index($doc, $part) < 0) { print "$file:$line\t$level\t$shown\n"; last }
      }
    } elsif (index($doc, "`$relative`") < 0) {
      print "$file:$line\t$level\t$shown (its text is made elsewhere: name `$relative` in the page)\n";
    }
  }
}
PERL
)

# Citations in docs/architecture.md, outside code blocks: `path.swift:N` (a path under Sources/ReplenishAgent/, or
# one from Sources/, Tests/ or cloud/; a leading ../ is the doc's own) names a file and a line it has. In a table
# row whose second column is a citation (the walk tables: | # | file:line | function | what happens |), the first
# identifier of the third column is on that line: `receive` of "`receive` → `settle`", `save` of
# "`FileTokenStore.save`" (the last part of a dotted name).
architecture=docs/architecture.md
citations=0
while IFS=$'\t' read -r where path line identifier; do
  citations=$((citations + 1))
  path=${path#../}
  case "$path" in
    Sources/* | Tests/* | cloud/*) file=$path ;;
    *) file=Sources/ReplenishAgent/$path ;;
  esac
  if [ ! -f "$file" ]; then
    fail "$where: the citation $path:$line names $file, which does not exist"
    continue
  fi
  length=$(wc -l <"$file")
  if [ "$line" -lt 1 ] || [ "$line" -gt "$length" ]; then
    fail "$where: the citation $path:$line is past the end of $file ($length lines)"
    continue
  fi
  case "$identifier" in
    -) ;;
    '?') fail "$where: the walk row citing $path:$line names no function in its third column" ;;
    *)
      text=$(sed -n "${line}p" "$file")
      grep -qw -- "$identifier" <<<"$text" ||
        fail "$where: $path:$line does not hold \`$identifier\` (the row's function); the line reads: ${text#"${text%%[! ]*}"}"
      ;;
  esac
done < <(awk '/^```/ { code = !code; next } code { next }
  {
    walk = ""; identifier = "-"
    if ($0 ~ /^\|/) {
      split($0, cells, "|")
      second = cells[3]; gsub(/`/, "", second); gsub(/^ +| +$/, "", second)
      if (second ~ /^[A-Za-z0-9_.\/+-]+\.swift:[0-9]+$/) {
        walk = second; identifier = "?"; third = cells[4]; gsub(/`/, "", third)
        if (match(third, /[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*/)) {
          identifier = substr(third, RSTART, RLENGTH); sub(/.*\./, "", identifier)
        }
      }
    }
    rest = $0
    while (match(rest, /[A-Za-z0-9_.\/+-]+\.swift:[0-9]+/)) {
      cited = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
      colon = index(cited, ":")
      print FILENAME ":" FNR "\t" substr(cited, 1, colon - 1) "\t" substr(cited, colon + 1) "\t" (cited == walk ? identifier : "-")
      if (cited == walk) walk = ""
    }
  }' "$architecture")

# Each walk's count ("**N hops over M files**", said before its table) is its table's: N rows, M distinct files.
walks=0
while IFS=$'\t' read -r where said counted; do
  walks=$((walks + 1))
  [ "$said" = "$counted" ] || fail "$where: the walk says $said, its table holds $counted"
done < <(awk '/^```/ { code = !code; next } code { next }
  match($0, /\*\*[0-9]+ hops over [0-9]+ files\*\*/) {
    claim = substr($0, RSTART + 2, RLENGTH - 4); where = FILENAME ":" FNR; rows = 0; delete files; nfiles = 0; next
  }
  /^\|/ {
    split($0, cells, "|"); second = cells[3]; gsub(/`/, "", second); gsub(/^ +| +$/, "", second)
    if (second ~ /\.swift:[0-9]+$/) {
      rows++; sub(/:[0-9]+$/, "", second); if (!(second in files)) { files[second] = 1; nfiles++ }
      next
    }
  }
  rows > 0 && claim != "" { print where "\t" claim "\t" rows " hops over " nfiles " files"; claim = ""; rows = 0 }
  rows > 0 && claim == "" { print FILENAME ":" FNR "\tno count\t" rows " hops over " nfiles " files"; rows = 0 }
  END { if (rows > 0) print where "\t" claim "\t" rows " hops over " nfiles " files" }' "$architecture")
[ "$walks" -ge 2 ] || fail "$architecture: the press's and the refresh's walks, each with its count, are missing"

# Every target and every folder of the agent is in the folder tables of docs/architecture.md (the section "What is
# in the repository?"), in backticks: `Sources/X/` or `X/` (an agent folder also as `Sources/ReplenishAgent/X/`).
folder_tables=$(awk '/^## / { inside = ($0 ~ /^## What is in the repository\?/) } inside' "$architecture")
[ -n "$folder_tables" ] || fail "$architecture has no section 'What is in the repository?' (the folder tables)"
for folder in Sources/*/ Sources/ReplenishAgent/*/; do
  folder=${folder%/}
  name=${folder##*/}
  grep -qF -e "\`$name/\`" -e "\`$folder/\`" <<<"$folder_tables" ||
    fail "$architecture: the folder tables (What is in the repository?) do not name $folder/ (as \`$name/\` or \`$folder/\`)"
done

# The licence files (LICENSE, packaging/debian/copyright against Package.resolved).
bash scripts/check-license.sh >&2 || fail "scripts/check-license.sh failed (above)"

[ "$failures" -eq 0 ] || { echo "check-docs: $failures problem(s)" >&2; exit 1; }
echo "ok: docs: links resolve, nothing points outside the repository (docs or sources), external links go to allowed sites, no commit hash, one figure per quantity, the subcommand count of docs/commands.md, $(wc -w <<<"$subcommands") subcommands named in code blocks exist, every benchmark figure names its command, every warning and error log line is in docs/troubleshooting.md, $citations file:line citations of docs/architecture.md hold, its $walks walks' counts are their tables', every source folder is in its folder tables, the licence files cover Package.resolved"
