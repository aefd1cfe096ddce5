//! A Redisson wire emulator: the Redis command sequences of a Java Redisson client, written from
//! `docs/protocol.md` (not from Redisson's source), for interop tests. It emulates the `RLock`, the
//! fair lock, the read-write lock, the fenced lock and the spin lock, and the synchronizers: the
//! semaphore, the permit-expirable semaphore and the count-down latch.
//!
//! A [`JavaClient`] stands for one `RedissonClient`: it has its own random v4 UUID (the "connection
//! manager id", §1.1), one command connection, one pub/sub connection per entry it waits on, and a
//! lock watchdog. [`JavaClient::get_lock`] returns a [`JavaLock`], the counterpart of one `RLock`
//! object with its `internalLockLeaseTime`; its siblings are [`JavaClient::get_fair_lock`],
//! [`JavaClient::get_read_write_lock`], [`JavaClient::get_fenced_lock`] and
//! [`JavaClient::get_spin_lock`], and (4.4+) [`JavaClient::get_non_reentrant_lock`] and
//! [`JavaClient::get_non_reentrant_fair_lock`]. Java thread ids are passed explicitly, as in Redisson's
//! `lockAsync(threadId)` overloads, so several "threads" of one client can be driven from tasks.
//! The synchronizers have no owner: [`JavaClient::get_semaphore`],
//! [`JavaClient::get_permit_expirable_semaphore`] and [`JavaClient::get_count_down_latch`].
//!
//! This module holds what every kind of Redisson object shares: the client and its connections,
//! versions, names, the local pub/sub entries with their latches (§3.1; a kind passes its
//! `onMessage` rule, its entry name and its channel), the waiting loops of §3.3 and §3.4 (which
//! the semaphores' acquires share), what every lock object has (`RedissonBaseLock`: its
//! `internalLockLeaseTime`, the client side of unlock and force unlock, the version-dependent
//! start of every release script), the version-dependent start of every synchronizer script, and
//! the watchdog. Each kind is a submodule with its
//! scripts, its object type (re-exported here) and its `JavaClient::get_*` factory: `lock` for the
//! `RLock`, `fair_lock`, `non_reentrant` (both non-reentrant locks, over the `RLock` and the fair
//! lock), `rw_lock`, `fenced_lock`, `spin_lock`, `semaphore`,
//! `expirable_semaphore` and `count_down_latch`.
//!
//! What is emulated, section by section of `docs/protocol.md`:
//!
//! | Behaviour | Section | Where |
//! |---|---|---|
//! | owner field `<uuid>:<threadId>` | §1.1, §1.2 | here: [`JavaClient::lock_name`] |
//! | key, channel and latch names (`prefixName`, `suffixName`) | §1.3, §1.4 | here: [`prefix_name`], [`suffix_name`], [`lock_channel`], [`unlock_latch`], [`semaphore_channel`], [`count_down_latch_channel`] |
//! | local entries, their latches, subscriptions; one entry map per pub/sub class (lock, semaphore, count-down latch) | §3.1 | here, used by the waiting calls |
//! | unlock latch replay and record, publish command by version, `DEL` of the latch | §2.3, §2.6 | here, for every kind's unlock |
//! | acquire script, incl. the ≤3.12 `HSET` variant | §2.2 | `lock`: [`JavaLock::try_lock`] and the waiting calls |
//! | unlock script: latch (≥3.24), no latch (3.22–3.23), literal `publish` (≤3.21), missing lock publishes (≤3.10.5) | §2.3, §2.4 | `lock`: [`JavaLock::unlock`], [`JavaLock::unlock_attempt`] |
//! | force unlock | §2.5 | `lock`: [`JavaLock::force_unlock`] |
//! | `lock()` / `tryLock(wait, lease)` waiting, `0`/`1` messages | §3.2–§3.4 | here; `lock`: [`JavaLock::lock`], [`JavaLock::try_lock_for`] |
//! | watchdog: one timer per lock (≤3.43) or one batched task per kind (≥3.44) | §4 | here, automatic: [`JavaClient::stop_watchdog`]; `lock`: the renewal scripts, [`JavaClient::renew`] |
//! | `internalLockLeaseTime` | §2.1, §11.10 | here, for every kind; [`JavaLock::internal_lease`] |
//! | cluster mode: routing by key, `SPUBLISH`/`SSUBSCRIBE` (3.22+ on Redis 7), per-slot batches | §2.6, §4.2 | here: [`JavaClient::connect_cluster`] |
//! | fair lock: queue and timeout set, stale purge, both acquire forms, give-up, unlock (a missing lock returns 1 and wakes the head), force unlock, per-thread channels, `fairLockWaitTimeout`; queued reply `zscore − wait − now` (≤3.31), unguarded purge (≤3.30) and enqueue (≤3.44) | §6.1–§6.8 | `fair_lock`: [`JavaFairLock`] |
//! | read-write lock: read and write acquire and unlock, per-hold timeout keys, downgrade without a message, force unlocks, `isLocked`; a missing hash unlocks with 1 (≤3.43) | §7 | `rw_lock`: [`JavaReadWriteLock`], [`JavaRwLock`] |
//! | read-lock renewal: `ReadLockTask` of this client's holders (4.4+), of every holder (3.44–4.3), one timer per lock with the write lock's fallback (≤3.43) | §4.2, §4.3 | `rw_lock`, run by the watchdog |
//! | non-reentrant lock and non-reentrant fair lock (4.4+): their acquire scripts refusing a re-entry with `NON_REENTRANT_REACQUIRE`, thrown as [`JavaError::IllegalMonitorState`]; the rest is the `RLock`'s and the fair lock's | §8.8, §6.9 | `non_reentrant`: [`JavaNonReentrantLock`], [`JavaNonReentrantFairLock`] |
//! | fenced lock: token key, `[-1, t]` / `[pttl, -1]` script, plain acquires that count too, `getToken` | §8.2 | `fenced_lock`: [`JavaFencedLock`] |
//! | spin lock: two-block acquire, `ExponentialBackOff` polling, unlock without publish, `DEL` force unlock | §8.1 | `spin_lock`: [`JavaSpinLock`] |
//! | semaphore: its scripts, publishes of the new value, `SemaphorePubSub` (`min(subscribers, n)` wake-ups), `acquire` sleeping on the latch without limit, `tryAcquire(wait)` | §8.5 | `semaphore`: [`JavaSemaphore`] |
//! | permit-expirable semaphore: raw 16-byte ids in `{N}:timeout`, reclaim of expired permits, the `OK` / `:<score>` / nil acquire reply and its wait bound, single and list release, the permit counts, lease updates | §8.6 | `expirable_semaphore`: [`JavaPermitExpirableSemaphore`] |
//! | count-down latch: always-braced channel, `1` on set and delete, `0` at zero, the reclosable local latch of `await` | §8.7 | `count_down_latch`: [`JavaCountDownLatch`] |
//! | synchronizers' publish command: an argument (3.22+) or a literal `publish` (≤3.21) | §2.6 | here, for every synchronizer script |
//! | the names of the objects of map, multimap and set entries, from the bytes Java's codecs wrote on the JVM | §13 | `entries`: [`JavaEntries`], [`JAVA_KEYS`] |
//!
//! Not emulated: WAIT-synced writes and their retries (§5: single-server Redisson sends a plain
//! EVAL; the emulator never waits for replicas), pub/sub reconnects (§3.7), the connection pools
//! (§3.6: one pub/sub connection per waited-on entry here), the async API's listeners (§3.5),
//! multi/red locks (§8.3, §8.4: client-side composites of the
//! emulated locks).
//!
//! Everything is plain `redis` commands; errors are [`redis::RedisError`]s, but for the acquisitions
//! of the non-reentrant locks, which tell a refused re-entry apart as a [`JavaError`]. An unlock
//! that Java would answer with `IllegalMonitorStateException` returns `Ok(None)`.
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

