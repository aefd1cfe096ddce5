//! What the scenarios share: a [`Party`] is a client of either side (the Redisson emulator or
//! rlock) behind one interface, so that every scenario is written once and run in both directions;
//! [`Party::get`] hands out a [`PartyLock`] of any [`Kind`], so that the scenarios every lock kind
//! shares are written once and run for each kind; [`Redis`] and [`Listener`] observe the server
//! directly.
//!
//! A new kind plugs in here: a [`Kind`] variant (with its channel), its objects in [`Party::get`]
//! and the arms of [`PartyLock`]'s methods, and a line in [`every_kind!`]'s list, which runs the
//! generic scenarios for it. Its own scenarios go into a module of their own.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock::{Owner, ShardedPubSub};
use rlock_tests::RedisServer;
use rlock_tests::harness;
use rlock_tests::redisson::{
    JavaClient, JavaConfig, JavaLock, RedissonVersion, ThreadId, lock_channel,
};
use rlock_tests::topology::Cluster;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The Redisson version scenarios use unless they say otherwise: HEAD.
pub(crate) const JAVA_VERSION: RedissonVersion = RedissonVersion::V4;

/// How soon a waiter must own the lock after the other side released it. Typical figures are a
/// millisecond or two; the margin is for a loaded 2-core machine.
pub(crate) const WAKE_LIMIT: Duration = Duration::from_millis(100);

/// How long a scenario waits for a waiter that should already be awake: far below the 30 s PTTL
/// it would otherwise sleep out, so a lost wake-up fails fast.
const WOKEN_LIMIT: Duration = Duration::from_secs(5);

/// The result of a waiter task that should own the lock now (or very soon).
pub(crate) async fn woken<T>(waiting: JoinHandle<T>) -> T {
    tokio::time::timeout(WOKEN_LIMIT, waiting)
        .await
        .expect("the waiter was not woken (it would sleep out the PTTL)")
        .expect("waiter task")
}

/// Which implementation a party runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// The Redisson wire emulator.
    Java,
    /// rlock.
    Rlock,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Java => "java",
            Self::Rlock => "rlock",
        })
    }
}

/// A kind of Redisson object that both sides implement, and the generic scenarios run for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The reentrant lock: Redisson's `RLock` (`getLock`), rlock's `Lock`.
    Reentrant,
}

impl Kind {
    /// The channel that unlocks of `name` publish on and its waiters subscribe to.
    pub(crate) fn channel(self, name: &str) -> String {
        match self {
            Self::Reentrant => lock_channel(name),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reentrant => "RLock",
        })
    }
}

/// One client of either side.
#[derive(Clone, Debug)]
pub(crate) enum Party {
    Java(JavaClient),
    Rlock(rlock::Client),
}

impl Party {
    /// A client of `side` with default settings (Java: [`JAVA_VERSION`]).
    pub(crate) async fn connect(side: Side, server: &RedisServer) -> Self {
        Self::connect_with(side, server, None).await
    }

    /// A client of `side` whose watchdog lease (Java's `lockWatchdogTimeout`, rlock's
    /// `Config.watchdog_timeout`) is `watchdog` instead of 30 s.
    pub(crate) async fn connect_with(
        side: Side,
        server: &RedisServer,
        watchdog: Option<Duration>,
    ) -> Self {
        match side {
            Side::Java => Self::java(server, JAVA_VERSION, watchdog).await,
            Side::Rlock => Self::Rlock(
                harness::client_with(server, |config| {
                    if let Some(watchdog) = watchdog {
                        config.watchdog_timeout = watchdog;
                    }
                })
                .await,
            ),
        }
    }

    /// An emulated Java client of `version`.
    pub(crate) async fn java(
        server: &RedisServer,
        version: RedissonVersion,
        watchdog: Option<Duration>,
    ) -> Self {
        let mut config = JavaConfig::default();
        if let Some(watchdog) = watchdog {
            config.lock_watchdog_timeout = watchdog;
        }
        let client = JavaClient::connect_with(&server.url(), version, config)
            .await
            .expect("emulated java client connects");
        Self::Java(client)
    }

