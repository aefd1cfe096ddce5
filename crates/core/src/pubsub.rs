//! One subscriber connection per client, shared by every waiter of every lock.
//!
//! # Implementation details
//!
//! The registry maps each channel to a [`Channel`] with a reference count (one per live
//! [`Subscription`]) and a [`Notify`]. The registry is the *desired* state; one background task owns
//! the connection and keeps the server's subscriptions equal to it, one `SUBSCRIBE`/`UNSUBSCRIBE`
//! batch at a time, while it keeps dispatching messages. So a channel is subscribed once however
//! many local waiters it has, and unsubscribed when the last one leaves.
//!
//! Messages follow Redisson's rule (PROTOCOL.md §3.2): `0` wakes one local waiter (or is banked for
//! the next one, like Java's semaphore permit), `1` wakes every waiter, anything else is ignored.
//!
//! When the connection drops, every waiter is woken (it may have missed a message) and falls back to
//! waits bounded by the lock's PTTL; the task reconnects with backoff, re-subscribes every channel and
//! wakes the waiters of each channel once more as its subscription is confirmed. Java does nothing on
//! reconnect and lets waiters sleep out the PTTL; this is the deliberate difference.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, redact};

/// The shortest and longest pause between reconnect attempts.
const RECONNECT_BACKOFF: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(2));

/// The local end of one channel.
#[derive(Debug, Default)]
pub(crate) struct Channel {
    /// Wakes waiters on an unlock message.
    wake: Notify,
    /// Whether the server has confirmed the subscription on the current connection.
    subscribed: AtomicBool,
    /// Signalled whenever `subscribed` becomes true.
    confirmed: Notify,
}

#[derive(Debug, Default)]
struct Registry {
    /// Channel name → (local subscriptions, channel).
    channels: Mutex<HashMap<String, (usize, Arc<Channel>)>>,
    /// Wakes the connection task when the desired set changed.
    changed: Notify,
}

/// The client's subscriber: hands out [`Subscription`]s; its task runs until the client is dropped.
#[derive(Debug)]
pub(crate) struct Subscriber {
    registry: Arc<Registry>,
}

impl Subscriber {
    /// Starts the connection task on `runtime`; it stops when `shutdown` is cancelled.
    pub(crate) fn start(
        config: &Config,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> redis::RedisResult<Self> {
        let client = redis::Client::open(config.url.as_str())?;
        let registry = Arc::new(Registry::default());
        let task = Connection {
            registry: registry.clone(),
            client,
            connect_timeout: config.connect_timeout,
            url: redact(&config.url),
        };
        drop(runtime.spawn(task.run(shutdown)));
        Ok(Self { registry })
    }

    /// Registers interest in `channel`. The subscription is sent in the background; see
    /// [`Subscription::confirmed`].
    pub(crate) fn subscribe(&self, channel: &str) -> Subscription {
        let mut channels = self.registry.channels.lock();
        let (refs, entry) = channels
            .entry(channel.to_owned())
            .or_insert_with(|| (0, Arc::new(Channel::default())));
        *refs += 1;
        let entry = entry.clone();
        if *refs == 1 {
            self.registry.changed.notify_one();
        }
        Subscription {
            registry: self.registry.clone(),
            name: channel.to_owned(),
            channel: entry,
        }
    }

    /// Joins `channel` only if it is already subscribed and live (another local waiter listens on it):
    /// then joining costs no round trip.
    pub(crate) fn join_live(&self, channel: &str) -> Option<Subscription> {
        let mut channels = self.registry.channels.lock();
        let (refs, entry) = channels.get_mut(channel)?;
        if !entry.subscribed.load(Ordering::Acquire) {
            return None;
        }
        *refs += 1;
        Some(Subscription {
            registry: self.registry.clone(),
            name: channel.to_owned(),
            channel: entry.clone(),
        })
    }

    /// How many channels are subscribed (or being subscribed) right now.
    pub(crate) fn channel_count(&self) -> usize {
        self.registry.channels.lock().len()
    }
}

/// One waiter's interest in a channel. Dropping it releases the interest; the last one unsubscribes.
#[derive(Debug)]
pub(crate) struct Subscription {
    registry: Arc<Registry>,
    name: String,
    channel: Arc<Channel>,
}

impl Subscription {
    /// A future that completes on the next wake-up of this channel. Call `enable()` on it before the
    /// retry that it guards, so a message that arrives during the retry is not lost.
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.channel.wake.notified()
    }

    /// Hands a consumed wake-up on to the next local waiter (used when a woken waiter is cancelled
    /// before it could use its turn).
    pub(crate) fn pass_on_wake(&self) {
        self.channel.wake.notify_one();
    }

    /// Whether the server currently delivers this channel's messages to us.
    pub(crate) fn is_live(&self) -> bool {
        self.channel.subscribed.load(Ordering::Acquire)
    }

    /// Completes once the server has confirmed the subscription.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn confirmed(&self) {
        loop {
            let confirmed = self.channel.confirmed.notified();
            tokio::pin!(confirmed);
            let _ = confirmed.as_mut().enable();
            if self.is_live() {
                return;
            }
            confirmed.await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.registry.channels.lock();
        if let Some((refs, _)) = channels.get_mut(&self.name) {
            *refs -= 1;
            if *refs == 0 {
                let _ = channels.remove(&self.name);
                self.registry.changed.notify_one();
            }
        }
    }
}

