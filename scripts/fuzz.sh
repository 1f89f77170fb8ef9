#!/bin/sh
# Runs the parser property tests (tests/fuzz_parsers.rs and the netlink parsers' unit
# properties in crates/steerd-kernel/src/kernel/netlink/fuzz.rs) with many more cases than `cargo test` runs:
# every property gets PROPTEST_CASES cases instead of its fixed budget.
#
#   scripts/fuzz.sh [CASES] [ARGS FOR cargo test...]
#
# CASES defaults to $PROPTEST_CASES, else 10000. The debug profile is used on purpose:
# it keeps overflow checks, so an arithmetic overflow on hostile input is a failure here.
# Set CARGO_TARGET_DIR to keep this build apart from another cargo's lock.
set -eu

cd "$(dirname "$0")/.."
cases=${PROPTEST_CASES:-10000}
case "${1:-}" in
    ''|*[!0-9]*) ;;
    *) cases=$1; shift ;;
esac
export PROPTEST_CASES="$cases"
echo "scripts/fuzz.sh: PROPTEST_CASES=$PROPTEST_CASES"

cargo test --test fuzz_parsers "$@"
cargo test --lib "$@" -- kernel::netlink::fuzz
