#!/usr/bin/env bash
# Builds steerd's Debian and RPM packages: a release build, the man page and shell
# completions generated from the CLI definition (examples/gen_assets.rs), then `cargo deb`
# and `cargo generate-rpm`. Prints the two package paths, one per line, last.
#
# Needs: cargo install --locked cargo-deb cargo-generate-rpm; gzip.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in cargo-deb cargo-generate-rpm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build-packages.sh: $tool is missing: cargo install --locked cargo-deb cargo-generate-rpm" >&2
        exit 2
    fi
done

cargo build --release --locked
cargo run --release --locked --quiet --example gen_assets -- target/assets >/dev/null
# --strip: the release profile keeps debug info (for perf); the package does not.
deb=$(cargo deb --no-build --locked --strip 2>/dev/null | tail -n 1)
# cargo generate-rpm does not strip: package a stripped copy.
strip --strip-debug -o target/assets/steerd target/release/steerd
cargo generate-rpm >/dev/null
rpm=$(ls -t target/generate-rpm/steerd-*.rpm | head -n 1)
echo "$deb"
echo "$rpm"
