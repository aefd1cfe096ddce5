//! The [`Client`]: connections, the subscriber, the watchdog and the node id, shared by all locks.

use std::fmt;
use std::sync::Arc;

use crate::codec::{Codec, EntryKey};
use crate::config::Config;
use crate::error::{Operation, Result, Subject};
use crate::locks::fair_lock::{Fair, FairLock};
use crate::locks::fenced_lock::{Fenced, FencedLock};
use crate::locks::group_lock::GroupLock;
use crate::locks::lock::Lock;
use crate::locks::non_reentrant::{NonReentrant, NonReentrantFairLock, NonReentrantLock};
use crate::locks::reentrant::Reentrant;
use crate::locks::rw_lock::ReadWriteLock;
use crate::locks::spin_lock::{Spin, SpinBackoff, SpinLock};
use crate::services::Services;
use crate::synchronizers::count_down_latch::CountDownLatch;
use crate::synchronizers::expirable_semaphore::PermitExpirableSemaphore;
use crate::synchronizers::semaphore::Semaphore;

/// A connection to one Redis, shared by every lock made from it. Cheap to clone.
///
/// A client owns a pool of command connections, **one** subscriber connection that carries the unlock
/// channels of all its waiters, one watchdog task that renews all its locks, and a random v4 UUID (its
/// node id, the first half of every hash field it writes) — the counterpart of one `RedissonClient`.
/// Its background tasks stop when the last clone of the client, the last lock handle and the last
/// guard are dropped.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let lock = client.lock("doc:client:example");
/// let guard = lock.lock().await?;
/// // ... the critical section ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    services: Arc<Services>,
}

/// A snapshot of a client's moving parts, for monitoring and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Unlock channels currently subscribed (one per lock name with local waiters).
    pub subscribed_channels: usize,
    /// Locks the watchdog is renewing.
    pub renewing_locks: usize,
    /// Acquisitions queued locally behind another task of this client (for the kinds that hand off,
    /// see [`Config::local_handoff`]); the head of each queue, which talks to Redis, included.
    pub queued_waiters: usize,
    /// Locks passed from one task of this client to another without a release (local hand-offs)
    /// since the client started, by script or free.
    pub local_handoffs: u64,
    /// Of those, the free hand-offs: passed with no Redis command at all, Redis keeping the hold of
    /// the owner that started the streak (see [`Config::local_handoff`]).
    pub free_handoffs: u64,
    /// Streaks of free hand-offs begun (each ends with a script hand-off or a real release).
    pub handoff_streaks: u64,
    /// Reads (`HGET`) that confirmed a streak's first owner's field in Redis behind its free
    /// hand-offs, which bound how far a delete that publishes nothing is carried (see the README's
    /// "What a successful `unlock()` proves").
    pub streak_confirmations: u64,
}

impl Client {
    /// Connects to the Redis at `url` with the default [`Config`].
    ///
    /// # Errors
    ///
    /// [`Error::Backend`](crate::Error::Backend) or [`Error::Timeout`](crate::Error::Timeout) when Redis cannot be reached,
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a malformed URL.
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
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a bad configuration or when not called inside a tokio runtime;
    /// [`Error::Backend`](crate::Error::Backend) or [`Error::Timeout`](crate::Error::Timeout) when Redis cannot be reached.
    /// [`Error::FeatureDisabled`](crate::Error::FeatureDisabled) when the configuration needs a crate
    /// feature this build lacks: `cluster` for [`Topology::Cluster`](crate::Topology::Cluster),
    /// `sentinel` for [`Topology::Sentinel`](crate::Topology::Sentinel), `tls` for `rediss://` URLs
    /// and [`Config::tls_root_cert`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a client that was never returned stops its background tasks.
    pub async fn with_config(config: Config) -> Result<Self> {
        let services = Services::start(config).await?;
        Ok(Self {
            services: Arc::new(services),
        })
    }

    /// The name Redis knows the object called `name` by: `name` through [`Config::name_mapper`]
    /// (Redisson's `getRawName()`), every factory's one way to a handle's name. An empty name stays
    /// empty, so that the handle's operations refuse it as they do without a mapper.
    fn raw_name(&self, name: impl Into<String>) -> String {
        let name = name.into();
        match &self.services.config.name_mapper {
            Some(mapper) if !name.is_empty() => mapper.map(&name),
            _ => name,
        }
    }

