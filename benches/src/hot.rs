//! Worker processes that loop on one hot lock name: the machinery of scenarios 3, 4 and 8.
//! [`back_to_back`] runs the same critical section with no lock at all, scenario 8's ceiling.
//!
//! The runner starts worker processes (this binary's hidden subcommand), each with one client and
//! `tasks` tasks. Once they have all warmed up it lets them go, and each task loops on the one name:
//! acquire, a critical section, release, then an optional think time (a sleep) before wanting the
//! lock again; until a stop time or until it has acquired a given number of times. The critical
//! section is either a busy loop of a few microseconds or a `GET` and `SET` of a counter key
//! (counter + 1) through a plain connection of the worker, so that the final counter checks mutual
//! exclusion.
//!
//! Every acquisition is recorded with timestamps on the shared clock ([`crate::clock`]):
//!
//! - `wait`: from calling acquire to acquire returning (monotonic clock, in the worker).
//! - `acquired`: just after acquire returned; `unlock_called`: just before release is called;
//!   `unlock_returned`: just after release returned.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::Result;
use crate::child::{ChildProcess, Parent};
use crate::clock::epoch_ns;
use crate::contenders::{Contender, ContenderKind, Rlock, Rslock};
use crate::scenarios::WorkerTask as Task;
use crate::stats;

/// One worker process's job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WorkerTask {
    pub(crate) kind: ContenderKind,
    pub(crate) url: String,
    pub(crate) name: String,
    pub(crate) tasks: usize,
    /// rlock only: `Config::local_handoff`. `None` keeps the default configuration.
    pub(crate) local_handoff: Option<bool>,
    pub(crate) section: Section,
    pub(crate) think_us: u64,
}

/// What a task does while it holds the lock.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Section {
    /// Busy for this many microseconds (a sleep would be rounded up to a millisecond).
    Spin { us: u64 },
    /// `GET` the counter at this key and `SET` it to one more, through the worker's own connection.
    Counter { key: String },
}

/// When the tasks stop.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) enum Until {
    /// No acquire starts after this instant on the shared clock.
    Time { stop_at_ns: i64 },
    /// Each task acquires this many times.
    Count { per_task: usize },
}