mod count_down_latch;
mod entries;
mod expirable_semaphore;
mod fair_lock;
mod fenced_lock;
mod group_lock;
mod kind;
mod lock;
mod non_reentrant;
mod rw_lock;
mod semaphore;
mod spin_lock;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{MultiplexedConnection, PubSubSink};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{
    AsyncCommands, Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, ToRedisArgs, Value,
};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use count_down_latch::JavaCountDownLatch;
pub use entries::{JAVA_KEYS, JavaEntries, JavaKey, hash128_to_base64};
pub use expirable_semaphore::{JavaPermitExpirableSemaphore, NON_EXPIRING_SCORE};
pub use fair_lock::{FairKind, JavaFairLock};
pub use fenced_lock::{FencedKind, JavaFencedLock};
pub use group_lock::JavaGroupLock;
pub use kind::{JavaObject, KINDS, MissingUnlock, ObjectKind, Polling, RlockObject};
pub use lock::{JavaLock, ReentrantKind};
pub use non_reentrant::{
    JavaError, JavaNonReentrantFairLock, JavaNonReentrantLock, JavaResult, NonReentrantFairKind,
    NonReentrantKind, REACQUIRE,
};
pub use rw_lock::{JavaReadWriteLock, JavaRwLock, ReadKind, WriteKind};
pub use semaphore::JavaSemaphore;
pub use spin_lock::{JavaSpinLock, SpinKind};

/// A Java thread id (`Thread.currentThread().getId()`): the second half of an owner field.
pub type ThreadId = u64;

/// `Config.lockWatchdogBatchSize` (§4.2).
const WATCHDOG_BATCH_SIZE: usize = 100;

// ===== versions =====

/// The Redisson release line to emulate. Each variant names the newest release of a range whose lock
/// wire behaviour is the same (Appendix A of `docs/protocol.md`); they are ordered oldest first.
/// Where a range spans a change of another kind, the variant says which release that kind follows.
///
/// Every kind follows the range's generation of the unlock latch and the publish command (§2.3,
/// §2.6). Beyond that, the kinds' own changes: the fair lock's stale purge tolerates a missing
/// score from 3.31 (`V3_31` on), its queued waiter gets `max(0, pttl)` from 3.32 (`V3_44` on) and
/// its enqueue guards a missing predecessor score from 3.45 (`V3_44` on); a read-write unlock of
/// a missing hash returns nil from 3.44 (`V3_44` on); read locks are renewed per lock before 3.44,
/// by a batched task of every holder's keys in 3.44 – 4.3 and of this client's holders from 4.4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RedissonVersion {
    /// ≤ 3.10.5: first acquire with `HSET field 1`; unlocking a *missing* lock publishes `0` and
    /// returns 1; literal `publish`; no latch; one renewal timer per lock. Its write lock
    /// publishes `1`, as from 3.9 on.
    V3_10_5,
    /// 3.10.6 – 3.12.x: as `V3_10_5`, but unlocking a missing lock returns nil.
    V3_12,
    /// 3.13 – 3.21: `HINCRBY` on first acquire too; literal `publish`; no latch.
    V3_21,
    /// 3.22 – 3.23: the publish command is a script argument; no latch.
    V3_23,
    /// 3.24 – 3.43 (e.g. 3.31.0): unlock latch with a 13500 ms TTL; partial unlocks keep
    /// `internalLockLeaseTime` (3.27.2+); one renewal timer per lock. Its fair lock is 3.31.0's.
    V3_31,
    /// 3.44 – 3.51: batched watchdog (one task per kind, ≤100 locks per script). Its fair lock is
    /// 3.45's (3.44.x alone lacked the enqueue guard).
    V3_44,
    /// 3.52 – 4.2.x: `EVALSHA`; latch TTL 16–20 s; the post-unlock `DEL` targets
    /// `redisson_unlock_latch:{N}:<clientUUID>` instead of the latch, which lives out its TTL.
    V3_52,
    /// 4.3+ and HEAD (4.7): as `V3_52` with the latch `DEL` fixed. Its read-lock renewal is 4.4's
    /// (4.3.x renewed every holder's timeout keys, as `V3_52` does).
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

    /// Whether scripts take the publish command as an argument (3.22+, §2.6) rather than calling
    /// `publish` literally.
    pub fn passes_publish_command(self) -> bool {
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

    /// Whether the version has `RNonReentrantLock` and `RNonReentrantFairLock` (4.4+, §6.9,
    /// §8.8: the `V4` line).
    pub fn has_non_reentrant_locks(self) -> bool {
        self >= Self::V4
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

/// Redisson's `suffixName(name, suffix)` (§1.3): `name:suffix` if `name` contains `{`, else
/// `{name}:suffix`.
pub fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
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

/// The channel of semaphore `name`, which the permit-expirable semaphore shares:
/// `redisson_sc:{name}` (§1.4).
pub fn semaphore_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

/// The channel of count-down latch `name`: `redisson_countdownlatch__channel__{name}`, braces
/// always added, even around a name that has its own (§1.4).
pub fn count_down_latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A fresh id as `ServiceManager.generateId()` makes them: 16 random bytes as 32 lower-case hex
/// characters. Unlock request ids (§1.4) and permit ids (§8.6) are such ids.
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
    /// `fairLockWaitTimeout`: a fair-lock waiter's `wait` (how far its queue deadline lies beyond
    /// its predecessor's, §6.1) when `tryLock` gives none. 5 min.
    pub fair_lock_wait_timeout: Duration,
}

impl Default for JavaConfig {
    fn default() -> Self {
        Self {
            lock_watchdog_timeout: Duration::from_secs(30),
            subscription_timeout: Duration::from_millis(7500),
            fair_lock_wait_timeout: Duration::from_secs(300),
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
    /// The local entries (§3.1), keyed by message rule and entry name: Java keeps one entry map
    /// per pub/sub class (`LockPubSub`, `SemaphorePubSub`, `CountDownLatchPubSub`).
    entries: tokio::sync::Mutex<HashMap<(MessageRule, String), Arc<Entry>>>,
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

    /// Sends a script with text arguments as this version does ([`Wire::eval_args`]).
    async fn eval<T: FromRedisValue>(
        &self,
        lua: &str,
        keys: &[&str],
        args: &[String],
    ) -> RedisResult<T> {
        self.eval_args(lua, keys, args).await
    }

    /// Sends a script as this version does: `EVALSHA` (loading on `NOSCRIPT`) with the script cache,
    /// else plain `EVAL` (§0). Each of `args` is one argument (text, or raw bytes).
    async fn eval_args<T: FromRedisValue, A: ToRedisArgs>(
        &self,
        lua: &str,
        keys: &[&str],
        args: &[A],
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
    /// `PublishSubscribe.subscribe` (§3.1): joins the local entry `entry_name` of the pub/sub
    /// class `rule`, or creates it and subscribes `channel` (on its own pub/sub connection)
    /// before returning. The `rule` handles what arrives on the channel.
    async fn subscribe(
        &self,
        entry_name: &str,
        channel: &str,
        rule: MessageRule,
    ) -> RedisResult<Arc<Entry>> {
        let mut entries = self.entries.lock().await;
        let key = (rule, entry_name.to_owned());
        if let Some(entry) = entries.get(&key) {
            let _ = entry.state.subscribers.fetch_add(1, Ordering::SeqCst);
            return Ok(entry.clone());
        }
        let (sink, mut messages) = self.subscriber.subscribe(channel).await?;
        let state = Arc::new(EntryState::default());
        let reader = tokio::spawn({
            let state = state.clone();
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
                        rule.on_message(&state, value);
                    }
                }
            }
        });
        let entry = Arc::new(Entry {
            channel: channel.to_owned(),
            state,
            sink,
            reader,
        });
        let _ = entries.insert(key, entry.clone());
        Ok(entry)
    }

    /// [`ClientInner::subscribe`] for a call that waits without limit: the subscription must be
    /// confirmed within `subscriptionTimeout`.
    async fn subscribe_in_time(
        &self,
        entry_name: &str,
        channel: &str,
        rule: MessageRule,
    ) -> RedisResult<Arc<Entry>> {
        let subscribe = self.subscribe(entry_name, channel, rule);
        let timeout = self.config.subscription_timeout;
        tokio::time::timeout(timeout, subscribe)
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("Unable to acquire subscription lock after {timeout:?}"),
                )
            })?
    }

    /// `PublishSubscribe.unsubscribe` (§3.1): the last local waiter of `entry_name` (of the
    /// pub/sub class `rule`) unsubscribes (and waits for the server's confirmation).
    async fn unsubscribe(&self, entry_name: &str, rule: MessageRule) {
        let mut entries = self.entries.lock().await;
        let key = (rule, entry_name.to_owned());
        let Some(entry) = entries.get(&key) else {
            return;
        };
        if entry.state.subscribers.fetch_sub(1, Ordering::SeqCst) > 1 {
            return;
        }
        if let Some(entry) = entries.remove(&key) {
            let _ = entry.sink.clone().unsubscribe(&entry.channel).await;
            entry.reader.abort();
        }
    }

    /// `lock(leaseTime)`'s loop (§3.3) around `attempt`, one acquire; the semaphores' `acquire`
    /// loops alike (§8.5, §8.6). Try; subscribe `channel` for the local entry `entry_name` of
    /// the pub/sub class `rule` (within `subscriptionTimeout`); loop { try; sleep on the latch up
    /// to the returned ttl, or without limit when it is negative }; unsubscribe.
    async fn acquire_waiting<T, Fut>(
        &self,
        entry_name: &str,
        channel: &str,
        rule: MessageRule,
        mut attempt: impl FnMut() -> Fut,
    ) -> RedisResult<T>
    where
        Fut: Future<Output = RedisResult<Attempt<T>>>,
    {
        if let Attempt::Acquired(held) = attempt().await? {
            return Ok(held);
        }
        let entry = self.subscribe_in_time(entry_name, channel, rule).await?;
        let result = async {
            loop {
                match attempt().await? {
                    Attempt::Acquired(held) => return Ok(held),
                    Attempt::Busy(ttl) => {
                        let limit = u64::try_from(ttl).ok().map(Duration::from_millis);
                        entry.state.latch.wait(limit).await;
                    }
                }
            }
        }
        .await;
        self.unsubscribe(entry_name, rule).await;
        result
    }

    /// `tryLock(waitTime, …)`'s loop (§3.4) around `attempt`; the semaphores' `tryAcquire(…,
    /// waitTime, …)` loop alike (§8.5, §8.6). As [`ClientInner::acquire_waiting`], but subscribing
    /// and every sleep are bounded by what is left of `wait` (a sleep also by the returned ttl
    /// when it is not negative). `None` when `wait` ran out.
    async fn try_acquire_waiting<T, Fut>(
        &self,
        entry_name: &str,
        channel: &str,
        rule: MessageRule,
        wait: Duration,
        mut attempt: impl FnMut() -> Fut,
    ) -> RedisResult<Option<T>>
    where
        Fut: Future<Output = RedisResult<Attempt<T>>>,
    {
        let deadline = Instant::now() + wait;
        if let Attempt::Acquired(held) = attempt().await? {
            return Ok(Some(held));
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(None);
        }
        let subscribe = self.subscribe(entry_name, channel, rule);
        let entry = match tokio::time::timeout(remaining, subscribe).await {
            Err(_) => return Ok(None),
            Ok(entry) => entry?,
        };
        let result = async {
            loop {
                let ttl = match attempt().await? {
                    Attempt::Acquired(held) => return Ok(Some(held)),
                    Attempt::Busy(ttl) => ttl,
                };
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Ok(None);
                }
                let limit = match u64::try_from(ttl) {
                    Ok(ttl) if Duration::from_millis(ttl) < remaining => Duration::from_millis(ttl),
                    _ => remaining,
                };
                entry.state.latch.wait(Some(limit)).await;
                if Instant::now() >= deadline {
                    return Ok(None);
                }
            }
        }
        .await;
        self.unsubscribe(entry_name, rule).await;
        result
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

