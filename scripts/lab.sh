#!/usr/bin/env bash
# Regenerates the side-by-side table in docs/lab.md: builds steerd and the lab in release
# mode, boots a real guest kernel under QEMU for every scenario and balancer (REPS runs
# each, medians; IDLE seconds of idle in idle-burst), and replaces the text between the
# lab-table markers. Needs root and the lab's packages (docs/lab.md). Extra arguments go to
# the lab (scenario names, --balancers ...). STEERD_LAB_KERNEL=DIR boots an unpacked kernel
# package instead of /boot's (docs/lab.md). TABLE=threaded writes the threaded-NAPI table
# (between the lab-threaded-table markers) instead.
#
#   sudo scripts/lab.sh                 # everything, 3 runs each (about 2.5 hours)
#   sudo REPS=1 scripts/lab.sh cpu0     # one scenario, one run each
#   sudo TABLE=threaded STEERD_LAB_KERNEL=$(scripts/lab-kernel.sh 6.12) scripts/lab.sh \
#       --balancers none,irqbalance,steerd threaded-cpu0 threaded-defaults threaded-kill9
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-3}
idle=${IDLE:-300}
marker=lab-table
[ "${TABLE:-}" = threaded ] && marker=lab-threaded-table
cargo build --release --bin steerd --example lab --example napi_set
table=$(mktemp)
trap 'rm -f "$table"' EXIT
target/release/examples/lab --reps "$reps" --idle "$idle" "$@" > "$table"
{
    echo "Generated $(date -u +%Y-%m-%d) by \`REPS=$reps IDLE=$idle scripts/lab.sh $*\` on $(nproc) host CPUs,"
    echo "steerd $(git describe --always --dirty)."
    echo
    cat "$table"
} > "$table.block"
scripts/doc-block.sh docs/lab.md "$marker" "$table.block"
rm -f "$table.block"
