#!/usr/bin/env python3
"""Markdown table of the saturated lab runs (`examples/lab --format json` lines on stdin):
per scenario and balancer the medians of delivered, lost and processed pkt/s, drops, the busiest
CPU's irq+softirq share, the first change and the first relief (from a CPU reaching 0.6),
the writes by lever and steerd's checks of its vector moves, the most changes after
convergence and the runs restored; then steerd's delivered packets over no balancer's and
irqbalance's, per round and their median (docs/lab.md, "Saturation"), and again over the
rounds in which no queue stalled (`stalled_queues`: a queue that stopped receiving mid-run
while the others went on, a fault of the lab's QEMU 7.2 under saturation, lab/queue_stall.rs)."""
import json
import statistics
import sys
from collections import defaultdict

runs = [json.loads(line) for line in sys.stdin if line.startswith("{")]
by = defaultdict(list)
for r in runs:
    by[(r["scenario"], r["balancer"])].append(r)


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def show(v, fmt="{:.0f}"):
    return "-" if v is None else fmt.format(v)


print("| scenario | balancer | runs | delivered pkt/s | lost pkt/s | processed pkt/s | drops softnet / tap | busiest irq+softirq | first change (s) | first relief (s) | writes by lever | vector moves checked | changes after convergence | restored |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
order = ["none", "irqbalance", "steerd", "hand"]
for scenario in dict.fromkeys(r["scenario"] for r in runs):
    for balancer in order:
        rs = by.get((scenario, balancer))
        if not rs:
            continue
        levers = defaultdict(int)
        for r in rs:
            for k, v in r["changes_by_lever"].items():
                levers[k] += v
        lever_text = ", ".join(f"{k} {v}" for k, v in sorted(levers.items())) or "-"
        checks = defaultdict(int)
        for r in rs:
            for k, v in (r.get("irq_move_checks") or {}).items():
                checks[k] += v
        check_text = ", ".join(f"{k} {v}" for k, v in sorted(checks.items())) or "-"
        print(
            f"| {scenario} | {balancer} | {len(rs)} | {show(med([r['delivered_pps'] for r in rs]))} "
            f"| {show(med([r.get('lost_pps') for r in rs]))} "
            f"| {show(med([r['processed_pps'] for r in rs]))} "
            f"| {show(med([r['softnet_drops'] for r in rs]))} / {show(med([r['tap_drops'] for r in rs]))} "
            f"| {show(med([r['busiest_si_share'] for r in rs]), '{:.2f}')} "
            f"| {show(med([r['first_change_s'] for r in rs]), '{:.1f}')} "
            f"| {show(med([r.get('first_relief_s') for r in rs]), '{:.1f}')} | {lever_text} | {check_text} "
            f"| {max(r['changes_after_convergence'] for r in rs)} "
            f"| {sum(r['restored'] for r in rs)}/{len(rs)} |"
        )
print()
for scenario in dict.fromkeys(r["scenario"] for r in runs):
    for other in ["none", "irqbalance"]:
        ratios = []
        sound = []
        for s in by.get((scenario, "steerd"), []):
            o = [r for r in by.get((scenario, other), []) if r["rep"] == s["rep"]]
            if o and o[0]["delivered_pps"] and s["delivered_pps"] is not None:
                ratio = s["delivered_pps"] / o[0]["delivered_pps"]
                ratios.append(ratio)
                if not (s.get("stalled_queues") or o[0].get("stalled_queues")):
                    sound.append(ratio)
        if ratios:
            per = ", ".join(f"{x:.2f}" for x in ratios)
            line = f"- {scenario}: steerd/{other} delivered {statistics.median(ratios):.2f} (rounds: {per})"
            if len(sound) < len(ratios):
                kept = ", ".join(f"{x:.2f}" for x in sound)
                median = f"{statistics.median(sound):.2f}" if sound else "-"
                line += f"; {median} over the {len(sound)} rounds without a stalled queue ({kept or 'none'})"
            print(line)
    stalled = [
        f"{b} {sum(bool(r.get('stalled_queues')) for r in by[(scenario, b)])}/{len(by[(scenario, b)])}"
        for b in order
        if (scenario, b) in by
    ]
    if any(r.get("stalled_queues") for r in runs if r["scenario"] == scenario):
        print(f"- {scenario}: runs with a queue stalled mid-run: {', '.join(stalled)}")
