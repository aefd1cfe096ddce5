#!/usr/bin/env bash
# Run rlock's benchmark suite: scripts/bench.sh [--url URL] [--quick] [--out FILE]
#
# Builds the benchmark runner in release mode and runs every scenario of
# benches/README.md: rlock side by side with the raw two-EVALSHA floor and the
# rslock crate, on one Redis. Without --url the runner starts its own private
# redis-server on a free loopback port (installing redis-server with apt-get
# first if it is missing). Prints a markdown table on stdout, progress on
# stderr, and writes the results as JSON (default target/bench/results.json).
#
#   scripts/bench.sh            the full suite (about two minutes)
#   scripts/bench.sh --quick    a smoke run of every scenario (under 30 s)
#
# Not part of scripts/test.sh: timings need a quiet machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_redis_server
cargo build --release -q -p rlock-benches
exec target/release/rlock-benches "$@"
