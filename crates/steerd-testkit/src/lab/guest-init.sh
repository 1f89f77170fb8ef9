#!/bin/busybox sh
# The lab guest's /init (busybox sh). It brings up the NIC, applies the scenario's
# set-up, snapshots every value a balancer may change, starts the balancer, samples the
# counters the host's report needs for a fixed time (running the scenario's timed events
# on the way), stops the balancer with SIGTERM, compares every value with the snapshot and
# powers off. Everything it prints for the host starts with a tag the host parses:
#   LAB READY / LAB EVENT uptime command / S uptime / N softnet row / C cpu line / I irq counts /
#   A irq affinity effective / R dev queue rps_cpus / E (end of sample) / LOG daemon line /
#   LAB DIFF what / LAB RESTORED yes|no / LAB DAEMON cpu_ticks rss_kb / LAB DONE /
#   LAB KERNEL release / T pid comm cpus_allowed_list last_cpu run_ticks (one per NAPI thread) /
#   Q queue rx_packets (at the end) / DOC doctor json line, DOCERR, DOCTOR EXIT status /
#   XP dev queue xps_cpus (each sample) / TXB, TXE queue tx_packets (start, end) /
#   TCB, TCE line (start, end: each line of `tc -s qdisc show dev eth0`, the transmit
#     queues' qdiscs with their requeues; none when tc fails) /
#   LAB HELD strace line (the in-flight fault scenarios: the write strace holds) /
#   LAB PARTITION state isolated-cpus (the cgroup scenario: the partition as the kernel took it)
# With QUEUE_WATCH=1 (the RSS lever's and the saturated scenarios) each sample also carries
# the NIC's packets per rx queue and its RSS table; with RSS_WATCH=1 (the RSS lever's) the
# end adds steerd's steerd_rss_* metrics (scraped before SIGTERM); every run has the table
# before and after:
#   QS q0_packets q1_packets ... / X entry0 entry1 ... / M metric line /
#   XB entries... key KEY (before the balancer) / XA entries... key KEY (after SIGTERM)
# With DAEMON_STATS=1 (the soak) each sample is followed by the daemon's own figures:
#   D uptime alive rss_kb hwm_kb threads fds tick_sum tick_count ticks reloads_ok reloads_error
#     anon_kb file_kb      (RSS from smaps_rollup; see daemon_stats)
# and, when RSS changed since the last sample, its mappings and the daemon's new log lines:
#   DS uptime rss_kb first-last name / DL log line
# and the end adds LAB PANICS count (daemon log lines with "panicked").
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# The cgroup v2 hierarchy where systemd mounts it (the cgroup scenario's partitions).
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /run /tmp /var/run
# As systemd mounts it: root's alone (steerd mounts tracefs for a moment under /run only
# when nobody else can write there).
mount -t tmpfs -o mode=0755 run /run
mount -t tmpfs tmp /tmp
. /lab.env
for m in $MODULES; do insmod "/modules/$m.ko" || echo "LAB ERROR insmod $m"; done
ip link set lo up

# The igbvf lab (lab/platform.rs): the igb the guest booted with becomes pf0, up and
# unaddressed, and its one VF (igbvf, loaded with the modules) takes the name eth0 and
# the guest's address, so everything below steers the VF. The VF is made once the PF's
# link is up, and its address set once the link is back after the PF's re-initialisation
# for SR-IOV: a VF address set while the PF resets was lost until the VF's next reset,
# and QEMU gave its packets to the PF's default pool for the first 9 s of traffic.
# wait_for CONDITION WHAT: up to 10 s for a shell condition, else a LAB ERROR saying WHAT.
wait_for() {
    i=0
    until eval "$1"; do
        if [ $i -ge 100 ]; then
            echo "LAB ERROR $2"
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
}
carrier_up() { [ "$(cat "/sys/class/net/$1/carrier" 2>/dev/null)" = 1 ]; }
make_vf() {
    ip link set eth0 name pf0 || echo "LAB ERROR renaming the physical function"
    ip link set pf0 up
    wait_for "carrier_up pf0" "pf0 has no carrier 10 s after ip link set up"
    echo 1 > /sys/class/net/pf0/device/sriov_numvfs || echo "LAB ERROR sriov_numvfs refused"
    wait_for "[ -e /sys/class/net/eth0 ]" "no VF netdev 10 s after sriov_numvfs"
    wait_for "carrier_up pf0" "pf0 has no carrier 10 s after sriov_numvfs"
    ip link set eth0 address "$GUEST_MAC" || echo "LAB ERROR the VF refused its address"
}
# After the address is up: whether the VF receives (the host's echo reply comes to
# GUEST_MAC). A VF whose address the PF lost in a reset does not: its packets go to the
# PF's default pool until the VF resets, which bringing its link down and up does.
vf_receives() {
    tries=0
    until ping -c 1 -W 1 "$HOST_ADDR" > /dev/null 2>&1; do
        tries=$((tries + 1))
        if [ $tries -ge 10 ]; then
            echo "LAB ERROR the VF received nothing in 10 tries"
            return
        fi
        if [ $((tries % 3)) = 0 ]; then
            ip link set eth0 down
            ip link set eth0 up
            # A link going down flushes its neighbours, permanent ones too.
            ip neigh replace "$HOST_ADDR" lladdr "$HOST_MAC" dev eth0 nud permanent
        fi
    done
}
eval "$NIC_PREPARE"
ip link set eth0 up
ip addr add "$GUEST_ADDR/24" dev eth0
ip neigh replace "$HOST_ADDR" lladdr "$HOST_MAC" dev eth0 nud permanent
# The NIC's own set-up (lab/platform.rs: igb hashes UDP on ports only when told to).
eval "$NIC_SETUP"
# TCP sinks: one listener per port, output discarded.
for port in $TCP_PORTS; do
    ( while true; do nc -l -p "$port" > /dev/null 2>&1 || break; done ) &
