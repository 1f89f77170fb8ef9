#!/usr/bin/env bash
# The newcomer check: clones this repository (its committed HEAD) into a fresh temporary
# directory and follows README.md's Quick start as a newcomer would, then checks what the
# issue "the first ten minutes" asks:
#
#   1. README's first command (the daemon) runs; 20 s after it answers /healthz it gets
#      SIGTERM and must exit 0.
#   2. README's second command (the tests) runs to its end.
#   3. Its closing summary adds up: passed + failed + skipped equals the number of tests
#      that exist (`cargo test -- --list`), and every skip is printed with a reason.
#   4. No knob is left changed: every /proc/irq/*/smp_affinity_list, every rx queue's
#      rps_cpus and rps_flow_cnt, and rps_sock_flow_entries are as before, after the daemon
#      and again after the tests.
#
#   scripts/newcomer-check.sh [--fresh-target]
#
# Run it by hand, as root for the full check (as another user the daemon only observes and
# the root-only tests are skipped, which the summary must then show). CI does not run it:
# it runs the very test command CI runs, so CI would recurse into itself. By default it
# shares $CARGO_TARGET_DIR (or the repository's target/) so that dependencies are not
# rebuilt; --fresh-target builds everything from nothing, as a real newcomer would (much
# slower). Port 9847 must be free (the daemon's default). Output: the log of both commands in the
# temporary directory, and a closing verdict; exit 0 only when every check holds.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/steerd-newcomer.XXXXXX)
if [ "${1:-}" = "--fresh-target" ]; then
    export CARGO_TARGET_DIR="$work/target"
else
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
fi
failures=()
fail() { failures+=("$*"); printf 'newcomer-check: FAIL: %s\n' "$*" >&2; }
say() { printf 'newcomer-check: %s\n' "$*" >&2; }

git clone -q "$repo" "$work/steerd" || { echo "cannot clone $repo" >&2; exit 1; }
cd "$work/steerd" || exit 1
say "fresh clone of $(git -C "$repo" rev-parse --short HEAD) in $work/steerd (target dir $CARGO_TARGET_DIR)"

# The commands of README's Quick start: its indented lines.
mapfile -t commands < <(awk '/^## /{inside = ($0 == "## Quick start")} inside && /^    [^ ]/{sub(/^    /, ""); print}' README.md)
if [ "${#commands[@]}" -ne 2 ]; then
    fail "README.md's Quick start has ${#commands[@]} commands, not 2: ${commands[*]}"
    exit 1
fi
daemon_command=${commands[0]}
test_command=${commands[1]}
say "README's commands: [$daemon_command] and [$test_command]"

# Every knob steerd may change, with its value.
knobs() {
    local f
    for f in /proc/irq/*/smp_affinity_list /sys/class/net/*/queues/rx-*/rps_cpus \
        /sys/class/net/*/queues/rx-*/rps_flow_cnt /proc/sys/net/core/rps_sock_flow_entries; do
        [ -e "$f" ] && printf '%s %s\n' "$f" "$(cat "$f" 2>/dev/null)"
    done
}
knobs >"$work/knobs.before"

# GET http://127.0.0.1:9847/healthz answered 200 (bash's /dev/tcp: no curl needed).
healthy() {
    local answer
    exec 3<>/dev/tcp/127.0.0.1/9847 || return 1
    printf 'GET /healthz HTTP/1.0\r\n\r\n' >&3
    answer=$(head -1 <&3)
    exec 3<&-
    [[ "$answer" == *" 200 "* ]]
}
if healthy 2>/dev/null; then
    fail "something already answers on 127.0.0.1:9847; stop it first"
    exit 1
fi

# 1. The daemon, as README says, for 20 s once it answers.
say "running: $daemon_command"
setsid bash -c "exec $daemon_command" >"$work/daemon.log" 2>&1 &
runner=$!
ready=0
for _ in $(seq 1 3600); do
    if healthy 2>/dev/null; then ready=1; break; fi
    kill -0 "$runner" 2>/dev/null || break
    sleep 1
done
if [ "$ready" -eq 1 ]; then
    sleep 20
    status_out=$("$CARGO_TARGET_DIR/release/steerd" status 2>&1)
    status_code=$?
    printf '%s\n' "$status_out" >"$work/status.txt"
    say "steerd status exited $status_code after 20 s:"
    printf '%s\n' "$status_out" | sed 's/^/    /' >&2
    steerd_pid=$(pgrep -s "$runner" -x steerd | head -1)
    if [ -n "$steerd_pid" ]; then
        kill -TERM "$steerd_pid"
    else
        fail "no steerd process under $runner"
    fi
    wait "$runner"
    code=$?
    [ "$code" -eq 0 ] || fail "the daemon exited $code after SIGTERM (log: $work/daemon.log)"
else
    fail "the daemon never answered /healthz (log: $work/daemon.log)"
    kill -TERM -- "-$runner" 2>/dev/null
    wait "$runner" 2>/dev/null
fi
knobs >"$work/knobs.after-daemon"
diff -u "$work/knobs.before" "$work/knobs.after-daemon" >"$work/knobs.daemon.diff" ||
    fail "knobs changed by the daemon: $work/knobs.daemon.diff"

# 2. The tests, as README says.
say "running: $test_command (log: $work/tests.log)"
bash -c "$test_command" >"$work/tests.log" 2>&1
test_code=$?
knobs >"$work/knobs.after-tests"
diff -u "$work/knobs.before" "$work/knobs.after-tests" >"$work/knobs.tests.diff" ||
    fail "knobs changed by the tests: $work/knobs.tests.diff"

# 3. The summary adds up.
summary=$(grep -E '^tests: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$work/tests.log" | tail -1)
last=$(tail -1 "$work/tests.log")
[ "$summary" = "$last" ] || fail "the test command's last line is not its summary: $last"
read -r passed failed skipped < <(sed -E 's/^tests: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/' <<<"$summary")
existing=$(cargo test -q -- --list 2>/dev/null | grep -c ': test$')
total=$((passed + failed + skipped))
say "summary: $summary"
say "tests that exist (cargo test -- --list): $existing"
[ "$total" -eq "$existing" ] ||
    fail "passed + failed + skipped = $total, but $existing tests exist"
skip_lines=$(grep -c '^SKIPPED ' "$work/tests.log")
[ "$skip_lines" -eq "$skipped" ] || fail "$skipped skipped, but $skip_lines SKIPPED lines"
without_reason=$(grep '^SKIPPED ' "$work/tests.log" | grep -Ev '^SKIPPED [^ ]+: .+' | grep -c . || true)
[ "$without_reason" -eq 0 ] || fail "$without_reason skips without a reason"
grep '^SKIPPED \|^FAILED ' "$work/tests.log" | sed 's/^/    /' >&2
[ "$test_code" -eq 0 ] || fail "the test command exited $test_code ($failed failed)"

if [ "${#failures[@]}" -eq 0 ]; then
    echo "newcomer-check: ok: daemon ran and restored everything; $summary; $existing tests exist; logs in $work"
    exit 0
fi
echo "newcomer-check: ${#failures[@]} check(s) failed (logs in $work):"
printf '  %s\n' "${failures[@]}"
exit 1
