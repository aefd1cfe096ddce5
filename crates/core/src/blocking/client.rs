//! The blocking client: the factory of every blocking handle.

use std::fmt;
use std::sync::Arc;

use super::group_lock::GroupLock;
use super::lock::{Lock, ReadWriteLock};
use super::runtime::{Runtime, block_on};
use super::synchronizers::{CountDownLatch, PermitExpirableSemaphore, Semaphore};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::kind::LockKind;
use crate::locks::spin_lock::SpinBackoff;

/// The blocking counterpart of [`crate::Client`].
#[derive(Clone)]
pub struct Client {
    inner: crate::Client,
    runtime: Arc<Runtime>,
}

impl Client {
    /// Connects to the Redis at `url` with the default [`Config`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::with_config`].
    pub fn connect(url: impl Into<String>) -> Result<Self> {
        Self::with_config(Config::new(url))
    }

    /// Connects with the given configuration.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::with_config`].
    pub fn with_config(config: Config) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rlock")
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start the rlock runtime: {e}")))?;
        let runtime = Arc::new(Runtime(Some(runtime)));
        let inner = block_on(&runtime, crate::Client::with_config(config))?;
        Ok(Self { inner, runtime })
    }

    fn wrap<K: LockKind>(&self, inner: crate::Lock<K>) -> Lock<K> {
        Lock::new(inner, self.runtime.clone())
    }

    /// The reentrant lock called `name`.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.lock(name))
    }

    /// The fair lock called `name`.
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock<crate::kind::Fair> {
        self.wrap(self.inner.fair_lock(name))
    }

    /// The non-reentrant lock called `name` (see [`crate::Client::non_reentrant_lock`]). Each
    /// thread is an owner: a thread that holds it and asks again gets
    /// [`Error::ReentryRefused`](crate::Error::ReentryRefused).
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> Lock<crate::kind::NonReentrant> {
        self.wrap(self.inner.non_reentrant_lock(name))
    }

    /// The non-reentrant fair lock called `name` (see [`crate::Client::non_reentrant_fair_lock`]).
    pub fn non_reentrant_fair_lock(
        &self,
        name: impl Into<String>,
    ) -> Lock<crate::kind::NonReentrantFair> {
        self.wrap(self.inner.non_reentrant_fair_lock(name))
    }

    /// The fenced lock called `name`.
    pub fn fenced_lock(&self, name: impl Into<String>) -> Lock<crate::kind::Fenced> {
        self.wrap(self.inner.fenced_lock(name))
    }

    /// The spin lock called `name`, with Redisson's default back-off.
    pub fn spin_lock(&self, name: impl Into<String>) -> Lock<crate::kind::Spin> {
        self.wrap(self.inner.spin_lock(name))
    }

    /// The spin lock called `name`, polling with `backoff`.
    pub fn spin_lock_with_backoff(
        &self,
        name: impl Into<String>,
        backoff: SpinBackoff,
    ) -> Lock<crate::kind::Spin> {
        self.wrap(self.inner.spin_lock_with_backoff(name, backoff))
    }

    /// The read-write lock called `name`: its [read](ReadWriteLock::read) and
    /// [write](ReadWriteLock::write) sides.
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        let lock = self.inner.read_write_lock(name);
        ReadWriteLock::new(self.wrap(lock.read()), self.wrap(lock.write()))
    }

    /// The group lock of `values` in `group` (see [`crate::Client::group_lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::group_lock`].
    pub fn group_lock(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<crate::EntryKey>>,
    ) -> Result<GroupLock> {
        let inner = self.inner.group_lock(group, values)?;
        Ok(GroupLock::new(inner, self.runtime.clone()))
    }

    /// The group lock of `values` in `group`, encoded with `codec` (see
    /// [`crate::Client::group_lock_with_codec`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::group_lock`].
    pub fn group_lock_with_codec(
        &self,
        group: impl Into<String>,
        codec: &crate::Codec,
        values: impl IntoIterator<Item = impl Into<crate::EntryKey>>,
    ) -> Result<GroupLock> {
        let inner = self.inner.group_lock_with_codec(group, codec, values)?;
        Ok(GroupLock::new(inner, self.runtime.clone()))
    }

    /// The semaphore called `name`.
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.inner.semaphore(name), self.runtime.clone())
    }

    /// The permit-expirable semaphore called `name`.
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(
            self.inner.permit_expirable_semaphore(name),
            self.runtime.clone(),
        )
    }

    /// The count-down latch called `name`.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.inner.count_down_latch(name), self.runtime.clone())
    }

    /// Runs a plain Redis command on the client's connections: see [`crate::Client::query`]. With
    /// it, a worker reads and writes the data its locks protect through the same client.
    ///
    /// ```
    /// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    /// use rlock_redisson::redis;
    /// let client = rlock_redisson::blocking::Client::connect(url)?;
    /// let guard = client.lock("doc:blocking:query").lock()?;
    /// client.query::<()>(redis::cmd("INCR").arg("doc:blocking:query:counter"))?;
    /// guard.unlock()?;
    /// # Ok::<(), rlock_redisson::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`crate::Client::query`].
    pub fn query<T: redis::FromRedisValue + Send>(&self, cmd: &redis::Cmd) -> Result<T> {
        block_on(&self.runtime, self.inner.query(cmd))
    }

    /// Waits until every release and undo running in the background has finished: see
    /// [`crate::Client::close`]. Call it before the program exits.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the client's runtime is gone.
    pub fn close(&self) -> Result<()> {
        block_on(&self.runtime, async {
            self.inner.close().await;
            Ok(())
        })
    }

    /// See [`crate::Client::config`].
    pub fn config(&self) -> &Config {
        self.inner.config()
    }

    /// See [`crate::Client::node_id`].
    pub fn node_id(&self) -> &str {
        self.inner.node_id()
    }

    /// See [`crate::Client::sharded_pubsub`].
    pub fn sharded_pubsub(&self) -> bool {
        self.inner.sharded_pubsub()
    }

    /// See [`crate::Client::stats`].
    pub fn stats(&self) -> crate::ClientStats {
        self.inner.stats()
    }

    /// The async client behind this one.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Client")
            .field(&self.inner)
            .finish()
    }
}
