#!/usr/bin/env bash
# Compares the idle CPU cost of two programs that take steerd's arguments (two steerd
# builds, or steerd and examples/idle_floor) side by side, in one window, so that the
# machine's noise hits both alike: quote the ratio, not the absolute figures.
#
#   scripts/ab-idle.sh BINARY_A BINARY_B [SECONDS] [ROUNDS]
#
# Both run `run --dry-run --root / --interval 1s` at once (dry-run: they decide and write
# nothing, so they cannot fight over the same files), each with its own metrics port and
# state file, started half a second apart. After a 3 s warm-up the script sums the first
# field of every thread's /proc/PID/task/*/schedstat (nanoseconds on CPU) over the window,
# for each, and prints ms of CPU per wall second and B/A. ROUNDS windows (default 3) give
# a median ratio.
# It stops only the two processes it started, by PID, also on Ctrl-C or failure.
set -euo pipefail

a=${1:?usage: ab-idle.sh BINARY_A BINARY_B [SECONDS] [ROUNDS]}
b=${2:?usage: ab-idle.sh BINARY_A BINARY_B [SECONDS] [ROUNDS]}
seconds=${3:-30}
rounds=${4:-3}

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# cpu_ns PID (nanoseconds on CPU summed over all current threads) and free_port.
# shellcheck source=scripts/measure-lib.sh
. "$(dirname "$0")/measure-lib.sh"

start() {
    local binary=$1 name=$2
    "$binary" run --dry-run --root / --interval 1s \
        --metrics-listen "127.0.0.1:$(free_port)" --state-file "$work/$name.json" \
        >"$work/$name.log" 2>&1 &
    pids+=("$!")
}

# Half a second apart, so that the two never wake together: a wake-up that finds the
# vCPU already awake for the other costs less, which would flatter whichever came second.
start "$a" a
sleep 0.5
start "$b" b
pid_a=${pids[0]}
pid_b=${pids[1]}
sleep 3
printf '%-6s %10s %10s %8s\n' round "A ms/s" "B ms/s" "B/A"
ratios=()
for round in $(seq "$rounds"); do
    for pid in "$pid_a" "$pid_b"; do
        kill -0 "$pid" 2>/dev/null || { echo "steerd $pid ended:"; cat "$work"/*.log; exit 1; }
    done
    a0=$(cpu_ns "$pid_a"); b0=$(cpu_ns "$pid_b"); t0=$(date +%s%N)
    sleep "$seconds"
    a1=$(cpu_ns "$pid_a"); b1=$(cpu_ns "$pid_b"); t1=$(date +%s%N)
    line=$(awk -v a="$((a1 - a0))" -v b="$((b1 - b0))" -v t="$((t1 - t0))" -v r="$round" \
        'BEGIN { printf "%-6s %10.4f %10.4f %8.3f", r, a / t * 1000, b / t * 1000, (a > 0 ? b / a : 0) }')
    echo "$line"
    ratios+=("$(echo "$line" | awk '{ print $4 }')")
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "median B/A %.3f over %d rounds of %s s\n", v[int((NR + 1) / 2)], NR, '"$seconds"' }'
