//! A Redisson wire emulator: the Redis command sequences of a Java Redisson client, written from
//! `PROTOCOL.md` (not from Redisson's source), for interop tests. It emulates the `RLock` today.
//!
//! A [`JavaClient`] stands for one `RedissonClient`: it has its own random v4 UUID (the "connection
//! manager id", §1.1), one command connection, one pub/sub connection per entry it waits on, and a
//! lock watchdog. [`JavaClient::get_lock`] returns a [`JavaLock`], the counterpart of one `RLock`
//! object with its `internalLockLeaseTime`. Java thread ids are passed explicitly, as in Redisson's
//! `lockAsync(threadId)` overloads, so several "threads" of one client can be driven from tasks.
//!
//! This module holds what every kind of Redisson object shares: the client and its connections,
//! versions, names, the local pub/sub entries with their latches (§3.1; a kind passes its
//! `onMessage` rule, its entry name and its channel), and the watchdog. Each kind is a submodule
//! with its scripts, its object type (re-exported here) and its `JavaClient::get_*` factory:
//! `lock` for the `RLock`.
//!
//! What is emulated, section by section of `PROTOCOL.md`:
//!
//! | Behaviour | Section | Where |
//! |---|---|---|
//! | owner field `<uuid>:<threadId>` | §1.1, §1.2 | here: [`JavaClient::lock_name`] |
//! | channel and latch names (`prefixName`) | §1.3, §1.4 | here: [`prefix_name`], [`lock_channel`], [`unlock_latch`] |
//! | local entries, their latches, subscriptions | §3.1 | here, used by the waiting calls |
//! | acquire script, incl. the ≤3.12 `HSET` variant | §2.2 | `lock`: [`JavaLock::try_lock`] and the waiting calls |
//! | unlock script: latch (≥3.24), no latch (3.22–3.23), literal `publish` (≤3.21), missing lock publishes (≤3.10.5) | §2.3, §2.4 | `lock`: [`JavaLock::unlock`], [`JavaLock::unlock_attempt`] |
//! | force unlock | §2.5 | `lock`: [`JavaLock::force_unlock`] |
//! | `lock()` / `tryLock(wait, lease)` waiting, `0`/`1` messages | §3.2–§3.4 | `lock`: [`JavaLock::lock`], [`JavaLock::try_lock_for`] |
//! | watchdog: one timer per lock (≤3.43) or one batched task (≥3.44) | §4 | here, automatic: [`JavaClient::stop_watchdog`]; `lock`: the renewal scripts, [`JavaClient::renew`] |
//! | `internalLockLeaseTime` | §2.1, §11.10 | `lock`: [`JavaLock::internal_lease`] |
//! | cluster mode: routing by key, `SPUBLISH`/`SSUBSCRIBE` (3.22+ on Redis 7), per-slot batches | §2.6, §4.2 | here: [`JavaClient::connect_cluster`] |
//!
//! Not emulated: WAIT-synced writes and their retries (§5: single-server Redisson sends a plain
//! EVAL; the emulator never waits for replicas), pub/sub reconnects (§3.7), the connection pools
//! (§3.6: one pub/sub connection per waited-on entry here), fair/RW/other lock kinds.
//!
//! Everything is plain `redis` commands; errors are [`redis::RedisError`]s. An unlock that Java would
//! answer with `IllegalMonitorStateException` returns `Ok(None)`.
//!
//! ```no_run
//! # async fn demo(url: &str) -> redis::RedisResult<()> {
//! use std::time::Duration;
//! use rlock_tests::redisson::{JavaClient, RedissonVersion};
//!
//! let java = JavaClient::connect(url, RedissonVersion::V3_31).await?;
//! let lock = java.get_lock("orders:42"); // RLock lock = redisson.getLock("orders:42");
//! lock.lock(1).await?; //                   lock.lock();   (on thread 1)
//! assert_eq!(lock.unlock(1).await?, Some(1)); // lock.unlock(); released and published
//! assert!(lock.try_lock_for(1, Duration::from_secs(1), Some(Duration::from_millis(500))).await?);
//! # Ok(())
//! # }
//! ```