done
echo 1000000 > /proc/sys/net/ipv4/icmp_msgs_per_sec 2>/dev/null
echo 0 > /proc/sys/net/ipv4/icmp_ratelimit 2>/dev/null

# Whether a /proc/interrupts line is a vector this lab watches: the NIC's and the disk's,
# as each driver names them (virtio: virtioN-input.Q, -output.Q, -config, -req.Q; igb and
# igbvf: eth0-rx-Q, eth0-tx-Q or eth0-TxRx-Q and eth0 for the link or mailbox; vmxnet3:
# eth0-rxtx-Q and eth0-event-N).
WATCHED='$NF ~ /^virtio[0-9]+-(input|output|config|req|request)/ || $NF ~ /^eth0(-|$)/'
QIRQS=$(awk "$WATCHED"' { sub(":", "", $1); print $1 }' /proc/interrupts)

# The NIC's queue vectors: "irq kind queue", kind input (receive), output (transmit) or
# rxtx (both, one vector per queue pair).
nic_vectors() {
    awk '{ irq = $1; sub(":", "", irq); n = $NF }
        n ~ /^virtio[0-9]+-(input|output)\.[0-9]+$/ {
            sub(/^virtio[0-9]+-/, "", n); split(n, p, "."); print irq, p[1], p[2]; next }
        n ~ /^eth0-(rx|tx|TxRx|rxtx)-[0-9]+$/ {
            split(n, p, "-"); k = p[2] == "rx" ? "input" : p[2] == "tx" ? "output" : "rxtx"
            print irq, k, p[3] }' /proc/interrupts
}

# Every NAPI kernel thread (threaded NAPI: `napi/DEV-ID`, found by its comm), one line
# each: "$1 pid comm cpus_allowed_list last_cpu run_ticks" with its allowed CPUs
# (Cpus_allowed_list of /proc/PID/status), the CPU it last ran on (field 39 of
# /proc/PID/stat) and its user+system ticks (fields 14 and 15). The transmit NAPIs of
# virtio-net have no id and are all named napi/eth0-0, so a thread is known by its pid,
# which stays while `threaded` stays on. One awk reads every file: a shell loop of `read`
# (a syscall per byte) made a sample take about a second under TCG.
napi_lines() { # tag
    files=
    for f in $(grep -l '^napi/' /proc/[0-9]*/comm 2>/dev/null); do
        files="$files ${f%/comm}/status ${f%/comm}/stat"
    done
    [ -n "$files" ] || return 0
    awk -v tag="$1" '
        FILENAME ~ /status$/ {
            if (FNR == 1) { name = "-"; pid = "-"; allowed = "-" }
            if ($1 == "Name:") name = $2
            if ($1 == "Pid:") pid = $2
            if ($1 == "Cpus_allowed_list:") allowed = $2
            next
        }
        {
            line = $0; sub(/^.*\) /, "", line); n = split(line, f, " ")
            print tag, pid, name, allowed, (n >= 37 ? f[37] : "-"), (n >= 13 ? f[12] + f[13] : "-")
        }' $files 2>/dev/null
}

