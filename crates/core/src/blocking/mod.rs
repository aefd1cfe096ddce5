//! A blocking facade over the async API, for threads that are not async.
//!
//! As in Java, the owner of a call is the calling thread ([`Owner::thread`](crate::Owner::thread), resolved on the thread
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
//! let client = rlock_redisson::blocking::Client::connect(&url)?;
//! let lock = client.lock("doc:blocking:example");
//! let guard = lock.lock()?;
//! assert!(lock.is_locked()?);
//! let nested = lock.lock()?; // this thread re-enters
//! assert_eq!(lock.hold_count()?, 2);
//! nested.unlock()?;
//! guard.unlock()?;
//! # Ok::<(), rlock_redisson::Error>(())
//! ```

use std::fmt;
use std::future::Future;
use std::sync::Arc;

mod lock;
mod multi_lock;
mod synchronizers;

pub use lock::{Guard, Lock, LockGuard, ReadWriteLock};
pub use multi_lock::{AnyLock, MultiGuard, MultiLock};
pub use synchronizers::{CountDownLatch, PermitExpirableSemaphore, Semaphore, SemaphorePermits};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::kind::LockKind;
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

/// Releases what a dropped blocking guard held: before returning, when dropped outside an async
/// runtime (as a `std::sync::MutexGuard` would); in the background, by dropping the async guard,
/// when dropped inside one.
fn release_dropped<G, F>(runtime: &Runtime, held: G, release: impl FnOnce(G) -> F)
where
    F: Future<Output = Result<()>>,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        drop(held);
    } else if let Err(e) = block_on(runtime, release(held)) {
        tracing::warn!(error = %e, "releasing a dropped blocking guard failed");
    }
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
