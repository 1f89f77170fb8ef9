#!/usr/bin/env bash
# Where steerd's memory goes, beside irqbalance's, in one run on this machine.
#
# usage: [ROUNDS=N] scripts/memory.sh [SECONDS] [STEERD_BINARY...]   (root; SECONDS default 20)
#
# Without a binary it builds steerd as the packages ship it (scripts/shipped-binary.sh) and
# measures that;
# with one or more (say an old and a new build) it measures each, so a change's saving is
# read in one run. Then, one after the other, for each steerd and for Debian's irqbalance:
#
#   - starts it (steerd: `run --root / --interval 1s`, the default configuration, a free
#     loopback metrics port, a state file in a temporary directory; irqbalance:
#     `--foreground`, its 10 s interval), and samples VmRSS every 0.05 s for the first 3 s
#     (start-up: when the peak is reached);
#   - lets it run SECONDS, with one /metrics scrape halfway (as Prometheus would; the HTTP
#     code's pages count), then reads /proc/PID/status (VmHWM, VmRSS, RssAnon, RssFile,
#     RssShmem, threads) and /proc/PID/smaps, each mapping's Rss put in one group:
#       program text / program other   the executable's r-xp mapping / its other mappings
#       libc, ld.so, other libraries   file mappings of shared objects (the names are listed)
#       heap                           [heap]: the main thread's malloc arena (brk)
#       malloc arenas                  anonymous rw-p mappings at a 64 MiB boundary: glibc's
#                                      per-thread arenas (each reserves 64 MiB; touched
#                                      pages count)
#       thread stacks                  anonymous rw-p mappings right after a 4 kB guard
#                                      (---p) mapping: a pthread stack
#       main stack, other anon         [stack]; every other anonymous mapping
#   - stops it with SIGTERM (steerd restores what it wrote).
#
# ROUNDS (default 1) repeats the whole sequence and prints each figure's median over the rounds:
# the file-backed figures move by up to ±100 kB between runs of the same binary (which pages
# a run's code paths fault in, 64 kB at a time), the anonymous ones by a few kB.
#
# It prints one table, a column per program. Every readable /proc/irq/*/smp_affinity_list
# and RPS/RFS value is saved first and written back at the end by the same EXIT trap as
# budget.sh's (scripts/restore-lib.sh), which stops only the processes this script started.
# Refuses to run while an irqbalance it did not start is running.

set -euo pipefail

DURATION=20
case "${1:-}" in
'' | *[!0-9]*) ;;
*)
    DURATION=$1
    shift
    ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    echo "memory.sh: must run as root (as another user steerd only observes, irqbalance cannot move IRQs)" >&2
    exit 2
fi

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/steerd-memory.XXXXXX)
STARTED_PIDS=()
SAVED="$WORK/saved-values"

log() { printf '%s\n' "memory.sh: $*" >&2; }

# save_values, restore_values and the EXIT trap that stops what was started and restores.
# shellcheck source=scripts/restore-lib.sh
. "$REPO/scripts/restore-lib.sh"
# free_port.
# shellcheck source=scripts/measure-lib.sh
. "$REPO/scripts/measure-lib.sh"

STEERDS=("$@")
if [ "${#STEERDS[@]}" -eq 0 ]; then
    log "building steerd as the packages ship it (scripts/shipped-binary.sh)"
    STEERDS=("$("$REPO/scripts/shipped-binary.sh")")
fi
for binary in "${STEERDS[@]}"; do
    [ -x "$binary" ] || {
        log "no binary at $binary"
        exit 1
    }
done

RUNNING_BEFORE=$(pgrep -x irqbalance || true)
if [ -n "$RUNNING_BEFORE" ]; then
    log "irqbalance is already running (PID $RUNNING_BEFORE), not started by this script; stop it yourself and rerun"
    exit 1
fi
command -v irqbalance >/dev/null || {
    log "no irqbalance: apt-get install irqbalance (scripts/budget.sh installs it)"
    exit 1
}
IRQBALANCE=$(command -v irqbalance)

save_values
log "saved $(wc -l <"$SAVED") kernel value(s) to restore at the end"

status_kb() { awk -v key="$2:" '$1 == key { print $2 }' /proc/"$1"/status; }

