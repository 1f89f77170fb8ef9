#!/usr/bin/env bash
# Measures steerd's cost beside irqbalance's, in one run, on this machine.
#
# usage: scripts/budget.sh [SECONDS]        (default 60; must be run as root)
#
# Builds steerd as the packages ship it (scripts/shipped-binary.sh) and the idle floor
# (release), then for SECONDS each, one after the other:
#   (a) steerd run --root / --interval 1s --metrics-listen 127.0.0.1:<free port>
#                                           (the default configuration: on an idle machine
#                                            it goes quiet after 3 ticks, ticking every 5 s
#                                            and woken by receive work; docs/config.md)
#   (b) steerd-awake: the same with `quiet: {enabled: false}`, ticking every second
#   (c) examples/idle_floor                 (the floor: wakes once a second and preads
#                                            softnet_stat, and proc/stat every 5th second,
#                                            as an awake idle steerd tick does; nothing else)
#   (d) irqbalance --foreground             (Debian's package, its default 10 s interval)
# and prints, for each, CPU time per wall second and peak RSS beside the targets of issue 4,
# steerd's quiet-mode state at the end of its window, and steerd-awake's CPU time as a
# multiple of the floor's (the part that is steerd's own code).
#
# CPU time: the sum over every thread (/proc/PID/task/*/schedstat, first field, nanoseconds
# on CPU) at the start and at the end of the window; the window starts after a warm-up, so
# start-up (discovery) is not in it. The thread list is compared at both ends: a thread that
# exited in between would be missing from the sum, and the script says so. As a cross-check
# covering the whole life of the process (start-up and shutdown included), each program runs
# under `perf stat -e task-clock` when perf works (nanosecond counts of all threads).
# Peak RSS: VmHWM of /proc/PID/status at the end of the window.
#
# Both programs write real /proc/irq/*/smp_affinity_list (and steerd RPS/RFS files). steerd
# restores what it changed on SIGTERM; irqbalance does not. So every readable
# smp_affinity_list, rps_cpus, rps_flow_cnt and rps_sock_flow_entries is saved first and
# written back at the end (only where it differs), by an EXIT trap, so also on Ctrl-C or
# failure. The script stops only processes it started, by PID.

set -euo pipefail

DURATION=${1:-60}
WARMUP=3
case "$DURATION" in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS]" >&2
    exit 2
    ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    echo "budget.sh: must run as root (steerd would run observe-only, irqbalance cannot move IRQs)" >&2
    exit 2
fi

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/steerd-budget.XXXXXX)
STARTED_PIDS=()
SAVED="$WORK/saved-values"

log() { printf '%s\n' "budget.sh: $*" >&2; }

# --- saving and restoring kernel values -----------------------------------------------------

# save_values, restore_values and the EXIT trap that stops what was started and restores.
# shellcheck source=scripts/restore-lib.sh
. "$REPO/scripts/restore-lib.sh"

# --- helpers ----------------------------------------------------------------------------------

# cpu_ns PID, cpu_runs PID (schedstat sums over all current threads) and free_port.
# shellcheck source=scripts/measure-lib.sh
. "$REPO/scripts/measure-lib.sh"

threads() {
    local t list=''
    for t in /proc/"$1"/task/*; do
        list+="${t##*/} "
    done
    echo "$list"
}

vm_kb() { awk -v key="$2:" '$1 == key { print $2 }' /proc/"$1"/status; }

# The PID of the program started under `perf stat` (its only child), or the PID itself.
target_pid() {
    local launcher=$1 child
    if [ "$USE_PERF" = 1 ]; then
        for _ in $(seq 100); do
            child=$(pgrep -P "$launcher" | head -n1 || true)
            [ -n "$child" ] && [ "$(readlink /proc/"$child"/exe 2>/dev/null)" != "$(readlink /proc/"$launcher"/exe 2>/dev/null)" ] && {
                echo "$child"
                return 0
            }
            sleep 0.05
        done
        return 1
    fi
    echo "$launcher"
}

# --- preparation ------------------------------------------------------------------------------

log "building steerd as the packages ship it (scripts/shipped-binary.sh) and the idle floor (release)"
STEERD=$("$REPO/scripts/shipped-binary.sh")
(cd "$REPO" && cargo build --release --quiet --example idle_floor)
TARGET_DIR=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
FLOOR="$TARGET_DIR/release/examples/idle_floor"
for binary in "$STEERD" "$FLOOR"; do
    [ -x "$binary" ] || {
        log "no binary at $binary"
        exit 1
    }
done

RUNNING_BEFORE=$(pgrep -x irqbalance || true)
if [ -n "$RUNNING_BEFORE" ]; then
    log "irqbalance is already running (PID $RUNNING_BEFORE), not started by this script:"
    log "it would fight steerd over the IRQs and skew both figures; stop it yourself and rerun"
    exit 1
