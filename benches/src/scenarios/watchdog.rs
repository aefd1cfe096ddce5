//! Scenario 5: what the watchdog costs.
//!
//! A worker process takes `locks` watchdog holds (distinct names) with a short configured
//! `Config::watchdog_timeout` (renewals every third of it), then holds them for two and a half renewal
//! periods, so that two whole renewal rounds fall inside the window, and measures its own CPU time
//! over that window (`getrusage`). Meanwhile the runner reads `INFO commandstats` every few
//! milliseconds and splits the `EVALSHA` calls into renewal rounds (bursts separated by quiet), which
//! gives the scripts sent per period and the keys renewed (`pexpire` calls inside the scripts). At the
//! end of the window the worker reads the PTTL of a sample of its locks: a renewed lock has more than
//! `timeout − period` left, an unrenewed one less than `timeout − 2 periods`.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::Result;
use crate::child::{ChildProcess, Parent};
use crate::probe::{CommandStats, Probe, Sampler};
use crate::process;
use crate::scenarios::WorkerTask as Task;

/// How many acquires or releases the worker keeps in flight: as many as the client's pool has
/// connections. With 256 in flight and a 900 ms timeout, renewals queued behind the acquires for pool
/// slots and holds expired before their first renewal; that is a finding (see benches/README.md), not
/// what this scenario measures.
const IN_FLIGHT: usize = 8;
/// How often the runner reads the command counts.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);
/// How many locks the worker reads the PTTL of.
const PTTL_SAMPLE: usize = 100;

#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Params {
    pub(crate) locks: usize,
    pub(crate) watchdog_timeout_ms: u64,
}

impl Params {
    fn period(self) -> Duration {
        Duration::from_millis(self.watchdog_timeout_ms) / 3
    }

    fn window(self) -> Duration {
        self.period() * 5 / 2
    }

