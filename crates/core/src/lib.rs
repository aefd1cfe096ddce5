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
mod codec;
mod cohort;
mod config;
mod connection;
mod credentials;
mod engine;
mod entries;
mod entry_names;
mod error;
mod ledger;
mod locks;
mod name_mapper;
mod names;
mod owner;
mod pubsub;
mod reconciling;
mod scripts;
mod services;
mod synchronizers;
mod telemetry;
mod wake;
mod watchdog;

/// The `redis` crate rlock is built on, for [`Client::query`]'s commands and replies: use it
/// rather than a `redis` dependency of your own, whose version could differ.
pub use redis;

pub use client::{Client, ClientStats};
pub use codec::{Codec, EntryKey};
pub use config::{Config, ProxiedCluster, ShardedPubSub, Topology};
pub use credentials::{Credentials, CredentialsProvider, ProviderError};
pub use engine::Guard;
pub use entries::EntryLocks;
pub use entry_names::{Container, EntryNames, EntryObject};
pub use error::{Error, Operation, Result};
pub use locks::fair_lock::{FairLock, QueuedWaiter};
pub use locks::fenced_lock::{FencedGuard, FencedLock};
pub use locks::group_lock::{GroupGuard, GroupLock};
pub use locks::listener::ChannelListener;
pub use locks::lock::{Holder, Lock, LockGuard, RemainingTtl};
#[allow(deprecated)]
pub use locks::multi_lock::{AnyLock, MultiGuard, MultiLock, RedLock};
pub use locks::non_reentrant::{NonReentrantFairLock, NonReentrantLock};
pub use locks::rw_lock::{ReadLock, ReadWriteLock, WriteLock};
pub use locks::spin_lock::{SpinBackoff, SpinLock};
pub use name_mapper::NameMapper;
pub use owner::Owner;
pub use synchronizers::count_down_latch::CountDownLatch;
pub use synchronizers::expirable_semaphore::{PermitExpirableSemaphore, PermitId};
pub use synchronizers::semaphore::{Semaphore, SemaphorePermits};

#[doc = include_str!("redisson_api.md")]
pub mod redisson_api {}

/// The lock kinds: the type parameter of [`Lock`], one per Redisson lock object. Their contents
/// are private; the [`Client`] method that makes a handle chooses its kind.
pub mod kind {
    pub use crate::locks::fair_lock::{Fair, FairQueue};
    pub use crate::locks::fenced_lock::Fenced;
    pub use crate::locks::lock_kind::LockKind;
    pub use crate::locks::non_reentrant::{NonReentrant, NonReentrantFair, Twin};
    pub use crate::locks::reentrant::Reentrant;
    pub use crate::locks::rw_lock::{Read, Write};
    pub use crate::locks::spin_lock::Spin;
}