    /// The reentrant lock called `name`: Redisson's `getLock(name)`. Making a handle costs nothing and
    /// sends nothing; an empty name is reported by the first operation. With a
    /// [`Config::name_mapper`], every kind's handle works under the mapped name, and its `name()`
    /// returns it.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(
            self.services.clone(),
            Reentrant::new(self.raw_name(name), self.services.publish),
        )
    }

    /// The group lock of `values` in the group `group`: Redisson's `getMultiLock(group, values)`
    /// (its `RedissonFasterMultiLock`, not the [`MultiLock`](crate::MultiLock) of several locks,
    /// which is `getMultiLock(locks...)`). The values are encoded with [`Config::codec`], as Java
    /// encodes them with its client's codec; the group's name is mapped as every lock name is.
    /// Making it sends nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Codec`](crate::Error::Codec) when the codec cannot encode a value as Java does, and
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) without values.
    pub fn group_lock(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<EntryKey>>,
    ) -> Result<GroupLock> {
        self.group_lock_with_codec(group, &self.services.config.codec, values)
    }

    /// The group lock of `values` in `group`, encoded with `codec`: for values Java encodes with
    /// another codec than its client's (Redisson's object options). See [`Client::group_lock`].
    ///
    /// # Errors
    ///
    /// As [`Client::group_lock`].
    pub fn group_lock_with_codec(
        &self,
        group: impl Into<String>,
        codec: &Codec,
        values: impl IntoIterator<Item = impl Into<EntryKey>>,
    ) -> Result<GroupLock> {
        GroupLock::new(self.services.clone(), self.raw_name(group), codec, values)
    }

    /// The fair lock called `name`: Redisson's `getFairLock(name)`.
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        let kind = Fair::new(
            self.raw_name(name),
            self.services.publish,
            self.services.config.fair_lock_wait_timeout,
        );
        Lock::new(self.services.clone(), kind)
    }

    /// The non-reentrant lock called `name`: Redisson's `getNonReentrantLock(name)` (4.4+). It is
    /// [`Client::lock`]'s hash, so the two exclude each other; an owner that holds it and asks again
    /// gets [`Error::ReentryRefused`](crate::Error::ReentryRefused).
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> NonReentrantLock {
        let twin = Reentrant::new(self.raw_name(name), self.services.publish);
        Lock::new(self.services.clone(), NonReentrant::new(twin))
    }

    /// The non-reentrant fair lock called `name`: Redisson's `getNonReentrantFairLock(name)` (4.4+).
    /// It shares [`Client::fair_lock`]'s hash and queue; an owner that holds it and asks again gets
    /// [`Error::ReentryRefused`](crate::Error::ReentryRefused), and is not queued.
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> NonReentrantFairLock {
        let twin = Fair::new(
            self.raw_name(name),
            self.services.publish,
            self.services.config.fair_lock_wait_timeout,
        );
        Lock::new(self.services.clone(), NonReentrant::new(twin))
    }

    /// The fenced lock called `name`: Redisson's `getFencedLock(name)`.
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        Lock::new(
            self.services.clone(),
            Fenced::new(self.raw_name(name), self.services.publish),
        )
    }

    /// The spin lock called `name`, with Redisson's default back-off: `getSpinLock(name)`.
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        self.spin_lock_with_backoff(name, SpinBackoff::default())
    }

    /// The spin lock called `name`, polling with `backoff`: `getSpinLock(name, backOff)`.
    pub fn spin_lock_with_backoff(
        &self,
        name: impl Into<String>,
        backoff: SpinBackoff,
    ) -> SpinLock {
        Lock::new(
            self.services.clone(),
            Spin::new(self.raw_name(name), self.services.publish, backoff),
        )
    }

    /// The read-write lock called `name`: Redisson's `getReadWriteLock(name)`.
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(&self.services, self.raw_name(name))
    }

    /// The semaphore called `name`: Redisson's `getSemaphore(name)`.
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.services.clone(), self.raw_name(name))
    }

    /// The permit-expirable semaphore called `name`: Redisson's
    /// `getPermitExpirableSemaphore(name)`.
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.services.clone(), self.raw_name(name))
    }

    /// The count-down latch called `name`: Redisson's `getCountDownLatch(name)`.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.services.clone(), self.raw_name(name))
    }

    /// This client's node id: the random v4 UUID that prefixes its owners' hash fields.
    pub fn node_id(&self) -> &str {
        &self.services.node_id
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        &self.services.config
    }

    /// Runs a plain Redis command on the client's connections, for what the lock API does not cover
    /// (in cluster mode it is routed by its first key). It runs under the command timeout. Build
    /// commands with the re-exported [`redis`](crate::redis) crate, so that no second `redis` version
    /// meets this one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rlock_redisson::Result<()> {
    /// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    /// let client = rlock_redisson::Client::connect(&url).await?;
    /// use rlock_redisson::redis;
    /// let pong: String = client.query(&redis::cmd("PING")).await?;
    /// assert_eq!(pong, "PONG");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`](crate::Error::Timeout) or [`Error::Backend`](crate::Error::Backend) (with
    /// Redis' message, `WRONGTYPE` included) as Redis answers.
    ///
    /// # Cancel safety
    ///
    /// Like the command: a dropped write may or may not have been applied.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.services
            .commands
            .query(Operation::Query, Subject::CLIENT, cmd)
            .await
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
        self.services.background.settle().await;
    }

    /// Whether unlock messages use sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`).
    pub fn sharded_pubsub(&self) -> bool {
        self.services.publish == "SPUBLISH"
    }

    /// Subscribed channels, renewed locks and local queues, right now.
    pub fn stats(&self) -> ClientStats {
        let (free_handoffs, handoff_streaks) = self.services.cohorts.free_handoffs();
        ClientStats {
            subscribed_channels: self.services.subscriber.registry().channel_count(),
            renewing_locks: self.services.watchdog.lock_count(),
            queued_waiters: self.services.cohorts.waiters(),
            local_handoffs: self.services.cohorts.handoffs(),
            free_handoffs,
            handoff_streaks,
            streak_confirmations: self.services.cohorts.confirmations(),
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("node_id", &self.services.node_id)
            .field("config", &self.services.config)
            .finish_non_exhaustive()
    }
}
