#!/bin/busybox sh
# /init of the VM-test initramfs that scripts/vm-test.sh builds (busybox sh, PID 1). It loads configfs and the
# out-of-tree gpio-sim module, makes a real kernel GPIO chip (gpio-sim, 8 lines, label "replenish-test"), runs
# `replenish-agent gpio-watch` on it and presses the simulated button through gpio-sim's sysfs `pull`
# attribute. Each check prints `VM-TEST PASS <name>` or `VM-TEST FAIL <name>: <why>`; figures print as
# `VM-TEST FIGURE <name> <value>`; the last line is `VM-TEST END`, then the VM powers off.
# /etc/vm-test.env (written by the host) sets API (v1 or v2): the libgpiod API the binary was built against,
# and IDLE_SECONDS, the length of the idle window the `idle` check measures (60 unless VM_IDLE_SECONDS says).
#
# TCG is slow and its timing uneven: every wait is a bounded poll, presses are >= 200 ms against a 50 ms
# debounce, and the only fixed sleeps are the press lengths and the idle window being measured.

/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
. /etc/vm-test.env

agent=/opt/replenish/replenish-agent
config=/sys/kernel/config/gpio-sim/chip0
failed=0

pass() { echo "VM-TEST PASS $1"; }
fail() { echo "VM-TEST FAIL $1: $2"; failed=1; }
figure() { echo "VM-TEST FIGURE $1 $2"; }
finish() {
    echo "VM-TEST END failed=$failed"
    sync
    poweroff -f
    sleep 5
}

# Milliseconds since boot (10 ms resolution).
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# wait_until MILLISECONDS COMMAND...: polls COMMAND every 20 ms until it succeeds; 1 if it never did.
wait_until() {
    limit=$(($(now_ms) + $1))
    shift
    while ! "$@" >/dev/null 2>&1; do
        [ "$(now_ms)" -ge "$limit" ] && return 1
        usleep 20000
    done
    return 0
}

# --- the chip ---------------------------------------------------------------------------------------------
setup_chip() {
    insmod /lib/modules/configfs.ko || return 1
    mount -t configfs configfs /sys/kernel/config || return 1
    insmod /lib/modules/gpio-sim.ko || return 1
    mkdir "$config" "$config/bank0" || return 1
    echo 8 >"$config/bank0/num_lines" || return 1
    echo replenish-test >"$config/bank0/label" || return 1
    echo 1 >"$config/live" || return 1
    dev_name=$(cat "$config/dev_name")
    chip_name=$(cat "$config/bank0/chip_name")
    sim=/sys/devices/platform/$dev_name/$chip_name
    wait_until 5000 test -c "/dev/$chip_name" || return 1
    [ -e "$sim/sim_gpio0/pull" ] || return 1
    echo "vm-test: gpio-sim chip $chip_name (device $dev_name, label replenish-test), API $API"
}

button_pull() { echo "$1" >"$sim/sim_gpio0/pull"; }
press() { button_pull pull-down; }   # active low: pulled down is pressed
release() { button_pull pull-up; }

# write_board FILE CHIP: a button on line 0 (active low, pull-up) and an LED on line 1.
# write_board FILE CHIP [EXTRA_INPUT_JSON]
write_board() {
    cat >"$1" <<EOF
{
  "name": "gpio-sim $2",
  "backend": "gpiod",
  "chip": "$2",
  "inputs": [
    { "name": "button", "kind": "button", "line": 0, "activeLow": true, "bias": "pull-up", "debounceMs": 50, "longPressMs": 3000 }${3:+,
    $3}
  ],
  "outputs": [
    { "name": "led", "line": 1, "activeLow": false }
  ]
}
EOF
}

# --- gpio-watch -------------------------------------------------------------------------------------------
# start_watch BOARD OUTPUTS LOG: runs gpio-watch in the background (watch_pid), output in LOG and LOG.err.
start_watch() {
    "$agent" gpio-watch --board "$1" --seconds 3600 --outputs "$2" >"$3" 2>"$3.err" &
    watch_pid=$!
    watch_log=$3
}

