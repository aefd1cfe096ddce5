//! The `rlock` command: a mutual-exclusion self-check, one-off operations on locks, semaphores and
//! count-down latches, and a demo of several processes contending for the same locks.
//!
//! Machine-readable results are JSON objects, one per line, on stdout; progress, errors and logs
//! (`RUST_LOG`, `warn` by default) go to stderr.
//! A usage error (an unknown flag or subcommand, a bad value) exits with code 2, as clap and shell
//! tools do; a failure at run time exits with code 1.

mod check;
mod critical;
mod demo;
mod entry;
mod expirable_semaphore;
mod force_unlock;
mod hold;
mod inspect;
mod kinds;
mod latch;
mod lock;
mod lock_state;
mod output;
mod semaphore;
mod server;
mod stats;
mod target;
mod topology;
mod watch;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::target::Target;

/// The error of every command: it is only ever printed.
type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = Error> = std::result::Result<T, E>;

/// Distributed locks and synchronizers on Redis, compatible with Redisson.
#[derive(Debug, Parser)]
#[command(name = "rlock", version)]
struct Cli {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check mutual exclusion: tasks of this process increment a counter non-atomically under the lock.
    Check(check::Args),
    /// Acquire a lock, hold it for a while, release it.
    Lock(lock::Args),
    /// Show a lock's holders, or a synchronizer's state, as stored in Redis, whoever wrote them
    /// (Redisson included).
    Inspect(inspect::Args),
    /// Watch locks live: kind, holders, TTL, queue, waiting subscribers, releases seen per second.
    Watch(watch::Args),
    /// Delete a lock whoever holds it, and wake its waiters.
    ForceUnlock(force_unlock::Args),
    /// Set up a semaphore's permits, hold some for a while, give some back, count them.
    Semaphore(semaphore::Args),
    /// Set up a permit-expirable semaphore, hold one of its permits for a while.
    ExpirableSemaphore(expirable_semaphore::Args),
    /// Set a count-down latch's count, count it down, wait for it to open.
    Latch(latch::Args),
    /// Print the Redis name Redisson gives an object of a map's, multimap's or set's entry
    /// (map.getLock(key), ...).
    EntryName(entry::Args),
    /// Show several processes sharing locks, on a private redis-server unless a URL is given.
    Demo(demo::Args),
    /// One process of the demo (started by `demo` itself).
    #[command(hide = true)]
    DemoWorker(demo::worker::Args),
}

/// The exit code of a usage error (clap's).
const USAGE: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` are "errors" too; they succeed and print to stdout.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(USAGE));
        }
    };
    init_logging();
    let target = &cli.target;
    let outcome = match cli.command {
        Command::Check(args) => check::run(target, args).await,
        Command::Lock(args) => lock::run(target, args).await,
        Command::Inspect(args) => inspect::run(target, args).await,
        Command::Watch(args) => watch::run(target, args).await,
        Command::ForceUnlock(args) => force_unlock::run(target, args).await,
        Command::Semaphore(args) => semaphore::run(target, args).await,
        Command::ExpirableSemaphore(args) => expirable_semaphore::run(target, args).await,
        Command::Latch(args) => latch::run(target, args).await,
        Command::EntryName(args) => entry::run(target, args),
        Command::Demo(args) => demo::run(target, args).await,
        Command::DemoWorker(args) => demo::worker::run(target, args).await,
    };
    outcome.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    })
}

/// Sends the library's and the CLI's logs to stderr, filtered by `RUST_LOG` (`warn` without it):
/// stdout carries the JSON lines and nothing else.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Parses the name of a lock or synchronizer: anything but empty.
fn non_empty_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        Err("a name must not be empty".into())
    } else {
        Ok(name.to_owned())
    }
}
