#!/usr/bin/env bash
# The reliability soak: the fault scenarios of the test suite run longer, then their figures.
#
#   scripts/soak.sh [--minutes N] [--kinds KIND,...]      (defaults: 5; every kind)
#
# N minutes are the budget of the whole run (the release build aside): before each scenario, what is
# left is shared among the scenarios still to run, but none runs shorter than in the quick test
# suite. Each is checked by the history checker (tests/src/history/):
# - tests/tests/faults.rs: kill -9 of a holder, CLIENT KILL of subscribers, a lost unlock message,
#   CLIENT PAUSE and SIGSTOP of redis-server, restart with AOF, cancellation storms, a holder frozen
#   past its lease, a slow subscriber, pool exhaustion, a hand-off while Redis is frozen, free
#   hand-offs while another client force-unlocks the locks and owners that just released try
#   again (kinds lock and non_reentrant); and what users do (kinds lock and mixed, the five kinds
#   that share a lock's hash mixed on each name): nested re-entries at random depth, two futures
#   of one owner, rlock's and the emulated Java client's holders, alone
#   (`re_entries_and_two_futures_of_one_owner`), with nested holds that mix `lock()` and
#   `lock_with_lease`, short fixed leases among watchdog ones (`nested_holds_mixing_leases`),
#   with re-entries released outer-first, through another kind too, and guards kept past their
#   lease in a slot and replaced (`holds_released_outer_first_and_guards_replaced`),
#   under force unlocks of every kind by the workers'
#   own clients and by other clients (`force_unlocks_of_every_kind_local_and_remote`), and under
#   deletes that publish nothing, an operator's DEL or UNLINK and Java's spin and fair forceUnlock
#   (`silent_deletes_by_an_operator`); and what users do on the locks of a map's entries, named as
#   Java names them (kind `entries`: `what_users_do_on_map_entries::entries`, the mixed kinds).
#   The kind-generic ones run once per lock kind, named
#   `<scenario>::<kind>`; the others on the reentrant lock (kind `lock`). The non-reentrant kinds'
#   cases that the quick suite leaves out (ignored, for its budget) run here too.
# - tests/tests/faults_synchronizers.rs (kind `synchronizers`): the semaphore, the permit-expirable
#   semaphore, the latch and the multi-lock under kill -9, killed subscribers, CLIENT PAUSE, SIGSTOP
#   and a lost server, checked by the counting model; and (kind `group`) the group lock, Redisson's
#   faster multi-lock, under kill -9 of holders and killed subscribers.
# - tests/tests/faults_proxy.rs (kind `lock`; `<scenario>::<kind>` for the non-reentrant kinds):
#   workers reach a single server, a master with a replica (WAIT), a Sentinel setup and a cluster
#   through fault proxies that lose the replies of scripts that ran, delay replies and reset
#   connections, while a monitor looks for acquires applied twice; a Sentinel and a cluster
#   failover while replies are lost (what a failover may lose: README.md); and one worker's
#   subscriber connection black-holed, deaf, while other clients force-unlock the locks its tasks
#   pass freely (`a_black_holed_subscriber_under_force_unlocks`).
# Then the property tests of tests/tests/fuzz.rs run with more cases. --kinds picks among lock,
# fair, spin, fenced, read, write, rw (readers and writers of one read-write lock), non_reentrant,
# non_reentrant_fair, mixed (the five kinds sharing a lock's hash on each name), entries (the same
# on map entries' locks), group and synchronizers.
# At the end the figures of all runs are added up and printed
# (acquisitions checked and how many of them re-entered their owner's hold, faults injected by
# kind, overlaps inside and outside signalled lease loss,
# leaked holds, double-applied acquires, panics, local hand-offs (scripts plus free ones), free
# hand-offs and their streaks as the workers reported them, permits lost to killed holders, holds
# across a failover, maximum delays), the run time against the budget, and a `failed: NAME` line
# per failed scenario.
#
# Exits non-zero if a scenario failed or a figure that must be 0 is not. Needs only a Rust toolchain
# (redis-server is installed with apt-get when missing); servers are private, on loopback.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