/// The task that owns the subscriber connection.
struct Connection {
    registry: Arc<Registry>,
    client: redis::Client,
    connect_timeout: Duration,
    url: String,
}

type Change = Pin<Box<dyn Future<Output = redis::RedisResult<()>> + Send>>;

impl Connection {
    async fn run(self, shutdown: CancellationToken) {
        let mut backoff = RECONNECT_BACKOFF.0;
        loop {
            let connect =
                tokio::time::timeout(self.connect_timeout, self.client.get_async_pubsub());
            let pubsub = tokio::select! {
                () = shutdown.cancelled() => return,
                connected = connect => connected,
            };
            match pubsub {
                Ok(Ok(pubsub)) => {
                    backoff = RECONNECT_BACKOFF.0;
                    tracing::debug!(url = %self.url, "subscriber connected");
                    if self.serve(pubsub, &shutdown).await.is_break() {
                        return;
                    }
                    tracing::warn!(url = %self.url, "subscriber connection lost; reconnecting");
                }
                Ok(Err(e)) => {
                    tracing::warn!(url = %self.url, error = %e, "subscriber cannot connect")
                }
                Err(_) => tracing::warn!(url = %self.url, "subscriber connect timed out"),
            }
            self.connection_lost();
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(RECONNECT_BACKOFF.1);
        }
    }

    /// Serves one connection until it breaks (`Continue`) or the client shuts down (`Break`).
    async fn serve(
        &self,
        pubsub: redis::aio::PubSub,
        shutdown: &CancellationToken,
    ) -> std::ops::ControlFlow<()> {
        let (sink, mut messages) = pubsub.split();
        // Channels the server has confirmed (or that are being subscribed by `change`).
        let mut server: HashSet<String> = HashSet::new();
        let mut change: Option<(Change, Vec<String>)> = None;
        loop {
            if change.is_none() {
                change = self.next_change(&sink, &mut server);
            }
            tokio::select! {
                () = shutdown.cancelled() => return std::ops::ControlFlow::Break(()),
                message = messages.next() => match message {
                    Some(message) => self.dispatch(&message),
                    None => return std::ops::ControlFlow::Continue(()),
                },
                result = async {
                    match change.as_mut() {
                        Some((pending, _)) => pending.await,
                        None => std::future::pending().await,
                    }
                }, if change.is_some() => {
                    let subscribed = change.take().map(|(_, names)| names).unwrap_or_default();
                    if result.is_err() {
                        return std::ops::ControlFlow::Continue(());
                    }
                    self.confirm(&subscribed);
                }
                () = self.registry.changed.notified(), if change.is_none() => {}
            }
        }
    }

    /// The next batch that brings the server's subscriptions to the desired set, and the channels it
    /// subscribes. Marks channels that are already subscribed as confirmed.
    fn next_change(
        &self,
        sink: &redis::aio::PubSubSink,
        server: &mut HashSet<String>,
    ) -> Option<(Change, Vec<String>)> {
        let channels = self.registry.channels.lock();
        let stale: Vec<String> = server
            .iter()
            .filter(|name| !channels.contains_key(*name))
            .cloned()
            .collect();
        let mut missing = Vec::new();
        for (name, (_, channel)) in channels.iter() {
            if server.contains(name) {
                if !channel.subscribed.swap(true, Ordering::AcqRel) {
                    channel.confirmed.notify_waiters();
                }
            } else {
                missing.push(name.clone());
            }
        }
        drop(channels);
        if !stale.is_empty() {
            for name in &stale {
                let _ = server.remove(name);
            }
            let mut sink = sink.clone();
            return Some((
                Box::pin(async move { sink.unsubscribe(stale).await }),
                Vec::new(),
            ));
        }
        if missing.is_empty() {
            return None;
        }
        server.extend(missing.iter().cloned());
        let mut sink = sink.clone();
        let names = missing.clone();
        Some((
            Box::pin(async move { sink.subscribe(names).await }),
            missing,
        ))
    }

    /// Marks freshly subscribed channels live and wakes their waiters once: they may have missed a
    /// message while the subscription was being (re-)established.
    fn confirm(&self, subscribed: &[String]) {
        let channels = self.registry.channels.lock();
        for name in subscribed {
            if let Some((_, channel)) = channels.get(name) {
                channel.subscribed.store(true, Ordering::Release);
                channel.confirmed.notify_waiters();
                channel.wake.notify_waiters();
            }
        }
    }

    fn dispatch(&self, message: &redis::Msg) {
        let name = message.get_channel_name();
        let Some(channel) = self
            .registry
            .channels
            .lock()
            .get(name)
            .map(|(_, c)| c.clone())
        else {
            return;
        };
        // Java decodes payloads with Long.valueOf: exactly an optionally signed decimal integer.
        let value = std::str::from_utf8(message.get_payload_bytes())
            .ok()
            .and_then(|text| text.parse::<i64>().ok());
        match value {
            Some(0) => channel.wake.notify_one(),
            Some(1) => channel.wake.notify_waiters(),
            _ => tracing::debug!(channel = name, "ignored a message that is neither 0 nor 1"),
        }
    }

    /// Every channel stops being live; every waiter re-tries now and then waits bounded by the PTTL.
    fn connection_lost(&self) {
        for (_, channel) in self.registry.channels.lock().values() {
            channel.subscribed.store(false, Ordering::Release);
            channel.wake.notify_waiters();
        }
    }
}