    /// The goal: one script per `watchdog_batch_size` (100) locks.
    pub(crate) fn target_scripts_per_period(self) -> usize {
        self.locks
            .div_ceil(rlock_redisson::Config::new("redis://unused/").watchdog_batch_size)
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Measured {
    pub(crate) locks: usize,
    pub(crate) watchdog_timeout_ms: u64,
    pub(crate) period_ms: f64,
    pub(crate) window_ms: f64,
    pub(crate) acquire_seconds: f64,
    /// Whole renewal rounds seen inside the window.
    pub(crate) rounds: usize,
    /// Renewal scripts of every burst seen, whole or not, in order.
    pub(crate) scripts_per_burst: Vec<u64>,
    /// Renewal scripts (`EVALSHA`) per whole round: the most and the mean.
    pub(crate) max_scripts_per_period: u64,
    pub(crate) mean_scripts_per_period: f64,
    /// Keys renewed (`PEXPIRE` inside the scripts) per whole round, the mean.
    pub(crate) keys_renewed_per_period: f64,
    pub(crate) target_scripts_per_period: usize,
    /// The worker's CPU time over the window, and per period.
    pub(crate) cpu_ms: f64,
    pub(crate) cpu_ms_per_period: f64,
    /// The CPU time as a share of one core over the window.
    pub(crate) cpu_percent_of_core: f64,
    /// The least PTTL among the sampled locks at the end of the window.
    pub(crate) min_pttl_ms: u64,
    /// Locks the watchdog still renewed after everything was released (expected: 0).
    pub(crate) renewing_after_release: usize,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WorkerTask {
    url: String,
    params: WorkerParams,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct WorkerParams {
    locks: usize,
    watchdog_timeout_ms: u64,
    window_ns: u64,
}

#[derive(Debug, Serialize, Deserialize)]
enum FromWorker {
    Held {
        acquire_ns: u64,
    },
    Measured {
        cpu_ns: u64,
        window_ns: u64,
        min_pttl_ms: u64,
    },
    Released {
        renewing_locks: usize,
    },
}

pub(crate) async fn run(url: &str, probe: &mut Probe, params: Params) -> Result<Measured> {
    // Load the renewal script first: on a server that never ran it, the first renewal would also
    // count an `EVALSHA` refused with NOSCRIPT (and a SCRIPT LOAD), a one-time cost, not a per-period one.
    let _sha: String = probe
        .query(
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(include_str!("../../../crates/core/lua/lock_renew.lua")),
        )
        .await?;
    let mut worker = ChildProcess::spawn(&Task::Watchdog(WorkerTask {
        url: url.to_owned(),
        params: WorkerParams {
            locks: params.locks,
            watchdog_timeout_ms: params.watchdog_timeout_ms,
            window_ns: u64::try_from(params.window().as_nanos())?,
        },
    }))?;
    let FromWorker::Held { acquire_ns } = worker.receive().await? else {
        return Err("watchdog worker: expected Held".into());
    };
    let sampling = probe.clone();
    let sampler = Sampler::start(SAMPLE_EVERY, move || {
        let mut sampling = sampling.clone();
        async move { Ok((Instant::now(), sampling.command_stats().await?)) }
    });
    let FromWorker::Measured {
        cpu_ns,
        window_ns,
        min_pttl_ms,
    } = worker.receive().await?
    else {
        return Err("watchdog worker: expected Measured".into());
    };
    let samples = sampler.stop().await?;
    let FromWorker::Released { renewing_locks } = worker.receive().await? else {
        return Err("watchdog worker: expected Released".into());
    };
    worker.finish().await?;

    let rounds = rounds(&samples, params.period() / 3);
    let whole: Vec<&Round> = rounds.iter().filter(|r| r.whole).collect();
    let mean = |f: fn(&Round) -> u64| {
        whole.iter().map(|r| f(r) as f64).sum::<f64>() / whole.len().max(1) as f64
    };
    let cpu_ms = cpu_ns as f64 / 1e6;
    let periods = window_ns as f64 / params.period().as_nanos() as f64;
    Ok(Measured {
        locks: params.locks,
        watchdog_timeout_ms: params.watchdog_timeout_ms,
        period_ms: params.period().as_secs_f64() * 1e3,
        window_ms: window_ns as f64 / 1e6,
        acquire_seconds: acquire_ns as f64 / 1e9,
        rounds: whole.len(),
        scripts_per_burst: rounds.iter().map(|r| r.scripts).collect(),
        max_scripts_per_period: whole.iter().map(|r| r.scripts).max().unwrap_or(0),
        mean_scripts_per_period: mean(|r| r.scripts),
        keys_renewed_per_period: mean(|r| r.keys),
        target_scripts_per_period: params.target_scripts_per_period(),
        cpu_ms,
        cpu_ms_per_period: cpu_ms / periods,
        cpu_percent_of_core: cpu_ns as f64 / window_ns as f64 * 100.0,
        min_pttl_ms,
        renewing_after_release: renewing_locks,
    })
}

/// One renewal round: a burst of renewal scripts.
#[derive(Debug, PartialEq, Eq)]
struct Round {
    scripts: u64,
    keys: u64,
    /// False when the burst was already under way when sampling began, or still when it ended.
    whole: bool,
}

/// Splits the `EVALSHA` calls between consecutive samples into bursts separated by at least `quiet`
/// without calls.
fn rounds(samples: &[(Instant, CommandStats)], quiet: Duration) -> Vec<Round> {
    let mut rounds: Vec<Round> = Vec::new();
    let mut last_activity: Option<Instant> = None;
    for (i, pair) in samples.windows(2).enumerate() {
        let [(_, before), (at, after)] = pair else {
            continue;
        };
        let scripts = after
            .calls("evalsha")
            .saturating_sub(before.calls("evalsha"));
        if scripts == 0 {
            continue;
        }
        let keys = after
            .calls("pexpire")
            .saturating_sub(before.calls("pexpire"));
        let continues = last_activity.is_some_and(|last| at.duration_since(last) < quiet);
        match rounds.last_mut() {
            Some(round) if continues => {
                round.scripts += scripts;
                round.keys += keys;
            }
            _ => rounds.push(Round {
                scripts,
                keys,
                whole: i > 0,
            }),
        }
        last_activity = Some(*at);
    }
    // A burst that was still going at the last sample may not be complete.
    if let (Some(round), Some(last)) = (rounds.last_mut(), last_activity)
        && samples
            .last()
            .is_some_and(|(at, _)| at.duration_since(last) < quiet)
    {
        round.whole = false;
    }
    rounds
}

/// The worker process: holds the locks for the window and measures its CPU time.
pub(crate) async fn work(task: WorkerTask, mut parent: Parent) -> Result<()> {
    let params = task.params;
    let mut config = rlock_redisson::Config::new(task.url);
    config.watchdog_timeout = Duration::from_millis(params.watchdog_timeout_ms);
    let client = rlock_redisson::Client::with_config(config).await?;
    let prefix = format!("bench:watchdog:{}", uuid::Uuid::new_v4().simple());
    let names: Vec<String> = (0..params.locks).map(|i| format!("{prefix}:{i}")).collect();

    let start = Instant::now();
    let locks: Vec<rlock_redisson::Lock> = names
        .iter()
        .map(|name| client.lock(name.as_str()))
        .collect();
    let guards: Vec<rlock_redisson::LockGuard> = futures::stream::iter(locks)
        .map(|lock| async move { lock.lock().await })
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
    parent
        .send(&FromWorker::Held {
            acquire_ns: u64::try_from(start.elapsed().as_nanos())?,
        })
        .await?;

    let cpu_before = process::cpu_time()?;
    let start = Instant::now();
    tokio::time::sleep(Duration::from_nanos(params.window_ns)).await;
    let cpu = process::cpu_time()? - cpu_before;
    let window = start.elapsed();
    let mut min_pttl = Duration::MAX;
    for name in names
        .iter()
        .step_by(names.len().div_ceil(PTTL_SAMPLE).max(1))
    {
        min_pttl = min_pttl.min(match client.lock(name.as_str()).remaining_ttl().await? {
            rlock_redisson::RemainingTtl::Expires(ttl) => ttl,
            _ => Duration::ZERO,
        });
    }
    parent
        .send(&FromWorker::Measured {
            cpu_ns: u64::try_from(cpu.as_nanos())?,
            window_ns: u64::try_from(window.as_nanos())?,
            min_pttl_ms: u64::try_from(min_pttl.as_millis())?,
        })
        .await?;

    futures::stream::iter(guards)
        .map(|guard| guard.unlock())
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>()
        .await?;
    parent
        .send(&FromWorker::Released {
            renewing_locks: client.stats().renewing_locks,
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(start: Instant, ms: u64, evalsha: u64) -> (Instant, CommandStats) {
        let mut stats = CommandStats::default();
        stats.add_calls("evalsha", evalsha);
        stats.add_calls("pexpire", evalsha * 100);
        (start + Duration::from_millis(ms), stats)
    }

    #[test]
    fn bursts_become_rounds() {
        let t = Instant::now();
        let samples = [
            sample(t, 0, 0),
            sample(t, 5, 40), // already under way at the start: not whole
            sample(t, 10, 50),
            sample(t, 100, 50),
            sample(t, 105, 90),
            sample(t, 110, 150),
            sample(t, 200, 150),
            sample(t, 205, 170), // still under way at the end: not whole
        ];
        let rounds = rounds(&samples, Duration::from_millis(30));
        let summary: Vec<(u64, bool)> = rounds.iter().map(|r| (r.scripts, r.whole)).collect();
        assert_eq!(summary, [(50, false), (100, true), (20, false)]);
        assert_eq!(rounds[1].keys, 10_000);
    }
}