    /// A client of `side` in cluster mode: Java of `version` (its AUTO mode picks sharded pub/sub
    /// from 3.22 on), rlock with `sharded`.
    pub(crate) async fn cluster(
        side: Side,
        cluster: &Cluster,
        version: RedissonVersion,
        sharded: ShardedPubSub,
    ) -> Self {
        match side {
            Side::Java => {
                let seeds = cluster.seeds();
                let java = JavaClient::connect_cluster(&seeds, version, JavaConfig::default());
                Self::Java(java.await.expect("emulated java cluster client connects"))
            }
            Side::Rlock => {
                let mut config = cluster.config();
                config.sharded_pubsub = sharded;
                let client = rlock::Client::with_config(config).await;
                Self::Rlock(client.expect("rlock cluster client connects"))
            }
        }
    }

    /// The emulated Java client behind a Java party.
    pub(crate) fn java_client(&self) -> &JavaClient {
        match self {
            Self::Java(java) => java,
            Self::Rlock(_) => panic!("not a java party"),
        }
    }

    pub(crate) fn side(&self) -> Side {
        match self {
            Self::Java(_) => Side::Java,
            Self::Rlock(_) => Side::Rlock,
        }
    }

    /// The hash field `thread` (Java) or `Owner::from_id(thread)` (rlock) holds under.
    pub(crate) fn field(&self, thread: ThreadId) -> String {
        match self {
            Self::Java(java) => java.lock_name(thread),
            Self::Rlock(client) => format!("{}:{thread}", client.node_id()),
        }
    }

    /// The `kind` object `name` (Java: a new object, as `getLock` and its siblings make).
    pub(crate) fn get(&self, kind: Kind, name: &str) -> PartyLock {
        match (self, kind) {
            (Self::Java(java), Kind::Reentrant) => PartyLock::Java(java.get_lock(name)),
            (Self::Rlock(client), Kind::Reentrant) => PartyLock::Rlock(client.lock(name)),
        }
    }

    /// The reentrant lock `name`, for the scenarios about the `RLock` alone.
    pub(crate) fn lock(&self, name: &str) -> PartyLock {
        self.get(Kind::Reentrant, name)
    }

    /// Whether this client's watchdog renews something. For Java, lock `name`; rlock only tells
    /// whether it renews any lock, so scenarios use one lock per rlock client.
    pub(crate) fn is_renewing(&self, name: &str) -> bool {
        match self {
            Self::Java(java) => java.is_renewing(name),
            Self::Rlock(client) => client.stats().renewing_locks > 0,
        }
    }
}

/// A lock of either side, one variant per side and [`Kind`]. Threads are Java thread ids, or rlock
/// owner ids.
#[derive(Clone, Debug)]
pub(crate) enum PartyLock {
    /// A Java `RLock` object.
    Java(JavaLock),
    /// An rlock `Lock`.
    Rlock(rlock::Lock),
}

impl PartyLock {
    /// Waits for the lock without a lease (the watchdog keeps it).
    pub(crate) async fn lock(&self, thread: ThreadId) -> Hold {
        match self {
            Self::Java(lock) => {
                lock.lock(thread).await.expect("java lock()");
                self.java_hold(thread)
            }
            Self::Rlock(lock) => Hold::Rlock(owned(lock, thread).lock().await.expect("rlock lock")),
        }
    }

    /// Waits for the lock, for a hold that expires after `lease`.
    pub(crate) async fn lock_with_lease(&self, thread: ThreadId, lease: Duration) -> Hold {
        match self {
            Self::Java(lock) => {
                lock.lock_with_lease(thread, lease)
                    .await
                    .expect("java lock(leaseTime)");
                self.java_hold(thread)
            }
            Self::Rlock(lock) => Hold::Rlock(
                owned(lock, thread)
                    .lock_with_lease(lease)
                    .await
                    .expect("rlock lock_with_lease"),
            ),
        }
    }

