//! `rlock expirable-semaphore`: Redisson's `RPermitExpirableSemaphore`, whose permits have ids and
//! may expire, so that a holder that dies cannot leak one.

use std::process::ExitCode;
use std::time::Duration;

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
    /// Take a permit (waiting until one is available), hold it, give it back by its id, printing
    /// `acquired` and `released` events with the id.
    ///
    /// `released` says `"expired":true` when the permit was no longer held by then: its lease ran
    /// out (or someone else released it, or deleted the semaphore). The command still exits 0.
    Acquire {
        /// The permit's lease, after which it comes back by itself; without one it never expires.
        #[arg(long, value_name = "MS")]
        lease_ms: Option<u64>,
        /// How long to hold it once taken.
        #[arg(long, value_name = "MS")]
        hold_ms: u64,
    },
}

/// What the `acquired` event adds: the permit's id.
#[derive(Debug, Serialize)]
struct Held<'a> {
    permit: &'a str,
}

/// What the `released` event adds: the permit's id, and whether it was gone already.
#[derive(Debug, Serialize)]
struct Released<'a> {
    permit: &'a str,
    expired: bool,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let name = args
        .named
        .resolve(&target.config()?, EntryObject::PermitExpirableSemaphore)?;
    let client = target.client().await?;
    let semaphore = client.permit_expirable_semaphore(name);
    match args.action {
        Action::SetPermits { permits } => {
            output::outcome(semaphore.try_set_permits(permits).await?)?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Acquire { lease_ms, hold_ms } => {
            let id = match lease_ms {
                None => semaphore.acquire().await?,
                Some(lease) => {
                    let lease = Duration::from_millis(lease);
                    semaphore.acquire_with_lease(lease).await?
                }
            };
            let permit = id.to_string();
            let release = async || {
                let released = semaphore.try_release(id).await?;
                let permit = permit.as_str();
                Ok(Released {
                    permit,
                    expired: !released,
                })
            };
            hold::hold_then_release(Held { permit: &permit }, hold_ms, release).await
        }
    }
}
