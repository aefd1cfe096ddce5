//! `rlock inspect`: a lock's holders, or a synchronizer's state, as stored in Redis.
//!
//! A lock's holders are read from its hash, so they are any client's: rlock's, and Redisson's
//! `RLock` and `RReadWriteLock` alike (PROTOCOL.md §2.1). Fields that are not `<uuid>:<owner>` (a
//! read-write lock's `mode`) are not holders. What else exists for the name is added: a fair lock's
//! queue, a read-write lock's mode and readers, a fenced lock's latest token. Every lock kind gets
//! that same report.
//!
//! A synchronizer's report is its key's existence and TTL plus its state: a semaphore's available
//! permits; a permit-expirable semaphore's available and acquired permits, and each taken permit's
//! expiry; a latch's count. The reads are separate (the state may change between them), and those of
//! a permit-expirable semaphore count its expired permits back in first, as any of its calls does.

use std::process::ExitCode;

use rlock_redisson::{Client, RemainingTtl};
use serde::Serialize;

use crate::kinds::Object;
use crate::target::Target;
use crate::{Result, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The name of the lock or synchronizer.
    #[arg(value_parser = crate::non_empty_name)]
    name: String,
    /// What the name is: any lock kind gets the lock report (the default), the other kinds theirs.
    #[arg(long, value_enum, default_value_t)]
    kind: Object,
}

/// What every report starts with: the key at the name.
#[derive(Debug, Serialize)]
struct Key {
    name: String,
    exists: bool,
    /// Redis' `PTTL`: -2 without the key, -1 without an expiry.
    pttl: i64,
}

/// A report: the key, then what the kind adds.
#[derive(Debug, Serialize)]
struct Report<D> {
    #[serde(flatten)]
    key: Key,
    #[serde(flatten)]
    details: D,
}

/// What a lock's report adds.
#[derive(Debug, Serialize)]
struct LockState {
    holders: Vec<Holder>,
    /// A read-write lock's mode (`read` or `write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    /// A read-write lock's read holders (a writer that also reads is among them).
    #[serde(skip_serializing_if = "Option::is_none")]
    readers: Option<Vec<Holder>>,
    /// A fair lock's waiters, head first.
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<Vec<Waiter>>,
    /// A fenced lock's latest token.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
}

#[derive(Debug, PartialEq, Serialize)]
struct Waiter {
    /// The waiter's hash field, `<uuid>:<owner>`.
    field: String,
    /// When it goes stale unless it polls again (epoch ms of its client's clock).
    deadline_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Holder {
    /// The holder's client uuid.
    node: String,
    /// The owner id within that client (a Java thread id, kept as text as Java ids are longs), with
    /// a `:write` suffix for a read-write lock's write holds.
    owner: String,
    count: u64,
}

impl From<rlock_redisson::Holder> for Holder {
    fn from(holder: rlock_redisson::Holder) -> Self {
        Self {
            node: holder.node,
            owner: holder.owner,
            count: holder.count,
        }
    }
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
    let client = target.client().await?;
    let name = args.name;
    match args.kind {
        Object::Lock(_) => inspect_lock(&client, name).await?,
        Object::Semaphore => {
            let semaphore = client.semaphore(name.as_str());
            let key = key(&client, name).await?;
            let available = semaphore.available_permits().await?;
            emit(key, SemaphoreState { available })?;
        }
        Object::ExpirableSemaphore => {
            let semaphore = client.permit_expirable_semaphore(name.as_str());
            let key = key(&client, name).await?;
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
            let key = key(&client, name).await?;
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

/// The key called `name`, as `PTTL` sees it.
async fn key(client: &Client, name: String) -> Result<Key> {
    let pttl: i64 = client.query(redis::cmd("PTTL").arg(&name)).await?;
    Ok(Key {
        name,
        exists: pttl != -2,
        pttl,
    })
}

/// Prints the report of the lock called `name`, of whichever kind.
async fn inspect_lock(client: &Client, name: String) -> Result<()> {
    let lock = client.lock(name.as_str());
    // Separate reads, each routed to the key's node: the lock may change between them.
    let kind: String = client.query(redis::cmd("TYPE").arg(&name)).await?;
    if !matches!(kind.as_str(), "none" | "hash") {
        return Err(format!("key {name:?} holds a {kind}, not a lock hash").into());
    }
    let pttl = pttl(lock.remaining_ttl().await?);
    let holders: Vec<Holder> = lock
        .holders()
        .await?
        .into_iter()
        .map(Holder::from)
        .collect();
    let mode: Option<String> = client
        .query(redis::cmd("HGET").arg(&name).arg("mode"))
        .await?;
    let readers = mode.as_ref().map(|_| {
        holders
            .iter()
            .filter(|holder| !holder.owner.ends_with(":write"))
            .cloned()
            .collect()
    });
    let queue: Vec<Waiter> = client
        .fair_lock(name.as_str())
        .queue()
        .await?
        .into_iter()
        .map(|waiter| Waiter {
            field: waiter.field,
            deadline_ms: waiter.deadline_ms,
        })
        .collect();
    let token = client.fenced_lock(name.as_str()).token().await?;
    let key = Key {
        exists: kind != "none",
        name,
        pttl,
    };
    emit(
        key,
        LockState {
            holders,
            mode,
            readers,
            queue: (!queue.is_empty()).then_some(queue),
            token: (token > 0).then_some(token),
        },
    )
}

/// The `PTTL` reply that `ttl` stands for.
fn pttl(ttl: RemainingTtl) -> i64 {
    match ttl {
        RemainingTtl::NotLocked => -2,
        RemainingTtl::NoExpiry => -1,
        RemainingTtl::Expires(left) => i64::try_from(left.as_millis()).unwrap_or(i64::MAX),
    }
}
