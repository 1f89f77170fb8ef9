#!/usr/bin/env bash
# Builds steerd's Debian and RPM packages: the shipped build (scripts/shipped-binary.sh:
# release, glibc linked in), the man page and shell
# completions generated from the CLI definition (examples/gen_assets.rs), then `cargo deb`
# and `cargo generate-rpm`. Prints the two package paths, one per line, last.
#
# usage: packaging/build-packages.sh                 the packages, as above
#        packaging/build-packages.sh --binary [--example NAME]
#                                                   only the shipped build of steerd (or of
#                                                   an example), its path: what the lab and
#                                                   the veth bed measure, so that one
#                                                   release tree serves them and the packages
#
# It builds in its own target directory (target/packaging, or
# $STEERD_PACKAGING_TARGET_DIR), never in $CARGO_TARGET_DIR: the package tests call it from
# `cargo test`, which keeps its own target directory locked while the tests run.
#
# gen_assets is built in the same tree as the shipped steerd (`shipped-binary.sh --example`),
# which shares every dependency with it: a plain `cargo run --release` of it built them all
# a second time (over four minutes on a 2-CPU host).
#
# Needs: cargo install --locked cargo-deb cargo-generate-rpm; gzip; strip (binutils).
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${STEERD_PACKAGING_TARGET_DIR:-$PWD/target/packaging}"
if [ "${1:-}" = "--binary" ]; then
    shift
    exec scripts/shipped-binary.sh "$@"
fi

for tool in cargo-deb cargo-generate-rpm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build-packages.sh: $tool is missing: cargo install --locked cargo-deb cargo-generate-rpm" >&2
        exit 2
    fi
done

assets=target/assets   # relative to the package root: Cargo.toml's asset lists name it

binary=$(scripts/shipped-binary.sh)
triple=$(rustc -vV | sed -n 's/^host: //p')
gen_assets=$(scripts/shipped-binary.sh --example gen_assets)
"$gen_assets" "$assets" >/dev/null
# --strip: the release profile keeps debug info (for perf); the package does not.
# --target: cargo deb then takes target/release/steerd from the triple's directory.
deb=$(cargo deb --no-build --locked --strip --target "$triple" 2>/dev/null | tail -n 1)
# cargo generate-rpm does not strip: package a stripped copy.
strip --strip-debug -o "$assets/steerd" "$binary"
cargo generate-rpm --target-dir "$CARGO_TARGET_DIR" >/dev/null
rpm=$(ls -t "$CARGO_TARGET_DIR"/generate-rpm/steerd-*.rpm | head -n 1)
echo "$deb"
echo "$rpm"
