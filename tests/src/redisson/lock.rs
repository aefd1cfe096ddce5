//! The `RLock` (PROTOCOL.md §2, §3.3, §3.4, §4): its scripts, [`JavaClient::get_lock`] and the
//! [`JavaLock`] object it returns, and the renewal calls the client's watchdog makes for it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::{AsyncCommands, RedisResult};
use tokio::time::Instant;

use super::{
    ClientInner, JavaClient, Latch, RedissonVersion, ThreadId, Wire, lock_channel, millis,
    new_request_id, unlock_latch,
};

/// The unlock message: wake one waiter per client (§2.8).
const UNLOCK_MESSAGE: &str = "0";

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

/// The acquire script of `version` (§2.2).
fn acquire_script(version: RedissonVersion) -> &'static str {
    match version {
        RedissonVersion::V3_10_5 | RedissonVersion::V3_12 => ACQUIRE_HSET_FIRST,
        RedissonVersion::V3_21 => ACQUIRE_TWO_BLOCKS,
        _ => ACQUIRE,
    }
}

/// `renewExpirationAsync` of one lock (§4.3): `RENEW_ONE` for `thread`'s field. True when the
/// field was there and the lease was renewed.
pub(super) async fn renew_one(
    wire: &Wire,
    name: &str,
    thread: ThreadId,
    lease_ms: u64,
) -> RedisResult<bool> {
    let args = [lease_ms.to_string(), wire.lock_name(thread)];
    let flag: i64 = wire.eval(RENEW_ONE, &[name], &args).await?;
    Ok(flag == 1)
}

/// One batched renewal (§4.2): `RENEW_BATCH` over `locks` (names and owning threads, of one slot
/// in a cluster). Per lock, whether it was renewed.
pub(super) async fn renew_batch(
    wire: &Wire,
    locks: &[(&str, ThreadId)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let keys: Vec<&str> = locks.iter().map(|(name, _)| *name).collect();
    let mut args = vec![lease_ms.to_string()];
    args.extend(locks.iter().map(|(_, thread)| wire.lock_name(*thread)));
    let flags: Vec<i64> = wire.eval(RENEW_BATCH, &keys, &args).await?;
    Ok(flags.into_iter().map(|flag| flag == 1).collect())
}

// ===== the client's RLock calls =====

impl JavaClient {
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
        let lease_ms = self.watchdog_timeout_ms();
        if wire.version.has_batched_watchdog() {
            renew_batch(wire, locks, lease_ms).await
        } else {
            let mut renewed = Vec::with_capacity(locks.len());
            for (name, thread) in locks {
                renewed.push(renew_one(wire, name, *thread, lease_ms).await?);
            }
            Ok(renewed)
        }
    }
}

// ===== the lock object =====

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
        let subscribe = self.client.subscribe(&self.name, &self.channel, on_message);
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
        let subscribe = self.client.subscribe(&self.name, &self.channel, on_message);
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
            .eval(acquire_script(wire.version), &[self.name.as_str()], &args)
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

/// `LockPubSub.onMessage` (§3.2): `0` releases one permit (banked if nobody sleeps), `1` one per
/// sleeping thread; other numbers are ignored.
fn on_message(latch: &Latch, value: i64) {
    match value {
        0 => latch.release(1),
        1 => latch.release(latch.queue_length()),
        _ => {}
    }
}
