//! `rlock demo`: several processes of this binary contend for a few locks, and the parent checks
//! from their reports and the counters that the locks excluded them.
//!
//! Each worker process (`demo-worker`, see [`worker`]) runs tasks that take the locks in turn,
//! increment the lock's counter non-atomically inside, and report every critical section as one JSON
//! line with its wall-clock interval. The parent shows progress while they run, then checks per lock
//! that the counter equals the number of acquisitions and that no two intervals overlap.

mod progress;
pub(crate) mod worker;

use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::server::PrivateRedis;
use crate::target::Target;
use crate::{Result, critical, output, stats};

use self::progress::Progress;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Worker processes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    processes: u32,
    #[command(flatten)]
    plan: Plan,
}

/// What every worker does; the parent passes it on verbatim.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct Plan {
    /// Tasks per process, each a separate lock owner.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    tasks: u32,
    /// Locks the tasks contend for: demo:lock:0, demo:lock:1, ... (after --name-prefix)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    locks: u32,
    /// Acquisitions per task.
    #[arg(long, default_value_t = 200)]
    iterations: u32,
    /// How long each critical section sleeps between reading and writing its counter.
    #[arg(long, value_name = "MS", default_value_t = 5)]
    hold_ms: u64,
}

impl Plan {
    /// The lock that `task` of `process` takes on its `iteration`-th acquisition: a rotation, so
    /// every lock gets the same share and every task meets every other on some lock.
    fn lock_for(&self, process: u32, task: u32, iteration: u32) -> u32 {
        ((u64::from(process) + u64::from(task) + u64::from(iteration)) % u64::from(self.locks))
            as u32
    }

    /// How many acquisitions each lock gets from `processes` workers.
    fn acquisitions_per_lock(&self, processes: u32) -> Vec<usize> {
        let mut counts = vec![0; self.locks as usize];
        for process in 0..processes {
            for task in 0..self.tasks {
                for iteration in 0..self.iterations {
                    counts[self.lock_for(process, task, iteration) as usize] += 1;
                }
            }
        }
        counts
    }
}

fn lock_name(lock: u32) -> String {
    format!("demo:lock:{lock}")
}

/// One critical section, as a worker reports it on its stdout.
#[derive(Debug, Deserialize, Serialize)]
struct Acquisition {
    process: u32,
    task: u32,
    lock: u32,
    /// How long `lock()` took.
    wait_us: u64,
    /// Wall clock (µs since the epoch) right after the lock was acquired...
    acquired_at_us: u64,
    /// ... and right before it was released, so the intervals of one lock must not overlap.
    released_at_us: u64,
}

/// The totals, printed as the last line.
#[derive(Debug, Serialize)]
struct Totals {
    mutual_exclusion: bool,
    acquisitions: usize,
    expected: usize,
    counters_match: bool,
    overlaps: usize,
    workers_failed: usize,
    elapsed_ms: u64,
    per_s: f64,
    wait_p50_ms: f64,
    wait_p99_ms: f64,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    // Returning drops the workers (killing them) and the private server (stopping it), also on
    // Ctrl-C, which would otherwise end us before any cleanup.
    tokio::select! {
        outcome = on_some_server(target, &args) => outcome,
        interrupted = tokio::signal::ctrl_c() => {
            interrupted?;
            eprintln!("\ninterrupted: stopping the workers");
            Ok(ExitCode::from(130))
        }
    }
}

/// Runs the demo on the given Redis, or else on a private one.
async fn on_some_server(target: &Target, args: &Args) -> Result<ExitCode> {
    if target.is_given() {
        return show(target, args).await;
    }
    target.check_single()?;
    eprintln!("no --url or REDIS_URL: starting a private redis-server");
    let server = PrivateRedis::start().await?;
    eprintln!("redis-server pid {} at {}", server.pid(), server.url());
    show(&target.with_url(server.url()), args).await
}

