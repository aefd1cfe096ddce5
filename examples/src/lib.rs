//! What the examples in this directory share: where the Redis they talk to is.
//!
//! Run one with `cargo run -p rlock-examples --example NAME` against the Redis in `REDIS_URL`
//! (default `redis://127.0.0.1:6379/`). Each example checks its own outcome and exits non-zero when
//! it does not hold; `scripts/test.sh` runs them all against the test suite's server.

/// The Redis URL the examples use: `REDIS_URL`, or a local server on the default port.
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}
