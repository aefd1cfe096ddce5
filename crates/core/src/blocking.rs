//! A blocking facade over the async API, for threads that are not async.
//!
//! As in Java, the owner of a call is the calling thread ([`Owner::thread`], resolved on the thread
//! that makes each call, not when a handle is made or cloned): a nested `lock()` on one thread
//! re-enters, and the same handle used from another thread excludes. A handle bound with
//! [`Lock::with_owner`] uses its owner instead.
//!
//! [`Client`] owns a small tokio runtime (one worker thread) that runs the subscriber, the watchdog and
//! every operation; each method blocks the calling thread until its operation completes. Calling it from
//! inside an async runtime is refused with [`Error::InvalidArgument`] rather than deadlocking.
//!
//! ```
//! # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
//! let client = rlock::blocking::Client::connect(&url)?;
//! let lock = client.lock("doc:blocking:example");
//! let guard = lock.lock()?;
//! assert!(lock.is_locked()?);
//! let nested = lock.lock()?; // this thread re-enters
//! assert_eq!(lock.hold_count()?, 2);
//! nested.unlock()?;
//! guard.unlock()?;
//! # Ok::<(), rlock::Error>(())
//! ```

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::kind::LockKind;
use crate::lock::RemainingTtl;
use crate::owner::Owner;
use crate::reentrant::Reentrant;
use crate::rw_lock::{Read, Write};
use crate::spin_lock::SpinBackoff;

/// The facade's private runtime. It shuts down in the background when its last user lets go, so that
/// dropping it never blocks (or panics), wherever that happens.
#[derive(Debug)]
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Refuses to run inside an async runtime, where blocking would stall (or deadlock) it.
fn outside_async(what: &str) -> Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::InvalidArgument(format!(
            "the blocking {what} cannot be used inside an async runtime; use the async API"
        )));
    }
    Ok(())
}

fn block_on<T>(runtime: &Runtime, work: impl Future<Output = Result<T>>) -> Result<T> {
    outside_async("API")?;
    runtime.0.as_ref().ok_or(Error::Closed)?.block_on(work)
}

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
    /// As [`crate::Client::with_config`], plus [`Error::InvalidArgument`] when called from inside an
    /// async runtime.
    pub fn with_config(config: Config) -> Result<Self> {
        outside_async("client")?;
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
        Lock {
            inner,
            runtime: self.runtime.clone(),
        }
    }

    /// The reentrant lock called `name`.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.lock(name))
    }

    /// The fair lock called `name`.
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock<crate::kind::Fair> {
        self.wrap(self.inner.fair_lock(name))
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
        ReadWriteLock {
            read: self.wrap(lock.read()),
            write: self.wrap(lock.write()),
        }
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

/// The blocking counterpart of [`crate::ReadWriteLock`].
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl ReadWriteLock {
    /// The read lock: shared by readers, excluded by a writer.
    pub fn read(&self) -> Lock<Read> {
        self.read.clone()
    }

    /// The write lock: excludes readers and other writers.
    pub fn write(&self) -> Lock<Write> {
        self.write.clone()
    }
}

/// The blocking counterpart of [`crate::Lock`], for every kind; each method blocks until its async
/// twin completes.
pub struct Lock<K: LockKind = Reentrant> {
    inner: crate::Lock<K>,
    runtime: Arc<Runtime>,
}

impl<K: LockKind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<K: LockKind> Lock<K> {
    fn guard(&self, guard: crate::Guard<K::Token>) -> Guard<K::Token> {
        Guard {
            inner: Some(guard),
            runtime: self.runtime.clone(),
        }
    }

    /// The async handle for a call made now, on this thread: bound to this thread's owner unless the
    /// handle has one of its own.
    fn here(&self) -> crate::Lock<K> {
        self.inner.clone().with_owner(self.owner())
    }

    /// The owner a call on this thread uses: the bound owner, else [`Owner::thread`].
    pub fn owner(&self) -> Owner {
        self.inner.owner().unwrap_or_else(Owner::thread)
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::Lock::with_owner`].
    pub fn with_owner(self, owner: Owner) -> Self {
        Self {
            inner: self.inner.with_owner(owner),
            runtime: self.runtime,
        }
    }

    /// See [`crate::Lock::lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock`].
    pub fn lock(&self) -> Result<Guard<K::Token>> {
        block_on(&self.runtime, self.here().lock()).map(|g| self.guard(g))
    }

    /// See [`crate::Lock::lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<Guard<K::Token>> {
        block_on(&self.runtime, self.here().lock_with_lease(lease)).map(|g| self.guard(g))
    }

    /// See [`crate::Lock::try_lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<Guard<K::Token>>> {
        block_on(&self.runtime, self.here().try_lock()).map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::Lock::try_lock_for`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<Guard<K::Token>>> {
        block_on(&self.runtime, self.here().try_lock_for(wait)).map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::Lock::try_lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock_with_lease`].
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Guard<K::Token>>> {
        block_on(&self.runtime, self.here().try_lock_with_lease(wait, lease))
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::Lock::unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::unlock`].
    pub fn unlock(&self, owner: Owner) -> Result<()> {
        block_on(&self.runtime, self.inner.unlock(owner))
    }

    /// See [`crate::Lock::force_unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.force_unlock())
    }

    /// See [`crate::Lock::is_locked`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_locked())
    }

    /// See [`crate::Lock::is_held_by`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_held_by`].
    pub fn is_held_by(&self, owner: Owner) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_held_by(owner))
    }

    /// How many holds this thread's owner (or the bound owner) has: Redisson's `getHoldCount`.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::hold_count_of`].
    pub fn hold_count(&self) -> Result<u32> {
        block_on(&self.runtime, self.inner.hold_count_of(self.owner()))
    }

    /// See [`crate::Lock::hold_count_of`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::hold_count_of`].
    pub fn hold_count_of(&self, owner: Owner) -> Result<u32> {
        block_on(&self.runtime, self.inner.hold_count_of(owner))
    }

    /// Whether this thread's owner (or the bound owner) holds the lock: Redisson's
    /// `isHeldByCurrentThread`.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_held_by`].
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_held_by(self.owner()))
    }

    /// See [`crate::Lock::remaining_ttl`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::remaining_ttl`].
    pub fn remaining_ttl(&self) -> Result<RemainingTtl> {
        block_on(&self.runtime, self.inner.remaining_ttl())
    }
}

