//! Scenarios 3 and 4 (and rslock's part of scenario 7): contended hand-off on one hot name.
//!
//! `processes` worker processes ([`crate::hot`]), each with one client and `tasks_per_process`
//! tasks, loop on one lock name: acquire, a critical section that spins for `hold_us`, release, then
//! `think_us` of work outside the lock (a sleep) before wanting the lock again. The think time keeps
//! a releasing task from immediately taking the lock back ("barging"), which would measure how often
//! one task re-acquires its own lock instead of how the lock passes between tasks; it is far shorter
//! than the queue ahead of a task, so the lock stays saturated. The runner also runs each
//! implementation without think time, to show barging and its unfairness (acquisitions per task,
//! least and most).
//!
//! Every acquisition is recorded with timestamps on the shared clock (see [`crate::hot`]).
//!
//! The runner merges the records of all processes and orders them by `acquired`. For each pair of
//! consecutive holders A then B it computes the **hand-off** `B.acquired − A.unlock_returned`, the
//! issue's definition. It can be negative, and that is not a clock error: the unlock script publishes
//! the wake-up message from inside Redis, so B's acquire can return before A's unlock reply has even
//! been read by A. Negative values are kept as they are (the table shows how many). The hand-off from
//! `A.unlock_called` is also reported; it includes A's unlock round trip and can never be negative
//! unless mutual exclusion is broken, which the runner counts as an overlap (expected: 0).
//!
//! Scenario 4: `INFO commandstats` is read before the workers start and after they all exit; the
//! difference, divided by all acquisitions, is the command cost per acquisition, split into what
//! clients sent and what scripts called inside Redis (see [`ContenderKind::script_calls`]).
//!
//! While the workers run, the runner also times `PING`s every millisecond: the round trip under the
//! same load, for context (those `PING`s are subtracted from the command counts).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::Result;
use crate::clock::epoch_ns;
use crate::contenders::ContenderKind;
use crate::hot::{Record, Section, Until, WorkerTask, Workers};
use crate::probe::{CommandStats, Probe, Sampler};
use crate::stats::{self, Summary};