# stop_watch: SIGTERM, then the exit status (watch_status) once gpio-watch has ended.
stop_watch() {
    kill -TERM "$watch_pid" 2>/dev/null
    wait "$watch_pid"
    watch_status=$?
}

show_log() {
    sed 's/^/vm-test:   | /' "$watch_log" "$watch_log.err"
}

is_ready() { grep -q '^ready ' "$watch_log"; }
lines() { wc -l <"$watch_log"; }
# The lines gpio-watch printed after line number $1.
since() { tail -n "+$(($1 + 1))" "$watch_log"; }
count_since() { since "$1" | grep -c "$2"; }
has_press_since() { [ "$(count_since "$1" '^press ')" -ge 1 ]; }
edges_since() { since "$1" | awk '$1 == "edge" && $2 == "button" { printf "%s%s", sep, $3; sep = " " }'; }

# check_ready NAME: gpio-watch printed its ready line within 60 s (a Swift process starts slowly under TCG).
check_ready() {
    if wait_until 60000 is_ready; then
        pass "$1"
        return 0
    fi
    fail "$1" "no ready line within 60 s (gpio-watch $(kill -0 "$watch_pid" 2>/dev/null && echo running || echo exited))"
    show_log
    return 1
}

# check_short_press NAME: pressed ~200 ms -> exactly one short press, edges active then inactive.
check_short_press() {
    mark=$(lines)
    press
    sleep 0.2
    release
    if ! wait_until 15000 has_press_since "$mark"; then
        fail "$1" "no press within 15 s; edges: $(edges_since "$mark")"
        return
    fi
    sleep 0.3 # anything more would be a second (wrong) press: debounce is 50 ms
    shorts=$(count_since "$mark" '^press button short ')
    presses=$(count_since "$mark" '^press ')
    edges=$(edges_since "$mark")
    if [ "$shorts" = 1 ] && [ "$presses" = 1 ] && [ "$edges" = "active inactive" ]; then
        pass "$1"
    else
        fail "$1" "$presses presses ($shorts short), edges: $edges"
        since "$mark" | sed 's/^/vm-test:   | /'
    fi
}

# burst LAST: 13 pull writes with no pause between them, alternating, ending with LAST.
burst() {
    if [ "$1" = pull-down ]; then other=pull-up; else other=pull-down; fi
    for _ in 1 2 3 4 5 6; do
        echo "$1" >"$sim/sim_gpio0/pull"
        echo "$other" >"$sim/sim_gpio0/pull"
    done
    echo "$1" >"$sim/sim_gpio0/pull"
}

# edge_times_since LINE: the raw edges gpio-watch printed after line LINE, one per line: "active|inactive MS".
# An edge's t= is when the kernel saw it, the time the agent's debouncer goes by.
edge_times_since() {
    since "$1" | awk '$1 == "edge" && $2 == "button" { t = $4; sub(/^t=/, "", t); sub(/ms$/, "", t); print $3, t }'
}

# is_bounce LINE: the edges after LINE are one bouncing press and one bouncing release: they start active and
# end inactive, the longest gap between two changes follows an active edge (the hold between the bursts, at
# least 60 ms) and every other gap is under 45 ms, so no level inside a burst lasted the 50 ms debounce (a
# 5 ms margin either side for the milliseconds' rounding). A burst the scheduler paused inside for longer
# holds a real press or release, and more than one press is then right: such an attempt is not judged.
is_bounce() {
    edge_times_since "$1" | awk '
        $1 != level[n] { n++; level[n] = $1; at[n] = $2 }   # a repeat of the level is no change
        END {
            if (n < 2 || level[1] != "active" || level[n] != "inactive") exit 1
            hold = 1
            for (i = 2; i < n; i++) if (at[i + 1] - at[i] > at[hold + 1] - at[hold]) hold = i
            if (level[hold] != "active" || at[hold + 1] - at[hold] < 60) exit 1
            for (i = 1; i < n; i++) if (i != hold && at[i + 1] - at[i] >= 45) exit 1
        }'
}

