#!/usr/bin/env bash
# Shows that the model check finds the faults of the real code it runs, fix by fix.
#
#   scripts/model-reverts.sh [PATCH...]          (default: every patch of scripts/model-reverts/)
#
# The model check (crates/core/src/cohort/model.rs) runs the real hold ledger, watchdog, local
# queues and streak. Each patch of scripts/model-reverts/ puts one fixed fault back into that code
# (its first lines say which, and `test:` names the model's test that must catch it). For each, a
# copy of the tree (this checkout's HEAD plus its uncommitted changes, in a temporary git worktree)
# gets the patch, and the named test runs there: it must fail with a counterexample's trace. The
# model's own reverts (faults of the mirror or of the abstract Redis: `Revert` in the model) run in
# the default suite instead.
#
# Needs only a Rust toolchain; no Redis. Builds in target/model-reverts (a debug build of the core
# crate's tests: a few minutes the first time, about a minute per patch after). Exits non-zero if
# a patch no longer applies, or if its test passes (the model misses the fault) or fails without a
# trace.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

patches=("$@")
if [ "${#patches[@]}" -eq 0 ]; then
    patches=(scripts/model-reverts/*.patch)
fi

repo=$PWD
copy=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$copy" >/dev/null 2>&1 || true; rm -rf "$copy"' EXIT
git worktree add --detach -q "$copy" HEAD
export CARGO_TARGET_DIR=$repo/target/model-reverts

failed=()
for patch in "${patches[@]}"; do
    test=$(sed -n 's/^test: //p' "$patch" | head -n 1)
    [ -n "$test" ] || die "$patch names no test (a 'test: ...' line)"
    section "$(basename "$patch"): $test must fail"
    # The tree as it is here, then the fault put back.
    git -C "$copy" checkout -q --force HEAD
    git -C "$copy" clean -qfd
    git diff HEAD | git -C "$copy" apply --allow-empty
    if ! git -C "$copy" apply "$repo/$patch"; then
        failed+=("$(basename "$patch"): no longer applies")
        continue
    fi
    log=$(mktemp)
    if (cd "$copy" && cargo test -q -p rlock-redisson --lib --all-features -- --exact "$test") \
        >"$log" 2>&1; then
        failed+=("$(basename "$patch"): $test passed with the fault put back")
    elif grep -q 'trace (' "$log"; then
        grep -m 1 -A 40 'revert: None' "$log" | sed -n '1,/^$/p' >&2
        printf 'caught: %s\n' "$(basename "$patch")"
    else
        tail -n 30 "$log" >&2
        failed+=("$(basename "$patch"): $test failed without a counterexample")
    fi
    rm -f "$log"
done

if [ "${#failed[@]}" -gt 0 ]; then
    printf 'failed: %s\n' "${failed[@]}"
    exit 1
fi
printf 'every fault put back was caught (%s)\n' "${#patches[@]}"
