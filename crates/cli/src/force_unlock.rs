//! `rlock force-unlock`: delete a lock whoever holds it.

use std::process::ExitCode;

use rlock_redisson::Lock;
use rlock_redisson::kind::LockKind;
use serde::Serialize;

use crate::entry::Named;
use crate::kinds::{LockKindArg, OnLock, Token};
use crate::target::Target;
use crate::{Result, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    named: Named,
    /// Which Redisson lock object (a read or write lock is deleted only while held in that mode).
    #[arg(long, value_enum, default_value_t)]
    kind: LockKindArg,
}

#[derive(Debug, Serialize)]
struct Report {
    released: bool,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let name = args.named.resolve_lock(&target.config()?, args.kind)?;
    let client = target.client().await?;
    // The library publishes the unlock message too, so waiters (Redisson's included) wake at once.
    let released = args.kind.with(&client, &name, ForceUnlock).await?;
    output::emit(&Report { released })?;
    Ok(ExitCode::SUCCESS)
}

struct ForceUnlock;

impl OnLock for ForceUnlock {
    type Output = rlock_redisson::Result<bool>;

    async fn on<K: LockKind>(self, lock: Lock<K>) -> rlock_redisson::Result<bool>
    where
        K::Token: Token,
    {
        lock.force_unlock().await
    }
}
