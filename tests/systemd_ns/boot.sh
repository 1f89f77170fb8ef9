#!/bin/sh
# Runs as PID 1 of fresh PID, mount, UTS, IPC, network and cgroup namespaces (see mod.rs),
# builds a root from an overlay of / with a tmpfs upper layer and API file systems of its
# own, then execs the machine's systemd. Every mount is made in this private mount
# namespace: the host sees none of them and they vanish with the namespace.
#
# What would still reach the host is kept out:
# - /proc/sys is read-only but for net/ (the machine's own network namespace), as
#   systemd-nspawn does: systemd as PID 1 raises fs.file-max and fs.nr_open, and
#   systemd-sysctl would apply /usr/lib/sysctl.d; those are global sysctls.
# - units that touch the kernel or the hardware are masked: sysctl, modules, binfmt, udev
#   (udev-trigger writes uevent files of every host device), time sync, pstore, random
#   seed, hwdb, remount; and all logins.
# - /etc/fstab is empty, and the machine boots a minimal target (basic.target and nothing
#   the host enabled, so e.g. irqbalance or a database never start in here).
#
#   $1: an empty host directory, the mount point of the tmpfs that holds everything
#   $2: the name of the target systemd starts
#   $3: the systemd binary (default /lib/systemd/systemd)
set -eu
base=$1
target=$2
systemd=${3:-/lib/systemd/systemd}
mount -t tmpfs -o mode=0755 steerd-sdns "$base"
mkdir "$base/upper" "$base/work" "$base/root"
mount -t overlay steerd-sdns -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$base/root"
root=$base/root
mount -t proc proc "$root/proc"
for path in sys sysrq-trigger; do
    [ -e "$root/proc/$path" ] || continue
    mount --bind "$root/proc/$path" "$root/proc/$path"
    mount -o remount,bind,ro "$root/proc/$path"
done
# net.* sysctls belong to the machine's own network namespace: writable, as on a host.
mount --bind "$root/proc/sys/net" "$root/proc/sys/net"
mount -o remount,bind,rw "$root/proc/sys/net"
# A fresh sysfs shows this network namespace's devices.
mount -t sysfs sysfs "$root/sys"
mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
# A private /dev with the usual nodes.
mount -t tmpfs -o mode=0755,nosuid tmpfs "$root/dev"
for node in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
    name=${node%%:*}
    numbers=${node#*:}
    mknod -m 0666 "$root/dev/$name" c "${numbers%:*}" "${numbers#*:}"
done
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
units=$root/etc/systemd/system
mkdir -p "$units"
for unit in getty@.service serial-getty@.service console-getty.service \
    container-getty@.service getty.target \
    systemd-sysctl.service systemd-modules-load.service kmod-static-nodes.service \
    systemd-binfmt.service proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount \
    systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
    systemd-udev-trigger.service systemd-udev-settle.service systemd-hwdb-update.service \
    systemd-timesyncd.service systemd-pstore.service systemd-random-seed.service \
    systemd-remount-fs.service systemd-firstboot.service systemd-machine-id-commit.service \
    systemd-boot-update.service systemd-hibernate-resume@.service systemd-fsck-root.service \
    systemd-fsck@.service systemd-repart.service systemd-pcrphase.service \
    systemd-pcrphase-sysinit.service timers.target; do
    ln -sf /dev/null "$units/$unit"
done
: > "$root/etc/fstab"
cat > "$units/$target" <<TARGET
[Unit]
Description=steerd test machine
Requires=basic.target
After=basic.target
AllowIsolate=yes
TARGET
echo steerd-sdns > "$root/etc/hostname"
cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot
exec env -i container=other PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    "$systemd" --unit="$target"