mod lock;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{MultiplexedConnection, PubSubSink};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

pub use lock::JavaLock;

/// A Java thread id (`Thread.currentThread().getId()`): the second half of an owner field.
pub type ThreadId = u64;

/// `Config.lockWatchdogBatchSize` (§4.2).
const WATCHDOG_BATCH_SIZE: usize = 100;

// ===== versions =====

/// The Redisson release line to emulate. Each variant names the newest release of a range whose lock
/// wire behaviour is the same (Appendix A of `PROTOCOL.md`); they are ordered oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RedissonVersion {
    /// ≤ 3.10.5: first acquire with `HSET field 1`; unlocking a *missing* lock publishes `0` and
    /// returns 1; literal `publish`; no latch; one renewal timer per lock.
    V3_10_5,
    /// 3.10.6 – 3.12.x: as `V3_10_5`, but unlocking a missing lock returns nil.
    V3_12,
    /// 3.13 – 3.21: `HINCRBY` on first acquire too; literal `publish`; no latch.
    V3_21,
    /// 3.22 – 3.23: the publish command is a script argument; no latch.
    V3_23,
    /// 3.24 – 3.43 (e.g. 3.31.0): unlock latch with a 13500 ms TTL; partial unlocks keep
    /// `internalLockLeaseTime` (3.27.2+); one renewal timer per lock.
    V3_31,
    /// 3.44 – 3.51: batched watchdog (one task, ≤100 locks per script).
    V3_44,
    /// 3.52 – 4.2.x: `EVALSHA`; latch TTL 16–20 s; the post-unlock `DEL` targets
    /// `redisson_unlock_latch:{N}:<clientUUID>` instead of the latch, which lives out its TTL.
    V3_52,
    /// 4.3+ and HEAD (4.7): as `V3_52` with the latch `DEL` fixed.
    V4,
}

impl RedissonVersion {
    /// Every emulated version, oldest first.
    pub const ALL: [Self; 8] = [
        Self::V3_10_5,
        Self::V3_12,
        Self::V3_21,
        Self::V3_23,
        Self::V3_31,
        Self::V3_44,
        Self::V3_52,
        Self::V4,
    ];

    /// Whether unlocks use the idempotency latch `redisson_unlock_latch:{N}:<id>` (3.24+, §2.3).
    pub fn has_unlock_latch(self) -> bool {
        self >= Self::V3_31
    }

    /// Whether the watchdog renews all locks from one batched task (3.44+, §4.2) rather than one
    /// timer per lock (§4.3).
    pub fn has_batched_watchdog(self) -> bool {
        self >= Self::V3_44
    }

    /// Whether, in cluster mode on Redis 7+, unlocks travel on sharded pub/sub (3.22+, §2.6).
    pub fn uses_sharded_pubsub(self) -> bool {
        self >= Self::V3_23
    }

    /// Whether scripts go out as `EVALSHA` (`useScriptCache` defaults to true since 3.46, §0).
    pub fn uses_script_cache(self) -> bool {
        self >= Self::V3_52
    }

    /// Whether the client's post-unlock `DEL` hits the latch it wrote (not in 3.52 – 4.2, §2.3).
    pub fn deletes_its_latch(self) -> bool {
        self.has_unlock_latch() && self != Self::V3_52
    }

    /// Whether a partial unlock (reply 0) resets `internalLockLeaseTime` (before 3.27.2, §2.1).
    pub fn partial_unlock_resets_lease(self) -> bool {
        self < Self::V3_31
    }

    /// The latch TTL in ms (§2.4): `(timeout + retryInterval) * retryAttempts` = 13500 up to
    /// 3.47, then `(timeout + EqualJitterDelay(1 s, 2 s)) * retryAttempts` = 16000–20000.
    fn latch_ttl_ms(self) -> u64 {
        if self >= Self::V3_52 {
            (3000 + fastrand::u64(1000..=2000)) * 4
        } else {
            (3000 + 1500) * 3
        }
    }
}