/// A local entry (`RedissonLockEntry`, §3.1; `RedissonCountDownLatchEntry`, §8.7): the
/// per-client state of one entry name (for an `RLock`, its lock name), shared by all local
/// waiters: the channel's subscription and what its messages act on.
struct Entry {
    channel: String,
    state: Arc<EntryState>,
    sink: Sink,
    reader: JoinHandle<()>,
}

/// What an entry's messages act on: the latch the lock and semaphore waiters sleep on, the
/// reclosable latch the count-down latch waiters sleep on, and how many local subscribers share
/// the entry (its `counter`).
#[derive(Debug)]
struct EntryState {
    latch: Latch,
    gate: Gate,
    subscribers: AtomicUsize,
}

impl Default for EntryState {
    /// A new entry, with its first subscriber.
    fn default() -> Self {
        Self {
            latch: Latch::default(),
            gate: Gate::default(),
            subscribers: AtomicUsize::new(1),
        }
    }
}

/// A pub/sub class of Redisson: what it does with a number that arrived on an entry's channel.
/// Each class has its own entry map (§3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum MessageRule {
    /// `LockPubSub` (§3.2), the rule of every lock kind's entries: `0` releases one permit
    /// (banked if nobody sleeps), `1` one per sleeping thread; other numbers are ignored.
    Lock,
    /// `SemaphorePubSub` (§8.5), of the semaphore's and the permit-expirable semaphore's entries:
    /// `n` releases `min(subscribers, n)` permits; a negative `n` throws inside Java's listener,
    /// so it does nothing.
    Semaphore,
    /// `CountDownLatchPubSub` (§8.7): `0` opens the reclosable latch, `1` closes it; other
    /// numbers are ignored.
    CountDownLatch,
}

impl MessageRule {
    /// `onMessage` of the class, for `value` arrived on the channel of `entry`.
    fn on_message(self, entry: &EntryState, value: i64) {
        match (self, value) {
            (Self::Lock, 0) => entry.latch.release(1),
            (Self::Lock, 1) => entry.latch.release(entry.latch.queue_length()),
            (Self::Semaphore, permits) => {
                if let Ok(permits) = usize::try_from(permits) {
                    let subscribers = entry.subscribers.load(Ordering::SeqCst);
                    entry.latch.release(permits.min(subscribers));
                }
            }
            (Self::CountDownLatch, 0) => entry.gate.open(),
            (Self::CountDownLatch, 1) => entry.gate.close(),
            (Self::Lock | Self::CountDownLatch, _) => {}
        }
    }
}

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

/// The count-down latch entry's `ReclosableLatch` (§8.7): closed when the entry is created;
/// while it is open, waiters pass.
#[derive(Debug)]
struct Gate {
    open: watch::Sender<bool>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            open: watch::Sender::new(false),
        }
    }
}

impl Gate {
    /// `open()`: lets every waiter through, now and until closed.
    fn open(&self) {
        let _ = self.open.send_replace(true);
    }

    /// `close()`: later waiters sleep until it opens again.
    fn close(&self) {
        let _ = self.open.send_replace(false);
    }