async fn show(target: &Target, args: &Args) -> Result<ExitCode> {
    let plan = args.plan;
    let expected = plan.acquisitions_per_lock(args.processes);
    let client = target.client().await?;
    let counters: Vec<String> = (0..plan.locks)
        .map(|lock| critical::counter_key(client.lock(lock_name(lock)).name()))
        .collect();
    // Start from zero even on a server an earlier demo ran on.
    critical::reset(&client, &counters).await?;

    eprintln!(
        "{} processes × {} tasks contend for {} locks: {} acquisitions per task, holding {} ms\n",
        args.processes, plan.tasks, plan.locks, plan.iterations, plan.hold_ms
    );
    let started = Instant::now();
    let (reports, mut received) = mpsc::unbounded_channel();
    let mut workers = Vec::new();
    for process in 0..args.processes {
        workers.push(spawn_worker(target, process, plan, reports.clone())?);
    }
    drop(reports);

    let mut progress = Progress::new(&expected);
    let mut acquisitions = Vec::new();
    // A line that is not a report means a broken worker.
    let mut workers_failed = 0;
    let period = progress.period();
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tokio::select! {
            report = received.recv() => match report {
                Some(Ok(acquisition)) => {
                    progress.record(&acquisition);
                    acquisitions.push(acquisition);
                }
                Some(Err(line)) => {
                    eprintln!("unexpected worker output: {line}");
                    workers_failed += 1;
                }
                None => break,
            },
            _ = tick.tick() => progress.draw(started.elapsed()),
        }
    }
    for (process, mut worker) in workers.into_iter().enumerate() {
        let status = worker.wait().await?;
        if !status.success() {
            eprintln!("worker {process} failed: {status}");
            workers_failed += 1;
        }
    }
    let elapsed = started.elapsed();
    progress.draw(elapsed);

    let mut counts = Vec::new();
    for counter in &counters {
        counts.push(critical::read(&client, counter).await?);
    }
    let totals = summarize(&acquisitions, &counts, &expected, workers_failed, elapsed);
    output::emit(&totals)?;
    let complete = totals.workers_failed == 0 && totals.acquisitions == totals.expected;
    Ok(if totals.mutual_exclusion && complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Starts worker `process`, forwarding each line it prints, parsed, to `reports`.
fn spawn_worker(
    target: &Target,
    process: u32,
    plan: Plan,
    reports: mpsc::UnboundedSender<Result<Acquisition, String>>,
) -> Result<Child> {
    let mut worker = Command::new(std::env::current_exe()?);
    // The same Redis, as this process reaches it.
    target.forward(&mut worker);
    let mut worker = worker
        .arg("demo-worker")
        .args(["--process", &process.to_string()])
        .args(["--tasks", &plan.tasks.to_string()])
        .args(["--locks", &plan.locks.to_string()])
        .args(["--iterations", &plan.iterations.to_string()])
        .args(["--hold-ms", &plan.hold_ms.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = worker
        .stdout
        .take()
        .ok_or("the worker's stdout is not piped")?;
    drop(tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = reports.send(serde_json::from_str(&line).map_err(|_| line));
        }
    }));
    Ok(worker)
}

/// Checks every lock's counter and intervals, prints the summary table on stderr and returns the
/// totals.
fn summarize(
    acquisitions: &[Acquisition],
    counters: &[u64],
    expected: &[usize],
    workers_failed: usize,
    elapsed: Duration,
) -> Totals {
    eprintln!(
        "\n  {:<14} {:>12} {:>9} {:>9}",
        "lock", "acquisitions", "counter", "overlaps"
    );
    let mut counters_match = true;
    let mut overlaps = 0;
    for (lock, &counter) in counters.iter().enumerate() {
        let mut intervals: Vec<(u64, u64)> = acquisitions
            .iter()
            .filter(|a| a.lock as usize == lock)
            .map(|a| (a.acquired_at_us, a.released_at_us))
            .collect();
        let count = intervals.len();
        let overlapping = count_overlaps(&mut intervals);
        let matches = counter == count as u64;
        eprintln!(
            "  {:<14} {:>12} {:>9} {:>9}  {}",
            lock_name(lock as u32),
            count,
            counter,
            overlapping,
            if matches && overlapping == 0 {
                "ok"
            } else {
                "BROKEN"
            }
        );
        counters_match &= matches;
        overlaps += overlapping;
    }

    let mut waits: Vec<Duration> = acquisitions
        .iter()
        .map(|a| Duration::from_micros(a.wait_us))
        .collect();
    let totals = Totals {
        mutual_exclusion: counters_match && overlaps == 0,
        acquisitions: acquisitions.len(),
        expected: expected.iter().sum(),
        counters_match,
        overlaps,
        workers_failed,
        elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        per_s: stats::rate(acquisitions.len(), elapsed),
        wait_p50_ms: stats::percentile_ms(&mut waits, 50.0),
        wait_p99_ms: stats::percentile_ms(&mut waits, 99.0),
    };
    eprintln!(
        "\nmutual exclusion held: {}",
        if totals.mutual_exclusion { "yes" } else { "NO" }
    );
    eprintln!(
        "throughput: {} acquisitions in {:.2} s = {:.0}/s; wait p50 {:.2} ms, p99 {:.2} ms",
        totals.acquisitions,
        elapsed.as_secs_f64(),
        totals.per_s,
        totals.wait_p50_ms,
        totals.wait_p99_ms
    );
    if totals.acquisitions != totals.expected || workers_failed > 0 {
        eprintln!(
            "workers failed: {workers_failed}; acquisitions {} of {} expected",
            totals.acquisitions, totals.expected
        );
    }
    totals
}

/// How many intervals begin before an earlier-begun one has ended.
fn count_overlaps(intervals: &mut [(u64, u64)]) -> usize {
    intervals.sort_unstable();
    let mut busy_until = 0;
    let mut overlaps = 0;
    for &(start, end) in intervals.iter() {
        if start < busy_until {
            overlaps += 1;
        }
        busy_until = busy_until.max(end);
    }
    overlaps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_intervals_do_not_overlap() {
        assert_eq!(count_overlaps(&mut [(5, 9), (0, 5), (9, 12)]), 0);
        assert_eq!(count_overlaps(&mut [(0, 10), (2, 3), (4, 12)]), 2);
    }

    #[test]
    fn every_lock_gets_its_share() {
        let plan = Plan {
            tasks: 4,
            locks: 3,
            iterations: 200,
            hold_ms: 0,
        };
        assert_eq!(plan.acquisitions_per_lock(3), [800, 800, 800]);
    }
}
