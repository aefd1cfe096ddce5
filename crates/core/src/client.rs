//! The [`Client`]: connections, the subscriber, the watchdog and the node id, shared by all locks.

use std::fmt;
use std::sync::Arc;

use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::config::{Config, ShardedPubSub, Topology, redact};
use crate::connection::Commands;
use crate::engine::{Holds, Latches};
use crate::error::{Error, Operation, Result};
use crate::lock::Lock;
use crate::owner::{self, Owner};
use crate::pubsub::Subscriber;
use crate::watchdog::Watchdog;

/// A connection to one Redis, shared by every lock made from it. Cheap to clone.
///
/// A client owns a pool of command connections, **one** subscriber connection that carries the unlock
/// channels of all its waiters, one watchdog task that renews all its locks, and a random v4 UUID (its
/// node id, the first half of every hash field it writes) — the counterpart of one `RedissonClient`.
/// Its background tasks stop when the last clone of the client and the last guard are dropped.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// let client = rlock::Client::connect(&url).await?;
/// let lock = client.lock("doc:client:example");
/// let guard = lock.lock().await?;
/// // ... the critical section ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    node_id: String,
    /// `PUBLISH`, or `SPUBLISH` in a cluster with sharded pub/sub.
    pub(crate) publish: &'static str,
    pub(crate) commands: Commands,
    pub(crate) subscriber: Subscriber,
    pub(crate) watchdog: Watchdog,
    pub(crate) holds: Holds,
    pub(crate) latches: Latches,
    /// Where releases and undos run after their caller has gone.
    pub(crate) background: Background,
    _shutdown: DropGuard,
}

/// Spawns the work that must finish even when its caller is gone (a dropped guard's release, a
/// cancelled acquire's undo), on the client's runtime, tracked so [`Client::close`] can wait for it.
#[derive(Clone, Debug)]
pub(crate) struct Background {
    runtime: tokio::runtime::Handle,
    tracker: TaskTracker,
}

impl Background {
    pub(crate) fn spawn<F>(&self, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn_on(work, &self.runtime)
    }
}

impl Inner {
    /// The hash field of `owner` on this client.
    pub(crate) fn field(&self, owner: Owner) -> String {
        owner::field(&self.node_id, owner)
    }
}

/// A snapshot of a client's moving parts, for monitoring and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Unlock channels currently subscribed (one per lock name with local waiters).
    pub subscribed_channels: usize,
    /// Locks the watchdog is renewing.
    pub renewing_locks: usize,
}

impl Client {
    /// Connects to the Redis at `url` with the default [`Config`].
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] or [`Error::Timeout`] when Redis cannot be reached,
    /// [`Error::InvalidArgument`] for a malformed URL.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a client that was never returned stops its background tasks.
    pub async fn connect(url: impl Into<String>) -> Result<Self> {
        Self::with_config(Config::new(url)).await
    }

    /// Connects with the given configuration. Fails fast (with a `PING`) when Redis is unreachable.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad configuration or when not called inside a tokio runtime;
    /// [`Error::Backend`] or [`Error::Timeout`] when Redis cannot be reached.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a client that was never returned stops its background tasks.
    pub async fn with_config(config: Config) -> Result<Self> {
        config.validate()?;
        // TLS (`rediss://`) needs a process-wide crypto provider; another one may already be set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::InvalidArgument("rlock::Client needs a tokio runtime".into()))?;
        let commands = Commands::new(&config)?;
        let shutdown = CancellationToken::new();
        let guard = shutdown.clone().drop_guard();
        let _: String = commands
            .query(Operation::Connect, "", &redis::cmd("PING"))
            .await?;
        // Publish and subscribe exactly as Redisson does (PROTOCOL.md §2.6), so Java hears us.
        let sharded = match (&config.topology, config.sharded_pubsub) {
            (Topology::Cluster, ShardedPubSub::On) => true,
            (Topology::Cluster, ShardedPubSub::Auto) => commands
                .query::<redis::Value>(
                    Operation::Connect,
                    "",
                    redis::cmd("PUBSUB").arg("SHARDNUMSUB"),
                )
                .await
                .is_ok(),
            _ => false,
        };
        let subscriber = Subscriber::start(&config, sharded, &runtime, shutdown.child_token())
            .map_err(|source| Error::Backend {
                operation: Operation::Connect,
                source,
            })?;
        let watchdog = Watchdog::start(&config, commands.clone(), &runtime, shutdown.child_token());
        let node_id = uuid::Uuid::new_v4().to_string();
        tracing::debug!(url = %redact(&config.url), %node_id, "rlock client connected");
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                node_id,
                publish: if sharded { "SPUBLISH" } else { "PUBLISH" },
                commands,
                subscriber,
                watchdog,
                holds: Holds::default(),
                latches: Latches::default(),
                background: Background {
                    runtime,
                    tracker: TaskTracker::new(),
                },
                _shutdown: guard,
            }),
        })
    }

    /// The reentrant lock called `name`: Redisson's `getLock(name)`. Making a handle costs nothing and
    /// sends nothing; an empty name is reported by the first operation.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into())
    }

    /// This client's node id: the random v4 UUID that prefixes its owners' hash fields.
    pub fn node_id(&self) -> &str {
        &self.inner.node_id
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Runs a plain Redis command on the client's connections, for what the lock API does not cover
    /// (in cluster mode it is routed by its first key). It runs under the command timeout.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rlock::Result<()> {
    /// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    /// let client = rlock::Client::connect(&url).await?;
    /// let pong: String = client.query(&redis::cmd("PING")).await?;
    /// assert_eq!(pong, "PONG");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`], [`Error::Backend`] or [`Error::WrongType`] as Redis answers.
    ///
    /// # Cancel safety
    ///
    /// Like the command: a dropped write may or may not have been applied.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.inner.commands.query(Operation::Query, "", cmd).await
    }

    /// Waits until every release and undo running in the background has finished: the releases of
    /// dropped guards, the undos of cancelled or timed-out acquires. Call it before the program exits,
    /// so that no hold outlives it until its lease runs out. Each of those tasks is bounded (by the
    /// retry policy, or by the lease of the hold it releases). The client stays usable.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits; the background work goes on.
    pub async fn close(&self) {
        let tracker = &self.inner.background.tracker;
        let _ = tracker.close();
        tracker.wait().await;
        let _ = tracker.reopen();
    }

    /// Whether unlock messages use sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`).
    pub fn sharded_pubsub(&self) -> bool {
        self.inner.publish == "SPUBLISH"
    }

    /// Subscribed channels and renewed locks, right now.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            subscribed_channels: self.inner.subscriber.channel_count(),
            renewing_locks: self.inner.watchdog.lock_count(),
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("node_id", &self.inner.node_id)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}