    /// `await()` or, with a limit, `await(limit)`: returns when the latch is open (at once if it
    /// is) or when the limit passes, whichever comes first.
    async fn wait(&self, limit: Option<Duration>) {
        let mut open = self.open.subscribe();
        let opened = async {
            let _ = open.wait_for(|open| *open).await;
        };
        match limit {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, opened).await;
            }
            None => opened.await,
        }
    }
}

// ===== lock objects (`RedissonBaseLock`) =====

/// How a kind holds a lock: the hash field of a thread, and the renewal the watchdog runs (§4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// `<uuid>:<tid>` in a lock hash (`RLock`, fair, fenced and spin locks; §1.2), renewed with an
    /// ownership check of that field (§4.2 `LockTask`, §4.3).
    Lock,
    /// A write lock's `<uuid>:<tid>:write` (§7.1), renewed like `Lock`; ≤3.43 falls back to the
    /// read renewal of the same thread, for a writer that downgraded (§4.3).
    Write,
    /// A read lock's `<uuid>:<tid>` and its timeout keys (§7.1), renewed with the read renewal
    /// (§4.2 `ReadLockTask`, §4.3).
    Read,
}

impl Hold {
    fn field(self, wire: &Wire, thread: ThreadId) -> String {
        match self {
            Self::Write => format!("{}:write", wire.lock_name(thread)),
            Self::Lock | Self::Read => wire.lock_name(thread),
        }
    }

    /// The watchdog registry of the hold: HEAD's task per kind (3.44+, §4.2); before, one entry
    /// per entry name (§4.3), which the read and write holds of one name share.
    fn task(self, version: RedissonVersion) -> Task {
        if self == Self::Read && version.has_batched_watchdog() {
            Task::ReadLock
        } else {
            Task::Lock
        }
    }
}

/// What one acquire script said: acquired (or re-entered), with what the kind's script returns
/// then (a fencing token, or nothing); or busy, with how long (ms) to sleep at most before the next
/// try, a negative value meaning until a message (§3.3).
enum Attempt<T> {
    Acquired(T),
    Busy(i64),
}

impl<T> Attempt<T> {
    fn is_acquired(&self) -> bool {
        matches!(self, Self::Acquired(_))
    }
}

impl From<Option<i64>> for Attempt<()> {
    /// An acquire reply read as `EVAL_LONG` (§0): nil means acquired, a number is the ttl.
    fn from(reply: Option<i64>) -> Self {
        reply.map_or(Self::Acquired(()), Self::Busy)
    }
}

/// What every emulated lock object has (`RedissonBaseLock`): its client, its name (the hash key),
/// how it holds, and its own `internalLockLeaseTime` (§2.1): the watchdog timeout, or the last
/// explicit lease it acquired with, until an unlock resets it. Clones share the object, as Java
/// threads share one reference.
#[derive(Clone)]
struct LockObject {
    client: Arc<ClientInner>,
    name: String,
    hold: Hold,
    /// `internalLockLeaseTime` in ms.
    internal_lease: Arc<AtomicU64>,
}

impl LockObject {
    fn new(client: &JavaClient, name: String, hold: Hold) -> Self {
        Self {
            internal_lease: Arc::new(AtomicU64::new(client.watchdog_timeout_ms())),
            client: client.inner.clone(),
            name,
            hold,
        }
    }

    fn wire(&self) -> &Wire {
        &self.client.wire
    }

    /// The hash field `thread` holds under.
    fn field(&self, thread: ThreadId) -> String {
        self.hold.field(self.wire(), thread)
    }

    /// The name of the local entry this object's waiters share (§1.2, §3.1): `<uuid>:<name>`.
    fn entry_name(&self) -> String {
        format!("{}:{}", self.wire().id, self.name)
    }

    fn internal_lease(&self) -> Duration {
        Duration::from_millis(self.internal_lease_ms())
    }

    /// `internalLockLeaseTime` in ms, as the scripts take it.
    fn internal_lease_ms(&self) -> u64 {
        self.internal_lease.load(Ordering::SeqCst)
    }

    fn reset_internal_lease(&self) {
        let timeout = self.client.watchdog.timeout_ms;
        self.internal_lease.store(timeout, Ordering::SeqCst);
    }

    /// One acquire script call for `thread`. Every kind's acquire takes `[lease, field, extra…]`,
    /// the lease being `lease` or, without one, `internalLockLeaseTime` (§2.2); `read` reads the
    /// reply. When it says acquired, an explicit lease becomes `internalLockLeaseTime`, and without
    /// one the watchdog takes the hold (§4.1).
    async fn acquire<R: FromRedisValue, T>(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
        script: &str,
        keys: &[&str],
        extra: &[String],
        read: impl FnOnce(R) -> Attempt<T>,
    ) -> RedisResult<Attempt<T>> {
        let lease_ms = lease.map_or_else(|| self.internal_lease_ms(), millis);
        let mut args = vec![lease_ms.to_string(), self.field(thread)];
        args.extend_from_slice(extra);
        let attempt = read(self.wire().eval(script, keys, &args).await?);
        if let Attempt::Acquired(_) = attempt {
            match lease {
                Some(lease) => self.internal_lease.store(millis(lease), Ordering::SeqCst),
                None => {
                    let watchdog = &self.client.watchdog;
                    watchdog.register(&self.name, thread, self.hold, lease_ms);
                }
            }
        }
        Ok(attempt)
    }

    /// An acquire over `KEYS = [name]`, read as `EVAL_LONG` (§2.2): the `RLock`'s (`extra`: the
    /// non-reentrant lock's refusal, §8.8), the spin lock's and the write lock's.
    async fn acquire_own(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
        script: &str,
        extra: &[String],
    ) -> RedisResult<Attempt<()>> {
        let keys = [self.name.as_str()];
        self.acquire(thread, lease, script, &keys, extra, Option::into)
            .await
    }

    /// [`ClientInner::acquire_waiting`] on the lock entry `entry_name` (§3.3).
    async fn lock_waiting<T, Fut>(
        &self,
        entry_name: &str,
        channel: &str,
        attempt: impl FnMut() -> Fut,
    ) -> RedisResult<T>
    where
        Fut: Future<Output = RedisResult<Attempt<T>>>,
    {
        let rule = MessageRule::Lock;
        let waiting = self
            .client
            .acquire_waiting(entry_name, channel, rule, attempt);
        waiting.await
    }

    /// [`ClientInner::try_acquire_waiting`] on the lock entry `entry_name` (§3.4).
    async fn try_lock_waiting<T, Fut>(
        &self,
        entry_name: &str,
        channel: &str,
        wait: Duration,
        attempt: impl FnMut() -> Fut,
    ) -> RedisResult<Option<T>>
    where
        Fut: Future<Output = RedisResult<Attempt<T>>>,
    {
        let rule = MessageRule::Lock;
        let client = &self.client;
        let waiting = client.try_acquire_waiting(entry_name, channel, rule, wait, attempt);
        waiting.await
    }

    /// [`LockObject::lock_waiting`] on this object's entry, as every kind's waiters share it but
    /// the fair lock's.
    async fn lock_on<T, Fut>(&self, channel: &str, attempt: impl FnMut() -> Fut) -> RedisResult<T>
    where
        Fut: Future<Output = RedisResult<Attempt<T>>>,
    {
        self.lock_waiting(&self.entry_name(), channel, attempt)
            .await
    }

    /// [`LockObject::try_lock_waiting`] on this object's entry.
    async fn try_lock_on<T, Fut>(
        &self,
        channel: &str,
        wait: Duration,
        attempt: impl FnMut() -> Fut,
    ) -> RedisResult<Option<T>>
    where
        Fut: Future<Output = RedisResult<Attempt<T>>>,
    {
        self.try_lock_waiting(&self.entry_name(), channel, wait, attempt)
            .await
    }

