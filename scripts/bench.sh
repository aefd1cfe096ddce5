#!/usr/bin/env bash
# Run rlock's benchmark suite:
#   scripts/bench.sh [--url URL] [--quick] [--only SCENARIO,...] [--out FILE]
#
# Builds the benchmark runner in release mode and runs the scenarios of
# benches/README.md: rlock side by side with the raw two-EVALSHA floor and the
# rslock crate, and local hand-off on against off, on one Redis. Without --url
# the runner starts its own private redis-server on a free loopback port
# (installing redis-server with apt-get first if it is missing). Prints
# markdown tables on stdout, progress on stderr, and writes the results as
# JSON (default target/bench/results.json).
#
#   scripts/bench.sh                 the full suite (about two minutes)
#   scripts/bench.sh --quick         a smoke run of every scenario (under 30 s)
#   scripts/bench.sh --only handoff  one scenario alone (here: local hand-off,
#                                    about 25 s); several: --only cycle,contended
#
# Scenarios for --only: cycle (1, 7), throughput (2), contended (3, 4, 7),
# watchdog (5), waiters (6), handoff (8). The idle PING round trip is always
# measured. --quick combines with --only.
#
# Not part of scripts/test.sh: timings need a quiet machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_redis_server
cargo build --release -q -p rlock-benches
exec target/release/rlock-benches "$@"
