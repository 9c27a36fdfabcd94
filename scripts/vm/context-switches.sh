# Sourced by both test VMs (scripts/vm/init.sh under busybox sh, scripts/vm/boot/runner.sh under bash), so
# POSIX sh only: their idle checks count context switches the same way.

# Context switches (voluntary + nonvoluntary) of each thread of a process: "TID COUNT NAME/WCHAN" lines, NAME
# the thread's name (15 characters) and WCHAN what it waits in, e.g. do_sys_poll or futex_wait_queue.
context_switches() {
  local task
  for task in /proc/"$1"/task/*; do
    awk -v tid="${task##*/}" -v name="$(tr ' ' _ <"$task/comm" 2>/dev/null)/$(cat "$task/wchan" 2>/dev/null)" \
      '/^(voluntary|nonvoluntary)_ctxt_switches:/ { n += $2 } END { if (NR) print tid, n, name }' \
      "$task/status" 2>/dev/null
  done
}
