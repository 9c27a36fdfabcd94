#!/usr/bin/env bash
# The footprint benchmark (issue #14): the device binary a device ships (release, `--static-swift-stdlib`, the
# build scripts/deb.sh makes, in the same scratch folder .build-deb) side by side with a C floor it builds
# itself (bench/c-agent.c: the same job, the same libcurl and libgpiod, no threads), in one run, as one table.
#
# Usage: scripts/bench.sh [IDLE_SECONDS [ORDERS [PRESSES [STARTS]]]]   (defaults 60 10000 1000 20; `make bench
# IDLE=60`). Takes about 15 minutes with the defaults (mostly the orders); `scripts/bench.sh 10 200 100 5` is a
# short run. Every figure is printed with what was used.
#
# What runs: the emulator (release build, same scratch folder) on loopback with slots slot-1 (the agent's) and
# slot-2 (the C floor's) and access tokens that live 24 h (so no refresh falls in the run); the agent paired
# with it on a bench board (bench/board.json: the simulated board, button debounce 5 ms); the C floor with the
# agent's access token, on a FIFO as its line (edges with their CLOCK_MONOTONIC times, as gpiod gives them),
# with the same 5 ms debounce.
#
# - RSS after start: the paired agent started afresh, once its start-up duties went out (deviceStatus and
#   subscriptionInfo at the emulator); the C floor once it said READY=1. After 1 order, after ORDERS orders:
#   VmRSS of the process when the last order is done.
# - How ORDERS orders are placed honestly: one press per order through the real path (edges → debounce →
#   durable outbox → replenish call → answer recorded). The agent's button has `cooldownSeconds: 0`; after
#   each replenish call the bench delivers the emulator's order (`POST /admin/deliver/{slot}`), so the next
#   call places a new order instead of ORDER_INPROGRESS, and waits until the program has finished with the
#   answer (the agent's outbox has nothing for the slot, the C floor's status file counts the order), so no
#   press is coalesced with a pending one. Only calls the emulator logged as `placed` count (printed).
# - Presses: the agent's through its control socket (`POST /press`, what `replenish-agent press` sends),
#   from one driver process (bench/driver.py) rather than a `replenish-agent press` process per press, whose
#   start would dominate; the C floor's as '1', hold, '0' (each with its time) written to its FIFO. Hold 10 ms,
#   debounce 5 ms, so a press is recognised 15 ms after its first edge at best. Press → request: from just before the first edge
#   (wall clock) to the emulator's dispatch of the replenish request (its event log's `at`, wall clock), over
#   the first PRESSES presses after the first order.
# - Idle: both programs at once, the idle seconds after the last order (the agent settled for 2 s first):
#   context switches (voluntary + involuntary) and CPU ticks (utime + stime, 1/`getconf CLK_TCK` s) summed
#   over every thread alive at both ends, per minute; the agent's own requests at the emulator meanwhile
#   (its timers: order follow-up, duties) are printed so they can be told apart. Per-thread breakdown below.
# - exec → ready: STARTS starts of each with $NOTIFY_SOCKET on a datagram socket the driver listens on, from
#   just before the spawn to READY=1 (the agent paired, on a copy of its state; stopped with SIGTERM); and STARTS
#   starts of the agent unpaired (the same config, a state directory without tokens: its pairing window opens).
# - After a pairing in this run: the agent that was started unpaired and has just paired with the emulator's
#   companion, once its window has closed (libavahi-client unloaded, or 5 s): its RSS and the shared libraries
#   it maps (distinct `.so` files in /proc/PID/maps), beside the same count for the agent started paired.
# - Binary: stripped size (`strip`), and `ldd`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
idle=${1:-60}
orders=${2:-10000}
presses=${3:-1000}
starts=${4:-20}
hold_ms=10
debounce_ms=5
((orders >= 2 && presses <= orders - 1)) || { echo "ORDERS must be at least 2 and PRESSES below it" >&2; exit 2; }
scripts/install-deps.sh
scratch=$(readlink -m "${DEB_SCRATCH:-$root/.build-deb}") # deb.sh's folder, a link into the cache
source scripts/lib.sh
build_release
# AGENT_BIN=FILE measures that agent binary instead of the one just built (the emulator stays the build's):
# how scripts/footprint-steps.sh measures one link variant at a time.
agent_bin=${AGENT_BIN:-$bin/replenish-agent}
# AGENT_PRELOAD=LIB starts the agent with that library preloaded (LD_PRELOAD), the C floor without: how
# footprint-steps.sh measures a change of the process's own settings (bench/text-advice.c) without building it in.
agent_cmd=("$agent_bin")
[ -n "${AGENT_PRELOAD:-}" ] && agent_cmd=(env "LD_PRELOAD=$AGENT_PRELOAD" "$agent_bin")
work=$(mktemp -d /tmp/replenish-bench.XXXXXX)
cc -O2 -Wall -o "$work/c-agent" bench/c-agent.c -lcurl -lgpiod
pids=()
trap 'stop_all; if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi' EXIT
driver() { python3 "$root/bench/driver.py" "$@"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
# The shared libraries a process maps now (distinct files), and whether libavahi-client is one of them.
mapped_libraries() { awk '$6 ~ /\.so/ {print $6}' "/proc/$1/maps" | sort -u | wc -l; }
maps_avahi() { grep -q libavahi-client "/proc/$1/maps"; }
# Anonymous RSS (heap, stacks, pages written after load such as relocated data): the part a smaller or
# better-ordered binary does not reduce, and that the kernel cannot drop under memory pressure.
anon() { awk '/RssAnon/ {print $2}' "/proc/$1/status"; }
stat_of() { curl -s "$emulator/admin/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
json_field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])$2)" "$1"; }

