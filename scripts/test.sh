#!/usr/bin/env bash
# The project's test command: formatting, lints, the library's feature-trimmed
# builds, packaging, the minimum supported Rust version and the whole test suite.
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

# One build, so no incremental caches: they doubled the target directory (4 GB of a clean build's
# 15 GB before the dev profile's debug info was trimmed, see Cargo.toml). Set it to 1 to keep them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

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

# Runs a command and says how long it took.
timed() {
    local start=$SECONDS
    "$@"
    printf '    (%ss)\n' $((SECONDS - start)) >&2
}

# The workspace builds rlock-redisson with every feature (the CLI and the tests enable them all), so
# the trimmed builds users can choose are checked here, one feature at a time.
section "rlock-redisson with --no-default-features (clippy)"
timed cargo clippy -p rlock-redisson --lib --no-default-features -- -D warnings
for feature in blocking cluster sentinel tls metrics redisson-config; do
    section "rlock-redisson with --no-default-features --features $feature (clippy)"
    timed cargo clippy -p rlock-redisson --lib --no-default-features --features "$feature" -- -D warnings
done
section "rlock-redisson's unit tests with --no-default-features"
# The configurations that need a missing feature are refused with Error::FeatureDisabled.
timed cargo test -p rlock-redisson --lib --no-default-features

section "cargo doc -p rlock-redisson --all-features (as docs.rs builds it)"
# Broken intra-doc links would fail the docs.rs build of the published crate.
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" timed cargo doc -p rlock-redisson --all-features --no-deps

msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
section "rust-version $msrv (the minimum supported Rust version)"
# clippy's incompatible_msrv lint (above, -D warnings) already refuses standard-library APIs newer
# than rust-version; this builds with that toolchain itself when it is installed.
msrv_toolchain=$(rustup toolchain list 2>/dev/null | awk '{print $1}' | grep -E "^${msrv//./\\.}(\.0)?-" | head -n 1 || true)
if [ -n "$msrv_toolchain" ]; then
    timed cargo "+$msrv_toolchain" check --locked -p rlock-redisson -p rlock-cli --all-features
else
    echo "skipped: the Rust $msrv toolchain is not installed (rustup toolchain install $msrv)" >&2
fi

section "cargo test"
# Integration tests start their own servers; the rustdoc examples and the examples use REDIS_URL.
use_throwaway_redis_url
cargo test --workspace "$@"

section "examples"
# Each example checks its own outcome against the same server and exits non-zero when it fails.
for example in examples/*.rs; do
    example=$(basename "$example" .rs)
    echo "--- $example"
    cargo run -q -p rlock-examples --example "$example"
done

section "cargo package -p rlock-redisson -p rlock-cli"
# Packages both crates (rlock-cli against the packaged rlock-redisson) and builds them from the
# packages, so nothing they need lives outside their directories. It runs last, as its builds
# reuse most of what the tests built. cargo packages what git has committed: a checkout with
# uncommitted changes skips this (CI runs on a clean clone).
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
    echo "skipped: uncommitted changes (commit them, or run: cargo package --allow-dirty -p rlock-redisson -p rlock-cli)" >&2
else
    # In a target directory of its own, without its earlier builds of the two crates: cargo takes a
    # registry crate's version for its content, so a build of the packaged 0.1.0 from an older
    # commit would pass for the current one (seen: rlock-cli verified against a stale rlock-redisson).
    package_target=target/package-check
    rm -rf "$package_target"/debug/.fingerprint/rlock-* "$package_target"/debug/deps/*rlock*
    timed env CARGO_TARGET_DIR="$package_target" cargo package -p rlock-redisson -p rlock-cli
fi

section "all checks passed"
