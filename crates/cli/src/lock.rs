//! `rlock lock`: acquire a lock, hold it, release it, reporting each step.

use std::process::ExitCode;
use std::time::Duration;

use rlock_redisson::Lock;
use rlock_redisson::kind::LockKind;
use serde::Serialize;

use crate::entry::Named;
use crate::kinds::{LockKindArg, OnLock, Token};
use crate::target::Target;
use crate::{Result, hold, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    named: Named,
    /// How long to hold the lock once acquired.
    #[arg(long, value_name = "MS")]
    hold_ms: u64,
    /// A fixed lease, after which Redis drops the lock; without one the watchdog keeps it.
    #[arg(long, value_name = "MS")]
    lease_ms: Option<u64>,
    /// Which Redisson lock object.
    #[arg(long, value_enum, default_value_t)]
    kind: LockKindArg,
}

/// What an `acquired` event adds: a fenced lock's token.
#[derive(Debug, Serialize)]
struct Fencing {
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let name = args.named.resolve_lock(&target.config()?, args.kind)?;
    let client = target.client().await?;
    args.kind.with(&client, &name, Hold(&args)).await
}

/// Acquires, holds and releases one lock of any kind.
struct Hold<'a>(&'a Args);

impl OnLock for Hold<'_> {
    type Output = Result<ExitCode>;

    async fn on<K: LockKind>(self, lock: Lock<K>) -> Result<ExitCode>
    where
        K::Token: Token,
    {
        let args = self.0;
        let guard = match args.lease_ms {
            None => lock.lock().await?,
            Some(lease) => lock.lock_with_lease(Duration::from_millis(lease)).await?,
        };
        let token = guard.token().fencing();
        output::event("acquired", Fencing { token })?;
        hold_lock(guard, args.hold_ms).await
    }
}

/// Holds `guard` for `hold_ms`, then releases it, reporting how it ended.
async fn hold_lock<T: std::fmt::Debug + Send + 'static>(
    guard: rlock_redisson::Guard<T>,
    hold_ms: u64,
) -> Result<ExitCode> {
    // Ctrl-C ends the hold early but still releases it, rather than leaving it to expire.
    let finished = tokio::select! {
        finished = hold::wait(hold_ms) => finished?,
        () = guard.lease_lost() => {
            output::event("lease_lost", ())?;
            // The lease may outlive the guard's conservative deadline by a round trip: release
            // whatever is left of it.
            let _ = guard.unlock().await;
            return Ok(ExitCode::FAILURE);
        }
    };
    let ended = output::epoch_ms();
    match guard.unlock().await {
        Ok(()) => {
            output::event_at("released", ended, ())?;
            Ok(finished)
        }
        // Lost between the last renewal check and the unlock (e.g. force-unlocked meanwhile).
        Err(rlock_redisson::Error::LeaseLost { .. }) => {
            output::event("lease_lost", ())?;
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.into()),
    }
}