fi
if ! command -v irqbalance >/dev/null; then
    log "installing Debian's irqbalance"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q irqbalance >"$WORK/apt.log" 2>&1 || {
        cat "$WORK/apt.log" >&2
        exit 1
    }
    # A package install may start the service (no systemd as PID 1 here, but an init
    # script might run): stop only a daemon that appeared with the install.
    for pid in $(pgrep -x irqbalance || true); do
        log "the package install started irqbalance (PID $pid); stopping it"
        kill -TERM "$pid"
    done
fi
IRQBALANCE=$(command -v irqbalance)

USE_PERF=0
if command -v perf >/dev/null && perf stat -e task-clock -x, -o /dev/null -- true >/dev/null 2>&1; then
    USE_PERF=1
else
    log "perf stat not usable: no whole-life cross-check"
fi

save_values
log "saved $(wc -l <"$SAVED") kernel value(s) to restore at the end"

# --- measuring --------------------------------------------------------------------------------

# measure NAME COMMAND...: starts COMMAND, waits WARMUP s (or until READY_URL answers), then
# measures a DURATION s window; leaves its results in $WORK/NAME.*
measure() {
    local name=$1
    shift
    local launcher pid
    if [ "$USE_PERF" = 1 ]; then
        perf stat -e task-clock -x, -o "$WORK/$name.perf" -- "$@" >"$WORK/$name.log" 2>&1 &
    else
        "$@" >"$WORK/$name.log" 2>&1 &
    fi
    launcher=$!
    STARTED_PIDS+=("$launcher")
    pid=$(target_pid "$launcher") || {
        log "$name did not start"
        cat "$WORK/$name.log" >&2
        exit 1
    }
    STARTED_PIDS+=("$pid")
    local start_ns
    start_ns=$(date +%s%N)
    if [ -n "${READY_URL:-}" ]; then
        local ready=0
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            if curl -fsS -o /dev/null "$READY_URL" 2>/dev/null; then
                ready=1
                break
            fi
            sleep 0.1
        done
        if [ "$ready" = 0 ]; then
            log "$name did not answer on $READY_URL"
            cat "$WORK/$name.log" >&2
            exit 1
        fi
    fi
    sleep "$WARMUP"
    kill -0 "$pid" 2>/dev/null || {
        log "$name exited early"
        cat "$WORK/$name.log" >&2
        exit 1
    }
    log "measuring $name (PID $pid) for ${DURATION}s"
    local t0 c0 r0 th0 t1 c1 r1 th1
    th0=$(threads "$pid")
    t0=$(date +%s%N)
    c0=$(cpu_ns "$pid")
    r0=$(cpu_runs "$pid")
    sleep "$DURATION" &
    wait $!
    c1=$(cpu_ns "$pid")
    r1=$(cpu_runs "$pid")
    t1=$(date +%s%N)
    th1=$(threads "$pid")
    echo "$((c1 - c0)) $((t1 - t0)) $((r1 - r0)) $(vm_kb "$pid" VmHWM) $(vm_kb "$pid" VmRSS) $(wc -w <<<"$th1")" >"$WORK/$name.window"
    if [ "$th0" != "$th1" ]; then
        echo "threads changed during the window ($th0-> $th1): the schedstat sum may miss exited threads" >"$WORK/$name.note"
    fi
    if [ -n "${AFTER_WINDOW:-}" ]; then
        "$AFTER_WINDOW" "$name"
    fi
    kill -TERM "$pid"
    local stopped=0
    for _ in $(seq 100); do
        if ! kill -0 "$launcher" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; then
            stopped=1
            break
        fi
        sleep 0.1
    done
    if [ "$stopped" = 0 ]; then
        log "$name did not stop within 10 s of SIGTERM; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$launcher" 2>/dev/null || true
    # Both are gone and reaped now: forget their PIDs, which the system may reuse.
    STARTED_PIDS=()
    echo "$(($(date +%s%N) - start_ns))" >"$WORK/$name.life"
}

VERSION=$(cd "$REPO" && git describe --always --dirty=' with uncommitted changes' 2>/dev/null || echo unknown)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
STEERD_PORT=$(free_port)
steerd_after_window() {
    curl -fsS "http://127.0.0.1:$STEERD_PORT/metrics" >"$WORK/$1.metrics" || true
}
READY_URL="http://127.0.0.1:$STEERD_PORT/metrics" AFTER_WINDOW=steerd_after_window \
    measure steerd "$STEERD" run --root / --interval 1s \
    --metrics-listen "127.0.0.1:$STEERD_PORT" --state-file "$WORK/steerd-state.json"
restore_values
# The same with quiet mode off: every idle tick a wake-up, as on a machine that always
# receives a little.
printf 'quiet:\n  enabled: false\n' >"$WORK/awake.yaml"
READY_URL="http://127.0.0.1:$STEERD_PORT/metrics" AFTER_WINDOW=steerd_after_window \
    measure steerd-awake "$STEERD" run --root / --interval 1s --config "$WORK/awake.yaml" \
    --metrics-listen "127.0.0.1:$STEERD_PORT" --state-file "$WORK/steerd-awake-state.json"

# Whatever steerd left behind (it should have restored everything itself) is put back before
# irqbalance starts, so irqbalance sees the machine as it was.
restore_values
READY_URL='' AFTER_WINDOW='' measure floor "$FLOOR"
READY_URL='' AFTER_WINDOW='' measure irqbalance "$IRQBALANCE" --foreground

