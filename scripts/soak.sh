#!/usr/bin/env bash
# The reliability soak: the fault scenarios of tests/tests/faults.rs run longer, then their figures.
#
#   scripts/soak.sh [--minutes N] [--kinds KIND,...]      (defaults: 5; every kind)
#
# Every scenario of tests/tests/faults.rs (kill -9 of a holder, CLIENT KILL of subscribers, a lost
# unlock message, CLIENT PAUSE and SIGSTOP of redis-server, restart with AOF, cancellation storms,
# a holder frozen past its lease, a slow subscriber, pool exhaustion) runs for an equal share of N
# minutes, but no shorter than in the quick test suite, one after the other, each checked by the
# history checker (tests/src/history/). The kind-generic scenarios (kill -9, CLIENT KILL,
# cancellation storms) run once per lock kind, named `<scenario>::<kind>`; --kinds picks the kinds
# among lock, fair, spin, fenced, read, write and rw (readers and writers of one read-write lock).
# The other scenarios run on the reentrant lock, so with `lock` among the kinds, and so do the
# proxy scenarios of tests/tests/faults_proxy.rs: workers reach a single server, a master with a
# replica (WAIT), a Sentinel setup and a cluster through fault proxies that lose the replies of
# scripts that ran, delay replies and reset connections at random, while a monitor looks for
# acquires applied twice (a hold count of 2); and the locks' master of a Sentinel setup and of a
# cluster is killed while the proxies lose replies (what a failover may lose: README.md). Then the
# property tests of tests/tests/fuzz.rs run with more cases. At the end the figures of all runs are
# added up and printed: acquisitions checked, faults injected by kind, overlaps inside and outside
# signalled lease loss, fair-lock acquisitions out of queue order, leaked holds, double-applied
# acquires, holds across a failover, maximum delays.
#
# Exits non-zero if a scenario failed or a figure that must be 0 is not. Needs only a Rust toolchain
# (redis-server is installed with apt-get when missing); servers are private, on loopback.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

all_kinds=lock,fair,spin,fenced,read,write,rw
minutes=5
kinds=$all_kinds
usage="usage: scripts/soak.sh [--minutes N] [--kinds KIND,...]"
while [ $# -gt 0 ]; do
    case "$1" in
    --minutes) minutes=${2:-}; shift 2 || die "--minutes needs a value" ;;
    --minutes=*) minutes=${1#*=}; shift ;;
    --kinds) kinds=${2:-}; shift 2 || die "--kinds needs a value" ;;
    --kinds=*) kinds=${1#*=}; shift ;;
    -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 ($usage)" ;;
    esac
done
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || die "--minutes takes a whole number of minutes, got '$minutes'"
IFS=, read -ra chosen <<<"$kinds"
[ "${#chosen[@]}" -gt 0 ] || die "--kinds needs at least one of $all_kinds"
for kind in "${chosen[@]}"; do
    [[ ",$all_kinds," == *",$kind,"* ]] || die "unknown kind '$kind' (kinds: $all_kinds)"
done

section "redis-server"
ensure_redis_server

section "build (release)"
cargo build --release -q -p rlock-tests --bin rlock-torture
cargo test --release -q -p rlock-tests --test faults --test faults_proxy --test fuzz --no-run

mapfile -t listed < <(cargo test --release -q -p rlock-tests --test faults -- --list 2>/dev/null |
    sed -n 's/: test$//p')
scenarios=()
for scenario in "${listed[@]}"; do
    kind=lock
    [[ "$scenario" == *::* ]] && kind=${scenario##*::}
    if [[ ",$kinds," == *",$kind,"* ]]; then
        scenarios+=("$scenario")
    fi
done
proxy_scenarios=()
if [[ ",$kinds," == *",lock,"* ]]; then
    mapfile -t proxy_scenarios < <(cargo test --release -q -p rlock-tests --test faults_proxy -- \
        --list 2>/dev/null | sed -n 's/: test$//p')
fi
[ "${#scenarios[@]}" -gt 0 ] || die "no fault scenarios found for kinds $kinds"
per_scenario=$((minutes * 60 / (${#scenarios[@]} + ${#proxy_scenarios[@]})))
[ "$per_scenario" -ge 5 ] || per_scenario=5

figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
export RLOCK_FAULTS_REPORT=$figures RLOCK_SOAK_SECS=$per_scenario

failed=()
for scenario in "${scenarios[@]}"; do
    section "$scenario (${per_scenario} s)"
    # Scenarios ignored in the quick suite for a known bug run too: the soak tells the whole truth.
    cargo test --release -q -p rlock-tests --test faults -- --exact "$scenario" --include-ignored \
        --nocapture ||
        failed+=("$scenario")
done

for scenario in "${proxy_scenarios[@]}"; do
    section "$scenario (${per_scenario} s)"
    # The cluster failover is left out of the quick suite for its length only.
    cargo test --release -q -p rlock-tests --test faults_proxy -- --exact "$scenario" \
        --include-ignored --nocapture ||
        failed+=("$scenario")
done

section "property tests (500 cases each)"
RLOCK_FUZZ_CASES=500 cargo test --release -q -p rlock-tests --test fuzz || failed+=(fuzz)

section "figures of scripts/soak.sh --minutes $minutes --kinds $kinds"
status=0
cargo run --release -q -p rlock-tests --bin rlock-torture -- summarize "$figures" || status=1
if [ "${#failed[@]}" -gt 0 ]; then
    printf 'failed: %s\n' "${failed[@]}" >&2
    status=1
fi
exit "$status"
