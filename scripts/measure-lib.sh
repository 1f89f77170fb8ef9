# Sourced by scripts/budget.sh, scripts/ab-idle.sh, scripts/decision-memory.sh,
# scripts/text-order.sh and (through scripts/restore-lib.sh) scripts/memory.sh: a process's
# CPU time and wake-ups from /proc/PID/task/*/schedstat (nanosecond resolution; clock ticks
# would be too coarse for a daemon that uses a tenth of a millisecond per second), a free
# loopback port for each steerd's metrics listener, the stop of what a script started, and
# examples/decision_churn's fake machine with the configuration that makes steerd decide.

# Nanoseconds on CPU, summed over all current threads of PID.
cpu_ns() {
    local sum=0 t ns
    for t in /proc/"$1"/task/*/schedstat; do
        read -r ns _ <"$t" 2>/dev/null || continue
        sum=$((sum + ns))
    done
    echo "$sum"
}

# Times a thread of PID was run (third schedstat field), summed: about its wake-ups.
cpu_runs() {
    local sum=0 t runs
    for t in /proc/"$1"/task/*/schedstat; do
        read -r _ _ runs <"$t" 2>/dev/null || continue
        sum=$((sum + runs))
    done
    echo "$sum"
}

# A TCP port on 127.0.0.1 that no socket uses now.
free_port() {
    local used='' port local_address _
    while read -r _ local_address _; do
        [ "$local_address" = local_address ] && continue
        used+="$((16#${local_address##*:}))"$'\n'
    done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
    while :; do
        port=$((20000 + RANDOM % 40000))
        grep -qx "$port" <<<"$used" || break
    done
    echo "$port"
}

# Stops every process in STARTED_PIDS (the PIDs the sourcing script started: SIGTERM, then
# SIGKILL after 5 s) and empties the list. Only those PIDs, never another process.
stop_started() {
    local pid
    for pid in "${STARTED_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${STARTED_PIDS[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    STARTED_PIDS=()
}

# start_churn CHURN TREE LOG: starts examples/decision_churn on a fake root at TREE (its
# PID in STARTED_PIDS) and waits until it says ready; a failure shows its log and exits.
start_churn() {
    "$1" "$2" >"$3" 2>&1 &
    STARTED_PIDS+=("$!")
    for _ in $(seq 100); do
        grep -qx ready "$3" 2>/dev/null && return 0
        sleep 0.1
    done
    log "decision_churn did not get ready:"
    cat "$3" >&2
    exit 1
}

# churn_config FILE: the configuration under which steerd decides every few ticks on
# decision_churn's machine (confirm at once, short dwell times).
churn_config() {
    cat >"$1" <<'EOF'
hysteresis:
  confirm_ticks: 1
  calm_ticks: 2
  irq_dwell: 1s
  rps_dwell: 1s
EOF
}
