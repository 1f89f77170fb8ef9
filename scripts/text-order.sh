#!/usr/bin/env bash
# Regenerates packaging/text-order.txt: the functions the daemon runs, in the order the
# linker is to put them first in the program's text (build.rs passes the file to lld as
# `--symbol-ordering-file` for the release `steerd`).
#
# usage: [IDLE=S] scripts/text-order.sh [SECONDS]   (root; SECONDS per workload, default 20,
#        then IDLE seconds, default 20, without a read)
#        STEERD_BINARY=PATH profiles that build instead of the shipped one (another
#        target or profile: its symbol names carry its own hashes); TEXT_ORDER_OUT=FILE
#        writes the list there instead of packaging/text-order.txt.
#
# Why: the daemon's peak RSS is mostly its program text, and nearly all of the text is
# mapped although about a third of it runs: on a page fault in a cached file the kernel
# maps the 64 kB around the page (fault-around), and the code start-up and the ticks touch
# is spread over the whole binary (docs/performance.md, "Where the memory goes"). Put
# together at the start of the text, the code that runs fills far fewer 64 kB windows.
#
# How: valgrind's callgrind lists every function a process executes. The script builds
# steerd as the packages ship it (scripts/shipped-binary.sh) and examples/decision_churn, then runs steerd under callgrind in two
# workloads, each SECONDS long with /metrics, /status and /decisions read every second, a
# SIGHUP reload halfway, then IDLE seconds without a read (what an idle daemon runs: with
# the reads alone the list left 300-500 kB more text mapped, docs/performance.md), one
# scrape, and SIGTERM at the end (the restore):
#
#   - on this machine's real /proc and /sys, as scripts/memory.sh runs it (the default
#     configuration, a state file in a temporary directory; the values steerd writes are
#     saved first and put back by an EXIT trap, scripts/restore-lib.sh);
#   - on decision_churn's fake root, whose queues switch between 400k pkt/s and idle, so
#     RPS, RFS and IRQ moves are decided and written every few ticks.
#
# The functions of the steerd binary that either run executed are written by their
# symbol names (mangled, as the linker sees them), in order of first appearance. A name the next
# build no longer has is skipped by the linker (`--no-warn-symbol-ordering`); code added
# since the last run is placed after the listed functions, so a stale list costs memory,
# never correctness. Rerun it after large changes and compare with
# `ROUNDS=3 scripts/memory.sh 20 OLD NEW`.
set -euo pipefail

DURATION=${1:-20}
IDLE=${IDLE:-20}
if [ "$(id -u)" -ne 0 ]; then
    echo "text-order.sh: must run as root (the real-root workload runs steerd as the daemon runs)" >&2
    exit 2
fi
command -v valgrind >/dev/null || {
    echo "text-order.sh: no valgrind (apt-get install valgrind)" >&2
    exit 2
}

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/steerd-text-order.XXXXXX)
STARTED_PIDS=()
SAVED="$WORK/saved-values"

log() { printf '%s\n' "text-order.sh: $*" >&2; }

. "$REPO/scripts/restore-lib.sh"
. "$REPO/scripts/measure-lib.sh"

TARGET_DIR=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
# steerd on its own, as it ships (scripts/shipped-binary.sh): the symbol names of
# steerd's own code carry a hash of the crate's build (its target and features too), and
# the example needs the test-support feature.
BUILT=${STEERD_BINARY:-}
if [ -z "$BUILT" ]; then
    log "building steerd as the packages ship it (scripts/shipped-binary.sh)"
    BUILT=$("$REPO/scripts/shipped-binary.sh")
fi
# Without its debug information valgrind names functions by the symbol table, as the
# linker does (with it, by the debug information's names, in another mangling).
STEERD="$WORK/steerd"
objcopy --strip-debug "$BUILT" "$STEERD"
log "building examples/decision_churn (release)"
(cd "$REPO" && cargo build --release --quiet --example decision_churn)
CHURN="$TARGET_DIR/release/examples/decision_churn"

# steerd runs itself again at start with glibc's thread cache off (src/memory.rs), and
# callgrind does not follow an exec: with the tunable already set it runs on as it is.
export GLIBC_TUNABLES=glibc.malloc.tcache_count=0

