//! Command connections: a deadpool pool of multiplexed connections with deadlines on everything.
//!
//! One pooled `Conn` (`pool.rs`) is a multiplexed connection to a server (single server, master, or the master
//! Sentinel names, resolved again for every new connection) or a cluster connection that routes by
//! slot and follows `MOVED`/`ASK`.
//!
//! No layer below rlock sends a request twice. A request whose connection broke or whose deadline
//! passed may have run, and only rlock can reconcile it (the acquire's undo, the unlock latch,
//! `OutcomeUnknown`): redis-rs's multiplexed connections never re-send, the pool opens new
//! connections for new requests only, and the cluster client's own retries are off, with
//! [`cluster`] following the redirects and refusals that prove a request did not run. The only
//! re-send below rlock is redis-rs's `EVALSHA` after `NOSCRIPT`, which did not run either.
//!
//! Each part is a file of its own:
//!
//! - [`deployment`]: which of the topologies this build supports a configuration needs.
//! - [`clients`]: redis-rs clients for the configured servers, which the subscriber (`pubsub`)
//!   opens its connections with too.
//! - [`pool`]: the pooled connection and the deadpool manager that opens and retires it.
//! - [`commands`]: the pool plus the deadlines every command runs under, and lock writes with
//!   `WAIT` for the master's replicas.
//! - [`failure`]: what the error of a failed command says about the command and its connection.
//! - [`cluster`]: cluster requests sent again only when Redis proved they did not run.
//! - [`probe`]: what the server lets rlock do, found out once as a client connects.

#[cfg(feature = "cluster")]
pub(crate) use clients::cluster_builder;
#[cfg(feature = "sentinel")]
pub(crate) use clients::sentinel_client;
pub(crate) use clients::{Rotating, node_client};
pub(crate) use commands::{Commands, Unknown, Written};
pub(crate) use deployment::Deployment;
pub(crate) use failure::{outcome_unknown, refused};
pub(crate) use pool::{Connection, Queueing};

mod clients;
#[cfg(feature = "cluster")]
mod cluster;
mod commands;
mod deployment;
mod failure;
mod pool;
pub(crate) mod probe;

/// Where a key lives: its cluster hash slot, for what is kept per master (replica counts) and for
/// the commands that must not cross slots (renewal batches, latch deletions).
pub(crate) use redis::cluster_routing::Slot;
