//! A lock's state as stored in Redis, whoever wrote it (Redisson included): what `inspect` prints
//! and `watch` refreshes.
//!
//! A lock's holders are read from its hash, so they are any client's: rlock's, and Redisson's
//! `RLock` and `RReadWriteLock` alike (docs/protocol.md §2.1). Fields that are not `<uuid>:<owner>`
//! (a read-write lock's `mode`) are not holders. What else exists for the name is added: a fair
//! lock's queue, a read-write lock's mode and readers, a fenced lock's latest token. Every lock
//! kind gets that same report.

use rlock_redisson::{Client, RemainingTtl};
use serde::Serialize;

use crate::Result;

/// What every report starts with: the key at the name.
#[derive(Debug, Serialize)]
pub(crate) struct Key {
    /// The name as given.
    pub(crate) name: String,
    /// The key in Redis, when `--name-prefix` makes it differ from the name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) key: Option<String>,
    pub(crate) exists: bool,
    /// Redis' `PTTL`: -2 without the key, -1 without an expiry.
    pub(crate) pttl: i64,
}

impl Key {
    /// The key `key` of the object called `name`, as `PTTL` sees it.
    pub(crate) async fn read(client: &Client, name: String, key: &str) -> Result<Self> {
        let pttl: i64 = client.query(redis::cmd("PTTL").arg(key)).await?;
        Ok(Self::new(name, key, pttl != -2, pttl))
    }

    fn new(name: String, key: &str, exists: bool, pttl: i64) -> Self {
        Self {
            key: (key != name).then(|| key.to_owned()),
            name,
            exists,
            pttl,
        }
    }
}

/// What a lock's report adds to its key.
#[derive(Debug, Serialize)]
pub(crate) struct LockState {
    pub(crate) holders: Vec<Holder>,
    /// A read-write lock's mode (`read` or `write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mode: Option<String>,
    /// A read-write lock's read holders (a writer that also reads is among them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) readers: Option<Vec<Holder>>,
    /// A fair lock's waiters, head first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) queue: Option<Vec<Waiter>>,
    /// A fenced lock's latest token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) token: Option<u64>,
}

/// Which lock kind a stored state shows. The reentrant, spin and non-reentrant locks share one
/// layout, and a fair lock without waiters has no queue: all read as [`DetectedKind::Lock`]. A
/// non-reentrant fair lock with waiters reads as [`DetectedKind::Fair`] (its layout is the fair
/// lock's: Redis does not tell the two apart, and neither can `watch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DetectedKind {
    /// A hash with holders and nothing else (or no key at all).
    Lock,
    /// A fair lock's queue of waiters exists.
    Fair,
    /// A fenced lock's token exists.
    Fenced,
    /// The hash has a read-write lock's `mode`.
    ReadWrite,
}

impl DetectedKind {
    /// Its name, in the table and in JSON.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Fair => "fair",
            Self::Fenced => "fenced",
            Self::ReadWrite => "read_write",
        }
    }
}

impl LockState {
    /// The kind this state shows (see [`DetectedKind`]); a read-write lock's mode wins over a queue
    /// or a token left under the same name.
    pub(crate) fn kind(&self) -> DetectedKind {
        if self.mode.is_some() {
            DetectedKind::ReadWrite
        } else if self.queue.is_some() {
            DetectedKind::Fair
        } else if self.token.is_some() {
            DetectedKind::Fenced
        } else {
            DetectedKind::Lock
        }
    }
}

/// One waiter in a fair lock's queue.
#[derive(Debug, PartialEq, Serialize)]
pub(crate) struct Waiter {
    /// The waiter's hash field, `<uuid>:<owner>`.
    pub(crate) field: String,
    /// When it goes stale unless it polls again (epoch ms of its client's clock).
    pub(crate) deadline_ms: Option<i64>,
}

/// One holder of a lock.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Holder {
    /// The holder's client uuid.
    pub(crate) node: String,
    /// The owner id within that client (a Java thread id, kept as text as Java ids are longs), with
    /// a `:write` suffix for a read-write lock's write holds.
    pub(crate) owner: String,
    pub(crate) count: u64,
}

impl Holder {
    /// The holder's hash field, `<node>:<owner>` (Redisson's `<uuid>:<threadId>`).
    pub(crate) fn field(&self) -> String {
        format!("{}:{}", self.node, self.owner)
    }
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

/// Reads the lock called `name` (its key mapped by `--name-prefix`), of whichever kind.
pub(crate) async fn read(client: &Client, name: String) -> Result<(Key, LockState)> {
    let lock = client.lock(name.as_str());
    let key = lock.name();
    // Separate reads, each routed to the key's node: the lock may change between them.
    let kind: String = client.query(redis::cmd("TYPE").arg(key)).await?;
    if !matches!(kind.as_str(), "none" | "hash") {
        return Err(format!("key {key:?} holds a {kind}, not a lock hash").into());
    }
    let pttl = pttl(lock.remaining_ttl().await?);
    let holders: Vec<Holder> = lock
        .holders()
        .await?
        .into_iter()
        .map(Holder::from)
        .collect();
    let mode: Option<String> = client
        .query(redis::cmd("HGET").arg(key).arg("mode"))
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
    let key = Key::new(name, key, kind != "none", pttl);
    let state = LockState {
        holders,
        mode,
        readers,
        queue: (!queue.is_empty()).then_some(queue),
        token: (token > 0).then_some(token),
    };
    Ok((key, state))
}

/// The `PTTL` reply that `ttl` stands for.
fn pttl(ttl: RemainingTtl) -> i64 {
    match ttl {
        RemainingTtl::NotLocked => -2,
        RemainingTtl::NoExpiry => -1,
        RemainingTtl::Expires(left) => i64::try_from(left.as_millis()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(mode: Option<&str>, queued: bool, token: Option<u64>) -> LockState {
        LockState {
            holders: Vec::new(),
            mode: mode.map(str::to_owned),
            readers: None,
            queue: queued.then(|| {
                vec![Waiter {
                    field: "f".into(),
                    deadline_ms: None,
                }]
            }),
            token,
        }
    }

    #[test]
    fn the_kind_comes_from_what_the_name_has_besides_its_holders() {
        assert_eq!(state(None, false, None).kind(), DetectedKind::Lock);
        assert_eq!(state(None, true, None).kind(), DetectedKind::Fair);
        assert_eq!(state(None, false, Some(3)).kind(), DetectedKind::Fenced);
        assert_eq!(
            state(Some("read"), true, Some(3)).kind(),
            DetectedKind::ReadWrite
        );
    }
}
