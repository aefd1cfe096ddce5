#!/usr/bin/env bash
# Run the interop suite's full kind x direction x topology matrix:
#
#   scripts/interop-matrix.sh [CARGO TEST ARGS...]
#
# The kind-generic scenarios (exclusion, wake-ups, reentrancy) for every lock
# kind, and the wake-ups of the locks of map entries and of the group lock, Java
# -> rlock and rlock -> Java, on a single server and in a 3-master Redis Cluster
# with sharded pub/sub. The default test run covers the single
# server and, in the cluster, one wake-up scenario per kind; the other cluster
# cases are ignored tests (`<scenario>::<kind>::cluster::<direction>`), which
# this script includes. Tests start their own private redis-server instances
# (installing redis-server with apt-get first if it is missing). Extra
# arguments go to the test binary, e.g. `--nocapture` for the wake-up timings.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_redis_server
section "interop matrix: every kind, both directions, single server and cluster"
exec cargo test -p rlock-tests --test interop -- --include-ignored \
    exclusion:: wakeup:: reentrancy:: entries:: group:: cluster:: "$@"
