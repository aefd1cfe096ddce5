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
//! The connection depends on the topology: a RESP2 pub/sub connection to the server (or to the master
//! Sentinel names, resolved again on every reconnect), or in cluster mode a RESP3 cluster connection
//! that sends each `SUBSCRIBE`/`SSUBSCRIBE` to the node owning the channel's slot and re-subscribes
//! after reconnects and topology changes. When a slot moves, Redis drops its sharded subscriptions
//! with an `SUNSUBSCRIBE` push: the task then subscribes again (the cluster connection follows the
//! `MOVED`) and wakes the channel's waiters.
//!
//! Each channel is registered with the [`WakeRule`] of its kind (docs/protocol.md §3.2, §8.5,
//! §8.7): a lock's `0` wakes one local waiter and `1` every waiter, a semaphore's `n` wakes up to
//! `n`, a latch's `0`/`1` opens/closes it. The wake-ups themselves are [`Wakeups`], a counting
//! primitive that a waiter arms before the retry it guards.
//!
//! When the connection drops, every waiter is woken (it may have missed a message) and falls back to
//! waits bounded by the lock's PTTL; the task reconnects with backoff, re-subscribes every channel and
//! wakes the waiters of each channel once more as its subscription is confirmed. Java does nothing on
//! reconnect and lets waiters sleep out the PTTL; this is the deliberate difference.

#[cfg(feature = "cluster")]
use std::collections::HashMap;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, redact};
#[cfg(feature = "cluster")]
use crate::connection::cluster_builder;
#[cfg(feature = "sentinel")]
use crate::connection::sentinel_client;
use crate::connection::{Commands, Deployment, Rotating, node_client, refused};
use crate::telemetry::{self, Subscriptions};
use crate::wake::{Armed, WakeRule, Wakeups};

/// The shortest and longest pause between reconnect attempts.
const RECONNECT_BACKOFF: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(2));

/// The local end of one channel.
#[derive(Debug)]
pub(crate) struct Channel {
    /// What a message does, as the kind that first subscribed the channel says.
    rule: WakeRule,
    /// The local waiters' wake-ups.
    wakeups: Wakeups,
    /// Whether the server has confirmed the subscription on the current connection.
    subscribed: AtomicBool,
    /// Signalled whenever `subscribed` becomes true.
    confirmed: Notify,
    /// Messages received so far (what a yielding local queue waits to see move).
    messages: AtomicU64,
    /// Signalled on every message (see [`Subscription::heard_after`]).
    heard: Notify,
    /// The registry-wide number of the live period the channel is in (see [`Mark`]).
    period: AtomicU64,
}

/// Where a live channel stood at one instant: its live period and how many messages it had had.
/// The same mark later means that the channel stayed subscribed all along and no message came:
/// nobody published on it in between, or the server would have delivered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    period: u64,
    messages: u64,
}

/// This client listening on a live channel since a mark, for as long as it is kept: what a hold
/// that may pass with no command keeps (see [`crate::cohort`]). Taken before a write, it tells
/// later whether anyone published on the channel since, an unlock of the lock included.
#[derive(Debug)]
pub(crate) struct Listening {
    subscription: Subscription,
    mark: Mark,
}

impl Listening {
    /// Whether the channel stayed live since the mark and carried no message.
    pub(crate) fn unchanged(&self) -> bool {
        self.subscription.mark() == Some(self.mark)
    }

    /// Listening on the same channel from the same mark, for another party (a streak's watch
    /// follows its first holder's listening): it keeps the channel subscribed too.
    pub(crate) fn follow(&self) -> Self {
        Self {
            subscription: self
                .subscription
                .registry
                .subscribe(&self.subscription.name, self.subscription.channel.rule),
            mark: self.mark,
        }
    }

    /// Completes once the channel is no longer [unchanged](Listening::unchanged): a message came,
    /// or it stopped being live or began a new live period (messages may have been missed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn changed(&self) {
        loop {
            let heard = self.subscription.channel.heard.notified();
            tokio::pin!(heard);
            let _ = heard.as_mut().enable();
            if !self.unchanged() {
                return;
            }
            heard.await;
        }
    }

    /// Marks the channel as it stands now, once it is live: what was heard so far has been acted
    /// on.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits, and marks nothing if dropped.
    pub(crate) async fn mark_now(&mut self) {
        loop {
            if let Some(mark) = self.subscription.mark() {
                self.mark = mark;
                return;
            }
            self.subscription.confirmed().await;
        }
    }
}