# The NIC's rx packets per queue (ethtool -S, either layout of per_queue_packets) and its
# RSS table (ethtool -x) in one pass: "QS p0 p1 ..." and "X e0 e1 ...".
rss_lines() {
    { ethtool -S eth0; echo ---; ethtool -x eth0; } 2>/dev/null | awk '
        $1 == "---" { t = 1; next }
        !t { n = $1; sub(":", "", n)
             if (n ~ /^rx_?(queue_)?[0-9]+_packets$/) { q = n; gsub(/[^0-9]/, "", q); p[q] = $2; if (q + 1 > nq) nq = q + 1 }
             else if ($2 == "Queue#:") blk = (tolower($1) == "rx") ? $3 : ""
             else if (blk != "" && $2 == "pkts" && $3 == "rx:" && $1 ~ /^(ucast|mcast|bcast)$/) { p[blk] += $4; if (blk + 1 > nq) nq = blk + 1 }
             next }
        $1 ~ /^[0-9]+:$/ { for (i = 2; i <= NF; i++) x = x " " $i }
        END { s = "QS"; for (i = 0; i < nq; i++) s = s " " p[i]; print s; print "X" x }'
}

# The RSS table and key as ethtool -x shows them, on one line: "entries... key KEY".
rss_table() {
    ethtool -x eth0 2>/dev/null | awk '
        $1 ~ /^[0-9]+:$/ { for (i = 2; i <= NF; i++) x = x " " $i; next }
        /RSS hash key/ { k = 1; next }
        k == 1 { key = ($1 ~ /^[0-9a-f][0-9a-f](:|$)/ ? $1 : "-"); k = 2 }
        END { print substr(x, 2), "key", key }'
}

# Each queue's received packets since boot, "$1 queue packets" per queue, from ethtool -S:
# virtio-net and igb print rx_queue_N_packets; vmxnet3 a block per queue ("Rx Queue#: N"
# then indented "ucast pkts rx: ...", mcast and bcast), whose packets are the sum.
queue_packets() { # tag
    per_queue_packets "$1" rx
}
# per_queue_packets TAG rx|tx: both layouts, for either direction.
per_queue_packets() { # tag direction
    ethtool -S eth0 2>/dev/null | awk -v tag="$1" -v dir="$2" '
        { n = $1; sub(":", "", n) }
        n ~ ("^" dir "_?(queue_)?[0-9]+_packets$") { q = n; gsub(/[^0-9]/, "", q); print tag, q, $2; next }
        $2 == "Queue#:" { block = (tolower($1) == dir) ? $3 : ""; next }
        block != "" && $2 == "pkts" && $3 == dir ":" && $1 ~ /^(ucast|mcast|bcast)$/ { sum[block] += $4; seen[block] = 1 }
        END { for (q in seen) print tag, q, sum[q] }' | sort -k2,2n
}
# The NIC's own receive losses, "$1 missed fifo over" (/sys/class/net/eth0/statistics):
# packets the device or driver lost before the kernel's backlogs saw them (igb counts a
# full ring in rx_missed_errors and rx_fifo_errors), which softnet's dropped never counts.
# Not rx_dropped: the kernel adds its own backlog drops to it (measured on 6.12: equal to
# softnet's dropped under RPS), so it would count those twice.
nic_drops() { # tag
    d=/sys/class/net/eth0/statistics
    echo "$1 $(cat $d/rx_missed_errors $d/rx_fifo_errors $d/rx_over_errors 2>/dev/null | tr '\n' ' ')"
}
# The same for transmitted packets.
tx_packets() { # tag
    per_queue_packets "$1" tx
}
# Each transmit queue's qdisc with its statistics (the root mq's children, "parent X:N" for
# queue N-1, each with "requeues R": packets it dequeued and had to put back because the
# driver's queue was stopped, its ring full), every line as tc prints it; the host reads
# the requeues (report::qdisc). Debian's tc by its path: busybox's own tc applet, first on
# PATH, has no statistics (-s). Nothing when tc fails: a run without the figure is still
# a run.
tx_qdiscs() { # tag
    /usr/sbin/tc -s qdisc show dev eth0 2>/dev/null | sed "s/^/$1 /"
}

