//! `rlock inspect`: a lock's holders, or a synchronizer's state, as stored in Redis.
//!
//! A lock's report is [`lock_state`](crate::lock_state)'s, for every lock kind.
//!
//! Every report starts with the name as given; with `--name-prefix`, the state read is that of the
//! mapped name, which the report adds as `key`.
//!
//! A synchronizer's report is its key's existence and TTL plus its state: a semaphore's available
//! permits; a permit-expirable semaphore's available and acquired permits, and each taken permit's
//! expiry; a latch's count. The reads are separate (the state may change between them), and those of
//! a permit-expirable semaphore count its expired permits back in first, as any of its calls does.

use std::process::ExitCode;

use rlock_redisson::Client;
use serde::Serialize;

use crate::entry::Named;
use crate::kinds::Object;
use crate::lock_state::{self, Key};
use crate::target::Target;
use crate::{Result, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    named: Named,
    /// What the name is: any lock kind gets the lock report (the default), the other kinds theirs.
    #[arg(long, value_enum, default_value_t)]
    kind: Object,
}

/// A report: the key, then what the kind adds.
#[derive(Debug, Serialize)]
struct Report<D> {
    #[serde(flatten)]
    key: Key,
    #[serde(flatten)]
    details: D,
}

/// What a semaphore's report adds.
#[derive(Debug, Serialize)]
struct SemaphoreState {
    available: i64,
}

/// What a permit-expirable semaphore's report adds.
#[derive(Debug, Serialize)]
struct ExpirableSemaphoreState {
    available: i64,
    acquired: u64,
    /// The taken permits, soonest to expire first.
    permits: Vec<Permit>,
}

/// One taken permit of a permit-expirable semaphore.
#[derive(Debug, Serialize)]
struct Permit {
    /// The permit's id, 32 hex characters.
    permit: String,
    /// When it expires (epoch ms); `None` for a permit that never does.
    expiry_ms: Option<u64>,
}

/// What a count-down latch's report adds.
#[derive(Debug, Serialize)]
struct LatchState {
    /// 0 once the latch is open.
    count: u64,
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let name = args.named.resolve_object(&target.config()?, args.kind)?;
    let client = target.client().await?;
    match args.kind {
        Object::Lock(_) => inspect_lock(&client, name).await?,
        Object::Semaphore => {
            let semaphore = client.semaphore(name.as_str());
            let key = Key::read(&client, name, semaphore.name()).await?;
            let available = semaphore.available_permits().await?;
            emit(key, SemaphoreState { available })?;
        }
        Object::ExpirableSemaphore => {
            let semaphore = client.permit_expirable_semaphore(name.as_str());
            let key = Key::read(&client, name, semaphore.name()).await?;
            let available = semaphore.available_permits().await?;
            let acquired = semaphore.acquired_permits().await?;
            let permits = semaphore.permit_expiries().await?.into_iter();
            let permits = permits.map(|(id, expiry)| Permit {
                permit: id.to_string(),
                expiry_ms: expiry.map(output::epoch_ms_of),
            });
            let permits = permits.collect();
            emit(
                key,
                ExpirableSemaphoreState {
                    available,
                    acquired,
                    permits,
                },
            )?;
        }
        Object::Latch => {
            let latch = client.count_down_latch(name.as_str());
            let key = Key::read(&client, name, latch.name()).await?;
            let count = latch.count().await?;
            emit(key, LatchState { count })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the report of `key` with what its kind adds.
fn emit(key: Key, details: impl Serialize) -> Result<()> {
    output::emit(&Report { key, details })
}

/// Prints the report of the lock called `name`, of whichever kind.
async fn inspect_lock(client: &Client, name: String) -> Result<()> {
    let (key, state) = lock_state::read(client, name).await?;
    emit(key, state)
}