// ===== names (§1.3, §1.4) =====

/// Redisson's `prefixName(prefix, name)` (§1.3): `prefix:name` if `name` contains `{`, else
/// `prefix:{name}`.
pub fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The unlock channel of lock `name`: `redisson_lock__channel:{name}` (§1.4).
pub fn lock_channel(name: &str) -> String {
    prefix_name("redisson_lock__channel", name)
}

/// The unlock latch key of one unlock request: `redisson_unlock_latch:{name}:<requestId>` (§1.4).
pub fn unlock_latch(name: &str, request_id: &str) -> String {
    format!(
        "{}:{request_id}",
        prefix_name("redisson_unlock_latch", name)
    )
}

/// A fresh unlock request id: 16 random bytes as 32 lower-case hex characters (§1.4).
pub fn new_request_id() -> String {
    (0..16)
        .map(|_| format!("{:02x}", fastrand::u8(..)))
        .collect()
}

// ===== the client =====

/// Settings of a [`JavaClient`], with Redisson's defaults (§9).
#[derive(Clone, Debug)]
pub struct JavaConfig {
    /// `lockWatchdogTimeout`: the lease of locks taken without one; renewed every third. 30 s.
    pub lock_watchdog_timeout: Duration,
    /// `subscriptionTimeout`: how long `lock()` waits for its channel subscription. 7.5 s.
    pub subscription_timeout: Duration,
}

impl Default for JavaConfig {
    fn default() -> Self {
        Self {
            lock_watchdog_timeout: Duration::from_secs(30),
            subscription_timeout: Duration::from_millis(7500),
        }
    }
}

/// An emulated `RedissonClient`, in single-server or cluster mode. Cheap to clone; clones share
/// everything.
#[derive(Clone)]
pub struct JavaClient {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    wire: Wire,
    config: JavaConfig,
    subscriber: Subscriber,
    /// The local entries (§3.1), keyed by entry name: reference count and entry.
    entries: tokio::sync::Mutex<HashMap<String, (usize, Arc<Entry>)>>,
    watchdog: Watchdog,
}

/// What every Redis call needs: the connection, the version, the client id, the publish command.
#[derive(Clone)]
struct Wire {
    version: RedissonVersion,
    id: Arc<str>,
    conn: Conn,
    /// `PUBLISH`, or `SPUBLISH` in a cluster with sharded pub/sub (§2.6).
    publish: &'static str,
}

impl Wire {
    /// `getLockName(threadId)` (§1.2).
    fn lock_name(&self, thread: ThreadId) -> String {
        format!("{}:{thread}", self.id)
    }

    /// Sends a script as this version does: `EVALSHA` (loading on `NOSCRIPT`) with the script cache,
    /// else plain `EVAL` (§0).
    async fn eval<T: FromRedisValue>(
        &self,
        lua: &str,
        keys: &[&str],
        args: &[String],
    ) -> RedisResult<T> {
        let mut conn = self.conn.clone();
        if self.version.uses_script_cache() {
            let script = redis::Script::new(lua);
            let mut invocation = script.prepare_invoke();
            for key in keys {
                let _ = invocation.key(*key);
            }
            for arg in args {
                let _ = invocation.arg(arg);
            }
            invocation.invoke_async(&mut conn).await
        } else {
            redis::cmd("EVAL")
                .arg(lua)
                .arg(keys.len())
                .arg(keys)
                .arg(args)
                .query_async(&mut conn)
                .await
        }
    }
}

/// The command connection: one server, or a cluster connection that routes every command by its
/// first key, as Redisson routes lock operations by the lock name (§0).
#[derive(Clone)]
enum Conn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl redis::aio::ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