impl Until {
    /// Whether a task that has acquired `done` times goes on.
    fn goes_on(self, done: usize) -> bool {
        match self {
            Self::Time { stop_at_ns } => epoch_ns() < stop_at_ns,
            Self::Count { per_task } => done < per_task,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
enum FromWorker {
    Ready,
    Done(Vec<Record>),
}

#[derive(Debug, Serialize, Deserialize)]
struct Go {
    until: Until,
}

/// One acquisition, times in ns (see the module docs).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The worker process, by its index in [`Workers::start`]'s order (set by the runner).
    #[serde(default)]
    pub(crate) process: usize,
    pub(crate) task: usize,
    pub(crate) wait_ns: i64,
    pub(crate) acquired_ns: i64,
    pub(crate) unlock_called_ns: i64,
    pub(crate) unlock_returned_ns: i64,
}

impl Record {
    /// Whether this acquisition came before `previous`, the holder before it, even called unlock:
    /// mutual exclusion broken.
    pub(crate) fn overlaps(&self, previous: &Self) -> bool {
        self.acquired_ns < previous.unlock_called_ns
    }
}

/// Worker processes, warmed up and waiting for the go.
#[derive(Debug)]
pub(crate) struct Workers {
    children: Vec<ChildProcess>,
}

impl Workers {
    /// Starts a worker process for each task and waits until they have all warmed up.
    pub(crate) async fn start(tasks: impl IntoIterator<Item = WorkerTask>) -> Result<Self> {
        let mut children = tasks
            .into_iter()
            .map(|task| ChildProcess::spawn(&Task::Hot(task)))
            .collect::<Result<Vec<_>>>()?;
        for child in &mut children {
            match child.receive().await? {
                FromWorker::Ready => {}
                FromWorker::Done(_) => return Err("worker finished before it was started".into()),
            }
        }
        Ok(Self { children })
    }

    /// Lets every worker go and waits until they have all finished and exited; returns all their
    /// acquisitions, each with its process' index.
    pub(crate) async fn run(self, until: Until) -> Result<Vec<Record>> {
        let mut children = self.children;
        for child in &mut children {
            child.send(&Go { until }).await?;
        }
        let mut records = Vec::new();
        for (process, mut child) in children.into_iter().enumerate() {
            let FromWorker::Done(done) = child.receive().await? else {
                return Err("worker sent Ready twice".into());
            };
            records.extend(done.into_iter().map(|r| Record { process, ..r }));
            child.finish().await?;
        }
        Ok(records)
    }
}

/// The worker process: connects, warms up, reports ready, and on `Go` contends until told to stop.
pub(crate) async fn work(task: WorkerTask, mut parent: Parent) -> Result<()> {
    match task.kind {
        ContenderKind::Rlock => {
            let mut config = rlock_redisson::Config::new(task.url.as_str());
            if let Some(on) = task.local_handoff {
                config.local_handoff = on;
            }
            contend(Rlock::with_config(config).await?, &task, &mut parent).await
        }
        ContenderKind::Rslock => contend(Rslock::new(&task.url), &task, &mut parent).await,
        ContenderKind::Raw => Err("the raw scripts cannot wait for a lock".into()),
        ContenderKind::RlockRecorded => Err("only the cycle scenario records metrics".into()),
    }
}

async fn contend<C: Contender>(contender: C, task: &WorkerTask, parent: &mut Parent) -> Result<()> {
    let contender = Arc::new(contender);
    let section = CriticalSection::open(&task.section, &task.url).await?;
    // One cycle per task on a name of its own: connections open, scripts load.
    let warm_ups: Vec<_> = (0..task.tasks)
        .map(|t| {
            let contender = contender.clone();
            let name = format!("{}:warm-up:{}:{t}", task.name, std::process::id());
            tokio::spawn(async move {
                let held = contender.acquire(&name).await?;
                contender.release(held).await
            })
        })
        .collect();
    for warm_up in warm_ups {
        warm_up.await??;
    }
    parent.send(&FromWorker::Ready).await?;
    let Go { until } = parent.receive().await?;

    let think = Duration::from_micros(task.think_us);
    let loops: Vec<_> = (0..task.tasks)
        .map(|t| {
            let contender = contender.clone();
            let name = task.name.clone();
            let mut section = section.clone();
            tokio::spawn(async move {
                let mut records = Vec::new();
                while until.goes_on(records.len()) {
                    let start = Instant::now();
                    let held = contender.acquire(&name).await?;
                    let acquired_ns = epoch_ns();
                    let wait_ns = stats::ns(start.elapsed());
                    section.run().await?;
                    let unlock_called_ns = epoch_ns();
                    contender.release(held).await?;
                    records.push(Record {
                        process: 0,
                        task: t,
                        wait_ns,
                        acquired_ns,
                        unlock_called_ns,
                        unlock_returned_ns: epoch_ns(),
                    });
                    if !think.is_zero() {
                        tokio::time::sleep(think).await;
                    }
                }
                Ok::<_, crate::Error>(records)
            })
        })
        .collect();
    let mut records = Vec::new();
    for task in loops {
        records.extend(task.await??);
    }
    parent.send(&FromWorker::Done(records)).await
}

/// Runs `section` `count` times back to back in the calling task, with no lock: what a hot lock around
/// it can reach at best. Returns how long the sections took (opening the connection not included).
pub(crate) async fn back_to_back(url: &str, section: &Section, count: usize) -> Result<Duration> {
    let mut section = CriticalSection::open(section, url).await?;
    let start = Instant::now();
    for _ in 0..count {
        section.run().await?;
    }
    Ok(start.elapsed())
}

/// A [`Section`], ready to run in a worker (or alone: [`back_to_back`]).
#[derive(Clone, Debug)]
enum CriticalSection {
    Spin(Duration),
    Counter {
        conn: MultiplexedConnection,
        key: String,
    },
}

impl CriticalSection {
    async fn open(section: &Section, url: &str) -> Result<Self> {
        Ok(match section {
            Section::Spin { us } => Self::Spin(Duration::from_micros(*us)),
            Section::Counter { key } => Self::Counter {
                conn: redis::Client::open(url)?
                    .get_multiplexed_async_connection()
                    .await?,
                key: key.clone(),
            },
        })
    }

    async fn run(&mut self) -> Result<()> {
        match self {
            Self::Spin(hold) => {
                let until = std::time::Instant::now() + *hold;
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            Self::Counter { conn, key } => {
                let counter: Option<u64> = redis::cmd("GET").arg(&*key).query_async(conn).await?;
                let () = redis::cmd("SET")
                    .arg(&*key)
                    .arg(counter.unwrap_or(0) + 1)
                    .query_async(conn)
                    .await?;
            }
        }
        Ok(())
    }
}