# --- report -----------------------------------------------------------------------------------

# perf's task-clock in ms over the whole life, or "-".
life_cpu() {
    local f="$WORK/$1.perf"
    [ -s "$f" ] || {
        echo "- -"
        return
    }
    local ms life_ns
    ms=$(awk -F, '$3 == "task-clock" || $3 ~ /^task-clock/ { print $1 }' "$f" | head -n1)
    life_ns=$(cat "$WORK/$1.life")
    [ -n "$ms" ] || {
        echo "- -"
        return
    }
    awk -v ms="$ms" -v ns="$life_ns" 'BEGIN { printf "%.1f %.4f\n", ms, ms / (ns / 1e9) }'
}

echo
echo "steerd budget, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs, window ${DURATION}s after ${WARMUP}s warm-up"
echo "steerd $VERSION; $("$IRQBALANCE" --version 2>&1 | head -n1)"
echo "CPU = sum of /proc/PID/task/*/schedstat (ns on CPU, all threads) over the window; RSS = VmHWM"
echo "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine inflates CPU time)"
echo
printf '%-12s %10s %9s %8s %9s %8s %7s %13s %13s\n' program "CPU ms/s" target "HWM MB" target runs/s threads "life CPU ms" "life ms/s"
for name in steerd steerd-awake floor irqbalance; do
    read -r cpu wall runs hwm_kb _ nthreads <"$WORK/$name.window"
    read -r life_ms life_rate < <(life_cpu "$name")
    case "$name" in
    steerd) cpu_target="<= 0.1" rss_target="<= 8.0" ;;
    steerd-awake | floor) cpu_target="-" rss_target="-" ;;
    *) cpu_target="~0.036" rss_target="~4.2" ;;
    esac
    awk -v n="$name" -v cpu="$cpu" -v wall="$wall" -v runs="$runs" -v hwm="$hwm_kb" \
        -v ct="$cpu_target" -v rt="$rss_target" -v th="$nthreads" -v lm="$life_ms" -v lr="$life_rate" \
        'BEGIN { printf "%-12s %10.4f %9s %8.2f %9s %8.2f %7d %13s %13s\n",
                 n, cpu / 1e6 / (wall / 1e9), ct, hwm / 1024, rt, runs / (wall / 1e9), th, lm, lr }'
    [ -s "$WORK/$name.note" ] && echo "  note ($name): $(cat "$WORK/$name.note")"
done
echo
read -r cpu wall _ hwm_kb _ _ <"$WORK/steerd.window"
awk -v cpu="$cpu" -v wall="$wall" -v hwm="$hwm_kb" 'BEGIN {
    rate = cpu / 1e6 / (wall / 1e9); mb = hwm / 1024
    if (rate <= 0.1) printf "steerd CPU: meets the 0.1 ms/s target (%.4f)\n", rate
    else printf "steerd CPU: MISSES the 0.1 ms/s target by %.4f ms/s (%.1fx)\n", rate - 0.1, rate / 0.1
    if (mb <= 8) printf "steerd RSS: meets the 8 MB target (%.2f MB)\n", mb
    else printf "steerd RSS: MISSES the 8 MB target by %.2f MB\n", mb - 8
}'
quiet_line() {
    [ -s "$WORK/$1.metrics" ] || return 0
    awk -v n="$1" '$1 == "steerd_quiet_mode" { q = $2 } $1 == "steerd_quiet_mode_available" { a = $2 }
        $1 == "steerd_quiet_receive_wakeups_total" { w = $2 }
        END { printf "%s at the end of the window: quiet_mode %s, quiet_mode_available %s, receive wake-ups %s\n", n, q, a, w }' \
        "$WORK/$1.metrics"
}
quiet_line steerd
quiet_line steerd-awake
read -r floor_cpu floor_wall _ <"$WORK/floor.window"
read -r awake_cpu awake_wall _ <"$WORK/steerd-awake.window"
awk -v cpu="$awake_cpu" -v wall="$awake_wall" -v fcpu="$floor_cpu" -v fwall="$floor_wall" 'BEGIN {
    rate = cpu / wall; floor = fcpu / fwall
    if (floor > 0) printf "steerd-awake / floor: %.2f (the floor: one wake-up and the same preads per second, no code)\n", rate / floor
}'
if [ -s "$WORK/steerd.metrics" ]; then
    sum=$(awk '$1 == "steerd_tick_duration_seconds_sum" { print $2 }' "$WORK/steerd.metrics")
    count=$(awk '$1 == "steerd_tick_duration_seconds_count" { print $2 }' "$WORK/steerd.metrics")
    awk -v s="$sum" -v c="$count" 'BEGIN {
        printf "steerd_tick_duration_seconds: sum %.6f s, count %d, mean %.1f us per tick (wall time inside the tick)\n",
               s, c, (c > 0 ? s / c * 1e6 : 0) }'
else
    echo "steerd /metrics could not be fetched at the end"
fi
