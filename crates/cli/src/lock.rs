//! `rlock lock`: acquire a lock, hold it, release it, reporting each step.

use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::target::Target;
use crate::{Result, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The lock name.
    #[arg(value_parser = crate::lock_name)]
    name: String,
    /// How long to hold the lock once acquired.
    #[arg(long, value_name = "MS")]
    hold_ms: u64,
    /// A fixed lease, after which Redis drops the lock; without one the watchdog keeps it.
    #[arg(long, value_name = "MS")]
    lease_ms: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Event {
    event: &'static str,
    t: u64,
}

fn event(event: &'static str) -> Result<()> {
    output::emit(&Event {
        event,
        t: output::epoch_ms(),
    })
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let client = target.client().await?;
    let lock = client.lock(args.name);
    let guard = match args.lease_ms {
        None => lock.lock().await?,
        Some(lease) => lock.lock_with_lease(Duration::from_millis(lease)).await?,
    };
    event("acquired")?;

    // Ctrl-C ends the hold early but still releases it, rather than leaving it to expire.
    let finished = tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(args.hold_ms)) => ExitCode::SUCCESS,
        interrupted = tokio::signal::ctrl_c() => {
            interrupted?;
            ExitCode::from(130)
        }
        () = guard.lease_lost() => {
            event("lease_lost")?;
            // The lease may outlive the guard's conservative deadline by a round trip: release
            // whatever is left of it.
            let _ = guard.unlock().await;
            return Ok(ExitCode::FAILURE);
        }
    };
    match guard.unlock().await {
        Ok(()) => {
            event("released")?;
            Ok(finished)
        }
        // Lost between the last renewal check and the unlock (e.g. force-unlocked meanwhile).
        Err(rlock::Error::LeaseLost { .. }) => {
            event("lease_lost")?;
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.into()),
    }
}