all_kinds=lock,fair,spin,fenced,read,write,rw,non_reentrant,non_reentrant_fair,mixed,entries,group,synchronizers
minutes=5
kinds=$all_kinds
usage="usage: scripts/soak.sh [--minutes N] [--kinds KIND,...]"
while [ $# -gt 0 ]; do
    case "$1" in
    --minutes) minutes=${2:-}; shift 2 || die "--minutes needs a value" ;;
    --minutes=*) minutes=${1#*=}; shift ;;
    --kinds) kinds=${2:-}; shift 2 || die "--kinds needs a value" ;;
    --kinds=*) kinds=${1#*=}; shift ;;
    -h | --help) sed -n '2,51p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 ($usage)" ;;
    esac
done
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || die "--minutes takes a whole number of minutes, got '$minutes'"
IFS=, read -ra chosen <<<"$kinds"
[ "${#chosen[@]}" -gt 0 ] || die "--kinds needs at least one of $all_kinds"
for kind in "${chosen[@]}"; do
    [[ ",$all_kinds," == *",$kind,"* ]] || die "unknown kind '$kind' (kinds: $all_kinds)"
done
chosen_kind() { [[ ",$kinds," == *",$1,"* ]]; }

section "redis-server"
ensure_redis_server

section "build (release)"
binaries=(faults faults_synchronizers faults_proxy)
cargo build --release -q -p rlock-tests --bin rlock-torture
cargo test --release -q -p rlock-tests $(printf -- '--test %s ' "${binaries[@]}") --test fuzz --no-run

# Every scenario as `binary scenario`: the lock-kind ones (`<scenario>::<kind>`, else the reentrant
# lock) of faults.rs and of the proxies', and the synchronizers'. Scenarios left out
# of the quick suite (for its budget) run too: the soak tells the whole truth.
scenarios=()
for binary in "${binaries[@]}"; do
    while IFS= read -r scenario; do
        case "$binary" in
        faults | faults_proxy) kind=lock; [[ "$scenario" == *::* ]] && kind=${scenario##*::} ;;
        faults_synchronizers) kind=synchronizers; [[ "$scenario" == *group_lock* ]] && kind=group ;;
        esac
        chosen_kind "$kind" && scenarios+=("$binary $scenario")
    done < <(cargo test --release -q -p rlock-tests --test "$binary" -- --list 2>/dev/null |
        sed -n 's/: test$//p')
done
[ "${#scenarios[@]}" -gt 0 ] || die "no fault scenarios found for kinds $kinds"

figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
export RLOCK_FAULTS_REPORT=$figures

# The minutes are the budget of the whole run (the build aside): before each scenario, what is left
# of it is shared among the scenarios still to run, the property tests counted as one. A scenario
# never runs shorter than in the quick suite (its floor), so a budget below the floors' sum is
# overrun by that much, and says so at the end.
budget=$((minutes * 60))
started=$SECONDS
share() {
    local left=$1 remaining=$((budget - (SECONDS - started)))
    [ "$remaining" -gt 0 ] || remaining=0
    echo $((remaining / left))
}

failed=()
total=$((${#scenarios[@]} + 1))
for i in "${!scenarios[@]}"; do
    read -r binary scenario <<<"${scenarios[$i]}"
    secs=$(share $((total - i)))
    section "$scenario ($binary, ${secs} s of the budget)"
    RLOCK_SOAK_SECS=$secs cargo test --release -q -p rlock-tests --test "$binary" -- \
        --exact "$scenario" --include-ignored --nocapture ||
        failed+=("$scenario")
done

# The budget's last share buys cases: about 11 a second (500 took 44 s on a 2-core machine), no
# fewer than the quick suite's 24.
cases=$(($(share 1) * 11))
[ "$cases" -ge 24 ] || cases=24
section "property tests ($cases cases each)"
RLOCK_FUZZ_CASES=$cases cargo test --release -q -p rlock-tests --test fuzz || failed+=(fuzz)

section "figures of scripts/soak.sh --minutes $minutes --kinds $kinds"
status=0
cargo run --release -q -p rlock-tests --bin rlock-torture -- summarize "$figures" || status=1
ran=$((SECONDS - started))
printf 'scenarios: %s, run time: %s s of a %s s budget\n' "$total" "$ran" "$budget"
if [ "${#failed[@]}" -gt 0 ]; then
    printf 'failed: %s\n' "${failed[@]}"
    status=1
fi
exit "$status"
