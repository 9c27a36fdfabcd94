# Sourced by scripts/test.sh and scripts/check.sh: runs the steps of a long command as named stages, some in
# the background, and prints where the time went as a table at the end of the run, on success and on failure
# alike, so a slow stage shows in every CI log.
#
#   stage NAME COMMAND…       runs COMMAND in the foreground; its output goes to the terminal
#   stage_bg NAME LOG [--after NAME…] -- COMMAND…
#                             starts COMMAND in the background with its output in LOG; with --after, COMMAND
#                             begins once those background stages have succeeded (and never if one failed)
#   stage_wait NAME           waits for a background stage; on failure prints its log's last lines, and fails
#   stage_table               the table (stage_begin installs it on EXIT)
#   stage_begin TITLE         starts the clock; the table's title is TITLE
#
# A stage fails the run as any command under `set -e` does. Background stages are waited for (or ended) at
# exit, so none outlives the run.

stage_names=()
stage_started=()
stage_ended=()
stage_result=()
stage_cpus=()
declare -A stage_index=() stage_pid=() stage_log=()

stage_now() { date +%s; }

# stage_cpu_of FILE: the CPU seconds in the output of `times` in FILE (the shell's own and its children's, user
# and system), a machine's limit being two CPU seconds a second.
stage_cpu_of() {
  awk '{ for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] } } END { printf "%d\n", n }' "$1"
}

stage_begin() {
  stage_title=$1
  stage_t0=$(stage_now)
  stage_tmp=$(mktemp)
  trap 'stage_exit $?' EXIT
}