impl<K: LockKind> fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Lock").field(&self.inner).finish()
    }
}

impl Lock<crate::kind::Fenced> {
    /// See [`crate::FencedLock::token`].
    ///
    /// # Errors
    ///
    /// As [`crate::FencedLock::token`].
    pub fn token(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.token())
    }
}

impl Lock<crate::kind::Fair> {
    /// See [`crate::FairLock::queue`].
    ///
    /// # Errors
    ///
    /// As [`crate::FairLock::queue`].
    pub fn queue(&self) -> Result<Vec<crate::QueuedWaiter>> {
        block_on(&self.runtime, self.inner.queue())
    }
}

/// The blocking counterpart of [`crate::Guard`]. Dropping it releases the hold before `drop`
/// returns (like a `std::sync::MutexGuard`), or in the background when dropped inside a runtime.
#[must_use = "dropping the guard releases the hold at once"]
pub struct Guard<T: fmt::Debug + Send + 'static = ()> {
    inner: Option<crate::Guard<T>>,
    runtime: Arc<Runtime>,
}

/// The blocking counterpart of [`crate::LockGuard`].
pub type LockGuard = Guard<()>;

impl<T: fmt::Debug + Send + 'static> Guard<T> {
    /// The owner of this hold.
    pub fn owner(&self) -> Option<Owner> {
        self.inner.as_ref().map(crate::Guard::owner)
    }

    /// What the acquisition yielded (a fencing token for a fenced lock); see
    /// [`crate::Guard::token`].
    pub fn token(&self) -> Option<&T> {
        self.inner.as_ref().map(crate::Guard::token)
    }

    /// See [`crate::Guard::is_lease_lost`].
    pub fn is_lease_lost(&self) -> bool {
        self.inner.as_ref().is_none_or(crate::Guard::is_lease_lost)
    }

    /// See [`crate::Guard::unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Guard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        match self.inner.take() {
            Some(guard) => block_on(&self.runtime, guard.unlock()),
            None => Ok(()),
        }
    }
}

impl<T: fmt::Debug + Send + 'static> Drop for Guard<T> {
    fn drop(&mut self) {
        if let Some(guard) = self.inner.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                drop(guard);
            } else if let Err(e) = block_on(&self.runtime, guard.unlock()) {
                tracing::warn!(error = %e, "releasing a dropped blocking guard failed");
            }
        }
    }
}

impl<T: fmt::Debug + Send + 'static> fmt::Debug for Guard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Guard").field(&self.inner).finish()
    }
}