/// How the client subscribes: per waited-on lock, a RESP2 pub/sub connection to the server, or in
/// a cluster a RESP3 cluster connection whose `SSUBSCRIBE`/`SUBSCRIBE` goes to the channel's node.
enum Subscriber {
    Single(Box<redis::Client>),
    Cluster { seeds: Vec<String>, sharded: bool },
}

impl JavaClient {
    /// Connects an emulated client of `version` with the default [`JavaConfig`].
    ///
    /// # Errors
    ///
    /// When Redis cannot be reached.
    pub async fn connect(url: &str, version: RedissonVersion) -> RedisResult<Self> {
        Self::connect_with(url, version, JavaConfig::default()).await
    }

    /// Connects an emulated client of `version` with `config`. Its id is a fresh random v4 UUID.
    ///
    /// # Errors
    ///
    /// When Redis cannot be reached.
    pub async fn connect_with(
        url: &str,
        version: RedissonVersion,
        config: JavaConfig,
    ) -> RedisResult<Self> {
        let redis = redis::Client::open(url)?;
        let conn = Conn::Single(redis.get_multiplexed_async_connection().await?);
        Ok(Self::new(
            version,
            config,
            conn,
            "PUBLISH",
            Subscriber::Single(Box::new(redis)),
        ))
    }

    /// Connects an emulated client of `version` in cluster mode (`useClusterServers`) through
    /// `seeds`. Like Redisson's default `shardedSubscriptionMode = AUTO`, it uses `SPUBLISH` and
    /// `SSUBSCRIBE` when `PUBSUB SHARDNUMSUB` works (Redis 7+) and the version has them (3.22+).
    ///
    /// # Errors
    ///
    /// When the cluster cannot be reached.
    pub async fn connect_cluster(
        seeds: &[String],
        version: RedissonVersion,
        config: JavaConfig,
    ) -> RedisResult<Self> {
        let mut conn = ClusterClientBuilder::new(seeds.to_vec())
            .build()?
            .get_async_connection()
            .await?;
        let probe: RedisResult<Value> = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .query_async(&mut conn)
            .await;
        let sharded = version.uses_sharded_pubsub() && probe.is_ok();
        let publish = if sharded { "SPUBLISH" } else { "PUBLISH" };
        let seeds = seeds.to_vec();
        let subscriber = Subscriber::Cluster { seeds, sharded };
        let conn = Conn::Cluster(conn);
        Ok(Self::new(version, config, conn, publish, subscriber))
    }

    fn new(
        version: RedissonVersion,
        config: JavaConfig,
        conn: Conn,
        publish: &'static str,
        subscriber: Subscriber,
    ) -> Self {
        let wire = Wire {
            version,
            id: uuid::Uuid::new_v4().to_string().into(),
            conn,
            publish,
        };
        let watchdog = Watchdog::new(wire.clone(), config.lock_watchdog_timeout);
        Self {
            inner: Arc::new(ClientInner {
                wire,
                config,
                subscriber,
                entries: tokio::sync::Mutex::new(HashMap::new()),
                watchdog,
            }),
        }
    }

    /// The publish command this client's scripts use: `PUBLISH`, or `SPUBLISH` (sharded cluster).
    pub fn publish_command(&self) -> &'static str {
        self.inner.wire.publish
    }

    /// The emulated version.
    pub fn version(&self) -> RedissonVersion {
        self.inner.wire.version
    }

    /// The client id (`Redisson.getId()`): a lower-case v4 UUID.
    pub fn id(&self) -> &str {
        &self.inner.wire.id
    }

    /// The hash field of `thread` on this client: `<uuid>:<threadId>` (§1.2).
    pub fn lock_name(&self, thread: ThreadId) -> String {
        self.inner.wire.lock_name(thread)
    }

    /// Whether the watchdog is renewing lock `name` for some thread of this client.
    pub fn is_renewing(&self, name: &str) -> bool {
        self.inner.watchdog.is_renewing(name)
    }

    /// Stops all lease renewal for good, as if the JVM froze or died: watchdog locks expire after
    /// their lease. Later acquisitions are not renewed either.
    pub fn stop_watchdog(&self) {
        self.inner.watchdog.stop();
    }

    fn watchdog_timeout_ms(&self) -> u64 {
        millis(self.inner.config.lock_watchdog_timeout)
    }
}

