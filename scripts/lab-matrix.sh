#!/usr/bin/env bash
# Regenerates the lab matrix in docs/lab.md (between the lab-matrix markers): every NIC and
# guest kernel below, each scenario run with steerd and with each irqbalance version on the
# same traffic, one cell per (NIC, kernel, scenario) with every balancer's figures side by
# side.
#
#   sudo scripts/lab-matrix.sh                      # the whole matrix (hours)
#   sudo CELLS="virtio:5.10:cloud igb:6.18:generic" SCENARIOS="cpu0 sat-cpu0" scripts/lab-matrix.sh
#   sudo ONLY_MISSING=1 scripts/lab-matrix.sh       # only the runs whose file is not there yet
#
# CELLS: NIC:VERSION:FLAVOUR triples (scripts/lab-kernel.sh fetches each kernel once);
# SCENARIOS: lab scenario names; REPS runs of each (medians); RULES: the never-matching
# policy-routing rules in the sat- scenarios' receive path (the lab's --rules; its default,
# 1,000, starves a guest on a host whose TCG runs them slowly: its samples stop for 10-15 s
# and the run's figures are empty, igb on 6.19, 2026-11-30); PPS: the UDP rate of the
# placement scenarios (those not named sat-; the lab's --pps; its default, each scenario's
# own 60k, saturates the guests of a host slower than the one it was chosen on, and a
# placement cell then compares RPS trials, not placements: docs/lab.md, "A slower bed";
# the tests' placement checks offer 20000); IRQBALANCE: the irqbalance
# versions to compare with (1.9.4 from Debian 13's userland, 1.9.2 the host's), the first
# run beside steerd, each other one on its own. The userland (QEMU 10, irqbalance 1.9.4) is
# built once by scripts/lab-userland.sh. Raw JSON lines are kept in target/lab-matrix/ (one
# file per cell, irqbalance version and scenario, each run's guest console in a directory
# beside it) and the table is made from all of them by
# scripts/lab-matrix.py, so a cell can be re-run alone (remove its file, ONLY_MISSING=1)
# and the table remade. A cell with no run kept here (the runs of another machine, whose
# target/ is not in the repository) keeps its figures from the table in docs/lab.md, balancer
# by balancer: a row re-run with one irqbalance version keeps the other's.
set -euo pipefail
cd "$(dirname "$0")/.."
cells=${CELLS:-"virtio:5.10:cloud virtio:6.1:cloud virtio:6.12:cloud virtio:6.19:cloud igb:5.10:generic igb:6.1:generic igb:6.12:generic igb:6.19:generic igbvf:6.19:generic"}
scenarios=${SCENARIOS:-"cpu0 defaults hotplug channels nic-remove kill9 sat-cpu0 sat-defaults sat-elephant sat-late"}
reps=${REPS:-1}
rules=${RULES:-}
pps=${PPS:-}
irqbalances=${IRQBALANCE:-"1.9.4 1.9.2"}
only_missing=${ONLY_MISSING:-0}
out=target/lab-matrix
mkdir -p "$out"
userland=$(scripts/lab-userland.sh)
cargo build --release --bin steerd --example lab --example napi_set
# The build the runs use, named now: the tree may move on while they run (hours).
built=$(git describe --always --dirty)
for cell in $cells; do
    IFS=: read -r nic version flavour <<< "$cell"
    if ! kernel=$(scripts/lab-kernel.sh "$version" "$flavour"); then
        echo "lab-matrix: $cell: no kernel (see above); its cells are left as they were" >&2
        continue
    fi
    for scenario in $scenarios; do
        balancers=irqbalance,steerd
        # The rate applies to the placement scenarios only: the sat- ones saturate on purpose.
        rate=
        case "$scenario" in sat-*) ;; *) rate=$pps ;; esac
        for irqbalance in $irqbalances; do
            name="$nic-$version-$flavour-irqbalance-$irqbalance-$scenario"
            file="$out/$name.json"
            if [ "$only_missing" = 1 ] && [ -s "$file" ]; then
                balancers=irqbalance
                continue
            fi
            echo "lab-matrix: $nic on $version ($flavour), $balancers (irqbalance $irqbalance), $reps run(s) of $scenario" >&2
            # Each run's console (the balancer's journal among it) beside the cell's JSON, so
            # that a cell's figures can be explained afterwards.
            rm -rf "$out/$name.console" && mkdir -p "$out/$name.console"
            LAB_CONSOLE="$out/$name.console" STEERD_LAB_KERNEL=$kernel target/release/examples/lab --format json --reps "$reps" --idle 30 ${rules:+--rules "$rules"} ${rate:+--pps "$rate"} \
                --nic "$nic" --userland "$userland" --irqbalance "$irqbalance" \
                --balancers "$balancers" "$scenario" > "$file.new" 2> "$out/$name.log" || {
                # A scenario the NIC cannot run (the lab says so: `Nic::cannot_run`) has no row.
                if grep -q "cannot run with --nic" "$out/$name.log"; then
                    echo "lab-matrix: $cell: $(tail -1 "$out/$name.log")" >&2
                    rm -f "$file.new" "$file"
                    break
                fi
                # A failed run leaves the cell as it was (its earlier file or table row).
                echo "lab-matrix: $cell $scenario: the lab failed (see $out/$name.log); the cell is left as it was" >&2
                rm -f "$file.new"
                balancers=irqbalance
                continue
            }
            mv "$file.new" "$file"
            # steerd runs once per cell and scenario, beside the first irqbalance.
            balancers=irqbalance
        done
    done
done
table=$(mktemp)
trap 'rm -f "$table" "$table.block"' EXIT
# Cells with no run kept here (another machine's, or a file removed) keep their figures from
# the table, balancer by balancer.
{ cat "$out"/*.json 2>/dev/null || true; } | python3 scripts/lab-matrix.py --keep docs/lab.md > "$table"
{
    echo "Generated $(date -u +%Y-%m-%d) by \`scripts/lab-matrix.sh\` from every run kept in target/lab-matrix, each cell"
    echo "(NIC, kernel, scenario and balancer) with no run here kept as the table had it"
    echo "(the last: \`REPS=$reps${rules:+ RULES=$rules}${pps:+ PPS=$pps} IRQBALANCE=\"$irqbalances\" SCENARIOS=\"$scenarios\"\`, cells: $cells)"
    echo "on $(nproc) host CPUs, steerd $built for the last runs."
    echo
    cat "$table"
} > "$table.block"
scripts/doc-block.sh docs/lab.md "lab-matrix" "$table.block"
