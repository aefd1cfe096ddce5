//! rlock's benchmark suite: every scenario of issues 5, 13 and 38 in one run, against one Redis, with
//! rlock's references side by side (the raw two-`EVALSHA` floor and the `rslock` crate). See
//! `benches/README.md` for what each scenario measures and how.
//!
//! ```text
//! cargo run --release -p rlock-benches -- [--url URL] [--quick] [--only SCENARIO,...]
//!     [--burst-sizes N,...] [--burst-unlock-at-once] [--out FILE]
//! ```

mod child;
mod clock;
mod contenders;
mod hot;
mod probe;
mod process;
mod report;
mod scenarios;
mod stats;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use rlock_tests::RedisServer;

use crate::contenders::ContenderKind;
use crate::probe::Probe;
use crate::report::{Machine, Results};
use crate::scenarios::{
    Plan, Scenario, burst, contended, cycle, handoff, throughput, waiters, watchdog,
};

pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// Benchmarks rlock against the raw Redis round trips and the rslock crate, and its local hand-off on
/// against off; prints markdown tables and writes the results as JSON.
#[derive(Debug, Parser)]
#[command(name = "rlock-benches")]
struct Cli {
    /// The Redis to use. Without it, a private redis-server is started on a free loopback port.
    #[arg(long)]
    url: Option<String>,
    /// A smoke run of every scenario (or of those --only names), in well under 30 s; too short to
    /// judge the goals on.
    #[arg(long)]
    quick: bool,
    /// Runs only these scenarios (comma-separated, or the option repeated); all without it.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SCENARIO")]
    only: Vec<Scenario>,
    /// Scenario 9's numbers of waiters (comma-separated), instead of the plan's (1000,10000,100000;
    /// 1000 with --quick).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    burst_sizes: Vec<usize>,
    /// Scenario 9's waiters unlock as soon as they acquired, instead of holding their locks until
    /// the end of the run.
    #[arg(long)]
    burst_unlock_at_once: bool,
    /// Where to write the results as JSON.
    #[arg(long, default_value = "target/bench/results.json")]
    out: PathBuf,
    #[command(subcommand)]
    worker: Option<Hidden>,
}

#[derive(Debug, Subcommand)]
enum Hidden {
    /// A benchmark process started by the runner itself.
    #[command(name = "__worker", hide = true)]
    Worker { task: String },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Everything runs in a spawned task, on the runtime's worker threads, as an application's
    // request handlers would.
    let outcome = match cli.worker {
        Some(Hidden::Worker { task }) => {
            tokio::spawn(async move { scenarios::serve(&task).await }).await
        }
        None => {
            let mut plan = if cli.quick {
                Plan::quick()
            } else {
                Plan::full()
            };
            if !cli.burst_sizes.is_empty() {
                plan.burst.sizes = cli.burst_sizes;
            }
            plan.burst.unlock_at_once = cli.burst_unlock_at_once;
            let scenarios = if cli.only.is_empty() {
                Scenario::value_variants().to_vec()
            } else {
                cli.only
            };
            tokio::spawn(run(cli.url, plan, scenarios, cli.out)).await
        }
    };
    match outcome {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("rlock-benches: {e}");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("rlock-benches: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(
    url: Option<String>,
    plan: Plan,
    scenarios: Vec<Scenario>,
    out: PathBuf,
) -> Result<()> {
    let command = std::iter::once("rlock-benches".to_owned())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let runs = |scenario| scenarios.contains(&scenario);
    let load_before = load_average();
    let private = match url {
        Some(_) => None,
        None => {
            // Starting blocks until the server answers; it panics with the reason if it cannot.
            let started = tokio::task::spawn_blocking(RedisServer::start).await;
            Some(started.map_err(|e| format!("no private redis-server ({e}); or pass --url"))?)
        }
    };
    let url = match (&url, &private) {
        (Some(url), _) => url.clone(),
        (None, Some(server)) => server.url(),
        (None, None) => unreachable!("a private server is started when no URL is given"),
    };
    let mut probe = Probe::connect(&url).await?;
    let redis_version = probe.server_version().await?;
    progress(&format!("Redis {redis_version} at {url}"));

    let mut cycle = Vec::new();
    if runs(Scenario::Cycle) {
        progress("scenario 1 (and 7): uncontended lock+unlock cycle");
        cycle = cycle::run(&url, &mut probe, plan.cycle).await?;
    }
    let mut throughput = Vec::new();
    if runs(Scenario::Throughput) {
        progress("scenario 2: uncontended throughput");
        throughput = throughput::run(&url, plan.throughput).await?;
    }
    progress("single-command round trip");
    let round_trip = probe.round_trip(plan.round_trip_samples).await?;
    let mut contended = Vec::new();
    if runs(Scenario::Contended) {
        let barging = contended::Params {
            think_us: 0,
            ..plan.contended
        };
        for params in [plan.contended, barging] {
            for kind in [ContenderKind::Rlock, ContenderKind::Rslock] {
                progress(&format!(
                    "scenarios 3, 4 (and 7): contended hand-off, {}, {} µs think time",
                    kind.label(),
                    params.think_us
                ));
                contended.push(contended::run(&url, &mut probe, params, kind).await?);
            }
        }
    }
    let mut watchdog = None;
    if runs(Scenario::Watchdog) {
        progress("scenario 5: watchdog cost");
        watchdog = Some(watchdog::run(&url, &mut probe, plan.watchdog).await?);
    }
    let mut waiters = None;
    if runs(Scenario::Waiters) {
        progress("scenario 6: many waiters");
        waiters = Some(waiters::run(&url, &mut probe, plan.waiters).await?);
    }
    let mut handoff = None;
    if runs(Scenario::Handoff) {
        handoff = Some(handoff::run(&url, &mut probe, plan.handoff).await?);
    }
    let mut burst = None;
    if runs(Scenario::Burst) {
        burst = Some(burst::run(&url, &mut probe, &plan.burst).await?);
    }
    let private_redis = private.is_some();
    drop(private);

    let mut results = Results {
        command,
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs(),
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            load_before,
            load_after: load_average(),
            redis_version,
            private_redis,
        },
        plan,
        scenarios,
        round_trip,
        cycle,
        throughput,
        contended,
        watchdog,
        waiters,
        handoff,
        burst,
        goals: Vec::new(),
    };
    results.judge();
    println!("{}", results.markdown());
    if let Some(dir) = out.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(&results)?)?;
    progress(&format!("results written to {}", out.display()));
    Ok(())
}

/// The first three fields of `/proc/loadavg` (1, 5 and 15 minutes).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|load| {
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

pub(crate) fn progress(message: &str) {
    eprintln!("==> {message}");
}