save_values
log "saved $(wc -l <"$SAVED") kernel value(s) to restore at the end"

# exercise NAME ARGS...: steerd ARGS under callgrind for DURATION seconds, read over HTTP,
# reloaded halfway, stopped with SIGTERM; its profile in $WORK/NAME.cg.
exercise() {
    local name=$1 port
    shift
    port=$(free_port)
    valgrind --tool=callgrind --demangle=no --dump-instr=no \
        --callgrind-out-file="$WORK/$name.cg" \
        "$STEERD" run "$@" --metrics-listen "127.0.0.1:$port" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    STARTED_PIDS+=("$pid")
    local base="http://127.0.0.1:$port" t
    for t in $(seq "$DURATION"); do
        kill -0 "$pid" 2>/dev/null || {
            log "$name: steerd exited early:"
            cat "$WORK/$name.log" >&2
            exit 1
        }
        for path in metrics status decisions healthz; do
            curl -fsS -m 5 -o /dev/null "$base/$path" 2>/dev/null || true
        done
        [ "$t" -eq $((DURATION / 2)) ] && kill -HUP "$pid"
        sleep 1
    done
    # Then idle, as a machine without traffic is and as memory.sh measures it: the reads
    # above are loopback packets every second, and an idle daemon runs other code. With
    # none for IDLE seconds that code is profiled too (quiet mode's, when it starts within
    # IDLE under callgrind; the lists of 2026-11-26 hold none of it), then one scrape.
    sleep "$IDLE"
    curl -fsS -m 5 -o /dev/null "$base/metrics" 2>/dev/null || true
    sleep 3
    kill -TERM "$pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    log "$name: $(grep -c '^fn=' "$WORK/$name.cg") functions seen"
}

mkdir -p -m 0700 "$WORK/state"
exercise real-root --root / --interval 1s --state-file "$WORK/state/state.json"

start_churn "$CHURN" "$WORK/tree" "$WORK/churn.log"
churn_config "$WORK/steerd.yaml"
exercise fake-root --root "$WORK/tree" --interval 250ms --config "$WORK/steerd.yaml"

# Callgrind compresses names: "fn=(id) name" the first time, "fn=(id)" after; "ob=" sets
# the object the following functions belong to. Keep steerd's, in order of first
# appearance, without callgrind's recursion suffix ('2) and unnamed addresses. (LTO's
# local copies, name.1234, are renumbered when the code changes: such a name then
# misses, and its function lands after the listed ones.)
awk -v exe="$STEERD" '
    match($0, /^c?ob=\([0-9]+\)/) {
        id = substr($0, RSTART, RLENGTH); sub(/^c?ob=/, "", id)
        rest = substr($0, RLENGTH + 2)
        if (rest != "") obj[id] = rest
        if ($0 ~ /^ob=/) cur = obj[id]
        next
    }
    match($0, /^c?fn=\([0-9]+\)/) {
        id = substr($0, RSTART, RLENGTH); sub(/^c?fn=/, "", id)
        rest = substr($0, RLENGTH + 2)
        if (rest != "") name[id] = rest
        if ($0 ~ /^fn=/ && cur == exe) {
            n = name[id]; sub(/'\''[0-9]+$/, "", n)
            if (n ~ /^_/ && !(n in seen)) { seen[n] = 1; print n }
        }
    }' "$WORK/real-root.cg" "$WORK/fake-root.cg" >"$WORK/order.txt"

OUT=${TEXT_ORDER_OUT:-$REPO/packaging/text-order.txt}
{
    echo "# The functions the daemon runs, first in its text (scripts/text-order.sh; build.rs)."
    echo "# $(wc -l <"$WORK/order.txt") functions, $(date -u +%Y-%m-%d), steerd $(cd "$REPO" && git describe --always --dirty 2>/dev/null || echo unknown)."
    cat "$WORK/order.txt"
} >"$OUT"
log "wrote $OUT ($(wc -l <"$WORK/order.txt") functions); rebuild and compare: ROUNDS=3 scripts/memory.sh 20 OLD NEW"
