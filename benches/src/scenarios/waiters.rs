//! Scenario 6: many waiters in one process.
//!
//! The runner holds `names` locks with a client of its own. A fresh worker process (so that its
//! memory is the waiters' alone) starts `waiters` tasks, task `i` waiting on name `i % names`. Once
//! they all wait (the `EVALSHA` count has stopped moving and the worker's subscriptions cover every
//! name), the runner counts the connections subscribed to anything (`CLIENT LIST TYPE pubsub`; the
//! runner's own client never waits, so they are all the worker's) and the worker reads its resident
//! memory (`VmRSS`, `/proc/self/status`). Then the runner releases every name and each waiter
//! acquires once and unlocks at once; the time until all have acquired is measured from the first
//! release to the last acquisition, on the shared clock. The memory goal is judged on the worker's
//! peak resident size (`VmHWM`) at the end, which covers the waiting and the hand-offs.

use std::time::Duration;

use futures::future::try_join_all;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::Result;
use crate::child::{ChildProcess, Parent};
use crate::clock::epoch_ns;
use crate::probe::Probe;
use crate::process::{self, Memory};
use crate::scenarios::WorkerTask as Task;

/// The waiters count as settled once no acquire attempt was made for this long.
const SETTLED_AFTER: Duration = Duration::from_millis(300);
/// How long the waiters may take to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Params {
    pub(crate) waiters: usize,
    pub(crate) names: usize,
}

#[derive(Debug, Serialize)]
pub(crate) struct Measured {
    pub(crate) waiters: usize,
    pub(crate) names: usize,
    /// Connections subscribed to at least one channel while everyone waited.
    pub(crate) subscriber_connections: usize,
    /// Channels those connections were subscribed to.
    pub(crate) subscribed_channels: u64,
    /// From starting the tasks until they all waited.
    pub(crate) settle_seconds: f64,
    /// Acquire attempts (`EVALSHA`) per waiter until then.
    pub(crate) attempts_per_waiter: f64,
    /// The worker's memory while everyone waited.
    pub(crate) waiting: Memory,
    /// The worker's memory after every waiter had acquired once (its peak covers the whole run).
    pub(crate) after: Memory,
    /// From the first release to the last waiter's acquisition.
    pub(crate) all_acquired_ms: f64,
    pub(crate) acquired: usize,
    /// Bytes of one `Lock::lock()` future, and of a whole waiter task's future (the lock future, the
    /// unlock future and the task's own state): what each waiting task keeps allocated.
    pub(crate) lock_future_bytes: usize,
    pub(crate) task_future_bytes: usize,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WorkerTask {
    url: String,
    prefix: String,
    waiters: usize,
    names: usize,
}

#[derive(Debug, Serialize, Deserialize)]
enum FromWorker {
    Started {
        lock_future_bytes: usize,
        task_future_bytes: usize,
    },
    Waiting(Memory),
    Done {
        acquired: usize,
        last_acquired_ns: i64,
        memory: Memory,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct ReadMemory;

pub(crate) async fn run(url: &str, probe: &mut Probe, params: Params) -> Result<Measured> {
    let prefix = format!("bench:waiters:{}", uuid::Uuid::new_v4().simple());
    let holder = rlock_redisson::Client::connect(url).await?;
    let mut holds = Vec::with_capacity(params.names);
    for name in 0..params.names {
        holds.push(holder.lock(format!("{prefix}:{name}")).lock().await?);
    }

    let before = probe.command_stats().await?;
    let started = Instant::now();
    let mut worker = ChildProcess::spawn(&Task::Waiters(WorkerTask {
        url: url.to_owned(),
        prefix,
        waiters: params.waiters,
        names: params.names,
    }))?;
    let FromWorker::Started {
        lock_future_bytes,
        task_future_bytes,
    } = worker.receive().await?
    else {
        return Err("waiters worker: expected Started".into());
    };
    let attempts = settle(probe, params, &before).await?;
    let settle_seconds = started.elapsed().as_secs_f64();
    let subscribed = probe.subscribed_connections().await?;
    worker.send(&ReadMemory).await?;
    let FromWorker::Waiting(waiting) = worker.receive().await? else {
        return Err("waiters worker: expected Waiting".into());
    };

    let released_ns = epoch_ns();
    try_join_all(holds.into_iter().map(rlock_redisson::LockGuard::unlock)).await?;
    let FromWorker::Done {
        acquired,
        last_acquired_ns,
        memory: after,
    } = worker.receive().await?
    else {
        return Err("waiters worker: expected Done".into());
    };
    worker.finish().await?;

    Ok(Measured {
        waiters: params.waiters,
        names: params.names,
        subscriber_connections: subscribed.len(),
        subscribed_channels: subscribed.iter().sum(),
        settle_seconds,
        attempts_per_waiter: attempts as f64 / params.waiters as f64,
        waiting,
        after,
        all_acquired_ms: (last_acquired_ns - released_ns) as f64 / 1e6,
        acquired,
        lock_future_bytes,
        task_future_bytes,
    })
}

/// Waits until the waiters have made their attempts and subscribed to every name; returns the
/// acquire attempts made.
async fn settle(
    probe: &mut Probe,
    params: Params,
    before: &crate::probe::CommandStats,
) -> Result<u64> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let mut last = (0, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let attempts = probe.command_stats().await?.since(before).calls("evalsha");
        if attempts != last.0 {
            last = (attempts, Instant::now());
        }
        let channels: u64 = probe.subscribed_connections().await?.iter().sum();
        // Every name's first waiter tries at least once (with the local queue, the others of a name
        // queue behind it without a try of their own).
        if attempts >= params.names as u64
            && channels >= params.names as u64
            && last.1.elapsed() >= SETTLED_AFTER
        {
            return Ok(attempts);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "waiters did not settle within {SETTLE_TIMEOUT:?}: {attempts} attempts, {channels} channels"
            )
            .into());
        }
    }
}

/// The worker process: `waiters` tasks, each acquiring its name once and unlocking at once.
pub(crate) async fn work(task: WorkerTask, mut parent: Parent) -> Result<()> {
    let client = rlock_redisson::Client::connect(&task.url).await?;
    let lock_future_bytes = std::mem::size_of_val(&client.lock("unused").lock());
    let mut task_future_bytes = 0;
    let waiters: Vec<_> = (0..task.waiters)
        .map(|i| {
            let waiter = waiter(client.lock(format!("{}:{}", task.prefix, i % task.names)));
            task_future_bytes = std::mem::size_of_val(&waiter);
            tokio::spawn(waiter)
        })
        .collect();
    parent
        .send(&FromWorker::Started {
            lock_future_bytes,
            task_future_bytes,
        })
        .await?;
    let ReadMemory = parent.receive().await?;
    parent
        .send(&FromWorker::Waiting(process::memory()?))
        .await?;
    let mut last_acquired_ns = i64::MIN;
    let mut acquired = 0;
    for waiter in waiters {
        last_acquired_ns = last_acquired_ns.max(waiter.await??);
        acquired += 1;
    }
    parent
        .send(&FromWorker::Done {
            acquired,
            last_acquired_ns,
            memory: process::memory()?,
        })
        .await
}

/// One waiter: acquires once, notes when, unlocks at once.
async fn waiter(lock: rlock_redisson::Lock) -> Result<i64> {
    let guard = lock.lock().await?;
    let acquired_ns = epoch_ns();
    guard.unlock().await?;
    Ok(acquired_ns)
}