impl Channel {
    fn new(rule: WakeRule) -> Self {
        Self {
            rule,
            wakeups: Wakeups::default(),
            subscribed: AtomicBool::new(false),
            confirmed: Notify::new(),
            messages: AtomicU64::new(0),
            heard: Notify::new(),
            period: AtomicU64::new(0),
        }
    }
}

/// The desired subscriptions and their local ends: what waiters see of the subscriber.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Channel name → (local subscriptions, channel). Hashed with foldhash, as every map a lock
    /// and unlock looks in (see [`Holds`]).
    ///
    /// [`Holds`]: crate::services::Holds
    channels: Mutex<foldhash::HashMap<String, (usize, Arc<Channel>)>>,
    /// Wakes the connection task when the desired set changed.
    changed: Notify,
    /// How many channels are live (`subscribed`), as a metric.
    live: Subscriptions,
    /// Whether the server refuses subscriptions for good (an ACL, a proxy without pub/sub): then
    /// nothing is subscribed and every waiter polls.
    refused: AtomicBool,
    /// Live periods begun so far, of all channels: each confirmation of a subscription, and each
    /// interruption that may have lost messages, begins a new one, numbered from here.
    periods: AtomicU64,
}

impl Registry {
    /// Registers interest in `channel`, whose messages wake as `rule` says. The subscription is sent
    /// in the background; see [`Subscription::confirmed`].
    pub(crate) fn subscribe(self: &Arc<Self>, channel: &str, rule: WakeRule) -> Subscription {
        let mut channels = self.channels.lock();
        let (refs, entry) = channels
            .entry(channel.to_owned())
            .or_insert_with(|| (0, Arc::new(Channel::new(rule))));
        *refs += 1;
        let entry = entry.clone();
        if *refs == 1 {
            self.changed.notify_one();
        }
        Subscription {
            registry: self.clone(),
            name: channel.to_owned(),
            channel: entry,
        }
    }

    /// Joins `channel` only if it is already subscribed and live (another local waiter listens on it):
    /// then joining costs no round trip.
    pub(crate) fn join_live(self: &Arc<Self>, channel: &str) -> Option<Subscription> {
        let mut channels = self.channels.lock();
        let (refs, entry) = channels.get_mut(channel)?;
        if !entry.subscribed.load(Ordering::Acquire) {
            return None;
        }
        *refs += 1;
        Some(Subscription {
            registry: self.clone(),
            name: channel.to_owned(),
            channel: entry.clone(),
        })
    }

    /// How many messages `channel` has received while subscribed (0 when it is not).
    pub(crate) fn messages(&self, channel: &str) -> u64 {
        self.channel(channel)
            .map_or(0, |c| c.messages.load(Ordering::Acquire))
    }

    /// Listens on `channel` from now on, if it is already live (another local waiter listens):
    /// joining costs no round trip, and [`Listening::unchanged`] tells later whether anything was
    /// published on it since.
    pub(crate) fn listen(self: &Arc<Self>, channel: &str) -> Option<Listening> {
        let subscription = self.join_live(channel)?;
        let mark = subscription.mark()?;
        Some(Listening { subscription, mark })
    }

    /// `channel` begins a new live period: what was marked before may have missed messages.
    fn begin_period(&self, channel: &Channel) {
        let period = self.periods.fetch_add(1, Ordering::AcqRel) + 1;
        channel.period.store(period, Ordering::Release);
        channel.heard.notify_waiters();
    }

    /// How many channels are subscribed (or being subscribed) right now.
    pub(crate) fn channel_count(&self) -> usize {
        self.channels.lock().len()
    }

    fn channel(&self, name: &str) -> Option<Arc<Channel>> {
        self.channels.lock().get(name).map(|(_, c)| c.clone())
    }

    /// Marks freshly subscribed channels live and wakes their waiters once: they may have missed a
    /// message while the subscription was being (re-)established.
    pub(crate) fn confirm(&self, subscribed: &[String]) {
        let channels = self.channels.lock();
        for name in subscribed {
            if let Some((_, channel)) = channels.get(name) {
                if !channel.subscribed.swap(true, Ordering::AcqRel) {
                    self.begin_period(channel);
                    self.live.live();
                }
                channel.confirmed.notify_waiters();
                channel.wakeups.wake_all();
            }
        }
    }

