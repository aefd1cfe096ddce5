//! A Redisson wire emulator: the Redis command sequences of a Java Redisson client's `RLock`,
//! written from `PROTOCOL.md` (not from Redisson's source), for interop tests.
//!
//! A [`JavaClient`] stands for one `RedissonClient`: it has its own random v4 UUID (the "connection
//! manager id", §1.1), one command connection, one pub/sub connection per lock name it waits on, and a
//! lock watchdog. [`JavaClient::get_lock`] returns a [`JavaLock`], the counterpart of one `RLock`
//! object with its `internalLockLeaseTime`. Java thread ids are passed explicitly, as in Redisson's
//! `lockAsync(threadId)` overloads, so several "threads" of one client can be driven from tasks.
//!
//! What is emulated, section by section of `PROTOCOL.md`:
//!
//! | Behaviour | Section | Where |
//! |---|---|---|
//! | owner field `<uuid>:<threadId>` | §1.1, §1.2 | [`JavaClient::lock_name`] |
//! | channel and latch names (`prefixName`) | §1.3, §1.4 | [`prefix_name`], [`lock_channel`], [`unlock_latch`] |
//! | acquire script, incl. the ≤3.12 `HSET` variant | §2.2 | [`JavaLock::try_lock`] and the waiting calls |
//! | unlock script: latch (≥3.24), no latch (3.22–3.23), literal `publish` (≤3.21), missing lock publishes (≤3.10.5) | §2.3, §2.4 | [`JavaLock::unlock`], [`JavaLock::unlock_attempt`] |
//! | force unlock | §2.5 | [`JavaLock::force_unlock`] |
//! | `lock()` / `tryLock(wait, lease)` waiting, local latch, `0`/`1` messages | §3.1–§3.4 | [`JavaLock::lock`], [`JavaLock::try_lock_for`] |
//! | watchdog: one timer per lock (≤3.43) or one batched task (≥3.44) | §4 | automatic; [`JavaClient::renew`], [`JavaClient::stop_watchdog`] |
//! | `internalLockLeaseTime` | §2.1, §11.10 | [`JavaLock::internal_lease`] |
//! | cluster mode: routing by key, `SPUBLISH`/`SSUBSCRIBE` (3.22+ on Redis 7), per-slot batches | §2.6, §4.2 | [`JavaClient::connect_cluster`] |
//!
//! Not emulated: WAIT-synced writes and their retries (§5: single-server Redisson sends a plain
//! EVAL; the emulator never waits for replicas), pub/sub reconnects (§3.7), the connection pools
//! (§3.6: one pub/sub connection per waited-on lock here), fair/RW/other lock kinds.
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
use redis::{AsyncCommands, Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A Java thread id (`Thread.currentThread().getId()`): the second half of an owner field.
pub type ThreadId = u64;

/// The unlock message: wake one waiter per client (§2.8).
const UNLOCK_MESSAGE: &str = "0";
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

    /// The acquire script of this version (§2.2).
    fn acquire_script(self) -> &'static str {
        match self {
            Self::V3_10_5 | Self::V3_12 => ACQUIRE_HSET_FIRST,
            Self::V3_21 => ACQUIRE_TWO_BLOCKS,
            _ => ACQUIRE,
        }
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

// ===== scripts (paraphrased from the numbered steps of PROTOCOL.md) =====

/// §2.2, 3.23+: one `if` with `EXISTS == 0 or HEXISTS == 1`.
/// KEYS[1] lock; ARGV[1] lease ms, ARGV[2] lockName. Nil when acquired, else the PTTL.
const ACQUIRE: &str = r"
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

/// §2.2, 3.13 – 3.22: the same as two separate blocks.
const ACQUIRE_TWO_BLOCKS: &str = r"
if (redis.call('exists', KEYS[1]) == 0) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

/// §2.2, ≤ 3.12: the first acquire writes the count with `HSET field 1`.
const ACQUIRE_HSET_FIRST: &str = r"
if (redis.call('exists', KEYS[1]) == 0) then
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

/// §2.3, 3.24+: KEYS = [lock, channel, latch]; ARGV = [0, lease, lockName, publishCmd, latchTtl].
/// Replays the stored result when the latch exists; nil when not the owner; 0 still held; 1 released.
const UNLOCK_LATCH: &str = r"
local stored = redis.call('get', KEYS[3]);
if stored ~= false then
    return tonumber(stored);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[4], KEYS[2], ARGV[1]);
redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
return 1;
";