    /// Tries for up to `wait` (zero: once), with a lease or the watchdog.
    pub(crate) async fn try_lock(
        &self,
        thread: ThreadId,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Option<Hold> {
        match self {
            Self::Java(lock) => {
                let acquired = if wait.is_zero() && lease.is_none() {
                    lock.try_lock(thread).await
                } else {
                    lock.try_lock_for(thread, wait, lease).await
                };
                acquired
                    .expect("java tryLock")
                    .then(|| self.java_hold(thread))
            }
            Self::Rlock(lock) => {
                let lock = owned(lock, thread);
                let guard = match lease {
                    None => lock.try_lock_for(wait).await,
                    Some(lease) => lock.try_lock_with_lease(wait, lease).await,
                };
                guard.expect("rlock try_lock").map(Hold::Rlock)
            }
        }
    }

    /// [`PartyLock::lock`] on a task; the task returns when it got the lock and the hold.
    pub(crate) fn spawn_lock(&self, thread: ThreadId) -> JoinHandle<(Instant, Hold)> {
        let lock = self.clone();
        tokio::spawn(async move {
            let hold = lock.lock(thread).await;
            (Instant::now(), hold)
        })
    }

    /// Releases one hold of `thread` through the lock API rather than a hold: Java's
    /// `unlock(threadId)`, rlock's `Lock::unlock(owner)`.
    pub(crate) async fn unlock_as(&self, thread: ThreadId) -> Unlocked {
        match self {
            Self::Java(lock) => java_unlocked(lock.unlock(thread).await),
            Self::Rlock(lock) => rlock_unlocked(lock.unlock(Owner::from_id(thread)).await),
        }
    }

    /// Deletes the lock whoever holds it; whether it existed.
    pub(crate) async fn force_unlock(&self) -> bool {
        match self {
            Self::Java(lock) => lock.force_unlock().await.expect("java forceUnlock"),
            Self::Rlock(lock) => lock.force_unlock().await.expect("rlock force_unlock"),
        }
    }

    fn java_hold(&self, thread: ThreadId) -> Hold {
        Hold::Java {
            lock: self.clone(),
            thread,
        }
    }
}

fn owned(lock: &rlock::Lock, thread: ThreadId) -> rlock::Lock {
    lock.clone().with_owner(Owner::from_id(thread))
}

/// The outcome of an unlock, in the terms both sides share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// One hold was released (Java: reply 0 or 1; rlock: `Ok`).
    Released,
    /// Refused, nothing changed: Java's nil reply (`IllegalMonitorStateException`), rlock's
    /// `Error::NotOwner` or, from a guard, `Error::LeaseLost`.
    NotOwner,
}

fn java_unlocked(reply: redis::RedisResult<Option<i64>>) -> Unlocked {
    match reply.expect("java unlock") {
        Some(0 | 1) => Unlocked::Released,
        None => Unlocked::NotOwner,
        Some(other) => panic!("java unlock replied {other}"),
    }
}

fn rlock_unlocked(result: rlock::Result<()>) -> Unlocked {
    match result {
        Ok(()) => Unlocked::Released,
        Err(rlock::Error::NotOwner { .. } | rlock::Error::LeaseLost { .. }) => Unlocked::NotOwner,
        Err(e) => panic!("rlock unlock failed: {e}"),
    }
}

/// One hold of either side.
#[derive(Debug)]
#[must_use = "a hold should be released or deliberately dropped"]
pub(crate) enum Hold {
    /// A Java thread's hold, through the (Java) lock object that took it.
    Java {
        lock: PartyLock,
        thread: ThreadId,
    },
    Rlock(rlock::LockGuard),
}

impl Hold {
    /// Releases the hold and reports what happened.
    pub(crate) async fn unlock(self) -> Unlocked {
        match self {
            Self::Java { lock, thread } => lock.unlock_as(thread).await,
            Self::Rlock(guard) => rlock_unlocked(guard.unlock().await),
        }
    }