"$bin/replenish-emulator" serve --listen 127.0.0.1:0 --port-file "$work/emulator.port" --slots slot-1,slot-2 \
  --access-token-lifetime 86400 >"$work/emulator.log" 2>&1 &
pids+=($!)
wait_for "the emulator" 30 test -s "$work/emulator.port"
emulator="http://127.0.0.1:$(cat "$work/emulator.port")"
pick_pairing_port
write_config "$root/bench/board.json" 0 BENCH0001
start_agent
pair
# The window closed at the pairing: its advertisement stops and libavahi-client is unloaded on Avahi's lane.
wait_for "the pairing window's libraries to be unloaded" 5 bash -c "! grep -q libavahi-client /proc/$agent_pid/maps" ||
  true
agent_rss_paired_here=$(rss "$agent_pid")
agent_libraries_paired_here=$(mapped_libraries "$agent_pid")
agent_avahi_paired_here=$(maps_avahi "$agent_pid" && echo "libavahi-client still mapped" || echo "libavahi-client not mapped")
stop_all_but_emulator() { kill -TERM "$agent_pid"; wait "$agent_pid" || true; pids=("${pids[0]}"); }
stop_all_but_emulator

echo "== exec → ready, $starts starts each"
cp -a "$work/state" "$work/state-copy"
sed "s|$work/state\"|$work/state-copy\"|" "$work/agent.json" >"$work/agent-copy.json"
agent_ready=$(driver ready --count "$starts" -- "${agent_cmd[@]}" run --config "$work/agent-copy.json")
mkdir -m 0700 "$work/state-unpaired"
sed "s|$work/state\"|$work/state-unpaired\"|" "$work/agent.json" >"$work/agent-unpaired.json"
agent_ready_unpaired=$(driver ready --count "$starts" -- "${agent_cmd[@]}" run --config "$work/agent-unpaired.json")
python3 -c "import json; print(json.load(open('$work/state/tokens.json'))['accessToken'])" >"$work/token"
mkfifo "$work/line"
mkdir -m 0700 "$work/c-state"
c_command=("$work/c-agent" "$work/line" "$work/c-state" "$emulator/replenish/slot-2" "$work/token" "$debounce_ms")
c_ready=$(driver ready --count "$starts" -- "${c_command[@]}")

