#!/usr/bin/env python3
"""The lab matrix (docs/lab.md) from `examples/lab --format json` lines on stdin: one row per
NIC, kernel and scenario, steerd's and each irqbalance version's medians side by side: first change,
busiest CPU's share of softnet `processed` beside the busiest queue's share of the packets
(placement) or delivered pkt/s, lost pkt/s (sent
and never received, wherever it was lost) and the drops counted in the guest (softnet) and
before it (the tap: no room in the guest's queue) (sat- scenarios), changes after convergence, runs restored, and the queues that got less than
a quarter of an even share of the packets (silent queues). With `--keep FILE`, the rows of
the table already in FILE (between the lab-matrix markers) for every cell that has no run
on stdin stay as they were."""
import json
import statistics
import sys
from collections import defaultdict

runs = [json.loads(line) for line in sys.stdin if line.startswith("{")]
cells = defaultdict(lambda: defaultdict(list))
for r in runs:
    kernel = r.get("kernel") or "?"
    # steerd's runs in one column whichever irqbalance ran beside them; irqbalance's in
    # one column per version.
    column = r["balancer"]
    if column == "irqbalance":
        column = "irqbalance " + (r.get("irqbalance") or "?")
    cells[(r.get("nic", "virtio"), kernel, r["scenario"])][column].append(r)


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def show(v, fmt="{:.0f}"):
    return "-" if v is None else fmt.format(v)


# Scenarios with timed events after which input vectors must settle on online CPUs: a run
# of one of them without `settle_s` never settled (the lab's JSON has no infinity).
EVENT_SCENARIOS = {"hotplug", "channels", "nic-remove", "kill9"}


# A run whose guest printed no sample for longer than this starved its own sampler: its
# steady window can be empty (igb on 6.19, `sat-cpu0` at 1,000 rules, 2026-11-30: gaps of
# 10-15 s and "0 pkt/s processed"), so the cell says so beside its figures. Sound saturated
# runs read gaps of 1.4-2.7 s.
STARVED_GAP_S = 5.0

# The lab's UDP rate (`UDP_PPS`): a cell run at another (the matrix's PPS) says so.
DEFAULT_PPS = 60000
# A placement cell's premise (the tests' `unsaturated`, steerd's high watermark,
# `lab::report::HOT_SHARE`): no guest CPU this share of its time in irq+softirq over the
# steady window. A run that broke it compared how each balancer copes with saturation
# (steerd's RPS trials among it), not placements, and the cell says in how many.
HOT_SHARE = 0.6


def busiest_queue_share(run):
    packets = run.get("queue_packets") or []
    total = sum(packets)
    return max(packets) / total if total > 0 else None


