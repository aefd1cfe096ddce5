//! What the `rlock` binary's tests share: running it and reading its JSON lines.
use std::process::{Command, Output};

use serde_json::Value;

/// The environment variables the CLI reads: a test sets what it means, never inherits them.
const CLI_ENV: [&str; 3] = [
    "REDIS_URL",
    "RLOCK_SENTINEL_USER",
    "RLOCK_SENTINEL_PASSWORD",
];

/// `rlock ARGS`, with `--url` first when given and none of the CLI's variables inherited.
pub(crate) fn rlock<S: AsRef<std::ffi::OsStr>>(url: Option<&str>, args: &[S]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rlock"));
    for name in CLI_ENV {
        command.env_remove(name);
    }
    if let Some(url) = url {
        command.args(["--url", url]);
    }
    command.args(args);
    command
}

pub(crate) fn run<S: AsRef<std::ffi::OsStr>>(url: Option<&str>, args: &[S]) -> Output {
    rlock(url, args).output().expect("cannot run rlock")
}

/// Runs `rlock ARGS` expecting success, and returns its stdout as JSON lines.
pub(crate) fn run_ok<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    url: Option<&str>,
    args: &[S],
) -> Vec<Value> {
    let output = run(url, args);
    assert!(output.status.success(), "rlock {args:?} failed: {output:?}");
    json_lines(&output)
}

pub(crate) fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("stdout line is not JSON"))
        .collect()
}

/// Asserts that `output` is a clean failure at run time: exit code 1, a message, no panic.
#[allow(
    dead_code,
    reason = "every test binary compiles this module; not every one checks both exit codes"
)]
pub(crate) fn assert_fails_cleanly(output: &Output, what: &str) {
    assert_exits(output, 1, what);
}

/// Asserts that `output` is a usage error: exit code 2 (clap's), a message, no panic.
#[allow(
    dead_code,
    reason = "every test binary compiles this module; not every one checks both exit codes"
)]
pub(crate) fn assert_usage_error(output: &Output, what: &str) {
    assert_exits(output, 2, what);
}

fn assert_exits(output: &Output, code: i32, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{what}: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert!(!stderr.is_empty(), "{what} failed silently");
}
