#!/usr/bin/env bash
# The CPU seconds a command and every process it starts used, daemons and reparented workers
# included (what `time` misses): the command runs in a cgroup of its own. Needs root.
#
#   test/support/cpu_of.sh NAME COMMAND [ARGS...]     # prints "CPU <seconds> s" after the command
#
# cgroup v1 (cpuacct) or v2; exits with the command's status.
set -uo pipefail
name=${1:?usage: $0 NAME COMMAND [ARGS...]}; shift
if [ -d /sys/fs/cgroup/cpuacct ]; then
    group=/sys/fs/cgroup/cpuacct/tserve-cpu-$name
    mkdir -p "$group" && echo 0 > "$group/cpuacct.usage"
    read_ns() { cat "$group/cpuacct.usage"; }
else
    group=/sys/fs/cgroup/tserve-cpu-$name
    mkdir -p "$group"
    read_ns() { awk '$1 == "usage_usec" {print $2 * 1000}' "$group/cpu.stat"; }
fi
start=$(read_ns)
bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$group" "$@"
rc=$?
awk -v a="$start" -v b="$(read_ns)" 'BEGIN {printf "CPU %.1f s\n", (b - a) / 1e9}'
rmdir "$group" 2>/dev/null || true
exit $rc