    /// Releases the hold, which must still be held.
    pub(crate) async fn release(self) {
        assert_eq!(
            self.unlock().await,
            Unlocked::Released,
            "release a held lock"
        );
    }
}

/// Instantiates `scenario(a: Side, b: Side)` in both directions: `java_to_rlock` gives the Java side
/// the first role (holder, writer, forcer...) and rlock the second, `rlock_to_java` the reverse.
macro_rules! both_directions {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            $crate::support::directions!(super::$scenario);
        }
    )*};
}

/// The tests `java_to_rlock` and `rlock_to_java` of [`both_directions!`]: `scenario(args…, a, b)`.
macro_rules! directions {
    ($scenario:path $(, $arg:expr)*) => {
        use $crate::support::Side;

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn java_to_rlock() {
            $scenario($($arg,)* Side::Java, Side::Rlock).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn rlock_to_java() {
            $scenario($($arg,)* Side::Rlock, Side::Java).await;
        }
    };
}

/// Instantiates `scenario(side: Side)` once per side.
macro_rules! both_sides {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use crate::support::Side;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn java() {
                super::$scenario(Side::Java).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rlock() {
                super::$scenario(Side::Rlock).await;
            }
        }
    )*};
}

/// Instantiates a scenario written over a [`Kind`] once per kind, as module `<scenario>::<kind>`:
/// - `every_kind!(one_test: scenario)` for `scenario(kind: Kind)`: the test `<scenario>::<kind>`;
/// - `every_kind!(both_directions: scenario)` for `scenario(kind: Kind, a: Side, b: Side)`: the
///   tests `<scenario>::<kind>::java_to_rlock` and `…::rlock_to_java` (see [`both_directions!`]).
macro_rules! every_kind {
    ($shape:ident: $($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            $crate::support::every_kind!(@kinds $shape $scenario);
        }
    )*};
    // The kinds the generic scenarios run for, one line each: a new kind joins here.
    (@kinds $shape:ident $scenario:ident) => {
        $crate::support::every_kind!(@$shape reentrant, $crate::support::Kind::Reentrant, $scenario);
    };
    (@one_test $name:ident, $kind:expr, $scenario:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::$scenario($kind).await;
        }
    };
    (@both_directions $name:ident, $kind:expr, $scenario:ident) => {
        mod $name {
            $crate::support::directions!(super::super::$scenario, $kind);
        }
    };
}

pub(crate) use {both_directions, both_sides, directions, every_kind};

// ===== observing Redis =====

/// A plain connection for looking at (and poking) the server behind both sides' backs. In a
/// cluster it talks to one node, and counts subscribers on every master.
#[derive(Clone)]
pub(crate) struct Redis {
    pub(crate) conn: MultiplexedConnection,
    /// Where channel subscribers are counted (classic subscriptions live on any node).
    pubsub_nodes: Vec<MultiplexedConnection>,
}

impl Redis {
    pub(crate) async fn connect(server: &RedisServer) -> Self {
        let conn = harness::raw(server).await;
        Self {
            pubsub_nodes: vec![conn.clone()],
            conn,
        }
    }

    /// A connection to `node` that counts subscribers on all of `masters`.
    pub(crate) async fn connect_cluster(node: &RedisServer, masters: &[RedisServer]) -> Self {
        let mut pubsub_nodes = Vec::new();
        for master in masters {
            pubsub_nodes.push(harness::raw(master).await);
        }
        Self {
            conn: harness::raw(node).await,
            pubsub_nodes,
        }
    }

    /// `HGETALL name`, sorted.
    pub(crate) async fn hash(&mut self, name: &str) -> BTreeMap<String, String> {
        self.conn.hgetall(name).await.expect("HGETALL")
    }

    pub(crate) async fn exists(&mut self, name: &str) -> bool {
        self.conn.exists(name).await.expect("EXISTS")
    }

    pub(crate) async fn pttl(&mut self, key: &str) -> i64 {
        self.conn.pttl(key).await.expect("PTTL")
    }