    /// Runs the kind's unlock script `body` under `request_id`, as `Wire::release` adds to it.
    async fn unlock_script(
        &self,
        request_id: &str,
        body: &str,
        keys: &[&str],
        args: Vec<String>,
        publishes: bool,
    ) -> RedisResult<Option<i64>> {
        let release = Release {
            name: &self.name,
            body,
            keys,
            args,
            publishes,
            request_id: Some(request_id),
        };
        self.wire().release(release).await
    }

    /// [`LockObject::force_unlock`] with the kind's force-unlock script `body`, which publishes.
    async fn force_unlock_script(
        &self,
        body: &str,
        keys: &[&str],
        args: Vec<String>,
    ) -> RedisResult<bool> {
        let release = Release {
            name: &self.name,
            body,
            keys,
            args,
            publishes: true,
            request_id: None,
        };
        self.force_unlock(self.wire().release(release)).await
    }

    /// `unlock()`'s client side (§2.3) around `attempt`, the kind's unlock script under a request
    /// id: a fresh id; after the reply, the `DEL` of the latch (3.24+); then the watchdog
    /// cancellation, and the `internalLockLeaseTime` reset on a reply of 1 or nil.
    async fn unlock<Fut>(
        &self,
        thread: ThreadId,
        attempt: impl FnOnce(String) -> Fut,
    ) -> RedisResult<Option<i64>>
    where
        Fut: Future<Output = RedisResult<Option<i64>>>,
    {
        let version = self.wire().version;
        let request_id = new_request_id();
        let result = attempt(request_id.clone()).await;
        if version.has_unlock_latch() && result.is_ok() {
            // Fire-and-forget in Java; awaited here so tests see its effect deterministically.
            let latch = if version.deletes_its_latch() {
                unlock_latch(&self.name, &request_id)
            } else {
                unlock_latch(&self.name, &self.wire().id)
            };
            let _: RedisResult<i64> = self.wire().conn.clone().del(latch).await;
        }
        self.client.watchdog.cancel(&self.name, thread, self.hold);
        let reset = match result {
            Ok(None | Some(1)) => true,
            Ok(Some(_)) => version.partial_unlock_resets_lease(),
            Err(_) => false,
        };
        if reset {
            self.reset_internal_lease();
        }
        result
    }

    /// `forceUnlock()`'s client side (§2.5): renewal stops, then `delete` (the kind's script or
    /// command: 1 when the lock existed) runs, then `internalLockLeaseTime` is reset. Returns
    /// whether the lock existed.
    async fn force_unlock(
        &self,
        delete: impl Future<Output = RedisResult<i64>>,
    ) -> RedisResult<bool> {
        self.client.watchdog.cancel_all(&self.name, self.hold);
        let deleted = delete.await?;
        self.reset_internal_lease();
        Ok(deleted == 1)
    }

    async fn exists(&self) -> RedisResult<bool> {
        self.wire().conn.clone().exists(&self.name).await
    }

    async fn is_held_by_thread(&self, thread: ThreadId) -> RedisResult<bool> {
        let field = self.field(thread);
        self.wire().conn.clone().hexists(&self.name, field).await
    }

    async fn hold_count(&self, thread: ThreadId) -> RedisResult<u64> {
        let field = self.field(thread);
        let count: Option<u64> = self.wire().conn.clone().hget(&self.name, field).await?;
        Ok(count.unwrap_or(0))
    }

    async fn remain_time_to_live(&self) -> RedisResult<i64> {
        self.wire().conn.clone().pttl(&self.name).await
    }
}

impl fmt::Debug for LockObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockObject")
            .field("name", &self.name)
            .field("client", &self.wire().id)
            .field("hold", &self.hold)
            .field("internal_lease", &self.internal_lease())
            .finish()
    }
}

/// The calls every kind's object answers alike (`RedissonBaseLock`, §2.7), for a kind whose
/// [`LockObject`] is `self.<path>`; with `; exists`, also `isLocked()` as `EXISTS`.
macro_rules! base_lock_calls {
    ($($object:ident).+) => {
        /// The lock name (also its hash key).
        pub fn name(&self) -> &str {
            &self.$($object).+.name
        }

        /// The hash field `thread` holds under (`getLockName(threadId)`, §1.2).
        pub fn lock_name(&self, thread: $crate::redisson::ThreadId) -> String {
            self.$($object).+.field(thread)
        }

        /// This object's `internalLockLeaseTime` (§2.1): the watchdog timeout, or the last
        /// explicit lease it acquired with, until an unlock resets it.
        pub fn internal_lease(&self) -> ::std::time::Duration {
            self.$($object).+.internal_lease()
        }

        /// `isHeldByThread(thread)`: `HEXISTS` of its field.
        ///
        /// # Errors
        ///
        /// When Redis fails.
        pub async fn is_held_by_thread(
            &self,
            thread: $crate::redisson::ThreadId,
        ) -> ::redis::RedisResult<bool> {
            self.$($object).+.is_held_by_thread(thread).await
        }

        /// `getHoldCount()` of `thread`: `HGET` of its field, nil → 0.
        ///
        /// # Errors
        ///
        /// When Redis fails.
        pub async fn hold_count(
            &self,
            thread: $crate::redisson::ThreadId,
        ) -> ::redis::RedisResult<u64> {
            self.$($object).+.hold_count(thread).await
        }

        /// `remainTimeToLive()`: `PTTL` in ms (-2 missing, -1 no expiry).
        ///
        /// # Errors
        ///
        /// When Redis fails.
        pub async fn remain_time_to_live(&self) -> ::redis::RedisResult<i64> {
            self.$($object).+.remain_time_to_live().await
        }
    };
    ($($object:ident).+; exists) => {
        $crate::redisson::base_lock_calls!($($object).+);

        /// `isLocked()`: `EXISTS`.
        ///
        /// # Errors
        ///
        /// When Redis fails.
        pub async fn is_locked(&self) -> ::redis::RedisResult<bool> {
            self.$($object).+.exists().await
        }
    };
}
pub(crate) use base_lock_calls;

