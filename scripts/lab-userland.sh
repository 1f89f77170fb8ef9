#!/usr/bin/env bash
# Builds, once, the lab's Debian 13 (trixie) userland: a root holding QEMU 10 (which emulates
# Intel's 82576 as `-device igb`, and vmxnet3), irqbalance 1.9.4 and ethtool 6.14, made by
# mmdebstrap from Debian's archive and cached outside the clone (STEERD_LAB_CACHE, default
# /var/cache/steerd-lab). Prints the root's path. The lab runs QEMU in it with
# `--userland DIR` (crates/steerd-testkit/src/lab/vm.rs) and takes irqbalance 1.9.4 from it with `--irqbalance 1.9.4`.
#
#   sudo scripts/lab-userland.sh            # builds it (under a minute here), prints its path
#
# scripts/lab-debian-root.sh builds and caches it; the lab binds the work directory holding
# the guest's kernel and initrd at /lab inside it.
set -euo pipefail
exec "$(dirname "$0")/lab-debian-root.sh" trixie qemu-system-x86,ethtool,irqbalance,strace \
    --customize-hook='mkdir -p "$1/lab"'