/// §2.3, 3.22 – 3.23: no latch. KEYS = [lock, channel]; ARGV = [0, lease, lockName, publishCmd].
const UNLOCK_NO_LATCH: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[4], KEYS[2], ARGV[1]);
return 1;
";

/// §2.3, 3.10.6 – 3.21: as `UNLOCK_NO_LATCH` with a literal `publish`. ARGV = [0, lease, lockName].
const UNLOCK_LITERAL_PUBLISH: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call('publish', KEYS[2], ARGV[1]);
return 1;
";

/// §2.3, ≤ 3.10.5: unlocking a missing lock publishes `0` and "succeeds".
const UNLOCK_MISSING_PUBLISHES: &str = r"
if (redis.call('exists', KEYS[1]) == 0) then
    redis.call('publish', KEYS[2], ARGV[1]);
    return 1;
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call('publish', KEYS[2], ARGV[1]);
return 1;
";

/// §2.5: KEYS = [lock, channel]; ARGV = [0, publishCmd]. 1 when a key was deleted (and published).
const FORCE_UNLOCK: &str = r"
if (redis.call('del', KEYS[1]) == 1) then
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
";

/// §4.3, ≤ 3.43: KEYS = [lock]; ARGV = [lease, lockName]. 1 when renewed.
const RENEW_ONE: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
";

/// §4.2, 3.44+: KEYS = [lock1 … lockN]; ARGV = [lease, lockName1 … lockNameN]. One flag per key.
const RENEW_BATCH: &str = r"
local result = {};
for i = 1, #KEYS do
    if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then
        redis.call('pexpire', KEYS[i], ARGV[1]);
        table.insert(result, 1);
    else
        table.insert(result, 0);
    end;
end;
return result;
";

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
    /// The local lock entries (§3.1), keyed by lock name: reference count and entry.
    entries: tokio::sync::Mutex<HashMap<String, (usize, Arc<LockEntry>)>>,
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

    /// `redisson.getLock(name)`: a new `RLock` object (with its own `internalLockLeaseTime`).
    pub fn get_lock(&self, name: impl Into<String>) -> JavaLock {
        let name = name.into();
        JavaLock {
            client: self.inner.clone(),
            channel: lock_channel(&name),
            name,
            internal_lease_ms: Arc::new(AtomicU64::new(self.watchdog_timeout_ms())),
        }
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

    /// Runs one renewal round now for `locks` (name and owning thread), with this version's script:
    /// one `RENEW_ONE` per lock (≤3.43, §4.3) or one batched script (3.44+, §4.2; in a cluster,
    /// pass locks of one slot). Returns, per lock, whether it was renewed (the thread's field was
    /// present). The automatic watchdog does not need this; it is for probing the script itself.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn renew(&self, locks: &[(&str, ThreadId)]) -> RedisResult<Vec<bool>> {
        let wire = &self.inner.wire;
        let lease = self.watchdog_timeout_ms().to_string();
        if wire.version.has_batched_watchdog() {
            let keys: Vec<&str> = locks.iter().map(|(name, _)| *name).collect();
            let mut args = vec![lease];
            args.extend(locks.iter().map(|(_, thread)| wire.lock_name(*thread)));
            let flags: Vec<i64> = wire.eval(RENEW_BATCH, &keys, &args).await?;
            Ok(flags.into_iter().map(|flag| flag == 1).collect())
        } else {
            let mut renewed = Vec::with_capacity(locks.len());
            for (name, thread) in locks {
                let args = [lease.clone(), wire.lock_name(*thread)];
                let flag: i64 = wire.eval(RENEW_ONE, &[*name], &args).await?;
                renewed.push(flag == 1);
            }
            Ok(renewed)
        }
    }

    fn watchdog_timeout_ms(&self) -> u64 {
        millis(self.inner.config.lock_watchdog_timeout)
    }
}