# check_bounce: two bursts of 13 pull writes (a bouncing press, then a bouncing release) -> exactly one short
# press. Whether an attempt was a bounce is judged by the edges' kernel times (is_bounce), not by how long the
# writes took: under TCG thirteen writes can take 80 ms while no gap between two of them reaches 50 ms. An
# attempt that was not a bounce is not judged; the check tries again, up to 5 times.
check_bounce() {
    attempt=1
    while :; do
        mark=$(lines)
        t0=$(now_ms)
        burst pull-down
        t1=$(now_ms)
        sleep 0.4
        t2=$(now_ms)
        burst pull-up
        t3=$(now_ms)
        echo "vm-test: bounce bursts took $((t1 - t0)) ms and $((t3 - t2)) ms to write (13 writes each; debounce 50 ms)"
        if ! wait_until 15000 has_press_since "$mark"; then
            fail bounce "no press within 15 s; edges: $(edges_since "$mark")"
            return
        fi
        sleep 0.3
        if is_bounce "$mark"; then
            break
        fi
        echo "vm-test: a burst held a level 45 ms or more (paused by the scheduler), so it is not a bounce: again;" \
            "edges: $(edge_times_since "$mark" | tr '\n' ' ')"
        if [ "$attempt" -ge 5 ]; then
            fail bounce "no attempt of 5 was a bounce (every gap inside a burst under 45 ms); nothing to judge"
            return
        fi
        attempt=$((attempt + 1))
    done
    shorts=$(count_since "$mark" '^press button short ')
    presses=$(count_since "$mark" '^press ')
    edge_count=$(count_since "$mark" '^edge button ')
    figure bounce-attempts "$attempt"
    figure bounce-raw-edges-seen "$edge_count"
    # v1 has no kernel debounce: the bounce must reach the agent (more than the two clean edges), or this
    # check would not be testing the agent's debouncer. v2 debounces in the kernel, so 2 is right there.
    min_edges=2
    [ "$API" = v1 ] && min_edges=3
    if [ "$edge_count" -lt "$min_edges" ]; then
        fail bounce "only $edge_count raw edges reached the agent (API $API needs at least $min_edges)"
    elif [ "$shorts" = 1 ] && [ "$presses" = 1 ]; then
        pass bounce
    else
        fail bounce "$presses presses ($shorts short) from two bursts of 13 writes"
        since "$mark" | sed 's/^/vm-test:   | /'
    fi
}

check_long_press() {
    mark=$(lines)
    press
    sleep 3.5
    release
    if ! wait_until 15000 has_press_since "$mark"; then
        fail long-press "no press within 15 s; edges: $(edges_since "$mark")"
        return
    fi
    sleep 0.3
    longs=$(count_since "$mark" '^press button long ')
    presses=$(count_since "$mark" '^press ')
    if [ "$longs" = 1 ] && [ "$presses" = 1 ]; then
        pass long-press
    else
        fail long-press "$presses presses ($longs long)"
        since "$mark" | sed 's/^/vm-test:   | /'
    fi
}

# context_switches PID: put in the initramfs by scripts/vm-test.sh (scripts/vm/context-switches.sh).
. /lib/vm-test/context-switches.sh

# idle: context switches of gpio-watch over IDLE_SECONDS without GPIO activity, over threads alive at both
# ends. The limit is 3 a second: the Swift runtime's own wakeups (about 1 a second) pass, a GPIO poll loop
# (10 ms, 100 ms or even 1 s) does not.
check_idle() {
    idle=${IDLE_SECONDS:-60}
    context_switches "$watch_pid" >/tmp/ctx.start
    sleep "$idle"
    context_switches "$watch_pid" >/tmp/ctx.end
    switches=$(awk 'NR == FNR { start[$1] = $2; next } ($1 in start) { n += $2 - start[$1] } END { print n + 0 }' \
        /tmp/ctx.start /tmp/ctx.end)
    threads=$(wc -l </tmp/ctx.end)
    figure idle-seconds "$idle"
    figure idle-context-switches "$switches"
    figure idle-context-switches-per-minute "$((switches * 60 / idle))"
    figure gpio-watch-threads "$threads"
    echo "vm-test: idle context switches by thread: $(awk 'NR == FNR { start[$1] = $2; next }
        ($1 in start) { printf "%s%s(%s)=%d", sep, $3, $1, $2 - start[$1]; sep = " " }' /tmp/ctx.start /tmp/ctx.end)"
    if [ "$switches" -le $((idle * 3)) ]; then
        pass idle
    else
        fail idle "$switches context switches in $idle s of no GPIO activity (limit $((idle * 3)))"
        sed 's/^/vm-test:   start /' /tmp/ctx.start
        sed 's/^/vm-test:   end   /' /tmp/ctx.end
    fi
}