    /// The unlock latch keys that exist right now.
    pub(crate) async fn latch_keys(&mut self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .conn
            .keys("redisson_unlock_latch:*")
            .await
            .expect("KEYS");
        keys.sort();
        keys
    }

    /// `PUBSUB CHANNELS`: every channel with a (non-pattern) subscriber, sorted, as raw bytes.
    pub(crate) async fn channels(&mut self) -> Vec<Vec<u8>> {
        let mut channels: Vec<Vec<u8>> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .query_async(&mut self.conn)
            .await
            .expect("PUBSUB CHANNELS");
        channels.sort();
        channels
    }

    /// `PUBSUB SHARDCHANNELS`: every channel with a sharded subscriber, sorted, as raw bytes.
    pub(crate) async fn shard_channels(&mut self) -> Vec<Vec<u8>> {
        let mut channels: Vec<Vec<u8>> = redis::cmd("PUBSUB")
            .arg("SHARDCHANNELS")
            .query_async(&mut self.conn)
            .await
            .expect("PUBSUB SHARDCHANNELS");
        channels.sort();
        channels
    }

    /// Subscribers of `channel`: `PUBSUB NUMSUB` plus `PUBSUB SHARDNUMSUB`, over all nodes.
    pub(crate) async fn subscribers(&mut self, channel: &str) -> i64 {
        let mut total = 0;
        for node in &mut self.pubsub_nodes {
            for kind in ["NUMSUB", "SHARDNUMSUB"] {
                let counts: Vec<(Vec<u8>, i64)> = redis::cmd("PUBSUB")
                    .arg(kind)
                    .arg(channel)
                    .query_async(node)
                    .await
                    .expect("PUBSUB NUMSUB");
                total += counts.first().map_or(0, |(_, n)| *n);
            }
        }
        total
    }

    /// `PUBLISH channel payload`.
    pub(crate) async fn publish(&mut self, channel: &str, payload: &[u8]) {
        let _: i64 = self.conn.publish(channel, payload).await.expect("PUBLISH");
    }

    /// How many scripts (`EVAL` + `EVALSHA`) the server ran so far: each is one acquire attempt
    /// while only waiters are active.
    pub(crate) async fn script_calls(&mut self) -> u64 {
        let calls = harness::command_calls(&mut self.conn).await;
        calls.get("eval").copied().unwrap_or(0) + calls.get("evalsha").copied().unwrap_or(0)
    }

    /// Waits until no script has run for 100 ms (every waiter is asleep) and returns the count.
    pub(crate) async fn settle(&mut self) -> u64 {
        let mut last = self.script_calls().await;
        for _ in 0..60 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.script_calls().await;
            if now == last {
                return now;
            }
            last = now;
        }
        panic!("scripts kept running: some waiter is busy-polling");
    }

    /// Waits until at least `count` scripts ran, then until they stop; returns the settled count.
    pub(crate) async fn scripts_reach(&mut self, count: u64) -> u64 {
        let mut check = self.clone();
        let reached = harness::eventually(Duration::from_secs(2), async || {
            check.script_calls().await >= count
        });
        assert!(
            reached.await,
            "fewer than {count} scripts ran: no retry followed"
        );
        self.settle().await
    }

    /// Waits until `channel` has at least `count` subscribers and the waiters went to sleep.
    pub(crate) async fn wait_parked(&mut self, channel: &str, count: i64) -> u64 {
        let mut redis = self.clone();
        let subscribed = harness::eventually(Duration::from_secs(5), async || {
            redis.subscribers(channel).await >= count
        })
        .await;
        assert!(subscribed, "no waiter subscribed to {channel}");
        self.settle().await
    }

    /// Holds `name` as a third client would: a hash with a foreign field and a long PEXPIRE.
    pub(crate) async fn hold_foreign(&mut self, name: &str, ttl_ms: i64) {
        let field = "00000000-0000-4000-8000-000000000000:1";
        let _: () = self.conn.hset(name, field, 1).await.expect("HSET");
        let _: () = self.conn.pexpire(name, ttl_ms).await.expect("PEXPIRE");
    }
}