# stage_open NAME: a new row, started now; prints its index.
stage_open() {
  local i=${#stage_names[@]}
  stage_names+=("$1")
  stage_started+=("$(($(stage_now) - stage_t0))")
  stage_ended+=("")
  stage_result+=(running)
  stage_cpus+=("")
  stage_index[$1]=$i
}

stage_close() { # NAME RESULT
  local i=${stage_index[$1]}
  stage_ended[i]=$(($(stage_now) - stage_t0))
  stage_result[i]=$2
}

# stage_failed_in_background: fails, naming it, when a background stage has already failed, so the run stops
# at the next stage instead of at the end.
stage_failed_in_background() {
  local name
  for name in "${!stage_pid[@]}"; do
    if [ -s "${stage_log[$name]}.status" ] && [ "$(cat "${stage_log[$name]}.status")" != 0 ]; then
      stage_wait "$name" || return 1
    fi
  done
}

stage() {
  local name=$1
  shift
  stage_failed_in_background || return 1
  echo "== $name"
  stage_open "$name"
  local status=0
  # In a subshell of its own, whose `times` counts the stage's processes only (this shell's also counts every
  # background stage it reaps meanwhile). Stages set no variable the run reads later.
  (
    status=0
    "$@" || status=$?
    times >"$stage_tmp"
    exit "$status"
  ) || status=$?
  stage_cpus[${stage_index[$name]}]=$(stage_cpu_of "$stage_tmp")
  if [ "$status" -ne 0 ]; then
    stage_close "$name" "FAILED ($status)"
    return "$status"
  fi
  stage_close "$name" ok
}

# background_nice: the background's nice level (REPLENISH_BACKGROUND_NICE, default 10).
background_nice() { echo "${REPLENISH_BACKGROUND_NICE:-10}"; }

stage_bg() {
  local name=$1 log=$2 after=() dependency
  shift 2
  if [ "${1:-}" = --after ]; then
    shift
    while [ "$1" != -- ]; do after+=("${stage_log[$1]:?no background stage named $1}"); shift; done
  fi
  [ "${1:-}" = -- ] && shift
  echo "== $name: in the background (log: $log)${after:+, after ${#after[@]} other stage(s)}"
  stage_open "& $name"
  stage_index[$name]=${stage_index["& $name"]}
  mkdir -p "$(dirname "$log")"
  rm -f "$log.status" "$log.began" "$log.ended" "$log.times"
  # The wrapper waits for the stages it comes after (each writes LOG.status when it ends), notes when its own
  # work began (LOG.began: the table's start) and writes its own status. setsid: its own process group, so
  # stage_exit can end all of it. Nice 10 (background_nice), its session's autogroup too (scripts/weighed.sh):
  # every background stage weighs the same, and the foreground's suites about nine times any of them, so their
  # timing checks (a loop that answers within 0.5 s while the flash stalls, a flood answered in time) measure the
  # agent and not the compiles beside it; CI failed on three such checks when the background weighed as the
  # foreground. REPLENISH_BACKGROUND_NICE=N sets another level, and 0 turns it off.
  setsid bash -c '
    weight=$1; log=$2; shift 2
    while [ "$1" != -- ]; do
      until [ -e "$1.status" ]; do sleep 1; done
      [ "$(cat "$1.status")" = 0 ] || { echo "not started: ${1##*/} failed"; echo 1 >"$log.status"; exit 1; }
      shift
    done
    shift
    date +%s >"$log.began"
    status=0
    bash scripts/weighed.sh "$weight" "$@" || status=$?
    date +%s >"$log.ended"
    times >"$log.times"
    echo "$status" >"$log.status"
    exit "$status"
  ' stage-bg "$(background_nice)" "$log" "${after[@]}" -- "$@" >"$log" 2>&1 </dev/null &
  stage_pid[$name]=$!
  stage_log[$name]=$log
}

stage_wait() {
  local name=$1 status=0
  echo "== $name: waiting for it"
  wait "${stage_pid[$name]}" || status=$?
  unset "stage_pid[$name]"
  # Its start: when its own work began, after the stages it waited for.
  [ -s "${stage_log[$name]}.began" ] && stage_started[${stage_index[$name]}]=$(($(cat "${stage_log[$name]}.began") - stage_t0))
  if [ "$status" -ne 0 ]; then
    stage_close "$name" "FAILED ($status)"
    [ -s "${stage_log[$name]}.ended" ] && stage_ended[${stage_index[$name]}]=$(($(cat "${stage_log[$name]}.ended") - stage_t0))
    tail -n 60 "${stage_log[$name]}"
    echo "FAIL: $name (log: ${stage_log[$name]})" >&2
    return "$status"
  fi
  stage_close "$name" ok
  [ -s "${stage_log[$name]}.times" ] && stage_cpus[${stage_index[$name]}]=$(stage_cpu_of "${stage_log[$name]}.times")
  # Its end: when it ended, not when the run came to wait for it.
  [ -s "${stage_log[$name]}.ended" ] && stage_ended[${stage_index[$name]}]=$(($(cat "${stage_log[$name]}.ended") - stage_t0))
  # The background stage's own step lines, so the log says what it did.
  grep -E '^(== |[a-z0-9-]+: [0-9]+ passed)' "${stage_log[$name]}" | awk -v prefix="   [$name] " '{ print prefix $0 }' || true
}

# m:ss
stage_clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

stage_table() {
  local now i end width=5
  now=$(($(stage_now) - stage_t0))
  for i in "${!stage_names[@]}"; do [ ${#stage_names[i]} -le "$width" ] || width=${#stage_names[i]}; done
  echo
  echo "== where the time went: $stage_title ($(stage_clock "$now") in all; background stages marked &; cpu: CPU time of the stage's processes, two cores give 2:00 a minute)"
  printf "%-${width}s %6s %6s %6s %6s  %s\n" stage start end wall cpu result
  for i in "${!stage_names[@]}"; do
    end=${stage_ended[i]:-$now}
    printf "%-${width}s %6s %6s %6s %6s  %s\n" "${stage_names[i]}" "$(stage_clock "${stage_started[i]}")" \
      "$(stage_clock "$end")" "$(stage_clock $((end - stage_started[i])))" \
      "$([ -n "${stage_cpus[i]}" ] && stage_clock "${stage_cpus[i]}" || echo -)" "${stage_result[i]}"
  done
}

stage_exit() {
  local status=$1 name
  local log
  for name in "${!stage_pid[@]}"; do
    log=${stage_log[$name]}
    if [ -s "$log.status" ]; then # it had ended by itself
      stage_close "$name" "$([ "$(cat "$log.status")" = 0 ] && echo ok || echo "FAILED ($(cat "$log.status"))")"
      [ -s "$log.ended" ] && stage_ended[${stage_index[$name]}]=$(($(cat "$log.ended") - stage_t0))
    else
      kill -TERM -- "-${stage_pid[$name]}" 2>/dev/null || true
      stage_close "$name" "ended (the run stopped)"
    fi
    wait "${stage_pid[$name]}" 2>/dev/null || true
  done
  stage_table
  rm -f "$stage_tmp"
  exit "$status"
}
