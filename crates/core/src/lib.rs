//! Distributed locks on Redis, wire-compatible with Redisson.
//!
//! A [`Lock`] of rlock and an `RLock` of Redisson (Java) with the same name are the same lock: they
//! exclude each other, wake each other through the same pub/sub channel, and see each other's holds.
//! The data layout, scripts, channels and messages follow Redisson's (see `PROTOCOL.md`): a lock is
//! a Redis hash whose one field, `<client-uuid>:<owner-id>`, counts the holds of its owner.
//!
//! - Waiters block on pub/sub, not polling: an unlock wakes the next waiter within a round trip,
//!   and every wait is also bounded by the lock's TTL, so a lost message costs at most that.
//! - Holds without a lease are kept alive by one watchdog task per client (renewals batched 100 locks
//!   per script), and a guard learns when its lease is lost ([`LockGuard::lease_lost`]).
//! - Every async fn is cancel safe or says why not: a dropped acquire never leaves a hold behind.
//! - Lost replies are reconciled, never blindly re-sent: acquires are undone on their own connection,
//!   unlocks are re-sent under one idempotency key.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> rlock::Result<()> {
//! # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
//! use std::time::Duration;
//!
//! let client = rlock::Client::connect(&url).await?;
//! let lock = client.lock("doc:crate:example");
//!
//! // Wait for the lock; the watchdog keeps it while we hold it.
//! let guard = lock.lock().await?;
//! guard.unlock().await?;
//!
//! // Try for 50 ms, then hold for at most 10 s.
//! match lock.try_lock_with_lease(Duration::from_millis(50), Duration::from_secs(10)).await? {
//!     Some(guard) => guard.unlock().await?,
//!     None => println!("busy"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! For threads that are not async, see [`blocking`].

#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unused_results,
    clippy::unwrap_used
)]

pub mod blocking;
mod client;
mod config;
mod connection;
mod engine;
mod error;
mod guard;
mod lock;
mod names;
mod owner;
mod pubsub;
mod scripts;
mod watchdog;

pub use client::{Client, ClientStats};
pub use config::Config;
pub use error::{Error, Operation, Result};
pub use guard::LockGuard;
pub use lock::{Lock, RemainingTtl};
pub use owner::Owner;
