#!/usr/bin/env bash
# The soak (issue 16, docs/lab.md): builds the steerd the packages ship
# (scripts/shipped-binary.sh: static glibc, its text in packaging/text-order.txt's order)
# and the lab in release mode, then runs steerd alone in the QEMU lab for MINUTES
# (default 60) under traffic that changes every minute (spread, skew, elephant, idle,
# TCP) with a configuration reload every 5 minutes,
# and prints the first and last 5 minutes side by side (RSS, fds, threads, tick time), the
# RSS growth, panics, reloads and the restore after SIGTERM. Exits 1 when a target is not
# met (RSS growth above 1 %, a panic, a lost original, a failed reload, fds or threads
# that differ). Needs root and the lab's packages (docs/lab.md).
#
#   sudo scripts/soak.sh        # an hour (about 62 minutes with the boot)
#   sudo scripts/soak.sh 5      # the 5-minute form tests/lab.rs runs
#
# CARGO_TARGET_DIR is honoured; extra arguments after MINUTES go to `lab soak`
# (e.g. --max-rss-growth 2).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-60}
shift || true
case "$minutes" in
    ''|*[!0-9]*) echo "usage: scripts/soak.sh [MINUTES] [lab soak arguments]" >&2; exit 2 ;;
esac
target=${CARGO_TARGET_DIR:-target}
steerd=$(scripts/shipped-binary.sh)
cargo build --release --example lab
cmd=("$target/release/examples/lab" soak --minutes "$minutes" --steerd "$steerd" "$@")
echo "+ ${cmd[*]}" >&2
exec "${cmd[@]}"