    /// Delivers a message to the channel's local waiters, by the channel's wake rule.
    pub(crate) fn dispatch(&self, name: &str, payload: &[u8]) {
        let Some(channel) = self.channel(name) else {
            return;
        };
        let _ = channel.messages.fetch_add(1, Ordering::AcqRel);
        channel.heard.notify_waiters();
        if !channel.rule.apply(payload, &channel.wakeups) {
            tracing::debug!(
                channel = name,
                "ignored a message its wake rule does not know"
            );
        }
    }

    /// One channel stopped being live: its waiters re-try now, then wait bounded by the PTTL.
    fn lost(&self, name: &str) {
        if let Some(channel) = self.channel(name) {
            if channel.subscribed.swap(false, Ordering::AcqRel) {
                self.live.gone();
            }
            channel.heard.notify_waiters();
            channel.wakeups.wake_all();
        }
    }

    /// Messages may have been missed: every waiter re-tries, and every channel begins a new period.
    fn wake_all(&self) {
        for (_, channel) in self.channels.lock().values() {
            self.begin_period(channel);
            channel.wakeups.wake_all();
        }
    }

    /// Whether the server refuses subscriptions: waiters poll instead of waiting for a confirmation.
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::Acquire)
    }

    /// The server refused a subscription for good: every waiter stops waiting for a confirmation and
    /// polls from now on.
    fn refuse(&self) {
        self.refused.store(true, Ordering::Release);
        for (_, channel) in self.channels.lock().values() {
            channel.confirmed.notify_waiters();
            channel.wakeups.wake_all();
        }
    }

    /// Every channel stops being live; every waiter re-tries now and then waits bounded by the PTTL.
    fn connection_lost(&self) {
        for (_, channel) in self.channels.lock().values() {
            if channel.subscribed.swap(false, Ordering::AcqRel) {
                self.live.gone();
            }
            channel.heard.notify_waiters();
            channel.wakeups.wake_all();
        }
    }
}

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
        let registry = Arc::new(Registry::default());
        let task = Connection {
            commands,
            registry: registry.clone(),
            endpoint: Endpoint::of(config, deployment, sharded)?,
            rotating: Rotating::of(config),
            deployment,
            sharded,
            connect_timeout: config.connect_timeout,
            keepalive: Keepalive {
                interval: config.ping_connection_interval,
                timeout: config.command_timeout,
            },
            url: redact(&config.url),
        };
        drop(runtime.spawn(task.run(shutdown)));
        Ok(Self { registry })
    }

    /// The local half, which waiters use.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
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
    /// Arms this waiter for the channel's next wake-up. Arm before the retry it guards, so a message
    /// that arrives during the retry is banked instead of lost.
    pub(crate) fn arm(&self) -> Armed<'_> {
        self.channel.wakeups.arm()
    }

    /// Whether the server currently delivers this channel's messages to us.
    pub(crate) fn is_live(&self) -> bool {
        self.channel.subscribed.load(Ordering::Acquire)
    }

    /// Completes once the server has confirmed the subscription, or has refused subscriptions for
    /// good (then [`Subscription::is_live`] stays false).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn confirmed(&self) {
        loop {
            let confirmed = self.channel.confirmed.notified();
            tokio::pin!(confirmed);
            let _ = confirmed.as_mut().enable();
            if self.is_live() || self.registry.refused() {
                return;
            }
            confirmed.await;
        }
    }

    /// How many messages the channel has received so far.
    pub(crate) fn messages(&self) -> u64 {
        self.channel.messages.load(Ordering::Acquire)
    }

    /// Where the channel stands now, if it is live.
    fn mark(&self) -> Option<Mark> {
        if !self.is_live() {
            return None;
        }
        Some(Mark {
            period: self.channel.period.load(Ordering::Acquire),
            messages: self.messages(),
        })
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.registry.channels.lock();
        if let Some((refs, _)) = channels.get_mut(&self.name) {
            *refs -= 1;
            if *refs == 0 {
                if let Some((_, channel)) = channels.remove(&self.name)
                    && channel.subscribed.load(Ordering::Acquire)
                {
                    self.registry.live.gone();
                }
                self.registry.changed.notify_one();
            }
        }
    }
}

/// Where the subscriber connects.
enum Endpoint {
    Node(Box<redis::Client>),
    #[cfg(feature = "sentinel")]
    Sentinel(Box<redis::sentinel::SentinelClient>),
    #[cfg(feature = "cluster")]
    Cluster(Box<ClusterEndpoint>),
}

