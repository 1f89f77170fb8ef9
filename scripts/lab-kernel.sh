#!/usr/bin/env bash
# Unpacks one of Debian's kernels for the lab's guests, without installing it (the host's
# /boot keeps its own kernel), and prints the directory to pass as STEERD_LAB_KERNEL:
#
#   scripts/lab-kernel.sh VERSION [cloud|generic]
#
# VERSION is 5.10 (Debian 11), 6.1 (Debian 12), 6.12 (Debian 13), 6.18 or 6.19 (Debian 13's
# backports). cloud (the default) has virtio-net and vmxnet3 but no igb or e1000e; generic
# (`-amd64`) has igb. Debian builds no generic 6.19 in one package (it is split into
# linux-binary-* and linux-modules-*): for igb on the newest kernel use 6.18 generic.
#
# The package lists come from a private apt index under STEERD_LAB_CACHE (default
# /var/cache/steerd-lab), so the host's sources stay as they are; the kernel is unpacked with
# `dpkg-deb -x` into STEERD_LAB_CACHE/kernels/VERSION-FLAVOUR and reused after that.
#
#   STEERD_LAB_KERNEL=$(scripts/lab-kernel.sh 6.18 generic) scripts/lab.sh --nic igb ...
set -euo pipefail
version=${1:?usage: lab-kernel.sh 5.10|6.1|6.12|6.18|6.19 [cloud|generic]}
flavour=${2:-cloud}
cache=${STEERD_LAB_CACHE:-/var/cache/steerd-lab}
mirror=${STEERD_LAB_MIRROR:-http://deb.debian.org/debian}
case "$version" in
    5.10) suite=bullseye ;;
    6.1) suite=bookworm ;;
    6.12) suite=trixie ;;
    6.18 | 6.19) suite=trixie-backports ;;
    *) echo "lab-kernel: unknown version $version (5.10, 6.1, 6.12, 6.18, 6.19)" >&2; exit 2 ;;
esac
case "$flavour" in
    cloud) tail='cloud-amd64' ;;
    generic) tail='amd64' ;;
    *) echo "lab-kernel: unknown flavour $flavour (cloud, generic)" >&2; exit 2 ;;
esac
dest=$cache/kernels/$version-$flavour
if ls "$dest"/boot/vmlinuz-* >/dev/null 2>&1; then
    realpath "$dest"
    exit 0
fi

# A private apt index naming every suite the lab takes kernels from.
apt_dir=$cache/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
# Kernel updates come through the security suites too (6.1.0-56 is only in
# bookworm-security as this is written).
security=${STEERD_LAB_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cat > "$apt_dir/sources.list" <<EOF
deb $mirror bullseye main
deb $security bullseye-security main
deb $mirror bookworm main
deb $security bookworm-security main
deb $mirror trixie main
deb $security trixie-security main
deb $mirror trixie-backports main
EOF
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir" -o "Dir::Cache::archives=$apt_dir/archives"
    -o "APT::Get::List-Cleanup=0" -o "Dir::State::status=/dev/null")
# Lists older than a day, or of other sources, are read again: a point release removes the
# kernel they name.
if [ -z "$(find "$apt_dir/lists" -name '*_Packages*' -mmin -1440 2>/dev/null | head -n 1)" ] ||
    ! cmp -s "$apt_dir/sources.list" "$apt_dir/lists/.sources.list"; then
    apt-get "${apt_opts[@]}" update >&2
    cp "$apt_dir/sources.list" "$apt_dir/lists/.sources.list"
fi
v=${version//./\\.}
# The ABI part (`5.10.0-39`, `6.12.57+deb13`, `6.18.15+deb13`) differs per release; the
# unsigned build is the same kernel as the signed one without the shim's signature.
candidates=$(apt-cache "${apt_opts[@]}" search --names-only \
    "^linux-image-${v}[.-][0-9][^ ]*-${tail}(-unsigned)?\$" | awk '{ print $1 }' |
    grep -v -e '-rt-' -e '-dbg' -e 'cloud-amd64' || true)
[ "$flavour" = cloud ] && candidates=$(apt-cache "${apt_opts[@]}" search --names-only \
    "^linux-image-${v}[.-][0-9][^ ]*-cloud-amd64(-unsigned)?\$" | awk '{ print $1 }' || true)
if [ -z "$(echo "$candidates" | grep .)" ]; then
    echo "lab-kernel: no linux-image-$version.*-$tail in $suite's lists" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# From 6.19 on the image package is empty and depends on linux-binary-* (vmlinuz) and
# linux-modules-* of the same version: unpack those instead. The modules package was missing
# from trixie-backports' index when this was written (2026-11), though it is in the pool:
# such a package is fetched from the pool by the name and version the image depends on
# (over the same mirror, without apt's signature check of an index entry).
fetch() { # PKG: downloads its .deb files into $work; fails if any cannot be fetched
    local pkg=$1 version_of_pkg parts part url
    version_of_pkg=$(apt-cache "${apt_opts[@]}" show "$pkg" | awk '/^Version:/ { print $2; exit }')
    parts=$(apt-cache "${apt_opts[@]}" show "$pkg" | awk '/^Depends:/ { print; exit }' |
        grep -o -E 'linux-(binary|modules)-[^ ,]+' || true)
    [ -n "$parts" ] || parts=$pkg
    for part in $parts; do
        if apt-cache "${apt_opts[@]}" show "$part" 2>/dev/null | grep -q "^Filename:"; then
            (cd "$work" && apt-get "${apt_opts[@]}" download "$part" >&2) || return 1
        else
            url="$mirror/pool/main/l/linux/${part}_${version_of_pkg}_amd64.deb"
            echo "lab-kernel: $part is not in the index; fetching $url" >&2
            curl -fsS -o "$work/${part}.deb" "$url" || return 1
        fi
    done
}
# The newest first; an index can name a package the archive does not serve yet or any
# more (seen 2026-11-28: bullseye-security listed linux-image-5.10.0-46-cloud-amd64-unsigned
# and its pool answered 404), so the next newest is tried then.
pkg=
for candidate in $(echo "$candidates" | grep . | sort -V -r); do
    rm -f "$work"/*.deb
    if fetch "$candidate"; then
        pkg=$candidate
        break
    fi
    echo "lab-kernel: $candidate could not be fetched; trying the next newest" >&2
done
if [ -z "$pkg" ]; then
    echo "lab-kernel: no linux-image-$version.*-$tail could be fetched" >&2
    exit 1
fi
mkdir -p "$dest.partial"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$dest.partial"; done
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "lab-kernel: $pkg unpacked" >&2
realpath "$dest"