/// A kind's acquisition calls (`lock`, `lock(leaseTime)`, `tryLock()`, `tryLock(wait, lease)`)
/// over its private `lock_inner(thread, lease)` (waiting without limit), `try_lock_once(thread)`
/// (one attempt) and `try_lock_inner(thread, wait, lease)`. With `<object path>, <channel path>`,
/// also those three, for a kind whose waiters share the object's entry and sleep on
/// `self.<channel path>` (§3.3, §3.4), each attempt being its `try_acquire(thread, lease)`.
macro_rules! acquire_calls {
    () => {
        /// `lock()` on `thread`: waits without limit; the watchdog keeps the hold.
        ///
        /// # Errors
        ///
        /// When a script fails, or the subscription is not confirmed within
        /// `subscriptionTimeout`.
        pub async fn lock(&self, thread: $crate::redisson::ThreadId) -> ::redis::RedisResult<()> {
            self.lock_inner(thread, None).await
        }

        /// `lock(leaseTime)` on `thread`: waits without limit; the hold expires after `lease`.
        ///
        /// # Errors
        ///
        /// As `lock`.
        pub async fn lock_with_lease(
            &self,
            thread: $crate::redisson::ThreadId,
            lease: ::std::time::Duration,
        ) -> ::redis::RedisResult<()> {
            self.lock_inner(thread, Some(lease)).await
        }

        /// `tryLock()` on `thread`: one attempt; watchdog lease if acquired.
        ///
        /// # Errors
        ///
        /// When the script fails.
        pub async fn try_lock(
            &self,
            thread: $crate::redisson::ThreadId,
        ) -> ::redis::RedisResult<bool> {
            self.try_lock_once(thread).await
        }

        /// `tryLock(waitTime, leaseTime)` on `thread`: waits up to `wait`; `lease` `None` means
        /// the watchdog. Returns whether the lock was acquired.
        ///
        /// # Errors
        ///
        /// When a script fails.
        pub async fn try_lock_for(
            &self,
            thread: $crate::redisson::ThreadId,
            wait: ::std::time::Duration,
            lease: Option<::std::time::Duration>,
        ) -> ::redis::RedisResult<bool> {
            self.try_lock_inner(thread, wait, lease).await
        }
    };
    ($($object:ident).+, $($channel:ident).+) => {
        $crate::redisson::acquire_calls!();

        /// `lock(leaseTime)` (§3.3).
        async fn lock_inner(
            &self,
            thread: $crate::redisson::ThreadId,
            lease: Option<::std::time::Duration>,
        ) -> ::redis::RedisResult<()> {
            let attempt = || self.try_acquire(thread, lease);
            self.$($object).+.lock_on(&self.$($channel).+, attempt).await
        }

        /// `tryLock()`: one attempt, read as `EVAL_NULL_BOOLEAN` (nil means acquired).
        async fn try_lock_once(
            &self,
            thread: $crate::redisson::ThreadId,
        ) -> ::redis::RedisResult<bool> {
            Ok(self.try_acquire(thread, None).await?.is_acquired())
        }

        /// `tryLock(waitTime, leaseTime)` (§3.4).
        async fn try_lock_inner(
            &self,
            thread: $crate::redisson::ThreadId,
            wait: ::std::time::Duration,
            lease: Option<::std::time::Duration>,
        ) -> ::redis::RedisResult<bool> {
            let attempt = || self.try_acquire(thread, lease);
            let held = self.$($object).+.try_lock_on(&self.$($channel).+, wait, attempt);
            Ok(held.await?.is_some())
        }
    };
}
pub(crate) use acquire_calls;

// ===== release scripts (§2.3, §2.5, §2.6) =====

