#!/usr/bin/env bash
# Builds, once, a Debian 13 (trixie) root for the lab with mmdebstrap from Debian's archive,
# cached outside the clone (STEERD_LAB_CACHE, default /var/cache/steerd-lab), and prints its
# path. scripts/lab-userland.sh (QEMU 10, irqbalance 1.9.4, ethtool) and scripts/lab-tuned.sh
# (Debian's tuned) are this with their packages:
#
#   scripts/lab-debian-root.sh NAME PACKAGES [MMDEBSTRAP_OPTION...]
#
# NAME is the root's directory under the cache; PACKAGES a comma-separated list installed on
# mmdebstrap's apt variant. Nothing is installed on the host but mmdebstrap itself; the root
# is built in a temporary directory beside the cache and renamed into place only when
# complete, so an interrupted build leaves nothing that looks finished.
set -euo pipefail
name=${1:?usage: lab-debian-root.sh NAME PACKAGES [MMDEBSTRAP_OPTION...]}
packages=${2:?usage: lab-debian-root.sh NAME PACKAGES [MMDEBSTRAP_OPTION...]}
shift 2
cache=${STEERD_LAB_CACHE:-/var/cache/steerd-lab}
root=$cache/$name
mirror=${STEERD_LAB_MIRROR:-http://deb.debian.org/debian}
if [ -f "$root/.steerd-lab-complete" ]; then
    echo "$root"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "lab-debian-root: $name needs root (mmdebstrap builds a root with device nodes and owners)" >&2
    exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
    apt-get install -y mmdebstrap >&2
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/$name.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mmdebstrap --variant=apt --include="$packages" "$@" trixie "$work/root" "$mirror" >&2
touch "$work/root/.steerd-lab-complete"
rm -rf "$root"
mv "$work/root" "$root"
echo "$root"
