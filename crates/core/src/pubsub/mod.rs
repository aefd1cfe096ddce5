//! One subscriber connection per client, shared by every waiter of every lock.
//!
//! # Implementation details
//!
//! Four files, from the waiters down to the wire:
//!
//! - `registry.rs`, the local half: the [`Registry`] maps each channel to its local end with a
//!   reference count (one per live [`Subscription`]). It is the *desired* state.
//! - `tracker.rs`, the diff: what the server has on the current connection against the desired
//!   set, as plain data (unit-tested without a server).
//! - `task.rs`, the one background task that owns the connection and keeps the server's
//!   subscriptions equal to the desired set, one `SUBSCRIBE`/`UNSUBSCRIBE` batch at a time, while
//!   it keeps dispatching messages. So a channel is subscribed once however many local waiters it
//!   has, and unsubscribed when the last one leaves.
//! - `link.rs`, the connection per topology, below.
//!
//! The connection depends on the topology: a RESP2 pub/sub connection to the server (or to the master
//! Sentinel names, resolved again on every reconnect), or in cluster mode a RESP3 cluster connection
//! that sends each `SUBSCRIBE`/`SSUBSCRIBE` to the node owning the channel's slot and re-subscribes
//! after reconnects and topology changes. When a slot moves, Redis drops its sharded subscriptions
//! with an `SUNSUBSCRIBE` push: the task then subscribes again (the cluster connection follows the
//! `MOVED`) and wakes the channel's waiters.
//!
//! Each channel is registered with the [`WakeRule`](crate::wake::WakeRule) of its kind (docs/protocol.md §3.2, §8.5,
//! §8.7): a lock's `0` wakes one local waiter and `1` every waiter, a semaphore's `n` wakes up to
//! `n`, a latch's `0`/`1` opens/closes it. The wake-ups themselves are [`Wakeups`](crate::wake::Wakeups), a counting
//! primitive that a waiter arms before the retry it guards.
//!
//! When the connection drops, every waiter is woken (it may have missed a message) and falls back to
//! waits bounded by the lock's PTTL; the task reconnects with backoff, re-subscribes every channel and
//! wakes the waiters of each channel once more as its subscription is confirmed. Java does nothing on
//! reconnect and lets waiters sleep out the PTTL; this is the deliberate difference.

mod link;
mod registry;
mod task;
mod tracker;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::connection::{Commands, Deployment};
pub(crate) use registry::{Listening, Registry, Subscription};
use task::SubscriberTask;

/// The client's subscriber: hands out [`Subscription`]s; its task runs until the client is dropped.
#[derive(Debug)]
pub(crate) struct Subscriber {
    registry: Arc<Registry>,
}

impl Subscriber {
    /// Starts the connection task on `runtime`; it stops when `shutdown` is cancelled. `sharded`
    /// selects `SSUBSCRIBE` (cluster mode only).
    ///
    /// A lost subscriber connection marks `commands`' pooled connections as suspect, before waiters
    /// are woken: the server they were opened to went away (restarted, failed over, killed), so a
    /// woken waiter's next try opens a fresh connection, and a server that is down refuses it
    /// plainly (nothing was sent) rather than failing a write whose outcome is then unknown.
    pub(crate) fn start(
        config: &Config,
        deployment: Deployment,
        sharded: bool,
        commands: Commands,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> redis::RedisResult<Self> {
        let registry = Arc::new(Registry::new(config.subscription_timeout));
        let task = SubscriberTask::new(config, deployment, sharded, commands, registry.clone())?;
        drop(runtime.spawn(task.run(shutdown)));
        Ok(Self { registry })
    }

    /// The local half, which waiters use.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
}