echo "== start"
device_status_before=$(stat_of "['deviceStatusCalls']")
"${agent_cmd[@]}" run --config "$work/agent.json" 2>"$work/agent.log" &
agent_pid=$!
pids+=($agent_pid)
device_status_sent() { (($(stat_of "['deviceStatusCalls']") > device_status_before)); }
wait_for "the agent's start-up duties" 40 device_status_sent
sleep 2
agent_rss_start=$(rss "$agent_pid")
agent_libraries_start=$(mapped_libraries "$agent_pid")
"${c_command[@]}" 2>"$work/c-agent.log" &
c_pid=$!
pids+=($c_pid)
sleep 1
c_rss_start=$(rss "$c_pid")
c_libraries=$(mapped_libraries "$c_pid")

echo "== 1 order each"
agent_first=$(driver presses --target agent --emulator "$emulator" --slot slot-1 --state "$work/state" \
  --control "$work/state/control.sock" --count 1 --hold-ms "$hold_ms")
agent_rss_one=$(rss "$agent_pid")
c_first=$(driver presses --target c --emulator "$emulator" --slot slot-2 --state "$work/c-state" \
  --fifo "$work/line" --count 1 --hold-ms "$hold_ms")
c_rss_one=$(rss "$c_pid")

echo "== $((orders - 1)) more orders each (the first $presses timed)"
agent_run=$(driver presses --target agent --emulator "$emulator" --slot slot-1 --state "$work/state" \
  --control "$work/state/control.sock" --count $((orders - 1)) --latency-count "$presses" --hold-ms "$hold_ms")
agent_rss_many=$(rss "$agent_pid")
agent_anon_many=$(anon "$agent_pid")
c_run=$(driver presses --target c --emulator "$emulator" --slot slot-2 --state "$work/c-state" \
  --fifo "$work/line" --count $((orders - 1)) --first-order 2 --latency-count "$presses" --hold-ms "$hold_ms")
c_rss_many=$(rss "$c_pid")
c_anon_many=$(anon "$c_pid")
agent_placed=$(($(json_field "$agent_first" "['placed']") + $(json_field "$agent_run" "['placed']")))
c_placed=$(($(json_field "$c_first" "['placed']") + $(json_field "$c_run" "['placed']")))

echo "== idle ${idle} s, both at once"
sleep 2
# One line per thread: tid, context switches, CPU ticks, name/wchan.
threads() {
  for task in /proc/"$1"/task/*; do
    local switches ticks
    switches=$(awk '/ctxt_switches/ {sum += $2} END {print sum + 0}' "$task/status" 2>/dev/null) || continue
    ticks=$(sed 's/.*) //' "$task/stat" | awk '{print $12 + $13}') || continue
    echo "${task##*/} $switches $ticks $(tr ' ' _ <"$task/comm")/$(cat "$task/wchan" 2>/dev/null)"
  done
}
requests_before=$(stat_of "['requests']")
threads "$agent_pid" >"$work/agent.before"
threads "$c_pid" >"$work/c.before"
sleep "$idle"
threads "$agent_pid" >"$work/agent.after"
threads "$c_pid" >"$work/c.after"
idle_requests=$(($(stat_of "['requests']") - requests_before))
# Sum over threads alive at both ends: column 2 = switches, 3 = ticks.
delta() { awk -v column="$3" 'NR == FNR {before[$1] = $column; next} ($1 in before) {sum += $column - before[$1]} END {print sum + 0}' "$1" "$2"; }
per_minute() { awk -v value="$1" -v seconds="$idle" 'BEGIN {printf "%.1f", value * 60 / seconds}'; }
agent_switches=$(per_minute "$(delta "$work/agent.before" "$work/agent.after" 2)")
agent_ticks=$(per_minute "$(delta "$work/agent.before" "$work/agent.after" 3)")
c_switches=$(per_minute "$(delta "$work/c.before" "$work/c.after" 2)")
c_ticks=$(per_minute "$(delta "$work/c.before" "$work/c.after" 3)")
agent_threads=$(awk '/Threads/ {print $2}' "/proc/$agent_pid/status")
c_threads=$(awk '/Threads/ {print $2}' "/proc/$c_pid/status")