snapshot() {
    napi_lines napi | cut -d' ' -f1-4
    echo "rss-table $(rss_table)"
    for i in $(ls /proc/irq | grep '^[0-9]'); do
        [ -r "/proc/irq/$i/smp_affinity_list" ] && read -r a < "/proc/irq/$i/smp_affinity_list" && echo "irq $i $a"
    done
    for f in /sys/class/net/*/queues/rx-*/rps_cpus /sys/class/net/*/queues/rx-*/rps_flow_cnt /sys/class/net/*/queues/tx-*/xps_cpus /proc/sys/net/core/rps_sock_flow_entries /sys/class/net/*/threaded; do
        [ -r "$f" ] && read -r v < "$f" && echo "$f $v"
    done
}

# The wall clock to the microsecond, seconds since the epoch (busybox's date has no %N):
# the daemon logs wall-clock times, the samples uptimes (lab::guest_clock).
wall() {
    busybox adjtimex | awk '/tv_sec/ { s = $2 } /tv_usec/ { u = $2 } END { printf "%d.%06d", s, u }'
}

sample() {
    read -r up _ < /proc/uptime
    echo "S $up"
    sed 's/^/N /' /proc/net/softnet_stat
    grep '^cpu[0-9]' /proc/stat | sed 's/^/C /'
    head -n 1 /proc/interrupts | sed 's/^/H /'
    awk "$WATCHED"' { print "I", $0 }' /proc/interrupts
    for i in $QIRQS; do
        a=-; e=-
        [ -r "/proc/irq/$i/smp_affinity_list" ] && read -r a < "/proc/irq/$i/smp_affinity_list"
        [ -r "/proc/irq/$i/effective_affinity_list" ] && read -r e < "/proc/irq/$i/effective_affinity_list"
        echo "A $i $a $e"
    done
    for f in /sys/class/net/eth0/queues/rx-*/rps_cpus; do
        [ -r "$f" ] || continue
        read -r v < "$f"
        q=${f%/rps_cpus}; q=${q##*/rx-}
        echo "R eth0 $q $v"
    done
    for f in /sys/class/net/eth0/queues/tx-*/xps_cpus; do
        read -r v 2>/dev/null < "$f" || continue
        q=${f%/xps_cpus}; q=${q##*/tx-}
        echo "XP eth0 $q $v"
    done
    napi_lines T
    [ "$QUEUE_WATCH" = 1 ] && rss_lines
    echo E
}

# The daemon's resources and tick time, for the soak: whether it is alive, its RSS, VmHWM
# and Threads, its open fds, from its own /metrics the tick-duration sum and count, ticks
# run and config reloads, then RSS's anonymous and file-backed parts. RSS and its parts are
# smaps_rollup's (Rss, Anonymous; file-backed = Rss - Anonymous), counted from the page
# tables when read: 6.1's VmRSS in /proc/PID/status is a counter each thread caches and
# adds in every 64 page faults, so it lagged the pages mapped by 400 kB in one soak and
# caught up in one step minutes later (a step that was no allocation). The guest's
# programs live in its initramfs, a tmpfs, so their pages are file-backed (shmem). The
# fds are counted before the scrape, so the scrape's own connection is not among them;
# `-` where a figure could not be read.
daemon_stats() {
    read -r up _ < /proc/uptime
    if [ -z "$BPID" ] || ! kill -0 "$BPID" 2>/dev/null; then
        echo "D $up dead - - - - - - - - - - -"
        return
    fi
    rollup=$(awk '/^Rss:/ { r = $2 } /^Anonymous:/ { a = $2 }
        END { print (r == "" ? "-" : r), (a == "" ? "-" : a) }' "/proc/$BPID/smaps_rollup" 2>/dev/null)
    rss=${rollup%% *}
    anon=${rollup##* }
    st=$(awk -v rss="${rss:--}" '/^VmHWM:/ { h = $2 } /^Threads:/ { t = $2 }
        END { print rss, (h == "" ? "-" : h), (t == "" ? "-" : t) }' "/proc/$BPID/status" 2>/dev/null)
    case "$rss$anon" in
        *[!0-9]*|"") parts="- -" ;;
        *) parts="$anon $((rss - anon))" ;;
    esac
    fds=$(ls "/proc/$BPID/fd" 2>/dev/null | wc -l)
    # busybox wget -T crashes in Debian's busybox-static 1.35 (status 139): timeout bounds it.
    m=$(timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null | awk '
        $1 == "steerd_tick_duration_seconds_sum" { s = $2 }
        $1 == "steerd_tick_duration_seconds_count" { c = $2 }
        $1 == "steerd_ticks_total" { t = $2 }
        $1 == "steerd_config_reloads_total{result=\"ok\"}" { ok = $2 }
        $1 == "steerd_config_reloads_total{result=\"error\"}" { er = $2 }
        function v(x) { return x == "" ? "-" : x }
        END { print v(s), v(c), v(t), v(ok), v(er) }')
    echo "D $up alive ${st:-- - -} $fds ${m:-- - - - -} ${parts:-- -}"
    rss_step_lines "$up" "${rss:--}"
}

# When RSS differs from the last sample (the first sample included): each mapping's Rss
# (`DS up rss_kb first-last name`, non-zero ones only) and the daemon's log lines written
# since the last step (`DL line`), so a soak's step says which mapping grew and what the
# daemon was doing then, not only by how much.
rss_step_lines() {
    [ "$2" = "$LAST_RSS" ] && return
    LAST_RSS=$2
    awk -v up="$1" '/^[0-9a-f]+-[0-9a-f]+ / { range = $1; name = ($6 == "" ? "[anon]" : $6) }
        /^Rss:/ && $2 > 0 { print "DS", up, $2, range, name }' "/proc/$BPID/smaps" 2>/dev/null
    lines=$(wc -l < /tmp/balancer.log 2>/dev/null || echo 0)
    tail -n "+$((${LOGGED_LINES:-0} + 1))" /tmp/balancer.log 2>/dev/null | tail -n 40 | sed 's/^/DL /'
    LOGGED_LINES=$lines
}

# Installs /etc/steerd/$1.yaml as the daemon's configuration and asks it to reload (SIGHUP).
reload_with() {
    cp "/etc/steerd/$1.yaml" /etc/steerd/steerd.yaml && kill -HUP "$BPID"
}

# A balancer that starts under load (`sat-late`): the set-up holds it back, an event starts it.
hold_balancer() {
    LATE_BALANCER=$BALANCER
    BALANCER=none
}
start_late_balancer() {
    BALANCER=$LATE_BALANCER
    start_balancer
}

start_balancer() {
    case "$BALANCER" in
        steerd)
            if [ -n "$HOLD_IRQ_WRITE" ]; then
                start_steerd_held
            else
                /usr/sbin/steerd run --state-file /run/steerd/state $STEERD_ARGS >> /tmp/balancer.log 2>&1 &
                BPID=$!
            fi ;;
        irqbalance)
            mkdir -p /run/irqbalance
            /usr/sbin/irqbalance --foreground >> /tmp/balancer.log 2>&1 &
            BPID=$! ;;
        *) BPID= ;;
    esac
}

# The in-flight fault scenarios (lab/faults.rs): steerd starts stopped, strace attaches
# (TracerPid set), and from then on holds steerd's first write to any input vector's
# smp_affinity_list for $HOLD_IRQ_WRITE microseconds before it enters the kernel. The
# write's result is the kernel's; strace's log goes into the balancer's log at the end.
start_steerd_held() {
    sh -c 'kill -STOP $$; exec /usr/sbin/steerd run --state-file /run/steerd/state '"$STEERD_ARGS" >> /tmp/balancer.log 2>&1 &
    BPID=$!
    paths=$(nic_vectors | awk '$2 != "output" { printf " -P /proc/irq/%s/smp_affinity_list", $1 }')
    strace -qq -f -y -e signal=none -o /tmp/strace.log -e trace=write \
        -e inject=write:delay_enter="$HOLD_IRQ_WRITE":when=1 $paths -p "$BPID" &
    for _ in $(seq 1 50); do
        awk '/TracerPid/ { exit !($2 > 0) }' "/proc/$BPID/status" && break
        sleep 0.1
    done
    kill -CONT "$BPID"
}
wait_held_write() { # until strace holds steerd's first input-vector write (at most 8 s)
    for _ in $(seq 1 80); do
        if grep -q 'smp_affinity_list' /tmp/strace.log 2>/dev/null; then
            echo "LAB HELD $(head -n 1 /tmp/strace.log)"
            return 0
        fi
        sleep 0.1
    done
    echo "LAB HELD none"
}
set_cpus_online() { # set_cpus_online 0|1 CPU...
    v=$1; shift
    for c in "$@"; do echo "$v" > "/sys/devices/system/cpu/cpu$c/online"; done
}

# `steerd doctor` on the machine as it runs (the `doctor` scenario): its JSON report, one
# `DOC` line per line of it, then `DOCTOR EXIT status` (0 none, 1 warnings, 2 errors). It
# asks a running steerd for its /status, so with steerd as the balancer its health is checked.
run_doctor() {
    /usr/sbin/steerd doctor --format json > /tmp/doctor.json 2> /tmp/doctor.err
    status=$?
    sed 's/^/DOC /' /tmp/doctor.json
    sed 's/^/DOCERR /' /tmp/doctor.err
    echo "DOCTOR EXIT $status"
}

# An isolated cgroup v2 cpuset partition of CPUs $1 (lab/isolation.rs), as Kubernetes'
# CPU manager or a realtime set-up makes one while the machine runs; then what the kernel
# made of it (`isolated`, or `isolated invalid (why)`) and the root's cpuset.cpus.isolated
# (`-` on kernels before 6.8, which lack it).
isolate_partition() {
    echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control
    mkdir -p /sys/fs/cgroup/lab-isolated
    echo "$1" > /sys/fs/cgroup/lab-isolated/cpuset.cpus
    echo isolated > /sys/fs/cgroup/lab-isolated/cpuset.cpus.partition
    read -r state < /sys/fs/cgroup/lab-isolated/cpuset.cpus.partition
    isolated=-
    [ -r /sys/fs/cgroup/cpuset.cpus.isolated ] && read -r isolated < /sys/fs/cgroup/cpuset.cpus.isolated
    echo "LAB PARTITION ${state:-none} ${isolated:-none}"
}
report_quiet() { # steerd's quiet-mode gauge, before a partition event
    q=$(timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null |
        awk '$1 == "steerd_quiet_mode" { print $2 }')
    echo "LAB QUIET ${q:--}"
}
dissolve_partition() {
    echo member > /sys/fs/cgroup/lab-isolated/cpuset.cpus.partition
    rmdir /sys/fs/cgroup/lab-isolated
}

# Debian's tuned (the tuned scenarios, lab/tuned.rs), chrooted in the root the lab put at
# /tuned, with the guest's /proc, /sys and /dev; its etc/tuned and usr/lib/tuned bound over
# the guest's, where steerd doctor reads the active profile and its includes. The profile,
# steerd-lab, is cpu-partitioning's scheduler section alone (isolated_cores=3: every IRQ
# it can is moved off CPU 3): the whole cpu-partitioning also flips static keys
# (net.core.busy_poll, rtentsk), and a TCG guest took an int3 oops in
# __netif_receive_skb_core while the kernel patched them under traffic (6.12, 1 of 9 runs).
# `LAB TUNED started PID`, then `LAB TUNED applied ...` once its log says the profile is
# applied (or `LAB ERROR`).
start_tuned() {
    if [ ! -x /tuned/usr/sbin/tuned ]; then
        echo "LAB ERROR no tuned in the guest (the lab adds scripts/lab-tuned.sh's root)"
        return
    fi
    for d in proc sys dev run tmp; do
        mkdir -p "/tuned/$d"
        mount --bind "/$d" "/tuned/$d"
    done
    mkdir -p /tuned/etc/tuned/profiles/steerd-lab
    printf '[main]\nsummary=cpu-partitioning scheduler section alone\n[scheduler]\nisolated_cores=3\n' \
        > /tuned/etc/tuned/profiles/steerd-lab/tuned.conf
    for d in etc/tuned usr/lib/tuned; do
        mkdir -p "/$d"
        mount --bind "/tuned/$d" "/$d"
    done
    chroot /tuned /usr/sbin/tuned --no-dbus --no-socket --log=/tmp/tuned.log \
        --profile steerd-lab > /tmp/tuned.out 2>&1 &
    TUNED_PID=$!
    echo "LAB TUNED started $TUNED_PID"
    (
        # Longer than tuned's part of the schedule (lab/tuned.rs: 50 s from its start to
        # its stop), so a profile applied after the stop still says when.
        for _ in $(seq 1 700); do
            if grep -q "static tuning from profile 'steerd-lab' applied" /tmp/tuned.log 2>/dev/null; then
                echo "LAB TUNED applied comm $(cat "/proc/$TUNED_PID/comm") profile $(cat /etc/tuned/active_profile 2>&1)"
                exit 0
            fi
            kill -0 "$TUNED_PID" 2>/dev/null || break
            sleep 0.1
        done
        echo "LAB ERROR tuned applied no profile: $(tail -n 3 /tmp/tuned.log /tmp/tuned.out 2>/dev/null | tr '\n' ' ')"
    ) &
}
# tuned rolls its profile back when it stops (SIGTERM): the IRQs go back where it found them.
stop_tuned() {
    [ -n "$TUNED_PID" ] || return
    kill "$TUNED_PID"
    (
        for _ in $(seq 1 300); do
            kill -0 "$TUNED_PID" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$TUNED_PID" 2>/dev/null; then
            echo "LAB TUNED still running 30 s after SIGTERM"
        else
            echo "LAB TUNED stopped"
        fi
        grep -i "irq\|error\|applied" /tmp/tuned.log | head -n 40 | sed 's/^/TUNEDLOG /'
    ) &
}

# A second balancer started beside the first (lab/second_balancer.rs): irqbalance, as a
# package upgrade or `systemctl start irqbalance` would start it.
start_second_irqbalance() {
    mkdir -p /run/irqbalance
    /usr/sbin/irqbalance --foreground >> /tmp/second.log 2>&1 &
    SECOND_PID=$!
    echo "LAB SECOND started $SECOND_PID"
}
stop_second_irqbalance() {
    [ -n "$SECOND_PID" ] && kill "$SECOND_PID"
    echo "LAB SECOND stopped"
    tail -n 20 /tmp/second.log 2>/dev/null | sed 's/^/SECOND /'
}

# Set-up helpers for scenarios.
rx_napi_threads() { # "ID PID" of every receive NAPI thread, in queue order (smallest NAPI id first)
    napi_lines T | awk '{ id = $3; sub(/.*-/, "", id); if (id != 0) print id, $2 }' | sort -n
}
pin_inputs() { # every receiving vector (input or rxtx) on CPU $1
    nic_vectors | while read -r irq kind q; do
        [ "$kind" != output ] && echo "$1" > "/proc/irq/$irq/smp_affinity_list"
    done
}
hand_place() { # queue N's vectors (and receive NAPI thread) on the Nth CPU of $HAND_CPUS (wrapping)
    set -- $HAND_CPUS
    n=$#
    nic_vectors | while read -r irq kind q; do
        i=$(( q % n + 1 ))
        eval "cpu=\${$i}"
        echo "$cpu" > "/proc/irq/$irq/smp_affinity_list"
    done
    # Threaded NAPI: queue N's receive thread (the Nth smallest NAPI id) beside its vectors.
    read -r threaded 2>/dev/null < /sys/class/net/eth0/threaded
    [ "$threaded" = 1 ] || return 0
    q=0
    rx_napi_threads |
        while read -r id pid; do
            i=$(( q % n + 1 )); q=$((q + 1))
            eval "cpu=\${$i}"
            taskset -pc "$cpu" "$pid" > /dev/null
        done
}
busy_poll_on() { # queue 0's NAPI busy-polling in its thread (napi-set, Linux 6.19), the others threaded
    echo 1 > /sys/class/net/eth0/threaded
    out=$(/usr/sbin/napi_set eth0 0 2 2>&1) || echo "LAB ERROR busy-polling NAPI refused on $(uname -r): $out"
}
busy_thread() { # queue 0's receive NAPI thread: the smallest non-zero NAPI id
    rx_napi_threads |
        awk 'NR == 1 { print $2 }'
}
pin_busy_thread() { taskset -pc "$1" "$(busy_thread)" > /dev/null; }
unpin_busy_thread() { taskset -pc "0-$(( $(grep -c '^processor' /proc/cpuinfo) - 1 ))" "$(busy_thread)" > /dev/null; }
add_rules() { # $1 never-matching policy-routing rules: a per-packet cost in the softirq path
    i=0
    while [ "$i" -lt "$1" ]; do
        ip rule add from "10.200.$((i / 250)).$((i % 250 + 1))" table 100 pref $((1000 + i))
        i=$((i + 1))
    done
}
rps_flip() { # every 0.2 s, RPS and RFS on every rx queue on, then off: the kernel's rps_needed and rfs_needed keys flip each time
    n=0
    while :; do
        for on in 1 0; do
            for q in /sys/class/net/eth0/queues/rx-*; do
                if [ "$on" = 1 ]; then echo f > "$q/rps_cpus"; echo 4096 > "$q/rps_flow_cnt"; else echo 0 > "$q/rps_cpus"; echo 0 > "$q/rps_flow_cnt"; fi
            done
            if [ "$on" = 1 ]; then echo 32768 > /proc/sys/net/core/rps_sock_flow_entries; else echo 0 > /proc/sys/net/core/rps_sock_flow_entries; fi
            sleep 0.2
        done
        n=$((n + 1))
        [ $((n % 25)) = 0 ] && echo "LAB RPS_FLIPS $n"
    done
}
hand_rps() { # RPS over every online CPU on every rx queue, RFS sized (the seeds' recipe)
    cpus=$(grep -c '^processor' /proc/cpuinfo)
    mask=$(printf '%x' $(( (1 << cpus) - 1 )))
    queues=$(ls -d /sys/class/net/eth0/queues/rx-* | wc -l)
    echo 32768 > /proc/sys/net/core/rps_sock_flow_entries
    for q in /sys/class/net/eth0/queues/rx-*; do
        echo "$mask" > "$q/rps_cpus"
        echo $(( 32768 / queues )) > "$q/rps_flow_cnt"
    done
}

echo "LAB KERNEL $(uname -r)"
# The scenario's set-up (before the snapshot: it is the machine as the balancer finds it).
eval "$SETUP"
snapshot > /tmp/before
# Every run records the RSS table (empty where the NIC has none) and each queue's packets
# at the start and the end: a queue the hash or the table stopped feeding shows in them.
echo "XB $(rss_table)"
queue_packets QB
nic_drops NDB
tx_packets TXB
tx_qdiscs TCB
sample
start_balancer
read -r START _ < /proc/uptime
echo "LAB READY $START"
# Uptime on both sides of the wall clock's reading: its fork takes a while under TCG.
read -r up_before _ < /proc/uptime
now_wall=$(wall)
read -r up_after _ < /proc/uptime
echo "LAB WALL $up_before $up_after $now_wall"
# Timed events: one per line, "SECONDS command", each run once when due.
END=$(awk -v s="$START" -v d="$DURATION" 'BEGIN { print s + d }')
done_events=""
NL='
'
while :; do
    read -r now _ < /proc/uptime
    if awk -v n="$now" -v e="$END" 'BEGIN { exit !(n >= e) }'; then break; fi
    sample
    [ "$DAEMON_STATS" = 1 ] && daemon_stats
    if [ -n "$EVENTS" ]; then
        elapsed=$(awk -v n="$now" -v s="$START" 'BEGIN { print n - s }')
        k=0
        IFS=$NL
        for ev in $EVENTS; do
            unset IFS
            k=$((k + 1))
            at=${ev%% *}; cmd=${ev#* }
            case " $done_events " in *" $k "*) IFS=$NL; continue ;; esac
            if awk -v e="$elapsed" -v a="$at" 'BEGIN { exit !(e + 0 >= a + 0) }'; then
                done_events="$done_events $k"
                # Stamped when it runs, not with the loop's `now`: the sample before it
                # takes 0.5-1.9 s under load, and an event stamped early made every
                # reaction to it look that much slower (busy-poll, CI at 6da45dd).
                read -r fired _ < /proc/uptime
                echo "LAB EVENT $fired $cmd"
                eval "$cmd"
            fi
            IFS=$NL
        done
        unset IFS
    fi
    # The first 3 s after the balancer starts are sampled every 0.1 s, so a first change
    # is timed to 0.1 s rather than to the period (the shares use the steady window only).
    if awk -v n="$now" -v s="$START" 'BEGIN { exit !(n - s < 3) }'; then
        sleep 0.1
    else
        sleep "$PERIOD"
    fi
done
sample
[ "$DAEMON_STATS" = 1 ] && daemon_stats
grep -E '^(Ip|Udp):' /proc/net/snmp | sed 's/^/P /'
# Packets received per queue since boot (Q queue packets; QB at the start): with the NAPI
# threads' run ticks, a check of which thread polls which queue.
queue_packets Q
nic_drops NDE
tx_packets TXE
tx_qdiscs TCE
if [ "$RSS_WATCH" = 1 ] && [ "$BALANCER" = steerd ]; then
    timeout 5 wget -q -O - http://127.0.0.1:9847/metrics 2>/dev/null | grep -E '^steerd_(rss|rediscoveries)' | sed 's/^/M /'
fi
if [ -n "$BPID" ] && kill -0 "$BPID" 2>/dev/null; then
    set -- $(cat "/proc/$BPID/stat" | sed 's/^.*) //')
    ticks=$(( ${12} + ${13} ))
    rss=$(awk '/VmHWM/ { print $2 }' "/proc/$BPID/status")
    echo "LAB DAEMON $ticks $rss"
    kill -TERM "$BPID"
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        kill -0 "$BPID" 2>/dev/null || break
        sleep 0.5
    done
fi
[ -f /tmp/strace.log ] && cat /tmp/strace.log >> /tmp/balancer.log
sed 's/^/LOG /' /tmp/balancer.log
[ "$DAEMON_STATS" = 1 ] && echo "LAB PANICS $(grep -c panicked /tmp/balancer.log)"
snapshot > /tmp/after
echo "XA $(rss_table)"
if cmp -s /tmp/before /tmp/after; then
    echo "LAB RESTORED yes"
else
    diff /tmp/before /tmp/after | grep '^[-+][^-+]' | sed 's/^/LAB DIFF /'
    echo "LAB RESTORED no"
fi
echo "LAB DONE"
poweroff -f