/// Pause between two round-trip probes while the workers run.
const LOADED_PING_INTERVAL: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Params {
    pub(crate) processes: usize,
    pub(crate) tasks_per_process: usize,
    pub(crate) duration_ms: u64,
    pub(crate) hold_us: u64,
    pub(crate) think_us: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct Measured {
    pub(crate) kind: ContenderKind,
    pub(crate) processes: usize,
    pub(crate) tasks_per_process: usize,
    pub(crate) hold_us: u64,
    pub(crate) think_us: u64,
    pub(crate) seconds: f64,
    /// Acquisitions that returned inside the measured window.
    pub(crate) acquisitions: usize,
    pub(crate) acquisitions_per_sec: f64,
    /// Acquisitions per process inside the window.
    pub(crate) per_process: Vec<usize>,
    /// The fewest and the most acquisitions a single task made inside the window (fairness).
    pub(crate) per_task_min: usize,
    pub(crate) per_task_max: usize,
    pub(crate) wait: Summary,
    /// `B.acquired − A.unlock_returned` (may be negative, see the module docs).
    pub(crate) handoff: Summary,
    /// `B.acquired − A.unlock_called`.
    pub(crate) handoff_from_unlock_call: Summary,
    /// Pairs where B acquired before A even called unlock: mutual exclusion broken.
    pub(crate) overlaps: usize,
    /// `PING` round trip while the workers ran.
    pub(crate) loaded_round_trip: Summary,
    /// All acquisitions, the drain after the window included: the divisor of the command counts.
    pub(crate) counted_acquisitions: u64,
    pub(crate) all_commands_per_acquisition: f64,
    pub(crate) client_commands_per_acquisition: f64,
    pub(crate) commands_per_acquisition: BTreeMap<String, f64>,
}

/// Runs the scenario for `kind` and measures it.
pub(crate) async fn run(
    url: &str,
    probe: &mut Probe,
    params: Params,
    kind: ContenderKind,
) -> Result<Measured> {
    let name = format!("bench:hot:{}", uuid::Uuid::new_v4().simple());
    let task = WorkerTask {
        kind,
        url: url.to_owned(),
        name,
        tasks: params.tasks_per_process,
        local_handoff: None,
        section: Section::Spin { us: params.hold_us },
        think_us: params.think_us,
    };
    let workers = Workers::start(vec![task; params.processes]).await?;

    let before = probe.command_stats().await?;
    let pinger = probe.clone();
    let pings = Sampler::start(LOADED_PING_INTERVAL, move || {
        let mut pinger = pinger.clone();
        async move { Ok(stats::ns(pinger.ping().await?)) }
    });
    let go_ns = epoch_ns();
    let stop_at_ns = go_ns + stats::ns(Duration::from_millis(params.duration_ms));
    let records = workers.run(Until::Time { stop_at_ns }).await?;
    let mut ping_times = pings.stop().await?;
    let mut calls = probe.command_stats().await?.since(&before);
    calls.subtract("ping", ping_times.len() as u64);

    Ok(analyse(
        kind,
        params,
        (go_ns, stop_at_ns),
        records,
        &calls,
        Summary::of_ns(&mut ping_times),
    ))
}

fn analyse(
    kind: ContenderKind,
    params: Params,
    (go_ns, stop_at_ns): (i64, i64),
    mut records: Vec<Record>,
    calls: &CommandStats,
    loaded_round_trip: Summary,
) -> Measured {
    records.sort_by_key(|r| r.acquired_ns);
    let counted_acquisitions = records.len() as u64;
    let in_window = |r: &Record| (go_ns..=stop_at_ns).contains(&r.acquired_ns);
    let mut per_process = vec![0; params.processes];
    let mut per_task = vec![0; params.processes * params.tasks_per_process];
    let mut waits = Vec::new();
    let mut handoffs = Vec::new();
    let mut from_call = Vec::new();
    let mut overlaps = 0;
    for (i, record) in records.iter().enumerate() {
        if !in_window(record) {
            continue;
        }
        per_process[record.process] += 1;
        per_task[record.process * params.tasks_per_process + record.task] += 1;
        waits.push(record.wait_ns);
        if let Some(previous) = i.checked_sub(1).map(|p| &records[p]) {
            handoffs.push(record.acquired_ns - previous.unlock_returned_ns);
            from_call.push(record.acquired_ns - previous.unlock_called_ns);
            if record.overlaps(previous) {
                overlaps += 1;
            }
        }
    }
    let seconds =
        Duration::from_nanos(u64::try_from(stop_at_ns - go_ns).unwrap_or(0)).as_secs_f64();
    let acquisitions = waits.len();
    let total = calls.total();
    Measured {
        kind,
        processes: params.processes,
        tasks_per_process: params.tasks_per_process,
        hold_us: params.hold_us,
        think_us: params.think_us,
        seconds,
        acquisitions,
        acquisitions_per_sec: acquisitions as f64 / seconds,
        per_process,
        per_task_min: per_task.iter().copied().min().unwrap_or(0),
        per_task_max: per_task.iter().copied().max().unwrap_or(0),
        wait: Summary::of_ns(&mut waits),
        handoff: Summary::of_ns(&mut handoffs),
        handoff_from_unlock_call: Summary::of_ns(&mut from_call),
        overlaps,
        loaded_round_trip,
        counted_acquisitions,
        all_commands_per_acquisition: stats::ratio(total as f64, counted_acquisitions as f64),
        client_commands_per_acquisition: stats::ratio(
            (total - kind.script_calls(calls)) as f64,
            counted_acquisitions as f64,
        ),
        commands_per_acquisition: calls.per(counted_acquisitions),
    }
}