/// `{field: count}`, for comparing with [`Redis::hash`].
pub(crate) fn holds<const N: usize>(entries: [(String, u32); N]) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .map(|(field, count)| (field, count.to_string()))
        .collect()
}

/// A message seen by a [`Listener`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Message {
    /// The channel, byte for byte (for key events: the event, e.g. `__keyevent@0__:set`).
    pub(crate) channel: Vec<u8>,
    /// The payload (for key events: the key).
    pub(crate) payload: Vec<u8>,
}

impl Message {
    pub(crate) fn new(channel: impl AsRef<[u8]>, payload: impl AsRef<[u8]>) -> Self {
        Self {
            channel: channel.as_ref().to_vec(),
            payload: payload.as_ref().to_vec(),
        }
    }
}

/// A raw pattern subscriber that records what it hears.
pub(crate) struct Listener {
    messages: mpsc::UnboundedReceiver<Message>,
    task: JoinHandle<()>,
}

impl Listener {
    /// Hears every message on every lock channel (`PSUBSCRIBE redisson_lock__channel*`).
    pub(crate) async fn unlock_messages(server: &RedisServer) -> Self {
        Self::psubscribe(server, "redisson_lock__channel*").await
    }

    /// Hears `set` and `del` key events (keyspace notifications `E$g`): the channel is the event,
    /// the payload the key.
    pub(crate) async fn key_events(server: &RedisServer) -> Self {
        let mut redis = Redis::connect(server).await;
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("E$g")
            .query_async(&mut redis.conn)
            .await
            .expect("CONFIG SET notify-keyspace-events");
        Self::psubscribe(server, "__keyevent@0__:*").await
    }

    async fn psubscribe(server: &RedisServer, pattern: &str) -> Self {
        let mut pubsub = server
            .client()
            .get_async_pubsub()
            .await
            .expect("pub/sub connection");
        pubsub.psubscribe(pattern).await.expect("PSUBSCRIBE");
        let (tx, messages) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut stream = pubsub.into_on_message();
            while let Some(message) = futures::StreamExt::next(&mut stream).await {
                let channel = message.get_channel::<Vec<u8>>().unwrap_or_default();
                let payload = message.get_payload_bytes().to_vec();
                if tx.send(Message { channel, payload }).is_err() {
                    return;
                }
            }
        });
        Self { messages, task }
    }

    /// The next message, if one arrives within `limit`.
    pub(crate) async fn next(&mut self, limit: Duration) -> Option<Message> {
        tokio::time::timeout(limit, self.messages.recv())
            .await
            .ok()
            .flatten()
    }

    /// Everything that arrives until the line has been quiet for `quiet`.
    pub(crate) async fn drain(&mut self, quiet: Duration) -> Vec<Message> {
        let mut seen = Vec::new();
        while let Some(message) = self.next(quiet).await {
            seen.push(message);
        }
        seen
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ===== timing =====

/// Wake-up latencies of one scenario, reported on stderr (`--nocapture` shows them).
#[derive(Debug, Default)]
pub(crate) struct Latencies(Vec<Duration>);

impl Latencies {
    /// Records `to - from` (zero if `to` came first).
    pub(crate) fn record(&mut self, from: Instant, to: Instant) {
        self.0.push(to.saturating_duration_since(from));
    }

    /// Prints min / median / max and asserts every sample is under `limit`.
    pub(crate) fn check(mut self, what: &str, limit: Duration) {
        self.0.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (Some(min), Some(max)) = (self.0.first().copied(), self.0.last().copied()) else {
            panic!("no samples for {what}");
        };
        let median = self.0[self.0.len() / 2];
        eprintln!(
            "interop timing: {what}: n={} min {:.2} ms, median {:.2} ms, max {:.2} ms",
            self.0.len(),
            ms(min),
            ms(median),
            ms(max)
        );
        assert!(
            max < limit,
            "{what}: slowest wake-up {max:?} exceeds {limit:?} (all: {:?})",
            self.0
        );
    }
}