impl ClientInner {
    /// `PublishSubscribe.subscribe` (§3.1): joins the local entry `entry_name`, or creates it and
    /// subscribes `channel` (on its own pub/sub connection) before returning. The kind's
    /// `on_message` handles what arrives on the channel.
    async fn subscribe(
        &self,
        entry_name: &str,
        channel: &str,
        on_message: OnMessage,
    ) -> RedisResult<Arc<Entry>> {
        let mut entries = self.entries.lock().await;
        if let Some((refs, entry)) = entries.get_mut(entry_name) {
            *refs += 1;
            return Ok(entry.clone());
        }
        let (sink, mut messages) = self.subscriber.subscribe(channel).await?;
        let latch = Arc::new(Latch::default());
        let reader = tokio::spawn({
            let latch = latch.clone();
            let channel = channel.as_bytes().to_vec();
            async move {
                while let Some(message) = messages.next().await {
                    // The pub/sub classes only act on their own channel name, exactly (§3.2).
                    if message.get_channel::<Vec<u8>>().ok().as_ref() != Some(&channel) {
                        continue;
                    }
                    // `LongCodec` reads the payload with `Long.valueOf`; a non-number is dropped
                    // as a decode error (§3.2).
                    let value = std::str::from_utf8(message.get_payload_bytes())
                        .ok()
                        .and_then(|text| text.parse::<i64>().ok());
                    if let Some(value) = value {
                        on_message(&latch, value);
                    }
                }
            }
        });
        let entry = Arc::new(Entry {
            channel: channel.to_owned(),
            latch,
            sink,
            reader,
        });
        let _ = entries.insert(entry_name.to_owned(), (1, entry.clone()));
        Ok(entry)
    }

    /// `PublishSubscribe.unsubscribe` (§3.1): the last local waiter of `entry_name` unsubscribes
    /// (and waits for the server's confirmation).
    async fn unsubscribe(&self, entry_name: &str) {
        let mut entries = self.entries.lock().await;
        let Some((refs, _)) = entries.get_mut(entry_name) else {
            return;
        };
        *refs -= 1;
        if *refs > 0 {
            return;
        }
        if let Some((_, entry)) = entries.remove(entry_name) {
            let _ = entry.sink.clone().unsubscribe(&entry.channel).await;
            entry.reader.abort();
        }
    }
}

type Messages = std::pin::Pin<Box<dyn futures::Stream<Item = redis::Msg> + Send>>;

impl Subscriber {
    /// A new subscription of `channel`, confirmed by the server, and its messages.
    async fn subscribe(&self, channel: &str) -> RedisResult<(Sink, Messages)> {
        match self {
            Self::Single(client) => {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(channel).await?;
                let (sink, messages) = pubsub.split();
                Ok((Sink::Single(sink), Box::pin(messages)))
            }
            Self::Cluster { seeds, sharded } => {
                let (sender, mut pushes) = tokio::sync::mpsc::unbounded_channel();
                let mut conn = ClusterClientBuilder::new(seeds.clone())
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(sender)
                    .build()?
                    .get_async_connection()
                    .await?;
                if *sharded {
                    conn.ssubscribe(channel).await?;
                } else {
                    conn.subscribe(channel).await?;
                }
                let messages = futures::stream::poll_fn(move |cx| pushes.poll_recv(cx))
                    .filter_map(|push| async move { redis::Msg::from_push_info(push) });
                let sink = Sink::Cluster {
                    conn,
                    sharded: *sharded,
                };
                Ok((sink, Box::pin(messages)))
            }
        }
    }
}

