//! A blocking facade over the async API, for threads that are not async.
//!
//! As in Java, the owner of a call is the calling thread ([`Owner::thread`](crate::Owner::thread), resolved on the thread
//! that makes each call, not when a handle is made or cloned): a nested `lock()` on one thread
//! re-enters, and the same handle used from another thread excludes. A handle bound with
//! [`Lock::with_owner`] uses its owner instead.
//!
//! [`Client`] owns a small tokio runtime (one worker thread) that runs the subscriber, the watchdog and
//! every operation; each method blocks the calling thread until its operation completes. It works
//! from any thread: a plain one, one of `tokio::task::spawn_blocking`'s (where an async application
//! runs blocking code), even an async worker (through `tokio::task::block_in_place`, which moves the
//! worker's other tasks elsewhere first). On a current-thread runtime's own thread a call stalls that
//! runtime's other tasks until it returns: use the async API in async code.
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

mod client;
mod lock;
mod multi_lock;
mod runtime;
mod synchronizers;

pub use client::Client;
pub use lock::{Guard, Lock, LockGuard, ReadWriteLock};
pub use multi_lock::{AnyLock, MultiGuard, MultiLock};
pub use synchronizers::{CountDownLatch, PermitExpirableSemaphore, Semaphore, SemaphorePermits};
