#!/usr/bin/env bash
# Times steerd's discovery with 500 veth pairs (4 rx/tx queues each) in a throwaway network
# namespace (root only). Everything is created inside that namespace and deleted on exit.
#   usage: scripts/discovery-500-veth.sh [PAIRS=500]
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-500}
[ "$(id -u)" -eq 0 ] || { echo "needs root (creates a network namespace)" >&2; exit 1; }
cargo build --release -q
ns="steerd-disc-$$"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
ip netns add "$ns"
batch=$(mktemp)
for i in $(seq 1 "$pairs"); do
    echo "link add va$i numtxqueues 4 numrxqueues 4 type veth peer name vb$i numtxqueues 4 numrxqueues 4"
done > "$batch"
start=$(date +%s.%N)
ip -n "$ns" -batch "$batch"
echo "created $pairs pairs in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s"
rm -f "$batch"
devices=$(ip netns exec "$ns" ls /sys/class/net | wc -l)
# Median of 5 runs of the whole `steerd inspect --format json` (process start, discovery,
# JSON printing), run inside the namespace so it sees those devices.
times=()
for _ in 1 2 3 4 5; do
    t0=$(date +%s%N)
    ip netns exec "$ns" ./target/release/steerd inspect --format json > /dev/null
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
echo "devices: $devices; steerd inspect (discovery + JSON), 5 runs in ms: ${times[*]}; median ${sorted[2]} ms (target < 1000 ms)"
