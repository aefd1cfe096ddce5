#!/usr/bin/env bash
# Run rlock's benchmark suite:
#   scripts/bench.sh [--url URL] [--quick] [--only SCENARIO,...] [--burst-sizes N,...]
#                    [--out FILE]
#
# Builds the benchmark runner in release mode and runs the scenarios of
# benches/README.md: rlock side by side with the raw two-EVALSHA floor and the
# rslock crate, local hand-off on against off, and a burst of N waiters on N
# names (scenario 9, issue 38), on one Redis. Without --url
# the runner starts its own private redis-server on a free loopback port
# (installing redis-server with apt-get first if it is missing). Prints
# markdown tables on stdout, progress on stderr, and writes the results as
# JSON (default target/bench/results.json).
#
#   scripts/bench.sh                 the full suite (two minutes, plus scenario
#                                    9: several minutes with 100,000 waiters)
#   scripts/bench.sh --quick         a smoke run of every scenario (under 30 s)
#   scripts/bench.sh --only handoff  one scenario alone (here: local hand-off,
#                                    about 25 s); several: --only cycle,contended
#   scripts/bench.sh --only burst    scenario 9 alone: N = 1,000, 10,000 and
#                                    100,000 waiters, each on its own name,
#                                    the holder in another client of the same
#                                    process, then in another process; arm
#                                    time, release -> all acquired and each
#                                    waiter's wake, failures and stuck waiters,
#                                    RSS, scripts and SUBSCRIBEs per waiter,
#                                    against a floor measured on the same
#                                    server (minutes at 100,000; about 2 GB of
#                                    memory; --quick: N = 1,000 only)
#   scripts/bench.sh --only burst --burst-sizes 1000,10000
#                                    scenario 9 at these N only
#
# Scenarios for --only: cycle (1, 7), throughput (2), contended (3, 4, 7),
# watchdog (5), waiters (6), handoff (8), burst (9). The idle PING round trip
# is always measured. --quick combines with --only.
#
# Not part of scripts/test.sh: timings need a quiet machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_redis_server
cargo build --release -q -p rlock-benches
exec "${CARGO_TARGET_DIR:-target}/release/rlock-benches" "$@"