/// How to reach the cluster, and how to subscribe there.
#[cfg(feature = "cluster")]
struct ClusterEndpoint {
    config: Config,
    sharded: bool,
}

impl Endpoint {
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    fn of(config: &Config, deployment: Deployment, sharded: bool) -> redis::RedisResult<Self> {
        Ok(match deployment {
            Deployment::Node => Self::Node(Box::new(node_client(config, &config.url)?)),
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel => Self::Sentinel(Box::new(sentinel_client(config)?)),
            #[cfg(feature = "cluster")]
            Deployment::Cluster => Self::Cluster(Box::new(ClusterEndpoint {
                config: config.clone(),
                sharded,
            })),
        })
    }

    /// Opens the link and the stream of its events.
    async fn connect(&mut self) -> redis::RedisResult<(Link, Events)> {
        let node = |pubsub: redis::aio::PubSub| {
            let (sink, messages) = pubsub.split();
            let events = messages.map(|m| Event::Message {
                channel: m.get_channel_name().to_owned(),
                payload: m.get_payload_bytes().to_vec(),
            });
            (Link::Node(sink), Box::pin(events) as Events)
        };
        match self {
            Self::Node(client) => Ok(node(client.get_async_pubsub().await?)),
            // Resolve the master anew on every connect: it may have failed over.
            #[cfg(feature = "sentinel")]
            Self::Sentinel(sentinel) => Ok(node(
                sentinel
                    .async_get_client()
                    .await?
                    .get_async_pubsub()
                    .await?,
            )),
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => {
                // Messages arrive as RESP3 pushes; each connection gets a channel of its own.
                let (sender, pushes) = tokio::sync::mpsc::unbounded_channel();
                let conn = cluster_builder(&cluster.config)
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(sender)
                    .build()?
                    .get_async_connection()
                    .await?;
                let events =
                    tokio_stream_of(pushes).filter_map(|push| async move { Event::of_push(push) });
                Ok((
                    Link::Cluster {
                        conn,
                        sharded: cluster.sharded,
                    },
                    Box::pin(events),
                ))
            }
        }
    }
}

/// An unbounded receiver as a stream.
#[cfg(feature = "cluster")]
fn tokio_stream_of<T: Send + 'static>(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// What the link reports.
// Only the cluster link reports interruptions and dropped subscriptions.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
enum Event {
    /// A message on a channel.
    Message { channel: String, payload: Vec<u8> },
    /// The cluster connection lost a node connection; it re-subscribes by itself, but messages may
    /// have been missed meanwhile.
    Interrupted,
    /// The server dropped a subscription (a sharded channel whose slot moved, or our own unsubscribe).
    Unsubscribed(String),
}

impl Event {
    #[cfg(feature = "cluster")]
    fn of_push(push: redis::PushInfo) -> Option<Self> {
        use redis::PushKind;
        let text = |value: &redis::Value| match value {
            redis::Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
            redis::Value::SimpleString(text) => Some(text.clone()),
            _ => None,
        };
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                let channel = text(push.data.first()?)?;
                let payload = match push.data.get(1)? {
                    redis::Value::BulkString(bytes) => bytes.clone(),
                    other => text(other)?.into_bytes(),
                };
                Some(Self::Message { channel, payload })
            }
            PushKind::Disconnection => Some(Self::Interrupted),
            PushKind::Unsubscribe | PushKind::SUnsubscribe => {
                Some(Self::Unsubscribed(text(push.data.first()?)?))
            }
            _ => None,
        }
    }
}

type Events = Pin<Box<dyn futures::Stream<Item = Event> + Send>>;

/// The subscribing half of a connection.
enum Link {
    Node(redis::aio::PubSubSink),
    #[cfg(feature = "cluster")]
    Cluster {
        conn: redis::cluster_async::ClusterConnection,
        sharded: bool,
    },
}

