//! The lock implementations under test, behind one small interface.
//!
//! - [`Rlock`]: this library, as an application uses it (`client.lock(name).lock()`, then
//!   `guard.unlock()`), so holds are watchdog holds.
//! - [`RawScripts`]: the physical floor. rlock's own acquire and unlock scripts (the very Lua files in
//!   `crates/core/lua`), sent as `EVALSHA` straight through the `redis` crate with the arguments rlock
//!   sends: nothing but the two round trips.
//! - [`Rslock`]: the polling peer, the `rslock` crate (Redlock with retry and random back-off) with its
//!   default settings: 3 tries per `lock`, 0–200 ms random delay between tries, and `acquire` looping
//!   over `lock` until it succeeds.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::probe::CommandStats;

/// The lease rslock's locks get: Redisson's default watchdog timeout, which rlock's holds get too.
const RSLOCK_TTL: Duration = Duration::from_secs(30);

/// A lock implementation, reduced to what the scenarios need.
pub(crate) trait Contender: Send + Sync + 'static {
    /// Proof of a hold, consumed by [`Contender::release`].
    type Held: Send + 'static;

    /// Waits until `name` is acquired.
    fn acquire(&self, name: &str) -> impl Future<Output = Result<Self::Held>> + Send;

    /// Releases a hold; returns once the release is confirmed.
    fn release(&self, held: Self::Held) -> impl Future<Output = Result<()>> + Send;
}

/// One lock + unlock cycle of any contender, as a trait object, so that a scenario can run several
/// implementations through the same loop.
pub(crate) trait Cycle: Send + Sync {
    fn cycle<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<()>>;
}

impl<C: Contender> Cycle for C {
    fn cycle<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let held = self.acquire(name).await?;
            self.release(held).await
        })
    }
}

/// Which implementation, as named in results and in the worker protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ContenderKind {
    Rlock,
    /// rlock whose client records its metrics into an in-memory recorder (the cycle scenario only).
    RlockRecorded,
    Raw,
    Rslock,
}

impl ContenderKind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Rlock => "rlock",
            Self::RlockRecorded => "rlock + metrics recorder",
            Self::Raw => "raw 2×EVALSHA",
            Self::Rslock => "rslock",
        }
    }

    /// How many of the counted `calls` were made by this implementation's Lua scripts from inside
    /// Redis (Redis 7 counts those in `INFO commandstats` too); the rest were sent by clients.
    ///
    /// rlock's scripts (`crates/core/lua`) call `exists hexists hincrby pexpire pttl get set type
    /// hget`, its hand-off scripts `hget hlen hset hdel` (and `incr` for fenced locks), and publish,
    /// and every `del` in them comes with a publish; its client sends `del` itself only for unlock
    /// latches, never a publish. rslock's only script here (unlock) calls `get` and
    /// `del`, and its client sends neither.
    pub(crate) fn script_calls(self, calls: &CommandStats) -> u64 {
        match self {
            Self::Rlock | Self::RlockRecorded | Self::Raw => {
                let publishes = calls.sum_of(&["publish", "spublish"]);
                calls.sum_of(&[
                    "exists", "hexists", "hincrby", "pexpire", "pttl", "get", "set", "type", "hget",
                    "hlen", "hset", "hdel", "incr",
                ]) + publishes // the publishes themselves
                    + publishes // the del each one comes with
            }
            Self::Rslock => calls.sum_of(&["get", "del"]),
        }
    }
}

/// rlock, used as an application would.
#[derive(Debug, Clone)]
pub(crate) struct Rlock {
    pub(crate) client: rlock_redisson::Client,
}

impl Rlock {
    /// A client with the default configuration.
    pub(crate) async fn connect(url: &str) -> Result<Self> {
        Self::with_config(rlock_redisson::Config::new(url)).await
    }

    pub(crate) async fn with_config(config: rlock_redisson::Config) -> Result<Self> {
        Ok(Self {
            client: rlock_redisson::Client::with_config(config).await?,
        })
    }
}

impl Contender for Rlock {
    type Held = rlock_redisson::LockGuard;

    fn acquire(&self, name: &str) -> impl Future<Output = Result<Self::Held>> + Send {
        let lock = self.client.lock(name);
        async move { Ok(lock.lock().await?) }
    }