/// The start of an unlock script with the latch (3.24+, §2.3 step 1): a stored result is
/// replayed; `latched(result)` stores the result under the latch (the last key) for the latch TTL
/// (the last argument); `publish` runs the publish command, the argument before it.
const LATCH_PRELUDE: &str = r"
local stored = redis.call('get', KEYS[#KEYS]);
if stored ~= false then
    return tonumber(stored);
end;
local function latched(result)
    redis.call('set', KEYS[#KEYS], result, 'px', ARGV[#ARGV]);
end;
local function publish(channel, message)
    redis.call(ARGV[#ARGV - 1], channel, message);
end;
";

/// The start of a release script without the latch, 3.22+: `publish` runs the publish command, the
/// last argument (§2.6).
const PUBLISH_ARGUMENT_PRELUDE: &str = r"
local function latched(result) end;
local function publish(channel, message)
    redis.call(ARGV[#ARGV], channel, message);
end;
";

/// The start of a release script ≤3.21: a literal `publish`.
const LITERAL_PUBLISH_PRELUDE: &str = r"
local function latched(result) end;
local function publish(channel, message)
    redis.call('publish', channel, message);
end;
";

/// A release script (unlock or force unlock) as a kind writes it, before what the version adds
/// (see [`Wire::release`]).
struct Release<'a> {
    /// The lock name, which the latch key is built from.
    name: &'a str,
    /// The script after the version's prelude; it may call `publish(channel, message)` and
    /// `latched(result)`, which does nothing without the latch.
    body: &'a str,
    keys: &'a [&'a str],
    args: Vec<String>,
    /// Whether the script publishes: then the publish command follows `args` (3.22+).
    publishes: bool,
    /// An unlock's request id: then its latch key follows `keys`, and the latch TTL the arguments
    /// (3.24+). `None` for a force unlock.
    request_id: Option<&'a str>,
}

impl Wire {
    /// Runs a release script as this version sends it (§2.3, §2.6): its prelude, then the body;
    /// the kind's keys and arguments, then the publish command (3.22+, when it publishes) and,
    /// for an unlock, the latch key and TTL (3.24+).
    async fn release<T: FromRedisValue>(&self, release: Release<'_>) -> RedisResult<T> {
        let latch = release
            .request_id
            .filter(|_| self.version.has_unlock_latch())
            .map(|id| unlock_latch(release.name, id));
        let prelude = match (&latch, self.version.passes_publish_command()) {
            (Some(_), _) => LATCH_PRELUDE,
            (None, true) => PUBLISH_ARGUMENT_PRELUDE,
            (None, false) => LITERAL_PUBLISH_PRELUDE,
        };
        let mut keys = release.keys.to_vec();
        let mut args = release.args;
        if release.publishes && self.version.passes_publish_command() {
            args.push(self.publish.to_owned());
        }
        if let Some(latch) = &latch {
            keys.push(latch);
            args.push(self.version.latch_ttl_ms().to_string());
        }
        let script = format!("{prelude}{}", release.body);
        self.eval(&script, &keys, &args).await
    }
}

// ===== synchronizer scripts (§8.5 – §8.7) =====

/// A synchronizer script (semaphore, permit-expirable semaphore, count-down latch) as a kind
/// writes it, before what the version adds (see [`Wire::eval_publishing`]).
struct Publishing<'a> {
    /// The script after the version's prelude. It reads its arguments from the Lua local `argv`,
    /// numbered as Java 3.22+ sends them (the publish command right after `head`), and may call
    /// `publish(channel, message)`.
    body: &'a str,
    keys: &'a [&'a str],
    /// The arguments before the publish command.
    head: Vec<Vec<u8>>,
    /// The arguments after it (the permit ids of a permit-expirable semaphore's acquire).
    tail: Vec<Vec<u8>>,
}

/// One script argument as Redisson encodes a number or a string: its text in UTF-8 (§0).
fn text_arg(value: impl fmt::Display) -> Vec<u8> {
    value.to_string().into_bytes()
}

impl Wire {
    /// Runs a synchronizer script as this version sends it (§2.6): 3.22+ passes the publish
    /// command between the script's `head` and `tail` arguments, and the script publishes with
    /// it; ≤3.21 sends the arguments without it and publishes with a literal `publish`, which the
    /// prelude puts into `argv` in the command's place, so that one body serves both.
    async fn eval_publishing<T: FromRedisValue>(&self, script: Publishing<'_>) -> RedisResult<T> {
        let at = script.head.len() + 1;
        let mut args = script.head;
        let argv = if self.version.passes_publish_command() {
            args.push(self.publish.as_bytes().to_vec());
            "local argv = ARGV;".to_owned()
        } else {
            format!("local argv = {{unpack(ARGV)}};\ntable.insert(argv, {at}, 'publish');")
        };
        args.extend(script.tail);
        let lua = format!(
            "{argv}
local function publish(channel, message)
    redis.call(argv[{at}], channel, message);
end;
{}",
            script.body
        );
        self.eval_args(&lua, script.keys, &args).await
    }
}

// ===== the watchdog (§4) =====

/// A registry of HEAD's `LockRenewalScheduler` (§4.2): plain and write locks are renewed by one
/// task, read locks by another. Before 3.44 every hold is under `Lock` (§4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Task {
    Lock,
    ReadLock,
}

/// A registered lock: its registry and name.
type RenewalKey = (Task, String);

/// Lease renewal of this client's watchdog locks: one timer per lock (≤3.43, §4.3) or one batched
/// task per registry (3.44+, §4.2). Holds are counted per thread (§4.1): every acquire adds one,
/// every unlock call removes one; a lock stops being renewed when no thread is left, when a
/// renewal finds it no longer held, or on force unlock. Renewals run the kinds' scripts
/// (`lock::renew_one`, `lock::renew_batch`, `rw_lock::renew_read_one`, `rw_lock::renew_read_batch`).
struct Watchdog {
    wire: Wire,
    timeout_ms: u64,
    state: Arc<Mutex<RenewalState>>,
}

#[derive(Default)]
struct RenewalState {
    locks: BTreeMap<RenewalKey, Renewed>,
    /// The batched tasks (3.44+), each while any lock of its registry is registered.
    batch_tasks: BTreeMap<Task, JoinHandle<()>>,
    next_generation: u64,
    stopped: bool,
}

struct Renewed {
    /// Tells registrations of the same key apart, so a stale timer never drops a newer one.
    generation: u64,
    /// How the first registration holds: the renewal its timer runs (≤3.43), the field the
    /// batched plain renewal checks.
    hold: Hold,
    /// Local threads holding the lock, in registration order, with their hold counts.
    threads: Vec<(ThreadId, u32)>,
    /// The per-lock timer (≤3.43).
    timer: Option<JoinHandle<()>>,
}

/// A registered lock as one batched renewal round sees it.
struct Registered {
    name: String,
    generation: u64,
    hold: Hold,
    /// Its local threads in registration order; never empty.
    threads: Vec<ThreadId>,
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

    fn key(&self, name: &str, hold: Hold) -> RenewalKey {
        (hold.task(self.wire.version), name.to_owned())
    }

    /// `scheduleExpirationRenewal(threadId)` after an acquire without lease, made with `lease_ms`.
    fn register(&self, name: &str, thread: ThreadId, hold: Hold, lease_ms: u64) {
        let mut state = self.state();
        if state.stopped {
            return;
        }
        let key = self.key(name, hold);
        let generation = state.next_generation;
        let entry = state.locks.entry(key.clone()).or_insert_with(|| Renewed {
            generation,
            hold,
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
            let task = key.0;
            let (wire, renewals) = (&self.wire, &self.state);
            state.batch_tasks.entry(task).or_insert_with(|| {
                let run = batched_renewal(wire.clone(), renewals.clone(), self.timeout_ms, task);
                tokio::spawn(run)
            });
        } else {
            // 3.31: the timer fires internalLockLeaseTime / 3 after the first acquisition and
            // renews with internalLockLeaseTime, i.e. the lease the lock was acquired with.
            let run = per_lock_renewal(
                self.wire.clone(),
                self.state.clone(),
                key.clone(),
                generation,
                lease_ms,
            );
            if let Some(entry) = state.locks.get_mut(&key) {
                entry.timer = Some(tokio::spawn(run));
            }
        }
    }

    /// `cancelExpirationRenewal(threadId)` after an unlock call: one hold of `thread` less.
    fn cancel(&self, name: &str, thread: ThreadId, hold: Hold) {
        let key = self.key(name, hold);
        let mut state = self.state();
        let Some(entry) = state.locks.get_mut(&key) else {
            return;
        };
        if let Some(i) = entry.threads.iter().position(|(t, _)| *t == thread) {
            entry.threads[i].1 -= 1;
            if entry.threads[i].1 == 0 {
                let _ = entry.threads.remove(i);
            }
        }
        if entry.threads.is_empty() {
            state.remove(&key);
        }
    }

    /// Stops renewing `name` in the registry of `hold` altogether (force unlock).
    fn cancel_all(&self, name: &str, hold: Hold) {
        let key = self.key(name, hold);
        self.state().remove(&key);
    }

    fn is_renewing(&self, name: &str) -> bool {
        self.state()
            .locks
            .keys()
            .any(|(_, renewed)| renewed == name)
    }

    fn stop(&self) {
        let mut state = self.state();
        state.stopped = true;
        let keys: Vec<RenewalKey> = state.locks.keys().cloned().collect();
        for key in keys {
            state.remove(&key);
        }
        for task in std::mem::take(&mut state.batch_tasks).into_values() {
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
    /// Stops renewing `key`; with no lock left in its registry, the batched task stops too (§4.4).
    fn remove(&mut self, key: &RenewalKey) {
        if let Some(timer) = self.locks.remove(key).and_then(|entry| entry.timer) {
            timer.abort();
        }
        let task = key.0;
        if !self.locks.keys().any(|(t, _)| *t == task)
            && let Some(run) = self.batch_tasks.remove(&task)
        {
            run.abort();
        }
    }

    /// Drops `key` if it is still the registration `generation`.
    fn remove_generation(&mut self, key: &RenewalKey, generation: u64) {
        if self
            .locks
            .get(key)
            .is_some_and(|e| e.generation == generation)
        {
            self.remove(key);
        }
    }

    /// The first local thread of registration `generation` of `key`, and how the lock is held.
    fn first_thread(&self, key: &RenewalKey, generation: u64) -> Option<(ThreadId, Hold)> {
        let entry = self.locks.get(key).filter(|e| e.generation == generation)?;
        entry
            .threads
            .first()
            .map(|(thread, _)| (*thread, entry.hold))
    }

    /// The registered locks of `task`'s registry.
    fn registered(&self, task: Task) -> Vec<Registered> {
        self.locks
            .iter()
            .filter(|((t, _), e)| *t == task && !e.threads.is_empty())
            .map(|((_, name), e)| Registered {
                name: name.clone(),
                generation: e.generation,
                hold: e.hold,
                threads: e.threads.iter().map(|(thread, _)| *thread).collect(),
            })
            .collect()
    }
}

fn lock_state(state: &Mutex<RenewalState>) -> MutexGuard<'_, RenewalState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// §4.3 (≤3.43): every `lease / 3`, one renewal for the first local thread, by how the lock is
/// held; a renewal re-schedules, a lost hold or an error ends renewal of the lock.
async fn per_lock_renewal(
    wire: Wire,
    state: Arc<Mutex<RenewalState>>,
    key: RenewalKey,
    generation: u64,
    lease_ms: u64,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(lease_ms / 3)).await;
        let Some((thread, hold)) = lock_state(&state).first_thread(&key, generation) else {
            return;
        };
        let name = key.1.as_str();
        let field = hold.field(&wire, thread);
        let renewed = match hold {
            Hold::Lock => lock::renew_one(&wire, name, &field, lease_ms).await,
            Hold::Write => match lock::renew_one(&wire, name, &field, lease_ms).await {
                Ok(false) => rw_lock::renew_read_one(&wire, name, thread, lease_ms).await,
                renewed => renewed,
            },
            Hold::Read => rw_lock::renew_read_one(&wire, name, thread, lease_ms).await,
        };
        if renewed.ok() != Some(true) {
            // This aborts our own handle, which is harmless: we return right away.
            lock_state(&state).remove_generation(&key, generation);
            return;
        }
    }
}

/// §4.2 (3.44+): every `lockWatchdogTimeout / 3`, renew all locks of `task`'s registry, at most
/// 100 (of one slot, in a cluster) per batched script; a lock found no longer held is dropped, an
/// error keeps them all. The task ends when its registry is empty.
async fn batched_renewal(wire: Wire, state: Arc<Mutex<RenewalState>>, timeout_ms: u64, task: Task) {
    loop {
        tokio::time::sleep(Duration::from_millis(timeout_ms / 3)).await;
        let registered = lock_state(&state).registered(task);
        for chunk in batches(&wire, registered)
            .iter()
            .flat_map(|b| b.chunks(WATCHDOG_BATCH_SIZE))
        {
            let renewed = match task {
                Task::Lock => {
                    let locks: Vec<(&str, String)> = chunk
                        .iter()
                        .map(|lock| (lock.name.as_str(), lock.hold.field(&wire, lock.threads[0])))
                        .collect();
                    lock::renew_batch(&wire, &locks, timeout_ms).await
                }
                Task::ReadLock => {
                    let locks: Vec<(&str, &[ThreadId])> = chunk
                        .iter()
                        .map(|lock| (lock.name.as_str(), lock.threads.as_slice()))
                        .collect();
                    rw_lock::renew_read_batch(&wire, &locks, timeout_ms).await
                }
            };
            let Ok(renewed) = renewed else {
                continue; // logged by Redisson; entries are kept and retried next tick
            };
            let mut state = lock_state(&state);
            for (lock, renewed) in chunk.iter().zip(renewed) {
                if !renewed {
                    state.remove_generation(&(task, lock.name.clone()), lock.generation);
                }
            }
        }
    }
}

/// The renewal batches: all locks, or in a cluster one batch per hash slot, as a script may not
/// cross slots (§4.2).
fn batches(wire: &Wire, locks: Vec<Registered>) -> Vec<Vec<Registered>> {
    if let Conn::Single(_) = wire.conn {
        return vec![locks];
    }
    let mut by_slot: HashMap<Slot, Vec<_>> = HashMap::new();
    for lock in locks {
        by_slot
            .entry(Slot::for_key(&lock.name))
            .or_default()
            .push(lock);
    }
    by_slot.into_values().collect()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// What the kinds' unit tests share: a private server with a client, a plain connection, a
/// listener of every message, and waiting for a condition.
#[cfg(test)]
mod testing {
    use std::time::Duration;

    use futures::StreamExt;
    use tokio::sync::mpsc;
    use tokio::task::JoinHandle;

    use super::{JavaClient, JavaConfig, RedissonVersion};
    use crate::RedisServer;

    /// How long a test waits for something that should happen at once (far below a 30 s PTTL).
    pub(super) const SOON: Duration = Duration::from_secs(5);

    /// How long a test listens for a message that must not come.
    pub(super) const QUIET: Duration = Duration::from_millis(200);

    /// A client of `version` with the default settings.
    pub(super) async fn java(server: &RedisServer, version: RedissonVersion) -> JavaClient {
        java_with(server, version, JavaConfig::default()).await
    }

    /// Two HEAD clients, as two JVMs.
    pub(super) async fn two_javas(server: &RedisServer) -> (JavaClient, JavaClient) {
        let a = java(server, RedissonVersion::V4).await;
        (a, java(server, RedissonVersion::V4).await)
    }

    /// A client of `version` with `config`.
    pub(super) async fn java_with(
        server: &RedisServer,
        version: RedissonVersion,
        config: JavaConfig,
    ) -> JavaClient {
        JavaClient::connect_with(&server.url(), version, config)
            .await
            .expect("emulated client connects")
    }

    /// A client of `version` whose `lockWatchdogTimeout` is `watchdog`.
    pub(super) async fn java_watchdog(
        server: &RedisServer,
        version: RedissonVersion,
        watchdog: Duration,
    ) -> JavaClient {
        let config = JavaConfig {
            lock_watchdog_timeout: watchdog,
            ..JavaConfig::default()
        };
        java_with(server, version, config).await
    }

    /// Every message published on the server (`PSUBSCRIBE *`), as channel and payload.
    pub(super) struct Listener {
        messages: mpsc::UnboundedReceiver<(String, String)>,
        task: JoinHandle<()>,
    }

    impl Listener {
        /// Listens from now on (the subscription is confirmed on return).
        pub(super) async fn start(server: &RedisServer) -> Self {
            let mut pubsub = server.client().get_async_pubsub().await.expect("pubsub");
            pubsub.psubscribe("*").await.expect("PSUBSCRIBE");
            let (sender, messages) = mpsc::unbounded_channel();
            let task = tokio::spawn(async move {
                let mut stream = pubsub.into_on_message();
                while let Some(message) = stream.next().await {
                    let channel = message.get_channel_name().to_owned();
                    let payload = String::from_utf8_lossy(message.get_payload_bytes());
                    if sender.send((channel, payload.into_owned())).is_err() {
                        return;
                    }
                }
            });
            Self { messages, task }
        }

        /// The next message, which must come [`SOON`].
        pub(super) async fn next(&mut self) -> (String, String) {
            tokio::time::timeout(SOON, self.messages.recv())
                .await
                .expect("a message comes")
                .expect("listener runs")
        }

        /// Asserts that no message comes for [`QUIET`].
        pub(super) async fn assert_quiet(&mut self) {
            let message = tokio::time::timeout(QUIET, self.messages.recv()).await;
            assert!(message.is_err(), "unexpected message {message:?}");
        }
    }

    impl Drop for Listener {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    /// Waits (up to [`SOON`]) until `condition` holds.
    pub(super) async fn eventually<F: Future<Output = bool>>(mut condition: impl FnMut() -> F) {
        let deadline = tokio::time::Instant::now() + SOON;
        while !condition().await {
            assert!(tokio::time::Instant::now() < deadline, "condition not met");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The result of a spawned call that must finish [`SOON`].
    pub(super) async fn finished<T>(task: JoinHandle<T>) -> T {
        tokio::time::timeout(SOON, task)
            .await
            .expect("the call finishes")
            .expect("the task runs")
    }
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
    fn names_follow_suffix_name() {
        assert_eq!(suffix_name("rw", "u:1"), "{rw}:u:1");
        assert_eq!(suffix_name("a{b}c", "u:1"), "a{b}c:u:1");
    }

    /// Every kind's watchdog hold outlives its lease (§4): per-lock timers (3.31) and the batched
    /// tasks (HEAD), until the unlock ends its renewal.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_watchdog_renews_every_kind() {
        let server = crate::RedisServer::start();
        let mut redis = crate::harness::raw(&server).await;
        for version in [RedissonVersion::V3_31, RedissonVersion::V4] {
            let watchdog = Duration::from_millis(300);
            let java = testing::java_watchdog(&server, version, watchdog).await;
            let fair = java.get_fair_lock("renewed:fair");
            let fenced = java.get_fenced_lock("renewed:fenced");
            let spin = java.get_spin_lock("renewed:spin");
            let write = java.get_read_write_lock("renewed:write").write_lock();
            fair.lock(1).await.expect("fair lock");
            fenced.lock(1).await.expect("fenced lock");
            spin.lock(1).await.expect("spin lock");
            write.lock(1).await.expect("write lock");
            tokio::time::sleep(watchdog * 2).await;
            for name in [fair.name(), fenced.name(), spin.name(), write.name()] {
                let pttl: i64 = redis.pttl(name).await.expect("PTTL");
                assert!((1..=300).contains(&pttl), "{version:?} {name}: {pttl}");
                assert!(java.is_renewing(name), "{version:?} {name}");
            }
            assert_eq!(fair.unlock(1).await.expect("unlock"), Some(1));
            assert_eq!(fenced.unlock(1).await.expect("unlock"), Some(1));
            assert_eq!(spin.unlock(1).await.expect("unlock"), Some(1));
            assert_eq!(write.unlock(1).await.expect("unlock"), Some(1));
            for name in [fair.name(), fenced.name(), spin.name(), write.name()] {
                assert!(!java.is_renewing(name), "{version:?} {name}");
            }
        }
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
        assert!(!RedissonVersion::V3_21.passes_publish_command());
        assert!(RedissonVersion::V3_23.passes_publish_command());
        assert!(!RedissonVersion::V3_52.deletes_its_latch());
        assert!(RedissonVersion::V4.deletes_its_latch());
        assert_eq!(RedissonVersion::V3_31.latch_ttl_ms(), 13_500);
        assert!((16_000..=20_000).contains(&RedissonVersion::V4.latch_ttl_ms()));
    }
}