impl Link {
    /// A `PING` on the link: on every node that holds subscriptions, for a cluster.
    fn ping(&self) -> Change {
        match self {
            Self::Node(sink) => {
                let mut sink = sink.clone();
                Box::pin(async move { sink.ping::<redis::Value>().await.map(drop) })
            }
            #[cfg(feature = "cluster")]
            Self::Cluster { conn, .. } => {
                use redis::cluster_routing::{
                    MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo,
                };
                let mut conn = conn.clone();
                let every_node = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllNodes,
                    Some(ResponsePolicy::AllSucceeded),
                ));
                Box::pin(async move {
                    conn.route_command(redis::cmd("PING"), every_node)
                        .await
                        .map(drop)
                })
            }
        }
    }

    fn subscribe(&self, channels: Vec<String>) -> Change {
        self.change(channels, true)
    }

    fn unsubscribe(&self, channels: Vec<String>) -> Change {
        self.change(channels, false)
    }

    fn change(&self, channels: Vec<String>, subscribe: bool) -> Change {
        match self {
            Self::Node(sink) => {
                let mut sink = sink.clone();
                Box::pin(async move {
                    if subscribe {
                        sink.subscribe(channels).await
                    } else {
                        sink.unsubscribe(channels).await
                    }
                })
            }
            #[cfg(feature = "cluster")]
            Self::Cluster { conn, sharded } => {
                let (mut conn, sharded) = (conn.clone(), *sharded);
                Box::pin(async move {
                    // One command per slot: a sharded command's channels must share a slot.
                    for batch in by_slot(channels, sharded) {
                        match (sharded, subscribe) {
                            (true, true) => conn.ssubscribe(batch).await?,
                            (true, false) => conn.sunsubscribe(batch).await?,
                            (false, true) => conn.subscribe(batch).await?,
                            (false, false) => conn.unsubscribe(batch).await?,
                        }
                    }
                    Ok(())
                })
            }
        }
    }
}

/// `channels` grouped by cluster slot when `sharded`, else in one group.
#[cfg(feature = "cluster")]
fn by_slot(channels: Vec<String>, sharded: bool) -> Vec<Vec<String>> {
    if !sharded {
        return vec![channels];
    }
    let mut groups: HashMap<redis::cluster_routing::Slot, Vec<String>> = HashMap::new();
    for channel in channels {
        groups
            .entry(redis::cluster_routing::Slot::for_key(&channel))
            .or_default()
            .push(channel);
    }
    groups.into_values().collect()
}

/// The task that owns the subscriber connection.
struct Connection {
    /// The client's command connections, marked suspect when this connection is lost.
    commands: Commands,
    registry: Arc<Registry>,
    endpoint: Endpoint,
    /// Where each connect gets fresh credentials, if it does: then the endpoint is made anew.
    rotating: Option<Rotating>,
    deployment: Deployment,
    sharded: bool,
    connect_timeout: Duration,
    keepalive: Keepalive,
    url: String,
}

/// How the subscriber connection is kept honest (Redisson's `pingConnectionInterval`): a
/// subscriber sends nothing while its channels do not change, so a connection cut without a reset
/// (a partition, a half-open TCP connection, a proxy that stopped forwarding) would stay "live" and
/// deaf for good. Every `interval` (zero: never) each link is sent a `PING`; one that is not
/// answered within `timeout` declares the connection dead: waiters are woken, every channel begins
/// a new live period (which ends the free hand-offs that relied on it, see [`Listening`]), and the
/// connection is made anew and re-subscribed.
#[derive(Clone, Copy, Debug)]
struct Keepalive {
    interval: Duration,
    timeout: Duration,
}

type Change = Pin<Box<dyn Future<Output = redis::RedisResult<()>> + Send>>;

/// How serving one connection ended.
enum Served {
    /// The client shut down.
    ShutDown,
    /// The connection broke (or a subscription failed on it): connect again.
    Lost,
    /// The server refuses to subscribe (`NOPERM`, `unknown command`): waiters poll for good.
    Refused(redis::RedisError),
}

