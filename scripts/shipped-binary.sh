#!/usr/bin/env bash
# Builds steerd as the Debian and RPM packages ship it and prints the binary's path, so
# the packages, the memory figures (scripts/memory.sh) and the text order
# (scripts/text-order.sh) all speak of one build.
#
# usage: scripts/shipped-binary.sh        (prints $CARGO_TARGET_DIR/<triple>/release/steerd)
#        scripts/shipped-binary.sh --example NAME
#                                        (an example program built the same way, its path:
#                                        the lab's guests run the shipped steerd and the
#                                        `rss` example beside it, from one build tree)
#
# How it differs from `cargo build --release`: glibc is linked into the program
# (`-C target-feature=+crt-static`, a static-pie executable). The dynamic build maps pages of
# libc.so, ld.so and libgcc_s besides its own text, and its start-up pays the dynamic
# loader's relocations; linked in, only the libc functions steerd calls are there, laid
# out by packaging/text-order.txt with the rest. That is about 700 kB less peak RSS, what
# brings the daemon to irqbalance's figure (docs/performance.md, "Where the memory goes").
# steerd resolves no names through NSS and loads no module, the two things a static glibc
# cannot do well; the cost is that a glibc security update reaches steerd with a rebuild of
# the package, not with libc6's upgrade (docs/install.md says so).
#
# Why `--target` with the host's own triple: with the triple named, RUSTFLAGS reach only
# the crates of the target, not the build scripts and proc macros, which cannot be linked
# statically. It also gives steerd's own symbols other hashes than a plain release build's:
# packaging/text-order.txt lists this build's names.
set -euo pipefail
cd "$(dirname "$0")/.."

what=(--bin steerd)
built=steerd
case "${1:-}" in
    "") ;;
    --example)
        [ -n "${2:-}" ] || { echo "shipped-binary.sh: --example needs a name" >&2; exit 2; }
        what=(--example "$2")
        built="examples/$2"
        ;;
    *) echo "usage: scripts/shipped-binary.sh [--example NAME]" >&2; exit 2 ;;
esac
triple=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --locked --quiet --target "$triple" "${what[@]}"
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
echo "$target_dir/$triple/release/$built"
