#![doc = include_str!("../../../README.md")]
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
pub use config::{Config, ShardedPubSub, Topology};
pub use error::{Error, Operation, Result};
pub use guard::LockGuard;
pub use lock::{Holder, Lock, RemainingTtl};
pub use owner::Owner;