strip -o "$work/agent.stripped" "$agent_bin"
strip -o "$work/c.stripped" "$work/c-agent"

ratio() { awk -v a="$1" -v c="$2" 'BEGIN {if (c + 0 == 0) print (a + 0 == 0 ? "=" : "-"); else printf "%.2f×", a / c}'; }
kb() { awk -v k="$1" 'BEGIN {printf "%.1f MB (%d kB)", k / 1000, k}'; }
row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$(ratio "$4" "$5")"; }
ms() { json_field "$1" "['$2']"; }
latency() { json_field "$1" "['latency']['$2']"; }
echo
echo "machine: $(nproc) cores, $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), $(swift --version 2>/dev/null | head -n 1 | sed 's/ (.*//')"
echo "run: scripts/bench.sh $idle $orders $presses $starts at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- Sources Package.swift bench scripts || echo ' (with uncommitted changes)')"
[ -n "${AGENT_BIN:-}" ] && echo "agent binary: $AGENT_BIN (AGENT_BIN)"
echo "orders placed: agent $agent_placed of $orders, C floor $c_placed of $orders; hold ${hold_ms} ms, debounce ${debounce_ms} ms"
echo
echo "| figure | agent (static) | C floor | agent / C |"
echo "|---|---|---|---|"
row "RSS after start" "$(kb "$agent_rss_start")" "$(kb "$c_rss_start")" "$agent_rss_start" "$c_rss_start"
row "RSS after 1 order" "$(kb "$agent_rss_one")" "$(kb "$c_rss_one")" "$agent_rss_one" "$c_rss_one"
row "RSS after $orders orders" "$(kb "$agent_rss_many")" "$(kb "$c_rss_many")" "$agent_rss_many" "$c_rss_many"
row "anonymous RSS after $orders orders" "$(kb "$agent_anon_many")" "$(kb "$c_anon_many")" "$agent_anon_many" \
  "$c_anon_many"
row "file-backed RSS after $orders orders" "$(kb $((agent_rss_many - agent_anon_many)))" \
  "$(kb $((c_rss_many - c_anon_many)))" "$((agent_rss_many - agent_anon_many))" "$((c_rss_many - c_anon_many))"
row "RSS growth, 1 → $orders orders" "$((agent_rss_many - agent_rss_one)) kB" "$((c_rss_many - c_rss_one)) kB" \
  "$((agent_rss_many - agent_rss_one))" "$((c_rss_many - c_rss_one))"
row "threads" "$agent_threads" "$c_threads" "$agent_threads" "$c_threads"
row "context switches per idle minute, all threads" "$agent_switches" "$c_switches" "$agent_switches" "$c_switches"
row "CPU ticks per idle minute, all threads" "$agent_ticks" "$c_ticks" "$agent_ticks" "$c_ticks"
row "exec → READY=1, median of $starts (min-max)" \
  "$(ms "$agent_ready" median) ms ($(ms "$agent_ready" min)-$(ms "$agent_ready" max))" \
  "$(ms "$c_ready" median) ms ($(ms "$c_ready" min)-$(ms "$c_ready" max))" \
  "$(ms "$agent_ready" median)" "$(ms "$c_ready" median)"
row "exec → READY=1 unpaired (pairing window opens), median of $starts (min-max)" \
  "$(ms "$agent_ready_unpaired" median) ms ($(ms "$agent_ready_unpaired" min)-$(ms "$agent_ready_unpaired" max))" \
  "$(ms "$c_ready" median) ms (no window)" "$(ms "$agent_ready_unpaired" median)" "$(ms "$c_ready" median)"
row "RSS after a pairing in this run (window closed)" "$(kb "$agent_rss_paired_here")" "$(kb "$c_rss_start")" \
  "$agent_rss_paired_here" "$c_rss_start"
row "shared libraries mapped, started paired" "$agent_libraries_start" "$c_libraries" "$agent_libraries_start" \
  "$c_libraries"
