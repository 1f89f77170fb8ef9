# Sourced by scripts/budget.sh and scripts/ab-idle.sh: a process's CPU time and wake-ups
# from /proc/PID/task/*/schedstat (nanosecond resolution; clock ticks would be too coarse
# for a daemon that uses a tenth of a millisecond per second).

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
