#!/usr/bin/env bash
# weighed.sh N COMMAND…: COMMAND at nice N, the session's autogroup too. With the kernel's autogroups a session's
# processes share one weight whatever their own nice: the group's nice is what counts (sched(7), "The autogroup
# feature"). Run it in a session of its own (setsid), or it sets the caller's session's weight.
# scripts/stages.sh runs each background stage through it, and scripts/check.sh the tests' build.
nice=$1
shift
{ [ -w /proc/self/autogroup ] && echo "$nice" >/proc/self/autogroup; } 2>/dev/null || true
exec nice -n "$nice" "$@"
