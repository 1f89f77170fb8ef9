#!/usr/bin/env bash
# Unpacks Debian's newest 6.12 cloud kernel (linux-image-6.12.*-cloud-amd64-unsigned) into
# target/lab-kernels/6.12 for the lab, without installing it: the host's /boot keeps its
# kernel. Prints the directory; boot it with
#   STEERD_LAB_KERNEL=$(scripts/lab-kernel-6.12.sh) scripts/lab.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
dest=target/lab-kernels/6.12
if ! ls "$dest"/boot/vmlinuz-* >/dev/null 2>&1; then
    pkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb[0-9]+-cloud-amd64-unsigned$' \
        | awk '{ print $1 }' | sort -V | tail -n 1)
    if [ -z "$pkg" ]; then
        echo "no linux-image-6.12.*-cloud-amd64-unsigned in the package lists (apt-get update?)" >&2
        exit 1
    fi
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && apt-get download "$pkg" >&2)
    mkdir -p "$dest"
    dpkg-deb -x "$work"/*.deb "$dest"
fi
realpath "$dest"