/// The subscribing half of an entry's connection.
#[derive(Clone)]
enum Sink {
    Single(PubSubSink),
    Cluster {
        conn: ClusterConnection,
        sharded: bool,
    },
}

impl Sink {
    async fn unsubscribe(&mut self, channel: &str) -> RedisResult<()> {
        match self {
            Self::Single(sink) => sink.unsubscribe(channel).await,
            Self::Cluster {
                conn,
                sharded: true,
            } => conn.sunsubscribe(channel).await,
            Self::Cluster { conn, .. } => conn.unsubscribe(channel).await,
        }
    }
}

impl fmt::Debug for JavaClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JavaClient")
            .field("version", &self.version())
            .field("id", &self.id())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

// ===== waiting (§3) =====

/// A local entry (`RedissonLockEntry`, §3.1): the per-client state of one entry name (for an
/// `RLock`, its lock name), shared by all local waiters: the channel's subscription and a latch.
struct Entry {
    channel: String,
    latch: Arc<Latch>,
    sink: Sink,
    reader: JoinHandle<()>,
}

/// What a kind's pub/sub class (`LockPubSub`, §3.2; `SemaphorePubSub`, §8.5; …) does with a
/// number that arrived on an entry's channel.
type OnMessage = fn(&Latch, i64);

/// The entry's `java.util.concurrent.Semaphore`, starting with 0 permits.
#[derive(Debug)]
struct Latch {
    permits: Semaphore,
    /// Threads blocked on the semaphore (`getQueueLength()`).
    sleeping: AtomicUsize,
}

impl Default for Latch {
    fn default() -> Self {
        Self {
            permits: Semaphore::new(0),
            sleeping: AtomicUsize::new(0),
        }
    }
}

impl Latch {
    /// `release(permits)`: each permit wakes one sleeping thread, or stays banked for the next
    /// thread to wait.
    fn release(&self, permits: usize) {
        self.permits.add_permits(permits);
    }

    /// `getQueueLength()`: how many threads sleep on the latch.
    fn queue_length(&self) -> usize {
        self.sleeping.load(Ordering::SeqCst)
    }

    /// `latch.tryAcquire(limit)` or, without a limit, `latch.acquire()`: sleeps until a permit or the
    /// limit, whichever comes first. A banked permit returns at once.
    async fn wait(&self, limit: Option<Duration>) {
        let _ = self.sleeping.fetch_add(1, Ordering::SeqCst);
        let permit = match limit {
            Some(limit) => tokio::time::timeout(limit, self.permits.acquire())
                .await
                .ok(),
            None => Some(self.permits.acquire().await),
        };
        let _ = self.sleeping.fetch_sub(1, Ordering::SeqCst);
        if let Some(Ok(permit)) = permit {
            permit.forget();
        }
    }
}

// ===== the watchdog (§4) =====

/// Lease renewal of this client's watchdog locks: one timer per lock (≤3.43, §4.3) or one batched
/// task for all of them (3.44+, §4.2). Holds are counted per thread (§4.1): every acquire adds one,
/// every unlock call removes one; the lock stops being renewed when no thread is left, when a renewal
/// finds the first thread's field gone, or on force unlock. Renewals run the `RLock`'s scripts
/// (`lock::renew_one`, `lock::renew_batch`).
struct Watchdog {
    wire: Wire,
    timeout_ms: u64,
    state: Arc<Mutex<RenewalState>>,
}

#[derive(Default)]
struct RenewalState {
    locks: BTreeMap<String, Renewed>,
    /// The batched task (3.44+), while any lock is registered.
    batch_task: Option<JoinHandle<()>>,
    next_generation: u64,
    stopped: bool,
}

struct Renewed {
    /// Tells registrations of the same key apart, so a stale timer never drops a newer one.
    generation: u64,
    /// Local threads holding the lock, in registration order, with their hold counts.
    threads: Vec<(ThreadId, u32)>,
    /// The per-lock timer (≤3.43).
    timer: Option<JoinHandle<()>>,
}

