#!/usr/bin/env bash
# Builds, once, a Debian 13 (trixie) root holding Debian's tuned (2.25, with the Python it
# runs on) for the lab's `tuned` scenarios (issue 33): the lab copies it into the guest at
# /tuned, and the guest runs tuned chrooted there with the guest's /proc, /sys and /dev, so
# the IRQs tuned moves are the guest's and nothing on the host is touched. Prints the root's
# path (scripts/lab-debian-root.sh builds and caches it).
#
#   sudo scripts/lab-tuned.sh            # builds it (under a minute here), prints its path
#
# Documentation, manual pages and translations are left out: the guest holds the root in
# its initramfs.
set -euo pipefail
exec "$(dirname "$0")/lab-debian-root.sh" tuned tuned \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*'
