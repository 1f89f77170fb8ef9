#!/usr/bin/env bash
# Does steerd's memory plateau once its decision log is full, while clients read it?
#
# usage: [SAMPLE=S] [WINDOW=S] scripts/decision-memory.sh [SECONDS] [STEERD_BINARY...]
#        (SECONDS default 240; SAMPLE default 10, WINDOW default 60)
#
# Without a binary it builds steerd in release (the project's profile) and measures that;
# with one or more (say an old and a new build) it runs each in turn, so a change's effect
# is read in one run. It always builds examples/decision_churn (release), the fake machine.
#
# For each steerd, on a fake root in a temporary directory (nothing of the host's /proc or
# /sys is read or written; root is not needed):
#
#   - decision_churn writes the tree (8 cores x 2 threads, eth0 with 8 queues, eth1 with
#     one) and plays its kernel, switching every queue between 400k pkt/s and idle every
#     2 s; with the short hysteresis below steerd turns RPS and RFS on and off for each
#     queue every round, about 8 decisions a second, so the log is full within a minute;
#   - steerd runs `run --root TREE --interval 250ms --config C --metrics-listen 127.0.0.1:P`
#     (a free loopback port; C: confirm_ticks 1, calm_ticks 2, irq_dwell and rps_dwell 1s);
#   - a client reads /status and /decisions every 0.2 s (as a dashboard or `watch steerd
#     status` would, much more often);
#   - every SAMPLE seconds it prints VmRSS, RssAnon, VmHWM and the [heap] mapping's Rss
#     (from /proc/PID/status and smaps), the number of decisions in the log and the size
#     of the /status body;
#   - at the end, the median VmRSS and RssAnon of an early window ([WINDOW, 2 WINDOW) s,
#     once the start-up is over and the log has filled) and of the last WINDOW seconds, and
#     the growth between them (the soak's figure, docs/reliability.md, over minutes
#     instead of an hour, at about 30 times the decision rate).
#
# An EXIT trap stops what this script started (by PID: the churn, steerd, the client) and
# removes the temporary directory.

set -euo pipefail

DURATION=240
case "${1:-}" in
'' | *[!0-9]*) ;;
*)
    DURATION=$1
    shift
    ;;
esac
SAMPLE=${SAMPLE:-10}
WINDOW=${WINDOW:-60}
if [ "$DURATION" -lt $((3 * WINDOW)) ]; then
    echo "decision-memory.sh: SECONDS ($DURATION) must be at least 3 x WINDOW ($WINDOW)" >&2
    exit 2
fi

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/steerd-decision-memory.XXXXXX)
STARTED_PIDS=()

log() { printf '%s\n' "decision-memory.sh: $*" >&2; }

# free_port and stop_started.
# shellcheck source=scripts/measure-lib.sh
. "$REPO/scripts/measure-lib.sh"

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_started
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

TARGET_DIR=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
log "building examples/decision_churn (release)"
(cd "$REPO" && cargo build --release --quiet --example decision_churn)
CHURN="$TARGET_DIR/release/examples/decision_churn"
STEERDS=("$@")
if [ "${#STEERDS[@]}" -eq 0 ]; then
    log "building steerd (release)"
    (cd "$REPO" && cargo build --release --quiet --bin steerd)
    STEERDS=("$TARGET_DIR/release/steerd")
fi
for binary in "${STEERDS[@]}"; do
    [ -x "$binary" ] || {
        log "no binary at $binary"
        exit 1
    }
done

churn_config "$WORK/steerd.yaml"

status_kb() { awk -v key="$2:" '$1 == key { print $2 }' /proc/"$1"/status; }
heap_kb() { awk '/^[0-9a-f]+-[0-9a-f]+ / { heap = ($6 == "[heap]") } heap && $1 == "Rss:" { print $2; exit }' /proc/"$1"/smaps; }

# The client: /status and /decisions every 0.2 s until killed.
client() {
    local base=$1
    while :; do
        curl -fsS -o /dev/null "$base/status" 2>/dev/null || true
        curl -fsS -o /dev/null "$base/decisions" 2>/dev/null || true
        sleep 0.2
    done
}

