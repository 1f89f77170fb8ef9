#!/usr/bin/env bash
# Builds, once, the lab's Debian 13 (trixie) userland: a root holding QEMU 10 (which emulates
# Intel's 82576 as `-device igb`, and vmxnet3), irqbalance 1.9.4 and ethtool 6.14, made by
# mmdebstrap from Debian's archive and cached outside the clone (STEERD_LAB_CACHE, default
# /var/cache/steerd-lab). Prints the root's path. The lab runs QEMU in it with
# `--userland DIR` (crates/steerd-testkit/src/lab/vm.rs) and takes irqbalance 1.9.4 from it with `--irqbalance 1.9.4`.
#
#   sudo scripts/lab-userland.sh            # builds it (under a minute here), prints its path
#
# Nothing is installed on the host but mmdebstrap itself; the root is built in a temporary
# directory beside the cache and renamed into place only when complete, so an interrupted
# build leaves nothing that looks finished.
set -euo pipefail
cache=${STEERD_LAB_CACHE:-/var/cache/steerd-lab}
root=$cache/trixie
mirror=${STEERD_LAB_MIRROR:-http://deb.debian.org/debian}
if [ -f "$root/.steerd-lab-complete" ]; then
    echo "$root"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "lab-userland: needs root (mmdebstrap builds a root with device nodes and owners)" >&2
    exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
    apt-get install -y mmdebstrap >&2
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/trixie.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# --variant=apt: the essential set and apt, then only what the lab runs from this root.
mmdebstrap --variant=apt --include=qemu-system-x86,ethtool,irqbalance,strace \
    trixie "$work/root" "$mirror" >&2
# The lab binds the work directory holding the guest's kernel and initrd here.
mkdir -p "$work/root/lab"
touch "$work/root/.steerd-lab-complete"
rm -rf "$root"
mv "$work/root" "$root"
echo "$root"
