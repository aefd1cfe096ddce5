// The README is the crate's documentation (and its examples are doctests). The package's README.md is
// a symlink to the repository's, which `cargo package` stores as a file, so the path works both in a
// clone and in the published crate.
#![doc = include_str!("../README.md")]
// docs.rs builds with `--cfg docsrs` on nightly: mark the items each feature gates.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unused_results,
    clippy::unwrap_used
)]

#[cfg(feature = "blocking")]
pub mod blocking;
mod client;
mod cohort;
mod config;
mod connection;
mod count_down_latch;
mod credentials;
mod engine;
mod error;
mod expirable_semaphore;
mod fair_lock;
mod fenced_lock;
mod listener;
mod lock;
mod lock_kind;
mod multi_lock;
mod name_mapper;
mod names;
mod non_reentrant;
mod owner;
mod pubsub;
mod reconciling;
mod reentrant;
mod rw_lock;
mod scripts;
mod semaphore;
mod services;
mod spin_lock;
mod telemetry;
mod wake;
mod watchdog;

/// The `redis` crate rlock is built on, for [`Client::query`]'s commands and replies: use it
/// rather than a `redis` dependency of your own, whose version could differ.
pub use redis;

pub use client::{Client, ClientStats};
pub use config::{Config, ProxiedCluster, ShardedPubSub, Topology};
pub use count_down_latch::CountDownLatch;
pub use credentials::{Credentials, CredentialsProvider, ProviderError};
pub use engine::Guard;
pub use error::{Error, Operation, Result};
pub use expirable_semaphore::{PermitExpirableSemaphore, PermitId};
pub use fair_lock::{FairLock, QueuedWaiter};
pub use fenced_lock::{FencedGuard, FencedLock};
pub use listener::ChannelListener;
pub use lock::{Holder, Lock, LockGuard, RemainingTtl};
#[allow(deprecated)]
pub use multi_lock::{AnyLock, MultiGuard, MultiLock, RedLock};
pub use name_mapper::NameMapper;
pub use non_reentrant::{NonReentrantFairLock, NonReentrantLock};
pub use owner::Owner;
pub use rw_lock::{ReadLock, ReadWriteLock, WriteLock};
pub use semaphore::{Semaphore, SemaphorePermits};
pub use spin_lock::{SpinBackoff, SpinLock};

#[doc = include_str!("redisson_api.md")]
pub mod redisson_api {}

/// The lock kinds: the type parameter of [`Lock`], one per Redisson lock object. Their contents
/// are private; the [`Client`] method that makes a handle chooses its kind.
pub mod kind {
    pub use crate::fair_lock::{Fair, FairQueue};
    pub use crate::fenced_lock::Fenced;
    pub use crate::lock_kind::LockKind;
    pub use crate::non_reentrant::{NonReentrant, NonReentrantFair, Twin};
    pub use crate::reentrant::Reentrant;
    pub use crate::rw_lock::{Read, Write};
    pub use crate::spin_lock::Spin;
}