def figures(rs, saturated):
    if not rs:
        return "-"
    first = show(med([r["first_change_s"] for r in rs]), "{:.1f}") + " s"
    # A run with no change at all (the driver's placement already good, nothing hot) has no
    # first change: the median is of the runs that had one, and the cell says how many did not.
    unchanged = sum(1 for r in rs if r["first_change_s"] is None)
    if unchanged and unchanged < len(rs):
        first += " (no change in {} of {})".format(unchanged, len(rs))
    if saturated:
        load = "{} pkt/s delivered, {} pkt/s lost, drops {} softnet / {} tap".format(
            show(med([r["delivered_pps"] for r in rs])),
            show(med([r.get("lost_pps") for r in rs])),
            show(med([r["softnet_drops"] for r in rs])),
            show(med([r.get("tap_drops") for r in rs])),
        )
    else:
        load = "busiest " + show(med([r["busiest_processed_share"] for r in rs]), "{:.2f}")
        # The busiest queue's share of the run's packets: with one queue per CPU no
        # placement does better, and it differs from boot to boot (igb's random RSS key
        # with the lab's 8 flows), so two balancers' busiest shares are compared through it.
        floor = med([busiest_queue_share(r) for r in rs])
        if floor is not None:
            load += " (busiest queue {:.2f})".format(floor)
        rates = sorted({r.get("offered_pps") for r in rs} - {None, DEFAULT_PPS})
        if rates:
            load += " at {} pkt/s".format("/".join("{:.0f}k".format(v / 1000) for v in rates))
        hot = [r["busiest_si_share"] for r in rs if (r.get("busiest_si_share") or 0.0) >= HOT_SHARE]
        if hot:
            load += " (a CPU hot, irq+softirq up to {:.2f}, in {} of {})".format(max(hot), len(hot), len(rs))
    if rs[0]["scenario"] in EVENT_SCENARIOS:
        settles = [r.get("settle_s") for r in rs]
        if any(v is None for v in settles):
            load += "; an input vector unpinned or offline until the end in {} of {}".format(
                sum(1 for v in settles if v is None), len(settles)
            )
        else:
            load += "; settled {:.1f} s after events".format(med(settles))
    gaps = [r.get("longest_sample_gap_s") or 0.0 for r in rs]
    starved = [g for g in gaps if g > STARVED_GAP_S]
    if starved:
        load += "; samples stopped for up to {:.0f} s in {} of {} (the guest starved: figures unsound)".format(
            max(starved), len(starved), len(rs)
        )
    # steerd's warnings and errors over a run (the JSON's `warnings`, since 2026-11-30):
    # issue 31 asks for none per tick, some 30 in a run.
    warned = [r["warnings"] for r in rs if r["balancer"] == "steerd" and "warnings" in r]
    if warned:
        load += "; warnings {}".format(max(warned))
    late = max(r["changes_after_convergence"] for r in rs)
    restored = sum(1 for r in rs if r["restored"])
    silent = med([r.get("silent_queues") for r in rs])
    return "{}; {}; {} late; restored {}/{}; silent queues {}".format(
        first, load, late, restored, len(rs), show(silent)
    )


def earlier_rows(path):
    """The rows of the table between the lab-matrix markers in `path`, by (NIC, kernel,
    scenario), each a dict of its header's columns: the cells whose runs are not kept here
    (another machine's, or removed) stay as they were."""
    text = open(path, encoding="utf-8").read()
    if "<!-- lab-matrix:begin -->" not in text:
        return {}
    block = text.split("<!-- lab-matrix:begin -->", 1)[1].split("<!-- lab-matrix:end -->", 1)[0]
    lines = [line.strip() for line in block.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        return {}
    split = lambda line: [cell.strip() for cell in line.strip("|").split("|")]
    header = split(lines[0])
    rows = {}
    for line in lines[2:]:
        cells = split(line)
        if len(cells) != len(header):
            sys.exit("lab-matrix.py: {}: a table row with {} cells under a header of {}: {}".format(
                path, len(cells), len(header), line))
        row = dict(zip(header, cells))
        rows[(row["NIC"], row["kernel"], row["scenario"])] = row
    return rows


kept = {}
if len(sys.argv) == 3 and sys.argv[1] == "--keep":
    # Every earlier row is kept; a cell re-run here replaces it column by column, so a
    # column the new runs lack (say irqbalance 1.9.2 when only 1.9.4 ran) keeps its figures.
    kept = earlier_rows(sys.argv[2])
elif len(sys.argv) != 1:
    sys.exit("usage: lab-matrix.py [--keep MARKDOWN] < runs.json")
irqbalance_columns = sorted(
    {"irqbalance " + (r.get("irqbalance") or "?") for r in runs if r["balancer"] == "irqbalance"}
    | {column for row in kept.values() for column in row if column.startswith("irqbalance ")}
)
columns = ["steerd"] + irqbalance_columns
print("| NIC | kernel | scenario | " + " | ".join(columns) + " |")
print("|---|---|---|" + "---|" * len(columns))
for key in sorted(set(cells) | set(kept)):
    nic, kernel, scenario = key
    saturated = scenario.startswith("sat-")
    runs_of = cells.get(key, {})
    shown = [
        figures(runs_of[column], saturated) if runs_of.get(column)
        else kept.get(key, {}).get(column, "-")
        for column in columns
    ]
    print("| {} | {} | {} | {} |".format(nic, kernel, scenario, " | ".join(shown)))
print(
    "lab-matrix.py: {} rows from the runs, {} kept from the earlier table".format(
        len(cells), len(set(kept) - set(cells))),
    file=sys.stderr,
)