# --- the runs ---------------------------------------------------------------------------------------------
run_by_label() {
    write_board /tmp/board-label.json replenish-test
    button_pull pull-down # so `pull` reads pull-up only if the agent's request set the bias
    start_watch /tmp/board-label.json on /tmp/watch-label.log
    check_ready ready || { stop_watch; return; }
    banner=$(grep '^ready ' "$watch_log")
    echo "vm-test: $banner"
    case "$banner" in
    *"(API $API)"*) pass api ;;
    *) fail api "expected (API $API) in: $banner" ;;
    esac
    bias=$(cat "$sim/sim_gpio0/pull")
    if [ "$bias" = pull-up ]; then pass bias; else fail bias "sim_gpio0/pull reads $bias after a pull-up request"; fi
    led_on=$(cat "$sim/sim_gpio1/value")

    # A second consumer of the same line must be refused with a reason (exit 1).
    "$agent" gpio-watch --board /tmp/board-label.json --seconds 1 >/tmp/busy.log 2>/tmp/busy.err
    busy_status=$?
    if [ "$busy_status" = 1 ] && [ -s /tmp/busy.err ] && ! grep -q '^ready ' /tmp/busy.log; then
        pass busy
        echo "vm-test: busy line refused: $(head -n 1 /tmp/busy.err)"
    else
        fail busy "a second gpio-watch on a held line exited $busy_status: $(cat /tmp/busy.log /tmp/busy.err)"
    fi

    check_short_press short-press
    check_bounce
    check_long_press
    check_idle
    stop_watch
    if [ "$watch_status" = 0 ] && grep -q '^done ' "$watch_log"; then
        pass stop
    else
        fail stop "gpio-watch exited $watch_status after SIGTERM ($(grep -c '^done ' "$watch_log") done lines)"
    fi
    [ "$failed" = 0 ] || show_log
}

run_by_name() {
    # This board also has a level sensor on line 2 that is already active when the agent starts: its bias
    # pulls the line up, and gpio-sim applies the bias, so the line reads 1 from the request on. No edge ever
    # comes, so only the backend's read of the level at start can report it.
    write_board /tmp/board-name.json "$chip_name" \
        '{ "name": "tank", "kind": "level", "line": 2, "activeLow": false, "bias": "pull-up", "minActiveMs": 300, "minInactiveMs": 300 }'
    button_pull pull-down
    echo pull-up >"$sim/sim_gpio1/pull" # the LED line idles at 1 until the agent drives it
    start_watch /tmp/board-name.json off /tmp/watch-name.log
    check_ready ready-by-name || { stop_watch; return; }
    led_off=$(cat "$sim/sim_gpio1/value")
    if wait_until 10000 grep -q '^press tank low ' "$watch_log"; then
        pass level-at-start
    else
        fail level-at-start "no 'press tank low' within 10 s; tank lines: $(grep tank "$watch_log" | tr '\n' ' ')"
    fi
    check_short_press short-press-by-name
    stop_watch
    if [ "$led_on" = 1 ] && [ "$led_off" = 0 ]; then
        pass led
    else
        fail led "sim_gpio1/value read $led_on with --outputs on and $led_off with --outputs off (want 1 and 0)"
    fi
}

if setup_chip; then
    run_by_label
    run_by_name
else
    fail chip "cannot create the gpio-sim chip"
    dmesg | tail -n 20
fi
finish