# median of the numbers on stdin
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print 0; else print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# run_one NAME BINARY: the run described in the header; samples go to $WORK/NAME.samples as
# "seconds VmRSS RssAnon VmHWM heap decisions status_bytes".
run_one() {
    local name=$1 binary=$2
    local tree="$WORK/$name.tree"
    start_churn "$CHURN" "$tree" "$WORK/$name.churn"
    local port pid base
    port=$(free_port)
    base="http://127.0.0.1:$port"
    "$binary" run --root "$tree" --interval 250ms --config "$WORK/steerd.yaml" \
        --metrics-listen "127.0.0.1:$port" >"$WORK/$name.log" 2>&1 &
    pid=$!
    STARTED_PIDS+=("$pid")
    for _ in $(seq 100); do
        curl -fsS -o /dev/null "$base/healthz" 2>/dev/null && break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null || {
        log "$name exited early:"
        cat "$WORK/$name.log" >&2
        exit 1
    }
    client "$base" &
    STARTED_PIDS+=("$!")
    log "$name (PID $pid, $binary): ${DURATION}s on $tree, a sample every ${SAMPLE}s"
    printf '%s\n' "$name: $binary"
    printf '%6s %8s %8s %8s %8s %9s %12s\n' seconds VmRSS RssAnon VmHWM heap decisions status_bytes
    local t0 now t decisions status_bytes line
    t0=$(date +%s)
    : >"$WORK/$name.samples"
    for ((t = SAMPLE; t <= DURATION; t += SAMPLE)); do
        now=$(date +%s)
        [ $((t0 + t)) -gt "$now" ] && sleep $((t0 + t - now))
        kill -0 "$pid" 2>/dev/null || {
            log "$name stopped:"
            tail -n 20 "$WORK/$name.log" >&2
            exit 1
        }
        decisions=$(curl -fsS "$base/decisions" 2>/dev/null | grep -o '"tick":' | wc -l || true)
        status_bytes=$(curl -fsS "$base/status" 2>/dev/null | wc -c || true)
        line="$t $(status_kb "$pid" VmRSS) $(status_kb "$pid" RssAnon) $(status_kb "$pid" VmHWM) $(heap_kb "$pid") $decisions $status_bytes"
        echo "$line" >>"$WORK/$name.samples"
        # shellcheck disable=SC2086
        printf '%6s %8s %8s %8s %8s %9s %12s\n' $line
    done
    stop_started
    echo
}

NAMES=()
n=0
for binary in "${STEERDS[@]}"; do
    n=$((n + 1))
    name="steerd$n"
    run_one "$name" "$binary"
    NAMES+=("$name")
done

# window NAME COLUMN FROM TO: the median of COLUMN over the samples with FROM <= seconds < TO.
window() {
    awk -v c="$2" -v from="$3" -v to="$4" '$1 >= from && $1 < to { print $c }' "$WORK/$1.samples" | median
}

echo "decision memory, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs; ${DURATION}s each, medians of the samples every ${SAMPLE}s"
echo "early window [${WINDOW}, $((2 * WINDOW))) s, last window [$((DURATION - WINDOW + 1)), ${DURATION}] s; kB"
printf '%-8s %12s %12s %20s %12s %12s %20s %8s %10s\n' "" "VmRSS early" "VmRSS last" "VmRSS growth" "RssAnon early" "RssAnon last" "RssAnon growth" "VmHWM" "decisions"
for name in "${NAMES[@]}"; do
    rss_early=$(window "$name" 2 "$WINDOW" $((2 * WINDOW)))
    rss_last=$(window "$name" 2 $((DURATION - WINDOW + 1)) $((DURATION + 1)))
    anon_early=$(window "$name" 3 "$WINDOW" $((2 * WINDOW)))
    anon_last=$(window "$name" 3 $((DURATION - WINDOW + 1)) $((DURATION + 1)))
    hwm=$(tail -n 1 "$WORK/$name.samples" | awk '{ print $4 }')
    decisions=$(tail -n 1 "$WORK/$name.samples" | awk '{ print $6 }')
    growth() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+d (%+.2f %%)", b - a, a ? 100 * (b - a) / a : 0 }'; }
    printf '%-8s %12s %12s %20s %12s %12s %20s %8s %10s\n' "$name" "$rss_early" "$rss_last" "$(growth "$rss_early" "$rss_last")" \
        "$anon_early" "$anon_last" "$(growth "$anon_early" "$anon_last")" "$hwm" "$decisions"
done
