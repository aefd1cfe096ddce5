//! A blocking facade over the async API, for threads that are not async.
//!
//! As in Java, the owner of a call is the calling thread ([`Owner::thread`](crate::Owner::thread),
//! resolved on the thread that makes each call, not when a handle is made or cloned): a nested
//! `lock()` on one thread re-enters, and the same handle used from another thread excludes. On a
//! thread of an async runtime (a `spawn_blocking` closure, a task) the owner is the calling task's
//! instead, since tasks take turns on those threads: each task excludes the others, and a
//! `spawn_blocking` closure's nested calls re-enter. A handle bound with [`Lock::with_owner`] uses
//! its owner instead.
//!
//! [`Client`] owns a small tokio runtime (one worker thread) that runs the subscriber, the watchdog and
//! every operation; each method blocks the calling thread until its operation completes. It works
//! from any thread: a plain one, one of `tokio::task::spawn_blocking`'s (where an async application
//! runs blocking code), even a multi-threaded runtime's worker (through `tokio::task::block_in_place`,
//! which moves the worker's other tasks elsewhere first). The one thread it refuses is a
//! current-thread runtime's own (its `block_on`, its tasks): blocking it would stop every task of
//! that runtime, and a call waiting for a lock another of those tasks holds would wait until that
//! hold's lease ran out, or for ever if its watchdog runs elsewhere (a blocking client's). Every
//! call there returns [`Error::BlockingInAsyncContext`](crate::Error::BlockingInAsyncContext) at
//! once, with nothing sent (a guard or permits the refused call consumed are released in the
//! background, as on drop). In async code, use the async API; call the blocking one from
//! `spawn_blocking`. tokio shows that thread apart from its blocking pool's only by the cooperative
//! budget it polls with, so two cases follow the budget: code a task runs inside
//! `tokio::task::coop::unconstrained` carries none and is not refused (it stalls its runtime while
//! it blocks), and a `Handle::block_on` on a `spawn_blocking` thread carries one and is refused.
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
mod entries;
mod group_lock;
mod lock;
mod multi_lock;
mod runtime;
mod synchronizers;

pub use client::Client;
pub use entries::EntryLocks;
pub use group_lock::{GroupGuard, GroupLock};
pub use lock::{Guard, Lock, LockGuard, ReadWriteLock};
pub use multi_lock::{AnyLock, MultiGuard, MultiLock};
pub use synchronizers::{CountDownLatch, PermitExpirableSemaphore, Semaphore, SemaphorePermits};
