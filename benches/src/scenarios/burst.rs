//! Scenario 9: a burst of waiters, N waiters on N names (issue 38).
//!
//! For each N a holder client takes N locks `burst:<run>:{i}` (a fixed lease, longer than the run)
//! and a second client, default `Config`, starts N tasks, task `i` calling `lock().await` on name
//! `i`. Once they all wait, the holder releases a few names one at a time, then every other name at
//! once; each waiter notes when it acquired and keeps its hold until the end of the run. Twice per
//! N: the holder in another client of the waiters' process, and the holder in another process. The
//! waiters always run in a fresh process of their own (started for the run), so that its resident
//! memory is theirs and the baseline's alone.
//!
//! - **Arm time**: from just before the first task is spawned (the worker's clock) until every waiter
//!   is parked or has failed: the server has at least `N − failed` channels subscribed
//!   (`pubsub_channels` + `pubsub_shardchannels` of `INFO stats`, less the count before arming; only
//!   the waiters' client subscribes to anything) and the acquire scripts (`EVALSHA` in `INFO
//!   commandstats`) have stopped moving. The runner samples both every [`ARM_SAMPLE_EVERY`]; the arm
//!   ends at the later of the first sample with every channel subscribed and the last sample that saw
//!   a new script, and counts as done once no script came for [`SETTLED_AFTER`] (not counted in it).
//!   A burst that does not settle within [`ARM_TIMEOUT`] is released anyway and reported unsettled.
//! - **Lone releases**: first the holder unlocks [`LONE_RELEASES`] names one at a time, each once
//!   the previous one's waiter acquired, while every other waiter stays parked. **Lone wake** of
//!   such a name = when its waiter acquired − when its unlock was called: what one release costs
//!   a waiter while N − 1 others wait (it should not grow with N).
//! - **Release**: the holder unlocks the rest of its guards, [`HOLDER_IN_FLIGHT`] at a time, noting
//!   the time just before each unlock call. **Wake** of waiter `i` = when it acquired − when its
//!   own name's unlock was called; **release → all acquired** = the last acquisition − the first
//!   unlock call.
//!   Times are epoch nanoseconds ([`crate::clock`]), shared by the processes.
//! - **Failures**: `lock()` errors, by their text (the waiter's name replaced by `…`), split by
//!   whether they came before the release; a waiter that neither acquired nor failed within
//!   [`STUCK_AFTER`] of the end of the release is **stuck**.
//! - **RSS per waiter**: (the worker's `VmRSS` once armed − its `VmRSS` just before spawning) / N.
//!   Everything the worker allocates for the waiters counts, the tasks and the benchmark's share of
//!   them included (an `Arc` and an index per task); the per-waiter outcome slots are allocated and
//!   written before the baseline.
//! - **Commands**: `INFO commandstats` deltas from before arming to the end of arming, and from
//!   there until every waiter acquired or failed, per waiter; the holder's unlock scripts (one per
//!   name) are subtracted from the scripts per waiter.
//! - **The floor**: what the server needs to run the burst's commands, at rates measured on the same
//!   server just before each N (see [`floor`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use redis::Value;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::Result;
use crate::child::{ChildProcess, Parent};
use crate::clock::epoch_ns;
use crate::probe::{CommandStats, Probe};
use crate::process::{self, Memory};
use crate::scenarios::WorkerTask as Task;
use crate::stats::{Summary, ratio};

/// The holder's lease: longer than any run (arming, the release and the stuck bound).
const LEASE: Duration = Duration::from_secs(30 * 60);
/// How many acquires or unlocks the holder keeps in flight.
const HOLDER_IN_FLIGHT: usize = 64;
/// How often the runner samples the server and the worker while the waiters arm.
const ARM_SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// Arming is over once no acquire script came for this long.
const SETTLED_AFTER: Duration = Duration::from_millis(300);
/// How long the waiters may take to arm before the holder releases anyway.
const ARM_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the holder may take to release every name; names not confirmed by then count as
/// release errors.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(300);
/// A waiter that neither acquired nor failed this long after the release ended is stuck.
const STUCK_AFTER: Duration = Duration::from_secs(120);
/// How long the holder may take to acquire its N locks.
const HOLD_TIMEOUT: Duration = Duration::from_secs(600);
/// How long any other reply of a worker may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the waiters may take to unlock their holds at the end.
const FINISH_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the runner asks the waiters how far they got after the release.
const STATUS_EVERY: Duration = Duration::from_millis(20);
/// Names released one at a time before the burst's release, each while the others wait.
const LONE_RELEASES: usize = 20;
/// How often the runner asks whether a lone release's waiter acquired.
const LONE_STATUS_EVERY: Duration = Duration::from_millis(1);
/// Marks a waiter's outcome slot as a failure (the rest is when, in epoch ns).
const FAILED: u64 = 1 << 63;

/// The floor's measurement: connections, commands per pipeline, channels per `SUBSCRIBE`.
const FLOOR_CONNECTIONS: usize = 4;
const FLOOR_PIPELINE: usize = 500;
const FLOOR_SUBSCRIBE_BATCH: usize = 1_000;
/// The lease and latch TTL the library sends with its default configuration, in ms.
const FLOOR_LEASE_MS: u64 = 30_000;
const FLOOR_LATCH_TTL_MS: u64 = 20_000;
/// How long the floor may wait for the server's subscription count or for the messages.
const FLOOR_WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Params {
    /// The numbers of waiters (and names), in order.
    pub(crate) sizes: Vec<usize>,
    /// Each waiter unlocks as soon as it acquired, instead of holding until the end of the run.
    pub(crate) unlock_at_once: bool,
}