impl Connection {
    async fn run(mut self, shutdown: CancellationToken) {
        let mut backoff = RECONNECT_BACKOFF.0;
        // Whether a connection was lost (or never made): the next one is a reconnect.
        let mut reconnecting = false;
        loop {
            let connect = tokio::time::timeout(self.connect_timeout, async {
                if let Some(rotating) = &self.rotating {
                    self.endpoint =
                        Endpoint::of(&rotating.config().await?, self.deployment, self.sharded)?;
                }
                self.endpoint.connect().await
            });
            let connected = tokio::select! {
                () = shutdown.cancelled() => return,
                connected = connect => connected,
            };
            match connected {
                Ok(Ok((link, events))) => {
                    backoff = RECONNECT_BACKOFF.0;
                    if reconnecting {
                        telemetry::reconnected(&self.url, self.registry.channel_count());
                    } else {
                        tracing::debug!(url = %self.url, "subscriber connected");
                    }
                    match self.serve(link, events, &shutdown).await {
                        // A connection that ends as the client shuts down was not lost.
                        _ if shutdown.is_cancelled() => return,
                        Served::ShutDown => return,
                        Served::Refused(e) => {
                            tracing::warn!(
                                url = %self.url,
                                error = %e,
                                "the server refuses subscriptions: waiters poll (every 25 ms up \
                                 to 1 s, and at the latest when the lock's TTL ends) instead of \
                                 being woken by unlock messages"
                            );
                            self.registry.refuse();
                            return shutdown.cancelled().await;
                        }
                        Served::Lost => self.commands.connection_failed(),
                    }
                    tracing::warn!(url = %self.url, "subscriber connection lost; reconnecting");
                }
                Ok(Err(e)) => {
                    tracing::warn!(url = %self.url, error = %e, "subscriber cannot connect")
                }
                Err(_) => tracing::warn!(url = %self.url, "subscriber connect timed out"),
            }
            reconnecting = true;
            self.registry.connection_lost();
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(RECONNECT_BACKOFF.1);
        }
    }

    /// Serves one connection until it breaks, the client shuts down or the server refuses to
    /// subscribe.
    async fn serve(&self, link: Link, mut events: Events, shutdown: &CancellationToken) -> Served {
        // Channels the server has confirmed (or that are being subscribed by `change`).
        let mut server: HashSet<String> = HashSet::new();
        let mut change: Option<(Change, Vec<String>)> = None;
        let Keepalive { interval, timeout } = self.keepalive;
        let mut next_ping = Instant::now() + interval;
        let mut ping: Option<Change> = None;
        loop {
            if change.is_none() {
                change = self.next_change(&link, &mut server);
            }
            tokio::select! {
                // Shutdown first: the connection may close because the client is shutting down.
                biased;
                () = shutdown.cancelled() => return Served::ShutDown,
                event = events.next() => match event {
                    Some(Event::Message { channel, payload }) => self.registry.dispatch(&channel, &payload),
                    Some(Event::Interrupted) => self.registry.wake_all(),
                    Some(Event::Unsubscribed(channel)) => {
                        if self.registry.channels.lock().contains_key(&channel)
                            && !change.as_ref().is_some_and(|(_, names)| names.contains(&channel))
                        {
                            telemetry::subscription_dropped(&channel);
                            let _ = server.remove(&channel);
                            self.registry.lost(&channel);
                        }
                    }
                    None => return Served::Lost,
                },
                result = async {
                    match change.as_mut() {
                        Some((pending, _)) => pending.await,
                        None => std::future::pending().await,
                    }
                }, if change.is_some() => {
                    let subscribed = change.take().map(|(_, names)| names).unwrap_or_default();
                    match result {
                        Err(e) if refused(&e) => return Served::Refused(e),
                        Err(e) => {
                            tracing::warn!(error = %e, "subscription change failed");
                            return Served::Lost;
                        }
                        Ok(()) => {}
                    }
                    self.registry.confirm(&subscribed);
                }
                () = self.registry.changed.notified(), if change.is_none() => {}
                () = tokio::time::sleep_until(next_ping), if ping.is_none() && !interval.is_zero() => {
                    let pinging = link.ping();
                    ping = Some(Box::pin(async move {
                        match tokio::time::timeout(timeout, pinging).await {
                            Ok(pinged) => pinged,
                            Err(_) => Err(redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))),
                        }
                    }));
                }
                pinged = async {
                    match ping.as_mut() {
                        Some(pending) => pending.await,
                        None => std::future::pending().await,
                    }
                }, if ping.is_some() => {
                    ping = None;
                    next_ping = Instant::now() + interval;
                    if let Err(e) = pinged {
                        tracing::warn!(
                            url = %self.url,
                            error = %e,
                            "the subscriber connection did not answer PING in time; declaring it dead"
                        );
                        return Served::Lost;
                    }
                }
            }
        }
    }

    /// The next batch that brings the server's subscriptions to the desired set, and the channels it
    /// subscribes. Marks channels that are already subscribed as confirmed.
    fn next_change(
        &self,
        link: &Link,
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
                    self.registry.live.live();
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
            return Some((link.unsubscribe(stale), Vec::new()));
        }
        if missing.is_empty() {
            return None;
        }
        server.extend(missing.iter().cloned());
        Some((link.subscribe(missing.clone()), missing))
    }
}