row "shared libraries mapped after a pairing in this run" "$agent_libraries_paired_here" "$c_libraries" \
  "$agent_libraries_paired_here" "$c_libraries"
row "press → request at the emulator, p50 ($presses presses)" "$(latency "$agent_run" p50) ms" \
  "$(latency "$c_run" p50) ms" "$(latency "$agent_run" p50)" "$(latency "$c_run" p50)"
row "press → request at the emulator, p99" "$(latency "$agent_run" p99) ms" "$(latency "$c_run" p99) ms" \
  "$(latency "$agent_run" p99)" "$(latency "$c_run" p99)"
row "binary, stripped" "$(stat -c %s "$work/agent.stripped") bytes" "$(stat -c %s "$work/c.stripped") bytes" \
  "$(stat -c %s "$work/agent.stripped")" "$(stat -c %s "$work/c.stripped")"
row "shared libraries (\`ldd\`)" "$(ldd "$agent_bin" | wc -l)" "$(ldd "$work/c-agent" | wc -l)" \
  "$(ldd "$agent_bin" | wc -l)" "$(ldd "$work/c-agent" | wc -l)"
echo
echo "after the pairing in this run: $agent_avahi_paired_here"
echo "the agent's own requests at the emulator during the idle ${idle} s: $idle_requests (timers: order follow-up, duties)"
echo "libraries only the agent links: $(comm -23 <(ldd "$agent_bin" | awk '{print $1}' | sort) \
  <(ldd "$work/c-agent" | awk '{print $1}' | sort) | tr '\n' ' ')"
echo "the agent's threads over the idle ${idle} s (switches, CPU ticks; name/wchan at the end):"
awk 'NR == FNR {s[$1] = $2; t[$1] = $3; next} {printf "  %-44s %6s %6s\n", $4 " (" $1 ")", ($1 in s) ? $2 - s[$1] : "new", ($1 in t) ? $3 - t[$1] : "new"}' \
  "$work/agent.before" "$work/agent.after"
# Where the agent's resident memory is (Rss by mapping, summed by file; [anon] is the heap and thread stacks).
echo "the agent's RSS by mapping, largest first (kB):"
awk '/^[0-9a-f]+-[0-9a-f]+ / {name = (NF >= 6) ? $6 : "[anon]"} /^Rss:/ {rss[name] += $2}
  END {for (n in rss) if (rss[n] > 0) printf "%8d %s\n", rss[n], n}' "/proc/$agent_pid/smaps" | sort -rn | head -n 12
# The binary's own mappings: its code (r-x) against its size shows how much of the text the run touched (the
# ordering file's aim); the relocated read-only data (r--, written once at start) is anonymous.
echo "the agent binary's mappings (permissions: resident kB, of which anonymous, of the mapping's size):"
awk -v bin="$(readlink -f "$agent_bin")" '/^[0-9a-f]+-[0-9a-f]+ / {split($1, r, "-"); mine = ($6 == bin); perm = $2; size = $1}
  mine && /^Size:/ {sz = $2} mine && /^Rss:/ {rss = $2} mine && /^Anonymous:/ {printf "  %s: %d kB, %d anonymous, of %d kB\n", perm, rss, $2, sz}' \
  "/proc/$agent_pid/smaps"
echo "the code of the functions in bench/hot-symbols.txt (the ordered range's own size): $(nm -S -t d --defined-only \
  "$agent_bin" 2>/dev/null | awk 'NR == FNR {hot[$1] = 1; next} NF == 4 && ($4 in hot) {sum += $2} END {printf "%d kB", sum / 1000}' \
  bench/hot-symbols.txt -) (none when the binary is stripped)"
echo "the C floor's RSS by mapping, largest first (kB):"
awk '/^[0-9a-f]+-[0-9a-f]+ / {name = (NF >= 6) ? $6 : "[anon]"} /^Rss:/ {rss[name] += $2}
  END {for (n in rss) if (rss[n] > 0) printf "%8d %s\n", rss[n], n}' "/proc/$c_pid/smaps" | sort -rn | head -n 8