impl ClientInner {
    /// `PublishSubscribe.subscribe` (§3.1): joins the lock's entry, or creates it and subscribes its
    /// channel (on its own pub/sub connection) before returning.
    async fn subscribe(&self, name: &str, channel: &str) -> RedisResult<Arc<LockEntry>> {
        let mut entries = self.entries.lock().await;
        if let Some((refs, entry)) = entries.get_mut(name) {
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
                    // LockPubSub only acts on its own channel name, exactly (§3.2).
                    if message.get_channel::<Vec<u8>>().ok().as_ref() == Some(&channel) {
                        latch.on_message(message.get_payload_bytes());
                    }
                }
            }
        });
        let entry = Arc::new(LockEntry {
            channel: channel.to_owned(),
            latch,
            sink,
            reader,
        });
        let _ = entries.insert(name.to_owned(), (1, entry.clone()));
        Ok(entry)
    }

    /// `PublishSubscribe.unsubscribe` (§3.1): the last local waiter unsubscribes (and waits for the
    /// server's confirmation).
    async fn unsubscribe(&self, name: &str) {
        let mut entries = self.entries.lock().await;
        let Some((refs, _)) = entries.get_mut(name) else {
            return;
        };
        *refs -= 1;
        if *refs > 0 {
            return;
        }
        if let Some((_, entry)) = entries.remove(name) {
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

/// `RedissonLockEntry` (§3.1): the per-client, per-lock state shared by all local waiters.
struct LockEntry {
    channel: String,
    latch: Arc<Latch>,
    sink: Sink,
    reader: JoinHandle<()>,
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
    /// `LockPubSub.onMessage` (§3.2): the payload is read with `Long.valueOf`; `0` releases one
    /// permit (banked if nobody sleeps), `1` one per sleeping thread; other numbers are ignored and
    /// non-numbers are dropped as decode errors.
    fn on_message(&self, payload: &[u8]) {
        let value = std::str::from_utf8(payload)
            .ok()
            .and_then(|text| text.parse::<i64>().ok());
        match value {
            Some(0) => self.permits.add_permits(1),
            Some(1) => self
                .permits
                .add_permits(self.sleeping.load(Ordering::SeqCst)),
            _ => {}
        }
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

// ===== the lock =====

/// An emulated `RLock` object (§2): one lock name plus this object's `internalLockLeaseTime`.
/// Clones share the object (as Java threads share one `RLock` reference).
#[derive(Clone)]
pub struct JavaLock {
    client: Arc<ClientInner>,
    name: String,
    channel: String,
    internal_lease_ms: Arc<AtomicU64>,
}

impl JavaLock {
    /// The lock name (also its hash key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The unlock channel this lock's waiters subscribe to.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The hash field of `thread`: `<clientUUID>:<threadId>`.
    pub fn lock_name(&self, thread: ThreadId) -> String {
        self.client.wire.lock_name(thread)
    }

    /// This object's `internalLockLeaseTime` (§2.1): the watchdog timeout, or the last explicit
    /// lease it acquired with, until an unlock resets it.
    pub fn internal_lease(&self) -> Duration {
        Duration::from_millis(self.internal_lease_ms.load(Ordering::SeqCst))
    }

    /// `lock()` on `thread` (§3.3): waits without limit; the watchdog keeps the hold.
    ///
    /// # Errors
    ///
    /// When a script fails, or the subscription is not confirmed within `subscriptionTimeout`.
    pub async fn lock(&self, thread: ThreadId) -> RedisResult<()> {
        self.lock_inner(thread, None).await
    }

    /// `lock(leaseTime)` on `thread` (§3.3): waits without limit; the hold expires after `lease`.
    ///
    /// # Errors
    ///
    /// As [`JavaLock::lock`].
    pub async fn lock_with_lease(&self, thread: ThreadId, lease: Duration) -> RedisResult<()> {
        self.lock_inner(thread, Some(lease)).await
    }

    /// `tryLock()` on `thread`: one attempt (`EVAL_NULL_BOOLEAN`), watchdog lease if acquired.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn try_lock(&self, thread: ThreadId) -> RedisResult<bool> {
        Ok(self.try_acquire(thread, None).await?.is_none())
    }

    /// `tryLock(waitTime, leaseTime)` on `thread` (§3.4): waits up to `wait`; `lease` `None` means the
    /// watchdog. Returns whether the lock was acquired.
    ///
    /// # Errors
    ///
    /// When a script fails.
    pub async fn try_lock_for(
        &self,
        thread: ThreadId,
        wait: Duration,
        lease: Option<Duration>,
    ) -> RedisResult<bool> {
        let deadline = Instant::now() + wait;
        if self.try_acquire(thread, lease).await?.is_none() {
            return Ok(true);
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(false);
        }
        let subscribe = self.client.subscribe(&self.name, &self.channel);
        let entry = match tokio::time::timeout(remaining, subscribe).await {
            Err(_) => return Ok(false),
            Ok(entry) => entry?,
        };
        let result = async {
            loop {
                let Some(ttl) = self.try_acquire(thread, lease).await? else {
                    return Ok(true);
                };
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Ok(false);
                }
                let limit = match u64::try_from(ttl) {
                    Ok(ttl) if Duration::from_millis(ttl) < remaining => Duration::from_millis(ttl),
                    _ => remaining,
                };
                entry.latch.wait(Some(limit)).await;
                if Instant::now() >= deadline {
                    return Ok(false);
                }
            }
        }
        .await;
        self.client.unsubscribe(&self.name).await;
        result
    }

    /// `unlock()` on `thread` (§2.3): one unlock with a fresh request id, then (3.24+) the `DEL` of
    /// the latch, then watchdog cancellation and the `internalLockLeaseTime` reset. Returns the
    /// script's reply: `Some(1)` released (and published), `Some(0)` still held, `None` not the owner
    /// (Java throws `IllegalMonitorStateException`). ≤3.10.5 returns `Some(1)` for a missing lock.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn unlock(&self, thread: ThreadId) -> RedisResult<Option<i64>> {
        let version = self.client.wire.version;
        let request_id = new_request_id();
        let result = self.unlock_attempt(thread, &request_id).await;
        if version.has_unlock_latch() && result.is_ok() {
            // Fire-and-forget in Java; awaited here so tests see its effect deterministically.
            let latch = if version.deletes_its_latch() {
                unlock_latch(&self.name, &request_id)
            } else {
                unlock_latch(&self.name, &self.client.wire.id)
            };
            let mut conn = self.client.wire.conn.clone();
            let _: RedisResult<i64> = conn.del(latch).await;
        }
        self.client.watchdog.cancel(&self.name, thread);
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

    /// One unlock script call exactly as sent on the wire, under `request_id` (ignored before 3.24,
    /// which has no latch). A Java retry after a lost reply re-sends this with the same id (3.52+);
    /// nothing else (no `DEL`, no bookkeeping) happens here.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn unlock_attempt(
        &self,
        thread: ThreadId,
        request_id: &str,
    ) -> RedisResult<Option<i64>> {
        let wire = &self.client.wire;
        let lease = self.internal_lease_ms.load(Ordering::SeqCst).to_string();
        let mut args = vec![UNLOCK_MESSAGE.to_owned(), lease, wire.lock_name(thread)];
        let keys = [self.name.as_str(), self.channel.as_str()];
        match wire.version {
            RedissonVersion::V3_10_5 => wire.eval(UNLOCK_MISSING_PUBLISHES, &keys, &args).await,
            RedissonVersion::V3_12 | RedissonVersion::V3_21 => {
                wire.eval(UNLOCK_LITERAL_PUBLISH, &keys, &args).await
            }
            RedissonVersion::V3_23 => {
                args.push(wire.publish.to_owned());
                wire.eval(UNLOCK_NO_LATCH, &keys, &args).await
            }
            _ => {
                let latch = unlock_latch(&self.name, request_id);
                args.push(wire.publish.to_owned());
                args.push(wire.version.latch_ttl_ms().to_string());
                let keys = [self.name.as_str(), self.channel.as_str(), latch.as_str()];
                wire.eval(UNLOCK_LATCH, &keys, &args).await
            }
        }
    }

    /// `forceUnlock()` (§2.5): stops renewal of the lock, deletes it whoever holds it and publishes
    /// `0` if it existed. Returns whether it existed.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn force_unlock(&self) -> RedisResult<bool> {
        self.client.watchdog.cancel_all(&self.name);
        let args = [
            UNLOCK_MESSAGE.to_owned(),
            self.client.wire.publish.to_owned(),
        ];
        let deleted: i64 = self
            .client
            .wire
            .eval(
                FORCE_UNLOCK,
                &[self.name.as_str(), self.channel.as_str()],
                &args,
            )
            .await?;
        self.reset_internal_lease();
        Ok(deleted == 1)
    }

    /// `isLocked()`: `EXISTS`.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn is_locked(&self) -> RedisResult<bool> {
        self.client.wire.conn.clone().exists(&self.name).await
    }

    /// `isHeldByThread(thread)`: `HEXISTS`.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn is_held_by_thread(&self, thread: ThreadId) -> RedisResult<bool> {
        let field = self.lock_name(thread);
        self.client
            .wire
            .conn
            .clone()
            .hexists(&self.name, field)
            .await
    }

    /// `getHoldCount()` of `thread`: `HGET`, nil → 0.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn hold_count(&self, thread: ThreadId) -> RedisResult<u64> {
        let field = self.lock_name(thread);
        let count: Option<u64> = self
            .client
            .wire
            .conn
            .clone()
            .hget(&self.name, field)
            .await?;
        Ok(count.unwrap_or(0))
    }

    /// `remainTimeToLive()`: `PTTL` in ms (-2 missing, -1 no expiry).
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn remain_time_to_live(&self) -> RedisResult<i64> {
        self.client.wire.conn.clone().pttl(&self.name).await
    }

    /// `lock(leaseTime)` (§3.3): try; subscribe; loop { try; sleep on the latch up to the PTTL, or
    /// without limit when the PTTL is negative }; unsubscribe.
    async fn lock_inner(&self, thread: ThreadId, lease: Option<Duration>) -> RedisResult<()> {
        if self.try_acquire(thread, lease).await?.is_none() {
            return Ok(());
        }
        let subscribe = self.client.subscribe(&self.name, &self.channel);
        let timeout = self.client.config.subscription_timeout;
        let entry = tokio::time::timeout(timeout, subscribe)
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("Unable to acquire subscription lock after {timeout:?}"),
                )
            })??;
        let result = async {
            loop {
                let Some(ttl) = self.try_acquire(thread, lease).await? else {
                    return Ok(());
                };
                let limit = u64::try_from(ttl).ok().map(Duration::from_millis);
                entry.latch.wait(limit).await;
            }
        }
        .await;
        self.client.unsubscribe(&self.name).await;
        result
    }

    /// `tryAcquire` (§2.2): one acquire script. `None` when acquired (then the lease becomes
    /// `internalLockLeaseTime`, or the lock is handed to the watchdog), else the PTTL.
    async fn try_acquire(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
    ) -> RedisResult<Option<i64>> {
        let wire = &self.client.wire;
        let lease_ms = lease.map_or_else(|| self.internal_lease_ms.load(Ordering::SeqCst), millis);
        let args = [lease_ms.to_string(), wire.lock_name(thread)];
        let ttl: Option<i64> = wire
            .eval(wire.version.acquire_script(), &[self.name.as_str()], &args)
            .await?;
        if ttl.is_none() {
            match lease {
                Some(lease) => self
                    .internal_lease_ms
                    .store(millis(lease), Ordering::SeqCst),
                None => self.client.watchdog.register(&self.name, thread, lease_ms),
            }
        }
        Ok(ttl)
    }

    fn reset_internal_lease(&self) {
        let timeout = millis(self.client.config.lock_watchdog_timeout);
        self.internal_lease_ms.store(timeout, Ordering::SeqCst);
    }
}

