#!/usr/bin/env bash
# Regenerates the lab matrix in docs/lab.md (between the lab-matrix markers): every NIC and
# guest kernel below, each scenario run with steerd and with irqbalance on the same traffic,
# one cell per (NIC, kernel, scenario) with both balancers' figures side by side.
#
#   sudo scripts/lab-matrix.sh                      # the whole matrix (hours)
#   sudo CELLS="virtio:5.10:cloud igb:6.18:generic" SCENARIOS="cpu0 sat-cpu0" scripts/lab-matrix.sh
#
# CELLS: NIC:VERSION:FLAVOUR triples (scripts/lab-kernel.sh fetches each kernel once);
# SCENARIOS: lab scenario names; REPS runs of each (medians); IRQBALANCE: the irqbalance
# version to compare with (1.9.4 from Debian 13's userland, 1.9.2 the host's). The userland
# (QEMU 10, irqbalance 1.9.4) is built once by scripts/lab-userland.sh. Raw JSON lines are kept
# in target/lab-matrix/ (one file per cell) and the table is made from them by
# scripts/lab-matrix.py, so a cell can be re-run alone and the table remade.
set -euo pipefail
cd "$(dirname "$0")/.."
cells=${CELLS:-"virtio:5.10:cloud virtio:6.1:cloud virtio:6.12:cloud virtio:6.19:cloud igb:5.10:generic igb:6.1:generic igb:6.12:generic igb:6.19:generic "}
scenarios=${SCENARIOS:-"cpu0 defaults hotplug channels nic-remove kill9 sat-cpu0 sat-defaults sat-elephant sat-late"}
reps=${REPS:-1}
irqbalance=${IRQBALANCE:-1.9.4}
out=target/lab-matrix
mkdir -p "$out"
userland=$(scripts/lab-userland.sh)
cargo build --release --bin steerd --example lab
for cell in $cells; do
    IFS=: read -r nic version flavour <<< "$cell"
    if ! kernel=$(scripts/lab-kernel.sh "$version" "$flavour"); then
        echo "lab-matrix: $cell: no kernel (see above); its cell is left as it was" >&2
        continue
    fi
    file="$out/$nic-$version-$flavour.json"
    echo "lab-matrix: $nic on $version ($flavour), $reps run(s) of: $scenarios" >&2
    # shellcheck disable=SC2086 # the scenario names are words
    STEERD_LAB_KERNEL=$kernel target/release/examples/lab --format json --reps "$reps" --idle 30 \
        --nic "$nic" --userland "$userland" --irqbalance "$irqbalance" \
        --balancers irqbalance,steerd $scenarios > "$file.new" 2> "$out/$nic-$version-$flavour.log" ||
        echo "lab-matrix: $cell: the lab failed (see $out/$nic-$version-$flavour.log)" >&2
    mv "$file.new" "$file"
done
table=$(mktemp)
trap 'rm -f "$table" "$table.block"' EXIT
cat "$out"/*.json | python3 scripts/lab-matrix.py > "$table"
{
    echo "Generated $(date -u +%Y-%m-%d) by \`REPS=$reps IRQBALANCE=$irqbalance scripts/lab-matrix.sh\`"
    echo "(cells: $cells) on $(nproc) host CPUs, steerd $(git describe --always --dirty)."
    echo
    cat "$table"
} > "$table.block"
scripts/doc-block.sh docs/lab.md "lab-matrix" "$table.block"
