//! `rlock check`: tasks of this process take turns on one lock and increment a counter under it.
//!
//! The increment is a separate GET and SET, so any two overlapping critical sections lose an
//! increment: however many processes run the check at once, the counter ends equal to the total
//! number of acquisitions if and only if the lock excluded them all.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use rlock_redisson::kind::LockKind;
use rlock_redisson::{Client, Lock};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::entry::Named;
use crate::kinds::{LockKindArg, OnLock, Token};
use crate::target::Target;
use crate::{Result, critical, output, stats};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    named: Named,
    /// Concurrent tasks, each a separate lock owner.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    tasks: u32,
    /// Acquisitions per task.
    #[arg(long)]
    iterations: u32,
    /// How long each critical section sleeps between its read and its write.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    hold_ms: u64,
    /// Which Redisson lock object; an exclusive kind (read locks are shared by design).
    #[arg(long, value_enum, default_value_t)]
    kind: LockKindArg,
}

#[derive(Debug, Serialize)]
struct Report {
    acquisitions: usize,
    counter: u64,
    elapsed_ms: u64,
    per_s: f64,
    wait_p50_ms: f64,
    wait_p99_ms: f64,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    if args.kind == LockKindArg::Read {
        return Err(
            "read locks are shared: check an exclusive kind (lock, fair, spin, fenced, write)"
                .into(),
        );
    }
    let name = args.named.resolve_lock(&target.config()?, args.kind)?;
    let client = target.client().await?;
    args.kind
        .with(
            &client,
            &name,
            Check {
                client: &client,
                args: &args,
            },
        )
        .await
}

/// The check on one lock of any exclusive kind.
struct Check<'a> {
    client: &'a Client,
    args: &'a Args,
}

impl OnLock for Check<'_> {
    type Output = Result<ExitCode>;

    async fn on<K: LockKind>(self, lock: Lock<K>) -> Result<ExitCode>
    where
        K::Token: Token,
    {
        check(self.client, lock, self.args).await
    }
}

async fn check<K: LockKind>(client: &Client, lock: Lock<K>, args: &Args) -> Result<ExitCode> {
    let counter = critical::counter_key(lock.name());
    let hold = Duration::from_millis(args.hold_ms);
    let iterations = args.iterations;

    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..args.tasks {
        let lock = lock.clone();
        let (client, counter) = (client.clone(), counter.clone());
        let _ = tasks.spawn(async move {
            let mut waits = Vec::new();
            for _ in 0..iterations {
                let asked = Instant::now();
                let guard = lock.lock().await?;
                waits.push(asked.elapsed());
                critical::increment(&client, &counter, hold).await?;
                guard.unlock().await?;
            }
            Ok::<_, crate::Error>(waits)
        });
    }
    let mut waits = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        waits.extend(joined??);
    }
    let elapsed = started.elapsed();

    output::emit(&Report {
        acquisitions: waits.len(),
        counter: critical::read(client, &counter).await?,
        elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        per_s: stats::rate(waits.len(), elapsed),
        wait_p50_ms: stats::percentile_ms(&mut waits, 50.0),
        wait_p99_ms: stats::percentile_ms(&mut waits, 99.0),
    })?;
    Ok(ExitCode::SUCCESS)
}
