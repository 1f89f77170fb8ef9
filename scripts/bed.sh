#!/usr/bin/env bash
# The veth throughput bed (crates/steerd-testkit/src/lab/bed, docs/lab.md "The veth throughput bed"): builds steerd
# and the bed in release mode and runs no balancer, steerd (built-in configuration) and the
# hand recipe REPS times each on the host kernel, in namespaces of its own. Prints one JSON
# line per run on stdout (FORMAT=text: a line per run on stderr instead), then the medians
# per balancer and steerd's ratios against the targets on stderr. Extra arguments go to the
# bed (--rules N, --rate PPS, --secs S, --balancers a,b, --check ...). Needs root; run it
# alone: it reads the whole machine's /proc/stat and softnet counters.
#
#   sudo scripts/bed.sh                        # 3 rounds, 20 s each run
#   sudo REPS=1 scripts/bed.sh --rate 60000    # one round, the load above two CPUs' capacity
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-3}
format=${FORMAT:-json}
cargo build --release --bin steerd --example bed
exec target/release/examples/bed --reps "$reps" --format "$format" --steerd target/release/steerd "$@"
