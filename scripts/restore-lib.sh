# Sourced by scripts/budget.sh and scripts/memory.sh, which run steerd and irqbalance on the
# real machine: both write /proc/irq/*/smp_affinity_list (steerd also RPS/RFS files), and
# irqbalance does not put anything back. So every readable smp_affinity_list, rps_cpus,
# rps_flow_cnt and rps_sock_flow_entries is saved first (save_values) and written back where
# it differs (restore_values), by an EXIT trap, so also on Ctrl-C or failure. The trap stops
# only the processes the script started, by PID.
#
# The sourcing script sets, before sourcing: WORK (a temporary directory, removed at the
# end), SAVED (a file in it), STARTED_PIDS=() (it appends each PID it starts) and log().

save_values() {
    : >"$SAVED"
    local f
    for f in /proc/irq/*/smp_affinity_list \
        /sys/class/net/*/queues/rx-*/rps_cpus \
        /sys/class/net/*/queues/rx-*/rps_flow_cnt \
        /proc/sys/net/core/rps_sock_flow_entries; do
        [ -r "$f" ] || continue
        local v
        v=$(cat "$f" 2>/dev/null) || continue
        printf '%s\t%s\n' "$f" "$v" >>"$SAVED"
    done
}

restore_values() {
    [ -s "$SAVED" ] || return 0
    local f v now changed=0 failed=0
    while IFS=$'\t' read -r f v; do
        now=$(cat "$f" 2>/dev/null) || continue # gone (device removed): nothing to restore
        [ "$now" = "$v" ] && continue
        if printf '%s\n' "$v" >"$f" 2>/dev/null; then
            changed=$((changed + 1))
        else
            failed=$((failed + 1))
            log "could not restore $f to '$v' (now '$now')"
        fi
    done <"$SAVED"
    log "restored $changed changed value(s); $failed could not be restored"
}

# stop_started.
# shellcheck source=scripts/measure-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/measure-lib.sh"

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_started
    restore_values
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