# breakdown PID EXE: "group kB" lines from /proc/PID/smaps (see the header), and
# "lib NAME kB" for each other library.
breakdown() {
    awk -v exe="$2" '
        function hex(s,   i, v) {
            v = 0
            for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
            return v
        }
        function flush() {
            if (range == "") return
            if (path == exe) g = (perms ~ /x/) ? "program-text" : "program-other"
            else if (path ~ /\/libc\.so/) g = "libc"
            else if (path ~ /\/ld-linux/) g = "ld.so"
            else if (path ~ /^\//) { g = "other-libraries"; n = path; sub(/.*\//, "", n); lib[n] += rss }
            else if (path == "[heap]") g = "heap"
            else if (path == "[stack]") g = "main-stack"
            else if (path ~ /^\[/) g = "vdso"
            else if (perms == "rw-p" && start % (64 * 1024 * 1024) == 0) g = "malloc-arenas"
            else if (perms == "rw-p" && prev_guard_end == start) g = "thread-stacks"
            else g = "other-anon"
            sum[g] += rss
            prev_guard_end = (path == "" && perms == "---p" && end - start == 4096) ? end : -1
        }
        /^[0-9a-f]+-[0-9a-f]+ / {
            flush()
            range = $1; perms = $2; path = $6
            split(range, r, "-"); start = hex(r[1]); end = hex(r[2])
            rss = 0
            next
        }
        $1 == "Rss:" { rss = $2 }
        END {
            flush()
            for (g in sum) print g, sum[g]
            for (n in lib) print "lib", n, lib[n]
        }' /proc/"$1"/smaps
}

# run_one NAME URL COMMAND...: starts COMMAND, records the start-up curve, the window and the
# breakdown in $WORK/NAME.*; URL (or "") is scraped once halfway.
run_one() {
    local name=$1 url=$2
    shift 2
    "$@" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    STARTED_PIDS+=("$pid")
    local t0 i rss peak=0 peak_at=0
    t0=$(date +%s%N)
    for i in $(seq 60); do
        kill -0 "$pid" 2>/dev/null || break
        rss=$(status_kb "$pid" VmRSS 2>/dev/null || echo 0)
        if [ -n "$rss" ] && [ "$rss" -gt "$peak" ]; then
            peak=$rss
            peak_at=$((($(date +%s%N) - t0) / 1000000))
        fi
        sleep 0.05
    done
    kill -0 "$pid" 2>/dev/null || {
        log "$name exited early:"
        cat "$WORK/$name.log" >&2
        exit 1
    }
    local hwm_startup
    hwm_startup=$(status_kb "$pid" VmHWM)
    log "$name (PID $pid): VmHWM ${hwm_startup} kB after 3 s; running ${DURATION}s"
    sleep $((DURATION / 2))
    if [ -n "$url" ]; then
        curl -fsS -o /dev/null "$url" || log "$name: $url did not answer"
    fi
    sleep $((DURATION - DURATION / 2))
    {
        echo "startup-peak-rss $peak"
        echo "startup-peak-ms $peak_at"
        echo "hwm-after-3s $hwm_startup"
        local key
        for key in VmHWM VmRSS RssAnon RssFile RssShmem Threads; do
            echo "$key $(status_kb "$pid" "$key")"
        done
        breakdown "$pid" "$(readlink /proc/"$pid"/exe)"
    } >"$WORK/$name.mem"
    kill -TERM "$pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name did not stop within 10 s of SIGTERM; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    STARTED_PIDS=()
    restore_values
}

ROUNDS=${ROUNDS:-1}
NAMES=()
for round in $(seq "$ROUNDS"); do
    NAMES=()
    n=0
    for binary in "${STEERDS[@]}"; do
        n=$((n + 1))
        name="steerd$n"
        [ "${#STEERDS[@]}" -eq 1 ] && name=steerd
        mkdir -p -m 0700 "$WORK/$name.state"
        rm -f "$WORK/$name.state/state.json"
        port=$(free_port)
        run_one "$name.r$round" "http://127.0.0.1:$port/metrics" "$binary" run --root / --interval 1s \
            --metrics-listen "127.0.0.1:$port" --state-file "$WORK/$name.state/state.json"
        NAMES+=("$name")
    done
    run_one "irqbalance.r$round" "" "$IRQBALANCE" --foreground
    NAMES+=(irqbalance)
done

echo
echo "memory, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs; each program ${DURATION}s after start, one /metrics scrape halfway; median of $ROUNDS round(s)"
echo "steerd $(cd "$REPO" && git describe --always --dirty=' with uncommitted changes' 2>/dev/null || echo unknown); $("$IRQBALANCE" --version 2>&1 | head -n1)"
n=0
for binary in "${STEERDS[@]}"; do
    n=$((n + 1))
    [ "${#STEERDS[@]}" -gt 1 ] && echo "steerd$n = $binary ($(stat -c %s "$binary") bytes)"
done
echo "kB of Rss; groups from /proc/PID/smaps (scripts/memory.sh's header says which mapping goes where)"
echo
printf '%-26s' "kB"
for name in "${NAMES[@]}"; do printf ' %12s' "$name"; done
echo
# row LABEL KEY: the median of KEY over each program's rounds (0 where a round lacks it).
row() {
    local label=$1 key=$2 name v
    printf '%-26s' "$label"
    for name in "${NAMES[@]}"; do
        v=$(for f in "$WORK/$name".r*.mem; do
            awk -v k="$key" '$1 == k && NF == 2 { v = $2 } END { print v + 0 }' "$f"
        done | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2) }')
        printf ' %12s' "${v:-0}"
    done
    echo
}
row "VmHWM (peak RSS)" VmHWM
row "VmRSS (at the end)" VmRSS
row "  RssAnon" RssAnon
row "  RssFile" RssFile
row "  RssShmem" RssShmem
row "peak VmRSS in first 3 s" startup-peak-rss
row "  reached at ms" startup-peak-ms
row "VmHWM after 3 s" hwm-after-3s
row "threads" Threads
echo "Rss by mapping:"
row "  program text" program-text
row "  program other" program-other
row "  libc" libc
row "  ld.so" ld.so
row "  other libraries" other-libraries
row "  heap (brk)" heap
row "  malloc arenas" malloc-arenas
row "  thread stacks" thread-stacks
row "  main stack" main-stack
row "  other anon" other-anon
row "  vdso, vvar" vdso
echo
for name in "${NAMES[@]}"; do
    libs=$(awk '$1 == "lib" { printf "%s %s kB, ", $2, $3 }' "$WORK/$name.r1.mem")
    echo "other libraries of $name (round 1): ${libs%, }"
done
