#!/usr/bin/env bash
# Sourced: the CPU seconds of the processes a shell has waited for, from bash's `times`, which must run in that shell
# itself (in a pipe or a $(...) it reports a fork's children: none). Usage: times >FILE; cpu_seconds FILE
# prints "USER SYS" in whole seconds, or nothing when FILE is missing or empty.
cpu_seconds() {
  [ -s "$1" ] || return 0
  awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); v[i] = t[1] * 60 + t[2] } }
       END { printf "%.0f %.0f\n", v[1], v[2] }' "$1"
}