impl Watchdog {
    fn new(wire: Wire, timeout: Duration) -> Self {
        Self {
            wire,
            timeout_ms: millis(timeout),
            state: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, RenewalState> {
        lock_state(&self.state)
    }

    /// `scheduleExpirationRenewal(threadId)` after an acquire without lease, made with `lease_ms`.
    fn register(&self, name: &str, thread: ThreadId, lease_ms: u64) {
        let mut state = self.state();
        if state.stopped {
            return;
        }
        let generation = state.next_generation;
        let entry = state
            .locks
            .entry(name.to_owned())
            .or_insert_with(|| Renewed {
                generation,
                threads: Vec::new(),
                timer: None,
            });
        match entry.threads.iter_mut().find(|(t, _)| *t == thread) {
            Some((_, count)) => *count += 1,
            None => entry.threads.push((thread, 1)),
        }
        if entry.generation != generation {
            return; // an existing registration: its timer or the batch task covers it
        }
        state.next_generation += 1;
        if self.wire.version.has_batched_watchdog() {
            if state.batch_task.is_none() {
                let task = batched_renewal(self.wire.clone(), self.state.clone(), self.timeout_ms);
                state.batch_task = Some(tokio::spawn(task));
            }
        } else {
            // 3.31: the timer fires internalLockLeaseTime / 3 after the first acquisition and
            // renews with internalLockLeaseTime, i.e. the lease the lock was acquired with.
            let task = per_lock_renewal(
                self.wire.clone(),
                self.state.clone(),
                name.to_owned(),
                generation,
                lease_ms,
            );
            if let Some(entry) = state.locks.get_mut(name) {
                entry.timer = Some(tokio::spawn(task));
            }
        }
    }

    /// `cancelExpirationRenewal(threadId)` after an unlock call: one hold of `thread` less.
    fn cancel(&self, name: &str, thread: ThreadId) {
        let mut state = self.state();
        let Some(entry) = state.locks.get_mut(name) else {
            return;
        };
        if let Some(i) = entry.threads.iter().position(|(t, _)| *t == thread) {
            entry.threads[i].1 -= 1;
            if entry.threads[i].1 == 0 {
                let _ = entry.threads.remove(i);
            }
        }
        if entry.threads.is_empty() {
            state.remove(name);
        }
    }

    /// Stops renewing `name` altogether (force unlock).
    fn cancel_all(&self, name: &str) {
        self.state().remove(name);
    }

    fn is_renewing(&self, name: &str) -> bool {
        self.state().locks.contains_key(name)
    }

    fn stop(&self) {
        let mut state = self.state();
        state.stopped = true;
        let names: Vec<String> = state.locks.keys().cloned().collect();
        for name in names {
            state.remove(&name);
        }
        if let Some(task) = state.batch_task.take() {
            task.abort();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

impl RenewalState {
    /// Stops renewing `name`; with no lock left, the batched task stops too (§4.4).
    fn remove(&mut self, name: &str) {
        if let Some(timer) = self.locks.remove(name).and_then(|entry| entry.timer) {
            timer.abort();
        }
        if self.locks.is_empty()
            && let Some(task) = self.batch_task.take()
        {
            task.abort();
        }
    }

    /// Drops `name` if it is still the registration `generation`.
    fn remove_generation(&mut self, name: &str, generation: u64) {
        if self
            .locks
            .get(name)
            .is_some_and(|e| e.generation == generation)
        {
            self.remove(name);
        }
    }

    fn first_thread(&self, name: &str, generation: u64) -> Option<ThreadId> {
        let entry = self
            .locks
            .get(name)
            .filter(|e| e.generation == generation)?;
        entry.threads.first().map(|(thread, _)| *thread)
    }
}

fn lock_state(state: &Mutex<RenewalState>) -> MutexGuard<'_, RenewalState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// §4.3 (≤3.43): every `lease / 3`, one renewal for the first local thread; a renewal
/// re-schedules, a missing field or an error ends renewal of the lock.
async fn per_lock_renewal(
    wire: Wire,
    state: Arc<Mutex<RenewalState>>,
    name: String,
    generation: u64,
    lease_ms: u64,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(lease_ms / 3)).await;
        let Some(thread) = lock_state(&state).first_thread(&name, generation) else {
            return;
        };
        let renewed = lock::renew_one(&wire, &name, thread, lease_ms).await;
        if renewed.ok() != Some(true) {
            // This aborts our own handle, which is harmless: we return right away.
            lock_state(&state).remove_generation(&name, generation);
            return;
        }
    }
}

/// §4.2 (3.44+): every `lockWatchdogTimeout / 3`, renew all registered locks, at most 100 (of one
/// slot, in a cluster) per batched script, each with its first local thread; a missing field drops
/// that lock, an error keeps them all. The task ends when no lock is left.
async fn batched_renewal(wire: Wire, state: Arc<Mutex<RenewalState>>, timeout_ms: u64) {
    loop {
        tokio::time::sleep(Duration::from_millis(timeout_ms / 3)).await;
        let snapshot: Vec<(String, u64, ThreadId)> = {
            lock_state(&state)
                .locks
                .iter()
                .filter_map(|(name, e)| Some((name.clone(), e.generation, e.threads.first()?.0)))
                .collect()
        };
        for chunk in batches(&wire, snapshot)
            .iter()
            .flat_map(|b| b.chunks(WATCHDOG_BATCH_SIZE))
        {
            let locks: Vec<(&str, ThreadId)> = chunk
                .iter()
                .map(|(name, _, thread)| (name.as_str(), *thread))
                .collect();
            let Ok(renewed) = lock::renew_batch(&wire, &locks, timeout_ms).await else {
                continue; // logged by Redisson; entries are kept and retried next tick
            };
            let mut state = lock_state(&state);
            for ((name, generation, _), renewed) in chunk.iter().zip(renewed) {
                if !renewed {
                    state.remove_generation(name, *generation);
                }
            }
        }
    }
}

/// The renewal batches: all locks, or in a cluster one batch per hash slot, as a script may not
/// cross slots (§4.2).
fn batches(wire: &Wire, locks: Vec<(String, u64, ThreadId)>) -> Vec<Vec<(String, u64, ThreadId)>> {
    if let Conn::Single(_) = wire.conn {
        return vec![locks];
    }
    let mut by_slot: HashMap<Slot, Vec<_>> = HashMap::new();
    for lock in locks {
        by_slot
            .entry(Slot::for_key(&lock.0))
            .or_default()
            .push(lock);
    }
    by_slot.into_values().collect()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prefix_name() {
        assert_eq!(lock_channel("myLock"), "redisson_lock__channel:{myLock}");
        assert_eq!(lock_channel("a{b}c"), "redisson_lock__channel:a{b}c");
        assert_eq!(lock_channel("a}b"), "redisson_lock__channel:{a}b}");
        assert_eq!(
            unlock_latch("myLock", "00ff"),
            "redisson_unlock_latch:{myLock}:00ff"
        );
    }

    #[test]
    fn request_ids_are_32_lower_hex() {
        let id = new_request_id();
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_ne!(id, new_request_id());
    }

    #[test]
    fn versions_are_ordered_and_flagged() {
        assert!(RedissonVersion::ALL.windows(2).all(|w| w[0] < w[1]));
        assert!(!RedissonVersion::V3_23.has_unlock_latch());
        assert!(RedissonVersion::V3_31.has_unlock_latch());
        assert!(!RedissonVersion::V3_52.deletes_its_latch());
        assert!(RedissonVersion::V4.deletes_its_latch());
        assert_eq!(RedissonVersion::V3_31.latch_ttl_ms(), 13_500);
        assert!((16_000..=20_000).contains(&RedissonVersion::V4.latch_ttl_ms()));
    }
}
