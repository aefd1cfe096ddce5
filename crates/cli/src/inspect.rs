//! `rlock inspect`: a lock's holders as stored in Redis.
//!
//! The holders are read from the lock's hash, so they are any client's: rlock's, and Redisson's
//! `RLock` and `RReadWriteLock` alike (PROTOCOL.md §2.1). Fields that are not `<uuid>:<owner>` (a
//! read-write lock's `mode`) are not holders. What else exists for the name is added: a fair lock's
//! queue, a read-write lock's mode and readers, a fenced lock's latest token.

use std::process::ExitCode;

use rlock::RemainingTtl;
use serde::Serialize;

use crate::target::Target;
use crate::{Result, output};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The lock name.
    #[arg(value_parser = crate::lock_name)]
    name: String,
}

#[derive(Debug, Serialize)]
struct Report {
    name: String,
    exists: bool,
    /// Redis' `PTTL`: -2 without the key, -1 without an expiry.
    pttl: i64,
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

impl From<rlock::Holder> for Holder {
    fn from(holder: rlock::Holder) -> Self {
        Self {
            node: holder.node,
            owner: holder.owner,
            count: holder.count,
        }
    }
}

pub(crate) async fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let client = target.client().await?;
    let lock = client.lock(args.name.as_str());
    // Separate reads, each routed to the key's node: the lock may change between them.
    let kind: String = client.query(redis::cmd("TYPE").arg(&args.name)).await?;
    if !matches!(kind.as_str(), "none" | "hash") {
        return Err(format!("key {:?} holds a {kind}, not a lock hash", args.name).into());
    }
    let pttl = pttl(lock.remaining_ttl().await?);
    let holders: Vec<Holder> = lock
        .holders()
        .await?
        .into_iter()
        .map(Holder::from)
        .collect();
    let mode: Option<String> = client
        .query(redis::cmd("HGET").arg(&args.name).arg("mode"))
        .await?;
    let readers = mode.as_ref().map(|_| {
        holders
            .iter()
            .filter(|holder| !holder.owner.ends_with(":write"))
            .cloned()
            .collect()
    });
    let queue: Vec<Waiter> = client
        .fair_lock(args.name.as_str())
        .queue()
        .await?
        .into_iter()
        .map(|waiter| Waiter {
            field: waiter.field,
            deadline_ms: waiter.deadline_ms,
        })
        .collect();
    let token = client.fenced_lock(args.name.as_str()).token().await?;
    output::emit(&Report {
        exists: kind != "none",
        name: args.name,
        pttl,
        holders,
        mode,
        readers,
        queue: (!queue.is_empty()).then_some(queue),
        token: (token > 0).then_some(token),
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The `PTTL` reply that `ttl` stands for.
fn pttl(ttl: RemainingTtl) -> i64 {
    match ttl {
        RemainingTtl::NotLocked => -2,
        RemainingTtl::NoExpiry => -1,
        RemainingTtl::Expires(left) => i64::try_from(left.as_millis()).unwrap_or(i64::MAX),
    }
}
