//! The scenarios of issues 5, 13 and 38, one module each, and the plan that sizes them.

pub(crate) mod burst;
pub(crate) mod contended;
pub(crate) mod cycle;
pub(crate) mod handoff;
pub(crate) mod throughput;
pub(crate) mod waiters;
pub(crate) mod watchdog;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::child::Parent;
use crate::hot;

/// The scenarios a run can be limited to (`--only`), by the numbers of benches/README.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scenario {
    /// 1 (and 7): the uncontended lock+unlock cycle against the raw floor and rslock.
    Cycle,
    /// 2: uncontended throughput against the raw floor.
    Throughput,
    /// 3, 4 (and 7): contended hand-off and commands per acquisition, against rslock.
    Contended,
    /// 5: the watchdog's cost.
    Watchdog,
    /// 6: many waiters in one process.
    Waiters,
    /// 8: local hand-off (lock cohorting) on against off, against no lock and against rslock.
    Handoff,
    /// 9: a burst of N waiters on N names, N = 1,000, 10,000 and 100,000 (issue 38).
    Burst,
}

/// How big each scenario is.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Plan {
    pub(crate) quick: bool,
    /// `PING`s that measure the idle single-command round trip.
    pub(crate) round_trip_samples: usize,
    pub(crate) cycle: cycle::Params,
    pub(crate) throughput: throughput::Params,
    pub(crate) contended: contended::Params,
    pub(crate) watchdog: watchdog::Params,
    pub(crate) waiters: waiters::Params,
    pub(crate) handoff: handoff::Params,
    pub(crate) burst: burst::Params,
}

impl Plan {
    /// The sizes the goals are judged on.
    pub(crate) fn full() -> Self {
        Self {
            quick: false,
            round_trip_samples: 5_000,
            cycle: cycle::Params {
                rounds: 20,
                cycles_per_round: 250,
            },
            throughput: throughput::Params {
                concurrency: 64,
                segments: 3,
                segment_ms: 1_000,
            },
            contended: contended::Params {
                processes: 4,
                tasks_per_process: 8,
                duration_ms: 5_000,
                hold_us: 50,
                think_us: 1_000,
            },
            watchdog: watchdog::Params {
                locks: 10_000,
                watchdog_timeout_ms: 3_000,
            },
            waiters: waiters::Params {
                waiters: 10_000,
                names: 100,
            },
            handoff: handoff::Params {
                processes: 2,
                tasks_per_process: 4,
                acquisitions_per_task: 300,
                scaling: &[1, 2, 4, 8],
                rounds: 3,
            },
            burst: burst::Params {
                sizes: vec![1_000, 10_000, 100_000],
                unlock_at_once: false,
            },
        }
    }

    /// A smoke run of every scenario that finishes in well under 30 s.
    pub(crate) fn quick() -> Self {
        let full = Self::full();
        Self {
            quick: true,
            round_trip_samples: 500,
            cycle: cycle::Params {
                rounds: 3,
                cycles_per_round: 100,
            },
            throughput: throughput::Params {
                concurrency: 16,
                segments: 1,
                segment_ms: 300,
            },
            contended: contended::Params {
                processes: 2,
                tasks_per_process: 4,
                duration_ms: 1_000,
                ..full.contended
            },
            watchdog: watchdog::Params {
                watchdog_timeout_ms: 900,
                ..full.watchdog
            },
            waiters: full.waiters,
            handoff: handoff::Params {
                acquisitions_per_task: 50,
                rounds: 1,
                ..full.handoff
            },
            burst: burst::Params {
                sizes: vec![1_000],
                ..full.burst
            },
        }
    }
}

/// What a benchmark child process runs (see [`crate::child`]).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WorkerTask {
    Hot(hot::WorkerTask),
    Watchdog(watchdog::WorkerTask),
    Waiters(waiters::WorkerTask),
    Burst(burst::WorkerTask),
}

/// The body of a child process: runs `task`, talking to the runner on stdin and stdout.
pub(crate) async fn serve(task: &str) -> Result<()> {
    let task: WorkerTask = serde_json::from_str(task)?;
    let parent = Parent::connect();
    match task {
        WorkerTask::Hot(task) => hot::work(task, parent).await,
        WorkerTask::Watchdog(task) => watchdog::work(task, parent).await,
        WorkerTask::Waiters(task) => waiters::work(task, parent).await,
        WorkerTask::Burst(task) => burst::work(task, parent).await,
    }
}
