#!/usr/bin/env bash
# Every script of every kind, its reply lost, in every topology:
#
#   scripts/lost-replies.sh [CARGO TEST ARGS...]
#
# tests/tests/lost_replies.rs puts a fault proxy (tests/src/proxy.rs) in front of every node of a
# single server, a master with a replica (WAIT), a Sentinel setup and a 3-master cluster, and for
# each script (acquire, re-entry, undo, unlock partial and full, force-unlock, renewal, fair
# give-up, the non-reentrant and non-reentrant fair locks' (a refused re-entry among them), read
# and write locks, fenced, spin, semaphore and permit acquire/release, latch count-down) forwards
# the script to Redis and cuts the connection before its reply comes back.
# Each case checks the exact Redis state afterwards and the caller's outcome. The default test run
# plays the representative cases in every topology; this script plays all of them. Servers are
# private, on loopback (redis-server is installed with apt-get when missing).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_redis_server
section "lost replies: every script x topology"
exec cargo test -p rlock-tests --test lost_replies -- --include-ignored --test-threads 2 "$@"
