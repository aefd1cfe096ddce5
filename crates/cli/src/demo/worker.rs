//! `rlock demo-worker`: one process of the demo. Its tasks take the demo's locks in rotation and
//! report each critical section as a JSON line on stdout.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{Acquisition, Plan, lock_name};
use crate::target::Target;
use crate::{Result, critical, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// This worker's number, for the reports.
    #[arg(long)]
    process: u32,
    #[command(flatten)]
    plan: Plan,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let Args { process, plan } = args;
    let client = target.client().await?;
    let locks: Vec<_> = (0..plan.locks)
        .map(|lock| client.lock(lock_name(lock)))
        .collect();
    let hold = Duration::from_millis(plan.hold_ms);

    let (reports, mut received) = mpsc::unbounded_channel();
    let mut tasks = JoinSet::new();
    for task in 0..plan.tasks {
        let (client, locks, reports) = (client.clone(), locks.clone(), reports.clone());
        let _ = tasks.spawn(async move {
            for iteration in 0..plan.iterations {
                let lock = plan.lock_for(process, task, iteration);
                let handle = &locks[lock as usize];
                let asked = Instant::now();
                let guard = handle.lock().await?;
                let wait = asked.elapsed();
                let acquired_at_us = output::epoch_us();
                critical::increment(&client, &critical::counter_key(handle.name()), hold).await?;
                let released_at_us = output::epoch_us();
                guard.unlock().await?;
                let _ = reports.send(Acquisition {
                    process,
                    task,
                    lock,
                    wait_us: u64::try_from(wait.as_micros()).unwrap_or(u64::MAX),
                    acquired_at_us,
                    released_at_us,
                });
            }
            Ok::<_, crate::Error>(())
        });
    }
    drop(reports);
    // Reports stream out while the tasks run, so the parent can show progress.
    while let Some(acquisition) = received.recv().await {
        output::emit(&acquisition)?;
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok(ExitCode::SUCCESS)
}
