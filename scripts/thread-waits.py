#!/usr/bin/env python3
"""How long each thread of a process waited for a CPU, from the scheduler's own
accounting: polls /proc/PID/task/*/schedstat (time on CPU, time runnable but waiting, and
the number of times it was put on a CPU) every half second until PID exits, then prints,
per thread, what it ran and waited over its life, the mean wait per time on a CPU, and the
CPUs it was seen on. Written for the veth bed's probe (docs/lab.md, "The veth throughput
bed"): whether its echo thread waits longer for a CPU under RPS than with no balancer.

    target/release/examples/bed --reps 1 --balancers none,steerd --steerd target/release/steerd & \\
        python3 scripts/thread-waits.py $!
"""
import os
import sys
import time


def poll(pid):
    """tid -> (first, last) samples of (time, run ns, wait ns, timeslices), and CPUs seen."""
    seen, cpus = {}, {}
    while os.path.exists(f"/proc/{pid}"):
        now = time.monotonic()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            break
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run, wait, slices = (int(v) for v in f.read().split()[:3])
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    # The fields after the command's closing parenthesis; `processor` is
                    # the stat file's 39th field.
                    cpu = f.read().rsplit(")", 1)[1].split()[36]
            except (OSError, ValueError, IndexError):
                continue
            sample = (now, run, wait, slices)
            first = seen.get(tid, (sample, sample))[0]
            seen[tid] = (first, sample)
            cpus.setdefault(tid, set()).add(cpu)
        time.sleep(0.5)
    return seen, cpus


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.exit("usage: thread-waits.py PID")
    seen, cpus = poll(int(sys.argv[1]))
    print("tid      seen s   run ms  wait ms  on-CPU times  wait per time us  CPUs")
    for tid, (a, b) in seen.items():
        slices = b[3] - a[3]
        wait_ms = (b[2] - a[2]) / 1e6
        print(
            "{:<8} {:>6.1f} {:>8.0f} {:>8.0f} {:>13} {:>17.0f}  {}".format(
                tid, b[0] - a[0], (b[1] - a[1]) / 1e6, wait_ms, slices,
                1000 * wait_ms / max(slices, 1), ",".join(sorted(cpus[tid], key=int)),
            )
        )


if __name__ == "__main__":
    main()
