#!/usr/bin/env bash
# The project's test command: formatting, lints and the whole test suite.
#
#   scripts/test.sh [CARGO TEST ARGS...]
#
# Works on a fresh Debian machine with only the Rust toolchain: it installs
# redis-server and tmux (for the `rlock watch` terminal test) with apt-get if
# they are missing. Tests start their own private
# redis-server instances (see tests/src/server.rs), so nothing else has to
# run. Extra arguments go to `cargo test --workspace`, e.g.
#   scripts/test.sh -p rlock-redisson
#   scripts/test.sh -- --nocapture
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

section "redis-server"
ensure_redis_server
"$(redis_server_bin)" --version

section "tmux"
ensure_tmux
tmux -V

section "cargo fmt --check"
cargo fmt --version >/dev/null 2>&1 ||
    die "rustfmt is missing (rustup component add rustfmt)"
cargo fmt --all -- --check

section "cargo clippy"
cargo clippy --version >/dev/null 2>&1 ||
    die "clippy is missing (rustup component add clippy)"
cargo clippy --workspace --all-targets -- -D warnings

section "cargo test"
# Integration tests start their own servers; the rustdoc examples (README included) talk to the one
# in REDIS_URL, so give them a throwaway server unless the caller chose one.
if [ -z "${REDIS_URL:-}" ]; then
    doc_redis=$(mktemp -d)
    trap 'stop_redis "$doc_redis"; rm -rf "$doc_redis"' EXIT
    start_redis "$doc_redis"
    export REDIS_URL="redis://127.0.0.1:$(cat "$doc_redis/redis.port")/"
fi
cargo test --workspace "$@"

section "examples"
# Each example checks its own outcome against the same server and exits non-zero when it fails.
for example in examples/*.rs; do
    example=$(basename "$example" .rs)
    echo "--- $example"
    cargo run -q -p rlock-examples --example "$example"
done

section "all checks passed"
