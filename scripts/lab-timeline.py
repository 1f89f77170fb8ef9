#!/usr/bin/env python3
"""Per-sample receive work of lab runs, from their consoles (`LAB_CONSOLE=DIR`, or the
matrix's target/lab-matrix/*.console/): for each log given, the guest's softnet `processed`
summed over its CPUs per second between samples (and the backlog drops, where over
500/s), steerd's RPS writes, and the mean work done between two uptimes (`--from`, `--to`,
seconds of guest uptime). Written to answer what a whole run's median cannot: whether an
RPS trial's seconds, or what follows its undo, account for a run's difference.

    python3 scripts/lab-timeline.py --from 15 --to 37 target/lab-matrix/virtio-6.19-cloud-irqbalance-1.9.4-sat-elephant.console/*.log
"""
import argparse
import statistics


def samples(path):
    """(uptime, [(processed, dropped) per CPU]) per sample, and steerd's RPS log lines."""
    out, writes, current = [], [], None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("S "):
                current = (float(line.split()[1]), [])
                out.append(current)
            elif line.startswith("N ") and current is not None:
                fields = line.split()
                current[1].append((int(fields[1], 16), int(fields[2], 16)))
            elif line.startswith("LOG ") and " rps_cpus: " in line:
                writes.append(line[4:].strip())
    return out, writes


def rates(series):
    """(uptime, processed/s, dropped/s) between consecutive samples with the same CPUs."""
    for (t0, a), (t1, b) in zip(series, series[1:]):
        if len(a) != len(b) or t1 <= t0:
            continue
        dt = t1 - t0
        yield (
            t1,
            sum(y[0] - x[0] for x, y in zip(a, b)) / dt,
            sum(y[1] - x[1] for x, y in zip(a, b)) / dt,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="start", type=float, default=15.0)
    parser.add_argument("--to", dest="end", type=float, default=37.0)
    parser.add_argument("logs", nargs="+")
    args = parser.parse_args()
    for path in args.logs:
        series, writes = samples(path)
        points = list(rates(series))
        print(path.split("/")[-1])
        for w in writes:
            print("   ", w[:160])
        print(
            "   ",
            " ".join(
                "{:.0f}:{:.1f}k{}".format(t, p / 1000, "/d{:.0f}k".format(d / 1000) if d > 500 else "")
                for t, p, d in points
            ),
        )
        window = [p for t, p, _ in points if args.start <= t <= args.end]
        if window:
            print(
                "    processed {:.0f}-{:.0f} s: mean {:.1f}k, median {:.1f}k pkt/s over {} samples".format(
                    args.start, args.end, statistics.mean(window) / 1000,
                    statistics.median(window) / 1000, len(window)
                )
            )


if __name__ == "__main__":
    main()
