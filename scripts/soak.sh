#!/usr/bin/env bash
# The reliability soak: the fault scenarios of tests/tests/faults.rs run longer, then their figures.
#
#   scripts/soak.sh [--minutes N]      (default: 5)
#
# Every scenario of tests/tests/faults.rs (kill -9 of a holder, CLIENT KILL of subscribers, a lost
# unlock message, CLIENT PAUSE and SIGSTOP of redis-server, restart with AOF, cancellation storms,
# a holder frozen past its lease, a slow subscriber, pool exhaustion) runs for an equal share of N
# minutes, one after the other, each checked by the history checker (tests/src/history/). Then the
# property tests of tests/tests/fuzz.rs run with more cases. At the end the figures of all runs are
# added up and printed: acquisitions checked, faults injected by kind, overlaps inside and outside
# signalled lease loss, leaked holds, maximum delays.
#
# Exits non-zero if a scenario failed or a figure that must be 0 is not. Needs only a Rust toolchain
# (redis-server is installed with apt-get when missing); servers are private, on loopback.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

minutes=5
while [ $# -gt 0 ]; do
    case "$1" in
    --minutes) minutes=${2:-}; shift 2 || die "--minutes needs a value" ;;
    --minutes=*) minutes=${1#*=}; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (usage: scripts/soak.sh [--minutes N])" ;;
    esac
done
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || die "--minutes takes a whole number of minutes, got '$minutes'"

section "redis-server"
ensure_redis_server

section "build (release)"
cargo build --release -q -p rlock-tests --bin rlock-torture
cargo test --release -q -p rlock-tests --test faults --test fuzz --no-run

mapfile -t scenarios < <(cargo test --release -q -p rlock-tests --test faults -- --list 2>/dev/null |
    sed -n 's/: test$//p')
[ "${#scenarios[@]}" -gt 0 ] || die "no fault scenarios found"
per_scenario=$((minutes * 60 / ${#scenarios[@]}))
[ "$per_scenario" -ge 5 ] || per_scenario=5

figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
export RLOCK_FAULTS_REPORT=$figures RLOCK_SOAK_SECS=$per_scenario

failed=()
for scenario in "${scenarios[@]}"; do
    section "$scenario (${per_scenario} s)"
    cargo test --release -q -p rlock-tests --test faults -- --exact "$scenario" --nocapture ||
        failed+=("$scenario")
done

section "property tests (500 cases each)"
RLOCK_FUZZ_CASES=500 cargo test --release -q -p rlock-tests --test fuzz || failed+=(fuzz)

section "figures of scripts/soak.sh --minutes $minutes"
status=0
cargo run --release -q -p rlock-tests --bin rlock-torture -- summarize "$figures" || status=1
if [ "${#failed[@]}" -gt 0 ]; then
    printf 'failed: %s\n' "${failed[@]}" >&2
    status=1
fi
exit "$status"
