//! `rlock semaphore`: Redisson's `RSemaphore`, a number of permits shared by every process.

use std::process::ExitCode;

use serde::Serialize;

use rlock_redisson::EntryObject;

use crate::entry::Named;
use crate::target::Target;
use crate::{Result, hold, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    named: Named,
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Set the number of permits unless the semaphore has some already: prints {"ok":true} if it
    /// did, {"ok":false} if not.
    SetPermits { permits: u32 },
    /// Take permits (waiting until they are available), hold them, give them back, printing
    /// `acquired` and `released` events.
    Acquire {
        /// How many permits to take.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        permits: u32,
        /// How long to hold them once taken.
        #[arg(long, value_name = "MS")]
        hold_ms: u64,
    },
    /// Give permits back, whoever took them (creating the semaphore if needed): prints {"ok":true}.
    Release {
        /// How many permits to give back.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        permits: u32,
    },
    /// Print the permits available now: {"permits":N} (0 for a semaphore that is not set up).
    Available,
}

/// What the `acquired` and `released` events add: how many permits.
#[derive(Debug, Serialize)]
struct Held {
    permits: u32,
}

/// The reply of `available`.
#[derive(Debug, Serialize)]
struct Available {
    permits: i64,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let name = args
        .named
        .resolve(&target.config()?, EntryObject::Semaphore)?;
    let client = target.client().await?;
    let semaphore = client.semaphore(name);
    match args.action {
        Action::SetPermits { permits } => {
            output::outcome(semaphore.try_set_permits(permits).await?)?
        }
        Action::Acquire { permits, hold_ms } => {
            let taken = semaphore.acquire(permits).await?;
            let held = Held { permits };
            let release = async || {
                taken.release().await?;
                Ok(&held)
            };
            return hold::hold_then_release(&held, hold_ms, release).await;
        }
        Action::Release { permits } => {
            semaphore.release(permits).await?;
            output::outcome(true)?;
        }
        Action::Available => {
            let permits = semaphore.available_permits().await?;
            output::emit(&Available { permits })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