impl fmt::Debug for JavaLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JavaLock")
            .field("name", &self.name)
            .field("client", &self.client.wire.id)
            .field("internal_lease", &self.internal_lease())
            .finish()
    }
}

// ===== the watchdog (§4) =====

/// Lease renewal of this client's watchdog locks: one timer per lock (≤3.43, §4.3) or one batched
/// task for all of them (3.44+, §4.2). Holds are counted per thread (§4.1): every acquire adds one,
/// every unlock call removes one; the lock stops being renewed when no thread is left, when a renewal
/// finds the first thread's field gone, or on force unlock.
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

/// §4.3 (≤3.43): every `lease / 3`, `RENEW_ONE` for the first local thread; 1 re-schedules, 0 or an
/// error ends renewal of the lock.
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
        let args = [lease_ms.to_string(), wire.lock_name(thread)];
        let renewed: RedisResult<i64> = wire.eval(RENEW_ONE, &[name.as_str()], &args).await;
        if renewed.ok() != Some(1) {
            // This aborts our own handle, which is harmless: we return right away.
            lock_state(&state).remove_generation(&name, generation);
            return;
        }
    }
}

/// §4.2 (3.44+): every `lockWatchdogTimeout / 3`, renew all registered locks, at most 100 (of one
/// slot, in a cluster) per `RENEW_BATCH`, each with its first local thread; a 0 drops that lock, an error keeps them all.
/// The task ends when no lock is left.
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
            let keys: Vec<&str> = chunk.iter().map(|(name, _, _)| name.as_str()).collect();
            let mut args = vec![timeout_ms.to_string()];
            args.extend(chunk.iter().map(|(_, _, thread)| wire.lock_name(*thread)));
            let Ok(flags) = wire.eval::<Vec<i64>>(RENEW_BATCH, &keys, &args).await else {
                continue; // logged by Redisson; entries are kept and retried next tick
            };
            let mut state = lock_state(&state);
            for ((name, generation, _), flag) in chunk.iter().zip(flags) {
                if flag == 0 {
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
