#!/usr/bin/env bash
# Builds, once, a Debian 13 (trixie) root holding Debian's tuned (2.25, with the Python it
# runs on) for the lab's `tuned` scenarios (issue 33): the lab copies it into the guest at
# /tuned, and the guest runs tuned chrooted there with the guest's /proc, /sys and /dev, so
# the IRQs tuned moves are the guest's and nothing on the host is touched. Made by
# mmdebstrap from Debian's archive, cached outside the clone (STEERD_LAB_CACHE, default
# /var/cache/steerd-lab); prints the root's path.
#
#   sudo scripts/lab-tuned.sh            # builds it (under a minute here), prints its path
#
# Documentation, manual pages and translations are left out: the guest holds the root in
# its initramfs. The root is built beside the cache and renamed into place only when
# complete.
set -euo pipefail
cache=${STEERD_LAB_CACHE:-/var/cache/steerd-lab}
root=$cache/tuned
mirror=${STEERD_LAB_MIRROR:-http://deb.debian.org/debian}
if [ -f "$root/.steerd-lab-complete" ]; then
    echo "$root"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "lab-tuned: needs root (mmdebstrap builds a root with device nodes and owners)" >&2
    exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
    apt-get install -y mmdebstrap >&2
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/tuned.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mmdebstrap --variant=apt --include=tuned \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    trixie "$work/root" "$mirror" >&2
rm -rf "$work/root/var/cache/apt" "$work/root/var/lib/apt/lists"
touch "$work/root/.steerd-lab-complete"
rm -rf "$root"
mv "$work/root" "$root"
echo "$root"