    async fn release(&self, held: Self::Held) -> Result<()> {
        Ok(held.unlock().await?)
    }
}

/// rlock's scripts sent directly: one `EVALSHA` to acquire, one to unlock, nothing else.
#[derive(Debug)]
pub(crate) struct RawScripts {
    connections: Vec<MultiplexedConnection>,
    next_connection: AtomicUsize,
    node_id: String,
    next_owner: AtomicU64,
    acquire: Script,
    unlock: Script,
}

/// A hold taken by [`RawScripts`].
#[derive(Debug)]
pub(crate) struct RawHold {
    name: String,
    field: String,
}

impl RawScripts {
    /// The lease and latch TTL rlock sends with its default configuration, in ms.
    const LEASE_MS: u64 = 30_000;
    const LATCH_TTL_MS: u64 = 20_000;

    /// Opens `connections` multiplexed connections; calls use them in turn.
    pub(crate) async fn connect(url: &str, connections: usize) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let mut opened = Vec::with_capacity(connections);
        for _ in 0..connections.max(1) {
            opened.push(client.get_multiplexed_async_connection().await?);
        }
        Ok(Self {
            connections: opened,
            next_connection: AtomicUsize::new(0),
            node_id: uuid::Uuid::new_v4().to_string(),
            next_owner: AtomicU64::new(1 << 32),
            acquire: Script::new(include_str!("../../crates/core/lua/lock_acquire.lua")),
            unlock: Script::new(include_str!("../../crates/core/lua/lock_unlock.lua")),
        })
    }

    fn connection(&self) -> MultiplexedConnection {
        let i = self.next_connection.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        self.connections[i].clone()
    }
}

impl Contender for RawScripts {
    type Held = RawHold;

    fn acquire(&self, name: &str) -> impl Future<Output = Result<Self::Held>> + Send {
        let owner = self.next_owner.fetch_add(1, Ordering::Relaxed);
        let hold = RawHold {
            name: name.to_owned(),
            field: format!("{}:{owner}", self.node_id),
        };
        let mut conn = self.connection();
        async move {
            let reply: Value = self
                .acquire
                .key(&hold.name)
                .arg(Self::LEASE_MS)
                .arg(&hold.field)
                // The owner's hold count as rlock sends it: a fresh hold.
                .arg(0)
                .invoke_async(&mut conn)
                .await?;
            match reply {
                // rlock's acquire replies the owner's count: `[1]` for a fresh hold.
                Value::Array(count) if count == [Value::Int(1)] => Ok(hold),
                other => Err(format!("raw acquire of {} refused: {other:?}", hold.name).into()),
            }
        }
    }

    fn release(&self, hold: Self::Held) -> impl Future<Output = Result<()>> + Send {
        let request_id = uuid::Uuid::new_v4().simple();
        let channel = format!("redisson_lock__channel:{{{}}}", hold.name);
        let latch = format!("redisson_unlock_latch:{{{}}}:{request_id}", hold.name);
        let mut conn = self.connection();
        async move {
            let reply: Value = self
                .unlock
                .key(&hold.name)
                .key(channel)
                .key(latch)
                .arg("0")
                .arg(Self::LEASE_MS)
                .arg(&hold.field)
                .arg("PUBLISH")
                .arg(Self::LATCH_TTL_MS)
                .invoke_async(&mut conn)
                .await?;
            match reply {
                Value::Int(1) => Ok(()),
                other => Err(format!("raw unlock of {} failed: {other:?}", hold.name).into()),
            }
        }
    }
}

/// The `rslock` crate with its default settings.
#[derive(Debug, Clone)]
pub(crate) struct Rslock {
    manager: rslock::LockManager,
}

impl Rslock {
    pub(crate) fn new(url: &str) -> Self {
        Self {
            manager: rslock::LockManager::new(vec![url.to_owned()]),
        }
    }
}

impl Contender for Rslock {
    type Held = rslock::LockGuard;

    fn acquire(&self, name: &str) -> impl Future<Output = Result<Self::Held>> + Send {
        let name = name.to_owned();
        async move { Ok(self.manager.acquire(name.as_str(), RSLOCK_TTL).await?) }
    }

    async fn release(&self, held: Self::Held) -> Result<()> {
        held.release().await;
        Ok(())
    }
}