/// Where the holder runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Holder {
    /// Another client of the waiters' process.
    SameProcess,
    /// A client in a process of its own.
    OtherProcess,
}

impl Holder {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::SameProcess => "same process",
            Self::OtherProcess => "other process",
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Measured {
    /// Whether the waiters unlocked at once (else they held until the end of the run).
    pub(crate) unlock_at_once: bool,
    /// One floor per N, measured before that N's runs.
    pub(crate) floors: Vec<Floor>,
    pub(crate) runs: Vec<Run>,
}

impl Measured {
    pub(crate) fn run(&self, waiters: usize, holder: Holder) -> Option<&Figures> {
        self.runs
            .iter()
            .find(|r| r.waiters == waiters && r.holder == holder)
            .and_then(|r| r.figures.as_ref())
    }
}

/// What the server does per second, on N fresh names, pipelined from [`FLOOR_CONNECTIONS`]
/// connections.
#[derive(Debug, Serialize)]
pub(crate) struct Floor {
    pub(crate) names: usize,
    /// `EVALSHA` of the acquire script on free names (each acquires).
    pub(crate) acquire_per_sec: f64,
    /// `EVALSHA` of the unlock script on those holds (each deletes, publishes to a subscribed
    /// channel and sets its unlock latch).
    pub(crate) unlock_per_sec: f64,
    /// `PUBLISH` to one subscribed channel, for reference (the unlock script publishes itself).
    pub(crate) publish_per_sec: f64,
    /// Channels subscribed per second, [`FLOOR_SUBSCRIBE_BATCH`] per `SUBSCRIBE`, until the server
    /// counts them all.
    pub(crate) subscribe_channels_per_sec: f64,
    /// Messages the subscriber received (the unlocks' and the `PUBLISH`es': 2 N).
    pub(crate) delivered: u64,
    /// The server's time for the commands of a burst's arming: 2 N acquire scripts (the first try
    /// and the try after the subscription) and N channels subscribed.
    pub(crate) arm_floor_ms: f64,
    /// The server's time for the commands after the release: N unlock scripts (with their
    /// `PUBLISH`) and N acquire scripts.
    pub(crate) release_floor_ms: f64,
}

/// One run: N waiters with the holder in one place.
#[derive(Debug, Serialize)]
pub(crate) struct Run {
    pub(crate) waiters: usize,
    pub(crate) holder: Holder,
    /// Why the run could not be measured (a worker died or stopped answering).
    pub(crate) error: Option<String>,
    pub(crate) figures: Option<Figures>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Figures {
    /// The holder's acquisition of the N locks (before anything is measured).
    pub(crate) hold_seconds: f64,
    /// From the first spawn to the last.
    pub(crate) spawn_ms: f64,
    /// Whether arming settled within [`ARM_TIMEOUT`].
    pub(crate) armed: bool,
    /// Arm time (see the module's documentation); `None` when it did not settle.
    pub(crate) arm_ms: Option<f64>,
    /// From the first spawn until the server had every channel subscribed, when it did.
    pub(crate) channels_ms: Option<f64>,
    /// When arming ended (settled or not): channels the server had subscribed for the waiters,
    /// connections subscribed to anything, `lock()` calls failed so far.
    pub(crate) server_channels: u64,
    pub(crate) subscriber_connections: usize,
    pub(crate) failed_while_arming: usize,
    /// The waiters' client's own view then (`Client::stats`).
    pub(crate) client_subscribed_channels: usize,
    pub(crate) client_queued_waiters: usize,
    /// The holder's release: the first unlock call to the last unlock returned.
    pub(crate) release_ms: f64,
    /// Names whose unlock was called; unlocks that failed or were not confirmed in time.
    pub(crate) released: usize,
    pub(crate) release_errors: usize,
    /// The first unlock call to the last acquisition, when every waiter acquired.
    pub(crate) all_acquired_ms: Option<f64>,
    /// The first unlock call to the last acquisition of those that did.
    pub(crate) last_acquired_ms: Option<f64>,
    /// Per waiter of the burst's release: acquired − its own name's unlock call.
    pub(crate) wake: Summary,
    /// Per lone release (before the burst's, one name at a time while the others wait): its
    /// waiter's acquisition − the unlock call; how many names were released so.
    pub(crate) lone_wake: Summary,
    pub(crate) lone_released: usize,
    pub(crate) acquired: usize,
    pub(crate) failed_before_release: usize,
    pub(crate) failed_after_release: usize,
    pub(crate) stuck: usize,
    /// `lock()` errors by text, the waiter's name replaced by `…`.
    pub(crate) errors: BTreeMap<String, usize>,
    /// The waiters' process: before spawning, once armed, and its peak at the end of arming.
    pub(crate) rss_before: Memory,
    pub(crate) rss_armed: Memory,
    pub(crate) rss_per_waiter_kib: f64,
    /// Bytes of one whole waiter task's future (the `lock()` future inside it).
    pub(crate) task_future_bytes: usize,
    /// Commands per waiter while arming, and from the end of arming until every waiter acquired or
    /// failed (the holder's unlocks included there).
    pub(crate) arm_commands: BTreeMap<String, f64>,
    pub(crate) release_commands: BTreeMap<String, f64>,
    /// Acquire scripts per waiter over both (the holder's unlock scripts subtracted), and
    /// `SUBSCRIBE` + `SSUBSCRIBE` commands per waiter.
    pub(crate) scripts_per_waiter: f64,
    pub(crate) subscribes_per_waiter: f64,
    /// This N's floors and the measured times divided by them.
    pub(crate) arm_floor_ms: f64,
    pub(crate) per_arm_floor: f64,
    pub(crate) release_floor_ms: f64,
    pub(crate) per_release_floor: f64,
    /// The waiters' unlocks at the end of the run, and what went wrong ending the run's processes
    /// (killed then), if anything.
    pub(crate) unlocked_at_end: usize,
    pub(crate) unlock_errors_at_end: usize,
    pub(crate) finish_error: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WorkerTask {
    url: String,
    prefix: String,
    waiters: usize,
    /// Takes the N locks with a client of its own.
    hold: bool,
    /// Runs the N waiters.
    wait: bool,
    unlock_at_once: bool,
}

#[derive(Debug, Serialize, Deserialize)]
enum ToWorker {
    Arm,
    Status,
    ReadMemory,
    /// Unlock the next name alone.
    ReleaseOne,
    /// Unlock every name not released yet.
    Release,
    Report,
    Finish,
}

#[derive(Debug, Serialize, Deserialize)]
enum FromWorker {
    Held {
        hold_ns: u64,
    },
    Ready {
        task_future_bytes: usize,
    },
    Spawned {
        memory: Memory,
        arm_started_ns: i64,
        spawned_ns: i64,
    },
    Status {
        acquired: usize,
        failed: usize,
    },
    Waiting {
        memory: Memory,
        subscribed_channels: usize,
        queued_waiters: usize,
    },
    ReleasedOne {
        called_ns: i64,
        unlocked: bool,
    },
    Released {
        /// Per name, when its unlock was called (0: never, or released alone before).
        called_ns: Vec<i64>,
        started_ns: i64,
        ended_ns: i64,
        errors: usize,
    },
    Report {
        /// Per waiter: 0 while waiting, else when it acquired, or failed (with [`FAILED`]).
        outcomes: Vec<u64>,
        errors: BTreeMap<String, usize>,
    },
    Finished {
        unlocked: usize,
        unlock_errors: usize,
    },
}

pub(crate) async fn run(url: &str, probe: &mut Probe, params: &Params) -> Result<Measured> {
    let mut measured = Measured {
        unlock_at_once: params.unlock_at_once,
        floors: Vec::new(),
        runs: Vec::new(),
    };
    for &waiters in &params.sizes {
        crate::progress(&format!(
            "scenario 9: the floor for {waiters} names (EVALSHA, PUBLISH, SUBSCRIBE rates)"
        ));
        let floor = floor(url, probe, waiters).await?;
        for holder in [Holder::SameProcess, Holder::OtherProcess] {
            crate::progress(&format!(
                "scenario 9: {waiters} waiters on {waiters} names, holder in the {}",
                holder.label()
            ));
            let result = burst(url, probe, params, waiters, holder, &floor).await;
            if let Err(e) = &result {
                eprintln!("!!! scenario 9, {waiters} waiters, {}: {e}", holder.label());
            }
            if let Some(e) = result.as_ref().ok().and_then(|f| f.finish_error.as_ref()) {
                eprintln!(
                    "!!! scenario 9, {waiters} waiters, {}: ending the run: {e}",
                    holder.label()
                );
            }
            measured.runs.push(Run {
                waiters,
                holder,
                error: result.as_ref().err().map(ToString::to_string),
                figures: result.ok(),
            });
        }
        measured.floors.push(floor);
    }
    Ok(measured)
}

/// A worker's next message, within `within`.
async fn reply(worker: &mut ChildProcess, within: Duration) -> Result<FromWorker> {
    tokio::time::timeout(within, worker.receive())
        .await
        .map_err(|_| format!("a burst worker did not answer within {within:?}"))?
}

async fn ask(worker: &mut ChildProcess, message: ToWorker, within: Duration) -> Result<FromWorker> {
    worker.send(&message).await?;
    reply(worker, within).await
}

fn unexpected(expected: &str, got: &FromWorker) -> crate::Error {
    format!("burst worker: expected {expected}, got {got:?}").into()
}

/// One run; see the module's documentation.
async fn burst(
    url: &str,
    probe: &mut Probe,
    params: &Params,
    waiters: usize,
    holder: Holder,
    floor: &Floor,
) -> Result<Figures> {
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let task = |hold, wait| {
        Task::Burst(WorkerTask {
            url: url.to_owned(),
            prefix: format!("burst:{}", &run_id[..8]),
            waiters,
            hold,
            wait,
            unlock_at_once: params.unlock_at_once,
        })
    };
    let (mut worker, mut holding) = match holder {
        Holder::SameProcess => (ChildProcess::spawn(&task(true, true))?, None),
        Holder::OtherProcess => (
            ChildProcess::spawn(&task(false, true))?,
            Some(ChildProcess::spawn(&task(true, false))?),
        ),
    };
    let hold_ns = match reply(holding.as_mut().unwrap_or(&mut worker), HOLD_TIMEOUT).await? {
        FromWorker::Held { hold_ns } => hold_ns,
        other => return Err(unexpected("Held", &other)),
    };
    let task_future_bytes = match reply(&mut worker, REPLY_TIMEOUT).await? {
        FromWorker::Ready { task_future_bytes } => task_future_bytes,
        other => return Err(unexpected("Ready", &other)),
    };

    let before = probe.command_stats().await?;
    let channels_before = probe.pubsub_channels().await?;
    let (rss_before, arm_started_ns, spawned_ns) =
        match ask(&mut worker, ToWorker::Arm, REPLY_TIMEOUT).await? {
            FromWorker::Spawned {
                memory,
                arm_started_ns,
                spawned_ns,
            } => (memory, arm_started_ns, spawned_ns),
            other => return Err(unexpected("Spawned", &other)),
        };
    let arming = settle(probe, &mut worker, waiters, &before, channels_before).await?;
    let subscriber_connections = probe.subscribed_connections().await?.len();
    let (rss_armed, client_subscribed_channels, client_queued_waiters) =
        match ask(&mut worker, ToWorker::ReadMemory, REPLY_TIMEOUT).await? {
            FromWorker::Waiting {
                memory,
                subscribed_channels,
                queued_waiters,
            } => (memory, subscribed_channels, queued_waiters),
            other => return Err(unexpected("Waiting", &other)),
        };

    let armed_stats = probe.command_stats().await?;
    let lone = lone_releases(&mut worker, &mut holding, waiters.min(LONE_RELEASES)).await?;
    let released = ask(
        holding.as_mut().unwrap_or(&mut worker),
        ToWorker::Release,
        RELEASE_TIMEOUT + REPLY_TIMEOUT,
    )
    .await?;
    let FromWorker::Released {
        called_ns,
        started_ns,
        ended_ns,
        errors: release_errors,
    } = released
    else {
        return Err(unexpected("Released", &released));
    };
    until_done(&mut worker, waiters, STUCK_AFTER, STATUS_EVERY).await?;
    let release_stats = probe.command_stats().await?.since(&armed_stats);
    let (outcomes, errors) = match ask(&mut worker, ToWorker::Report, REPLY_TIMEOUT).await? {
        FromWorker::Report { outcomes, errors } => (outcomes, errors),
        other => return Err(unexpected("Report", &other)),
    };
    let finished = finish(holding.into_iter().chain(std::iter::once(worker))).await;

    let lone_wake = Outcome::lone_wake(&outcomes, &lone);
    let outcome = Outcome::of(&outcomes, &called_ns, started_ns);
    // The lone releases' unlock scripts count as the holder's too.
    let released = called_ns.iter().filter(|&&at| at > 0).count() + lone.len();
    let scripts = |stats: &CommandStats| stats.sum_of(&["evalsha", "eval"]);
    let subscribes = |stats: &CommandStats| stats.sum_of(&["subscribe", "ssubscribe"]);
    let per_waiter = |count: u64| count as f64 / waiters as f64;
    let ms = |ns: i64| ns as f64 / 1e6;
    let arm_ms = arming.armed_ns.map(|at| ms(at - arm_started_ns));
    let all_acquired_ms = outcome
        .last_acquired_ns
        .filter(|_| outcome.acquired == waiters)
        .map(|at| ms(at - started_ns));
    Ok(Figures {
        hold_seconds: hold_ns as f64 / 1e9,
        spawn_ms: ms(spawned_ns - arm_started_ns),
        armed: arming.armed_ns.is_some(),
        arm_ms,
        channels_ms: arming.channels_ns.map(|at| ms(at - arm_started_ns)),
        server_channels: arming.channels,
        subscriber_connections,
        failed_while_arming: arming.failed,
        client_subscribed_channels,
        client_queued_waiters,
        release_ms: ms(ended_ns - started_ns),
        released,
        release_errors,
        all_acquired_ms,
        last_acquired_ms: outcome.last_acquired_ns.map(|at| ms(at - started_ns)),
        wake: outcome.wake,
        lone_wake,
        lone_released: lone.len(),
        acquired: outcome.acquired,
        failed_before_release: outcome.failed_before_release,
        failed_after_release: outcome.failed_after_release,
        stuck: outcome.stuck,
        errors,
        rss_before,
        rss_armed,
        rss_per_waiter_kib: (rss_armed.rss_mib - rss_before.rss_mib) * 1024.0 / waiters as f64,
        task_future_bytes,
        arm_commands: arming.stats.per(waiters as u64),
        release_commands: release_stats.per(waiters as u64),
        scripts_per_waiter: per_waiter(
            (scripts(&arming.stats) + scripts(&release_stats)).saturating_sub(released as u64),
        ),
        subscribes_per_waiter: per_waiter(subscribes(&arming.stats) + subscribes(&release_stats)),
        arm_floor_ms: floor.arm_floor_ms,
        per_arm_floor: arm_ms.map_or(f64::NAN, |arm| ratio(arm, floor.arm_floor_ms)),
        release_floor_ms: floor.release_floor_ms,
        per_release_floor: all_acquired_ms
            .map_or(f64::NAN, |all| ratio(all, floor.release_floor_ms)),
        unlocked_at_end: finished.as_ref().map_or(0, |&(unlocked, _)| unlocked),
        unlock_errors_at_end: finished.as_ref().map_or(0, |&(_, errors)| errors),
        finish_error: finished.err().map(|e| e.to_string()),
    })
}

/// Releases `names` names one at a time (the holder is `holding`, or the waiters' `worker`), each
/// once the previous one's waiter acquired (or failed, or [`REPLY_TIMEOUT`] passed): when each
/// unlock was called.
async fn lone_releases(
    worker: &mut ChildProcess,
    holding: &mut Option<ChildProcess>,
    names: usize,
) -> Result<Vec<i64>> {
    let mut called = Vec::with_capacity(names);
    for released in 1..=names {
        let holder = holding.as_mut().unwrap_or(&mut *worker);
        match ask(holder, ToWorker::ReleaseOne, REPLY_TIMEOUT).await? {
            FromWorker::ReleasedOne {
                called_ns,
                unlocked: true,
            } => called.push(called_ns),
            FromWorker::ReleasedOne { .. } => return Err("a lone release's unlock failed".into()),
            other => return Err(unexpected("ReleasedOne", &other)),
        }
        until_done(worker, released, REPLY_TIMEOUT, LONE_STATUS_EVERY).await?;
    }
    Ok(called)
}

/// Asks `worker` how far its waiters got, every `every`, until `waiters` of them acquired or failed
/// or `within` passed (the outcomes tell which, at the end).
async fn until_done(
    worker: &mut ChildProcess,
    waiters: usize,
    within: Duration,
    every: Duration,
) -> Result<()> {
    let by = Instant::now() + within;
    loop {
        let (acquired, failed) = match ask(worker, ToWorker::Status, REPLY_TIMEOUT).await? {
            FromWorker::Status { acquired, failed } => (acquired, failed),
            other => return Err(unexpected("Status", &other)),
        };
        if acquired + failed >= waiters || Instant::now() >= by {
            return Ok(());
        }
        tokio::time::sleep(every).await;
    }
}

/// Ends the run's processes: the waiters unlock their holds, then each process exits. Returns the
/// waiters' unlocks that succeeded and failed.
async fn finish(processes: impl Iterator<Item = ChildProcess>) -> Result<(usize, usize)> {
    let mut unlocks = (0, 0);
    for mut process in processes {
        match ask(
            &mut process,
            ToWorker::Finish,
            FINISH_TIMEOUT + REPLY_TIMEOUT,
        )
        .await?
        {
            FromWorker::Finished {
                unlocked,
                unlock_errors,
            } => unlocks = (unlocks.0 + unlocked, unlocks.1 + unlock_errors),
            other => return Err(unexpected("Finished", &other)),
        }
        tokio::time::timeout(REPLY_TIMEOUT, process.finish())
            .await
            .map_err(|_| "a burst worker did not exit")??;
    }
    Ok(unlocks)
}

/// How arming went.
#[derive(Debug)]
struct Arming {
    /// When it ended, if it settled.
    armed_ns: Option<i64>,
    /// The first sample with every waiter's channel subscribed (or its waiter failed), if any.
    channels_ns: Option<i64>,
    /// The waiters' channels on the server, and the failures, at the last sample.
    channels: u64,
    failed: usize,
    /// The commands from before arming to the last sample.
    stats: CommandStats,
}

/// Samples the server and the worker until the waiters are armed (see the module's documentation)
/// or [`ARM_TIMEOUT`] passes.
async fn settle(
    probe: &mut Probe,
    worker: &mut ChildProcess,
    waiters: usize,
    before: &CommandStats,
    channels_before: u64,
) -> Result<Arming> {
    let deadline = Instant::now() + ARM_TIMEOUT;
    let quiet_ns = crate::stats::ns(SETTLED_AFTER);
    let (mut scripts, mut last_script_ns) = (0, epoch_ns());
    let mut channels_ns = None;
    loop {
        tokio::time::sleep(ARM_SAMPLE_EVERY).await;
        let stats = probe.command_stats().await?.since(before);
        let channels = probe
            .pubsub_channels()
            .await?
            .saturating_sub(channels_before);
        let failed = match ask(worker, ToWorker::Status, REPLY_TIMEOUT).await? {
            FromWorker::Status { failed, .. } => failed,
            other => return Err(unexpected("Status", &other)),
        };
        let now = epoch_ns();
        let sent = stats.sum_of(&["evalsha", "eval"]);
        if sent != scripts {
            (scripts, last_script_ns) = (sent, now);
        }
        if channels + failed as u64 >= waiters as u64 {
            channels_ns = channels_ns.or(Some(now));
        } else {
            channels_ns = None;
        }
        let settled = channels_ns.is_some() && now - last_script_ns >= quiet_ns;
        if settled || Instant::now() >= deadline {
            return Ok(Arming {
                armed_ns: channels_ns
                    .filter(|_| settled)
                    .map(|at| at.max(last_script_ns)),
                channels_ns,
                channels,
                failed,
                stats,
            });
        }
    }
}

/// The waiters' outcomes, from their slots and the names' unlock calls.
#[derive(Debug, Default)]
struct Outcome {
    acquired: usize,
    failed_before_release: usize,
    failed_after_release: usize,
    stuck: usize,
    last_acquired_ns: Option<i64>,
    wake: Summary,
}

impl Outcome {
    fn of(outcomes: &[u64], called_ns: &[i64], release_started_ns: i64) -> Self {
        let mut outcome = Self::default();
        let mut wakes = Vec::with_capacity(outcomes.len());
        for (i, &slot) in outcomes.iter().enumerate() {
            let at = i64::try_from(slot & !FAILED).unwrap_or(i64::MAX);
            if slot == 0 {
                outcome.stuck += 1;
            } else if slot & FAILED != 0 {
                if at < release_started_ns {
                    outcome.failed_before_release += 1;
                } else {
                    outcome.failed_after_release += 1;
                }
            } else {
                outcome.acquired += 1;
                outcome.last_acquired_ns = outcome.last_acquired_ns.max(Some(at));
                if let Some(&called) = called_ns.get(i).filter(|&&called| called > 0) {
                    wakes.push(at - called);
                }
            }
        }
        outcome.wake = Summary::of_ns(&mut wakes);
        outcome
    }

    /// The lone releases' wakes: waiter `i`'s acquisition − `lone[i]`, the unlock call of its name,
    /// for the first `lone.len()` waiters (the names released alone).
    fn lone_wake(outcomes: &[u64], lone: &[i64]) -> Summary {
        let released = outcomes.get(..lone.len()).unwrap_or_default();
        Self::of(released, lone, lone.first().copied().unwrap_or(0)).wake
    }
}

/// The floor for `names` names: the rates of the commands a burst needs, each measured alone on
/// fresh names, pipelined ([`FLOOR_PIPELINE`] commands a pipeline, one pipeline at a time per
/// connection, the names split between [`FLOOR_CONNECTIONS`] connections), timed from the first
/// send to the last reply:
///
/// 1. a pub/sub connection subscribes every name's unlock channel, [`FLOOR_SUBSCRIBE_BATCH`]
///    channels per `SUBSCRIBE`, timed until `INFO stats` counts them all;
/// 2. `EVALSHA` of the library's acquire script (its arguments: lease, owner field) on each name;
/// 3. `EVALSHA` of its unlock script on each of those holds, as the library sends it (channel,
///    unlock latch, `PUBLISH`): each deletes the lock, publishes to a subscribed channel (so the
///    message is delivered) and sets the latch;
/// 4. `PUBLISH` of N messages to one subscribed channel, for reference.
///
/// Then the latches are deleted and the channels unsubscribed.
async fn floor(url: &str, probe: &mut Probe, names: usize) -> Result<Floor> {
    let client = redis::Client::open(url)?;
    let mut connections = Vec::with_capacity(FLOOR_CONNECTIONS);
    for _ in 0..FLOOR_CONNECTIONS {
        connections.push(client.get_multiplexed_async_connection().await?);
    }
    let load = |script: &str| redis::cmd("SCRIPT").arg("LOAD").arg(script).clone();
    let acquire: String = probe
        .query(&load(include_str!(
            "../../../crates/core/lua/lock_acquire.lua"
        )))
        .await?;
    let unlock: String = probe
        .query(&load(include_str!(
            "../../../crates/core/lua/lock_unlock.lua"
        )))
        .await?;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let field = format!("{run}:1");
    let name = |i: usize| format!("burst:floor:{}:{i}", &run[..8]);
    let channel = |i: usize| format!("redisson_lock__channel:{{{}}}", name(i));
    let latch = |i: usize| format!("redisson_unlock_latch:{{{}}}:{run}", name(i));
    let channels: Vec<String> = (0..names).map(channel).collect();

    let channels_before = probe.pubsub_channels().await?;
    let (mut sink, mut messages) = client.get_async_pubsub().await?.split();
    let delivered = Arc::new(AtomicU64::new(0));
    let counting = delivered.clone();
    let drain = tokio::spawn(async move {
        while messages.next().await.is_some() {
            let _ = counting.fetch_add(1, Ordering::Relaxed);
        }
    });
    let start = Instant::now();
    for batch in channels.chunks(FLOOR_SUBSCRIBE_BATCH) {
        sink.subscribe(batch).await?;
    }
    let subscribed_by = Instant::now() + FLOOR_WAIT;
    while probe
        .pubsub_channels()
        .await?
        .saturating_sub(channels_before)
        < names as u64
    {
        if Instant::now() >= subscribed_by {
            return Err(format!("the floor's {names} channels were not subscribed in time").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let subscribe = start.elapsed();

    let acquired = pipelined(&connections, names, |i| {
        redis::cmd("EVALSHA")
            .arg(&acquire)
            .arg(1)
            .arg(name(i))
            .arg(FLOOR_LEASE_MS)
            .arg(&field)
            // The owner's hold count as rlock sends it: a fresh hold.
            .arg(0)
            .clone()
    })
    .await?;
    // rlock's acquire replies the owner's count: `[1]` for each fresh hold.
    expect_all(
        &acquired.1,
        |reply| *reply == Value::Array(vec![Value::Int(1)]),
        "acquire",
    )?;
    let unlocked = pipelined(&connections, names, |i| {
        redis::cmd("EVALSHA")
            .arg(&unlock)
            .arg(3)
            .arg(name(i))
            .arg(channel(i))
            .arg(latch(i))
            .arg("0")
            .arg(FLOOR_LEASE_MS)
            .arg(&field)
            .arg("PUBLISH")
            .arg(FLOOR_LATCH_TTL_MS)
            .clone()
    })
    .await?;
    expect_all(&unlocked.1, |reply| *reply == Value::Int(1), "unlock")?;
    let published = pipelined(&connections, names, |_| {
        redis::cmd("PUBLISH").arg(channel(0)).arg("0").clone()
    })
    .await?;
    let delivered_by = Instant::now() + FLOOR_WAIT;
    while delivered.load(Ordering::Relaxed) < 2 * names as u64 && Instant::now() < delivered_by {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let delivered = delivered.load(Ordering::Relaxed);

    let mut conn = connections[0].clone();
    for batch in (0..names).collect::<Vec<_>>().chunks(FLOOR_SUBSCRIBE_BATCH) {
        let latches: Vec<String> = batch.iter().map(|&i| latch(i)).collect();
        let _: u64 = redis::cmd("UNLINK")
            .arg(latches)
            .query_async(&mut conn)
            .await?;
    }
    for batch in channels.chunks(FLOOR_SUBSCRIBE_BATCH) {
        sink.unsubscribe(batch).await?;
    }
    drop(sink);
    drain.abort();
    let unsubscribed_by = Instant::now() + FLOOR_WAIT;
    while probe.pubsub_channels().await? > channels_before {
        if Instant::now() >= unsubscribed_by {
            return Err("the floor's channels were not unsubscribed in time".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let n = names as f64;
    let per_sec = |elapsed: Duration| n / elapsed.as_secs_f64();
    let (acquire_per_sec, unlock_per_sec) = (per_sec(acquired.0), per_sec(unlocked.0));
    let subscribe_channels_per_sec = per_sec(subscribe);
    Ok(Floor {
        names,
        acquire_per_sec,
        unlock_per_sec,
        publish_per_sec: per_sec(published.0),
        subscribe_channels_per_sec,
        delivered,
        arm_floor_ms: (2.0 * n / acquire_per_sec + n / subscribe_channels_per_sec) * 1e3,
        release_floor_ms: (n / unlock_per_sec + n / acquire_per_sec) * 1e3,
    })
}

/// Sends `command(i)` for every `i` below `count`, pipelined: connection `c` takes every
/// `i ≡ c` (mod connections), [`FLOOR_PIPELINE`] commands a pipeline, one pipeline at a time. Returns
/// the time from the first send to the last reply, and the replies.
async fn pipelined(
    connections: &[MultiplexedConnection],
    count: usize,
    command: impl Fn(usize) -> redis::Cmd + Sync,
) -> Result<(Duration, Vec<Value>)> {
    let command = &command;
    let start = Instant::now();
    let replies: Vec<Vec<Value>> =
        futures::future::try_join_all(connections.iter().enumerate().map(|(c, conn)| {
            let mut conn = conn.clone();
            let mine: Vec<usize> = (c..count).step_by(connections.len()).collect();
            async move {
                let mut replies = Vec::with_capacity(mine.len());
                for batch in mine.chunks(FLOOR_PIPELINE) {
                    let mut pipe = redis::pipe();
                    for &i in batch {
                        let _ = pipe.add_command(command(i));
                    }
                    let batch: Vec<Value> = pipe.query_async(&mut conn).await?;
                    replies.extend(batch);
                }
                Ok::<_, crate::Error>(replies)
            }
        }))
        .await?;
    let elapsed = start.elapsed();
    Ok((elapsed, replies.into_iter().flatten().collect()))
}

/// Fails unless every reply is as expected.
fn expect_all(replies: &[Value], expected: impl Fn(&Value) -> bool, what: &str) -> Result<()> {
    match replies.iter().find(|reply| !expected(reply)) {
        None => Ok(()),
        Some(reply) => Err(format!("the floor's {what} script replied {reply:?}").into()),
    }
}

/// The body of a burst worker: the holder, the waiters, or both (see [`WorkerTask`]).
pub(crate) async fn work(task: WorkerTask, mut parent: Parent) -> Result<()> {
    let mut holding = None;
    if task.hold {
        let start = Instant::now();
        let client = rlock_redisson::Client::connect(&task.url).await?;
        let guards: VecDeque<rlock_redisson::LockGuard> = futures::stream::iter(0..task.waiters)
            .map(|i| {
                let lock = client.lock(format!("{}:{i}", task.prefix));
                async move { lock.lock_with_lease(LEASE).await }
            })
            .buffered(HOLDER_IN_FLIGHT)
            .try_collect()
            .await?;
        parent
            .send(&FromWorker::Held {
                hold_ns: u64::try_from(start.elapsed().as_nanos())?,
            })
            .await?;
        holding = Some((client, guards));
    }
    let waiting = if task.wait {
        let shared = Arc::new(Waiters::connect(&task).await?);
        let task_future_bytes = std::mem::size_of_val(&wait(shared.clone(), 0));
        parent
            .send(&FromWorker::Ready { task_future_bytes })
            .await?;
        Some(shared)
    } else {
        None
    };
    loop {
        let message: ToWorker = parent.receive().await?;
        let answer = match (message, &waiting) {
            (ToWorker::ReleaseOne, _) => {
                let (_, guards) = holding.as_mut().ok_or("nothing to release")?;
                let guard = guards.pop_front().ok_or("every name is released")?;
                let called_ns = epoch_ns();
                FromWorker::ReleasedOne {
                    called_ns,
                    unlocked: guard.unlock().await.is_ok(),
                }
            }
            (ToWorker::Release, _) => {
                let (_client, guards) = holding.take().ok_or("nothing to release")?;
                release(guards, task.waiters).await
            }
            (ToWorker::Finish, _) => {
                let (unlocked, unlock_errors) = match waiting {
                    Some(shared) => shared.finish().await,
                    None => (0, 0),
                };
                return parent
                    .send(&FromWorker::Finished {
                        unlocked,
                        unlock_errors,
                    })
                    .await;
            }
            (ToWorker::Arm, Some(shared)) => {
                let memory = process::memory()?;
                let arm_started_ns = epoch_ns();
                for i in 0..task.waiters {
                    drop(tokio::spawn(wait(shared.clone(), i)));
                }
                FromWorker::Spawned {
                    memory,
                    arm_started_ns,
                    spawned_ns: epoch_ns(),
                }
            }
            (ToWorker::Status, Some(shared)) => FromWorker::Status {
                acquired: shared.acquired.load(Ordering::Acquire),
                failed: shared.failed.load(Ordering::Acquire),
            },
            (ToWorker::ReadMemory, Some(shared)) => {
                let stats = shared.client.stats();
                FromWorker::Waiting {
                    memory: process::memory()?,
                    subscribed_channels: stats.subscribed_channels,
                    queued_waiters: stats.queued_waiters,
                }
            }
            (ToWorker::Report, Some(shared)) => FromWorker::Report {
                outcomes: shared
                    .outcomes
                    .iter()
                    .map(|slot| slot.load(Ordering::Acquire))
                    .collect(),
                errors: shared
                    .errors
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
            },
            (message, None) => {
                return Err(format!("a burst holder cannot do {message:?}").into());
            }
        };
        parent.send(&answer).await?;
    }
}

/// Unlocks every guard left of `names` (the last ones: the first were released alone),
/// [`HOLDER_IN_FLIGHT`] at a time, within [`RELEASE_TIMEOUT`].
async fn release(guards: VecDeque<rlock_redisson::LockGuard>, names: usize) -> FromWorker {
    let first = names - guards.len();
    let mut called_ns = vec![0; names];
    let (mut confirmed, mut errors) = (0, 0);
    let started_ns = epoch_ns();
    let deadline = Instant::now() + RELEASE_TIMEOUT;
    let mut unlocks = futures::stream::iter((first..).zip(guards))
        .map(|(i, guard)| async move {
            let called = epoch_ns();
            (i, called, guard.unlock().await.is_ok())
        })
        .buffer_unordered(HOLDER_IN_FLIGHT);
    while let Ok(Some((i, called, unlocked))) =
        tokio::time::timeout_at(deadline, unlocks.next()).await
    {
        called_ns[i] = called;
        confirmed += 1;
        if !unlocked {
            errors += 1;
        }
    }
    FromWorker::Released {
        called_ns,
        started_ns,
        ended_ns: epoch_ns(),
        // Unlocks not confirmed by the deadline count as errors.
        errors: errors + (names - first - confirmed),
    }
}

/// What the waiters of a worker share: their client and the benchmark's per-waiter bookkeeping.
#[derive(Debug)]
struct Waiters {
    client: rlock_redisson::Client,
    prefix: String,
    /// Per waiter: see [`FromWorker::Report`].
    outcomes: Vec<AtomicU64>,
    acquired: AtomicUsize,
    failed: AtomicUsize,
    unlocked: AtomicUsize,
    unlock_errors: AtomicUsize,
    errors: Mutex<BTreeMap<String, usize>>,
    /// Set at the end: the waiters that hold unlock.
    done: watch::Sender<bool>,
    unlock_at_once: bool,
}

impl Waiters {
    async fn connect(task: &WorkerTask) -> Result<Self> {
        Ok(Self {
            client: rlock_redisson::Client::connect(&task.url).await?,
            prefix: task.prefix.clone(),
            // Written here, so its pages are resident before the baseline is read.
            outcomes: (0..task.waiters).map(|_| AtomicU64::new(0)).collect(),
            acquired: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            unlocked: AtomicUsize::new(0),
            unlock_errors: AtomicUsize::new(0),
            errors: Mutex::new(BTreeMap::new()),
            done: watch::Sender::new(false),
            unlock_at_once: task.unlock_at_once,
        })
    }

    /// Lets the holding waiters unlock, and waits (at most [`FINISH_TIMEOUT`]) until they did;
    /// returns the unlocks that succeeded and failed.
    async fn finish(&self) -> (usize, usize) {
        let _ = self.done.send_replace(true);
        let acquired = self.acquired.load(Ordering::Acquire);
        let deadline = Instant::now() + FINISH_TIMEOUT;
        loop {
            let unlocked = self.unlocked.load(Ordering::Acquire);
            let unlock_errors = self.unlock_errors.load(Ordering::Acquire);
            if unlocked + unlock_errors >= acquired || Instant::now() >= deadline {
                return (unlocked, unlock_errors);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Waiter `i`: `lock()` on its name, notes when it acquired (or failed), holds until the end (or
/// unlocks at once, with [`Params::unlock_at_once`]).
async fn wait(shared: Arc<Waiters>, i: usize) {
    let lock = shared.client.lock(format!("{}:{i}", shared.prefix));
    match lock.lock().await {
        Ok(guard) => {
            shared.outcomes[i].store(stamp(), Ordering::Release);
            let _ = shared.acquired.fetch_add(1, Ordering::AcqRel);
            if !shared.unlock_at_once {
                let mut done = shared.done.subscribe();
                let _ = done.wait_for(|done| *done).await;
            }
            let counter = match guard.unlock().await {
                Ok(()) => &shared.unlocked,
                Err(_) => &shared.unlock_errors,
            };
            let _ = counter.fetch_add(1, Ordering::AcqRel);
        }
        Err(e) => {
            shared.outcomes[i].store(stamp() | FAILED, Ordering::Release);
            let text = e.to_string().replace(lock.name(), "…");
            *shared
                .errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(text)
                .or_insert(0) += 1;
            let _ = shared.failed.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Now, for an outcome slot (never 0, never with [`FAILED`] set).
fn stamp() -> u64 {
    u64::try_from(epoch_ns()).map_or(1, |ns| ns.clamp(1, FAILED - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_split_into_acquired_failed_and_stuck() {
        let release = 1_000_000;
        let outcomes = [
            0,                  // stuck
            500_000 | FAILED,   // failed before the release
            1_500_000 | FAILED, // failed after it
            1_200_000,          // acquired, its name released at 1_100_000
            1_400_000,          // acquired, its name never released
            2_000_000,          // acquired last, its name released at 1_000_000
        ];
        let called = [1_000_000, 1_000_000, 1_000_000, 1_100_000, 0, 1_000_000];
        let outcome = Outcome::of(&outcomes, &called, release);
        assert_eq!(outcome.stuck, 1);
        assert_eq!(
            (outcome.failed_before_release, outcome.failed_after_release),
            (1, 1)
        );
        assert_eq!(outcome.acquired, 3);
        assert_eq!(outcome.last_acquired_ns, Some(2_000_000));
        assert_eq!(outcome.wake.count, 2);
        assert!((outcome.wake.max_us - 1_000.0).abs() < 1e-9);
        assert!((outcome.wake.min_us - 100.0).abs() < 1e-9);
    }

    #[test]
    fn lone_releases_have_wakes_of_their_own_left_out_of_the_burst() {
        let outcomes = [
            1_300_000, // released alone at 1_000_000
            1_150_000, // released alone at 1_100_000
            5_000_000, // released in the burst at 4_000_000
        ];
        let lone = [1_000_000, 1_100_000];
        let lone_wake = Outcome::lone_wake(&outcomes, &lone);
        assert_eq!(lone_wake.count, 2);
        assert!((lone_wake.min_us - 50.0).abs() < 1e-9);
        assert!((lone_wake.max_us - 300.0).abs() < 1e-9);
        // The burst's release calls no unlock for the names released alone.
        let burst = Outcome::of(&outcomes, &[0, 0, 4_000_000], 4_000_000);
        assert_eq!((burst.acquired, burst.wake.count), (3, 1));
        assert!((burst.wake.max_us - 1_000.0).abs() < 1e-9);
    }
}
