//! The `RLock` (docs/protocol.md §2, §3.3, §3.4, §4): its scripts, [`JavaClient::get_lock`] and the
//! [`JavaLock`] object it returns, and the renewal calls the client's watchdog makes for it.

use std::time::Duration;

use redis::RedisResult;

use super::kind::{JavaObject, ObjectKind, RlockObject};
use super::{
    Attempt, Hold, JavaClient, LockObject, RedissonVersion, ThreadId, Wire, acquire_calls,
    base_lock_calls, lock_channel,
};

/// The unlock message: wake one waiter per client (§2.8).
const UNLOCK_MESSAGE: &str = "0";

// ===== scripts (paraphrased from the numbered steps of docs/protocol.md) =====

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

/// §2.2, 3.13 – 3.22: the same as two separate blocks (and the spin lock's acquire, §8.1).
pub(super) const ACQUIRE_TWO_BLOCKS: &str = r"
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

/// The decrement of a reentrant unlock (§2.3 steps 2–4; the same steps in §6.7, §7.5 and §8.1),
/// over the Lua locals `lock`, `owner` and `lease`: nil when `owner` holds nothing; 0 when it
/// still holds after the decrement, with the lease re-applied and the 0 latched; otherwise it
/// falls through to the kind's release.
pub(super) const UNLOCK_DECREMENT: &str = r"
if (redis.call('hexists', lock, owner) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', lock, owner, -1);
if (counter > 0) then
    redis.call('pexpire', lock, lease);
    latched(0);
    return 0;
end;
";

/// §2.3 (run by `Wire::release`): KEYS = [lock, channel]; ARGV = [0, lease, lockName]. Nil when
/// not the owner; 0 still held; 1 released (deleted and published).
const UNLOCK_LOCALS: &str = r"
local lock, owner, lease = KEYS[1], ARGV[3], ARGV[2];
";
const UNLOCK_RELEASE: &str = r"
redis.call('del', lock);
publish(KEYS[2], ARGV[1]);
latched(1);
return 1;
";

/// §2.3, ≤ 3.10.5: before the rest, unlocking a missing lock publishes `0` and "succeeds".
const UNLOCK_MISSING_PUBLISHES: &str = r"
if (redis.call('exists', KEYS[1]) == 0) then
    publish(KEYS[2], ARGV[1]);
    return 1;
end;
";

/// §2.5 (run by `Wire::release`): KEYS = [lock, channel]; ARGV = [0]. 1 when a key was deleted
/// (and published).
const FORCE_UNLOCK: &str = r"
if (redis.call('del', KEYS[1]) == 1) then
    publish(KEYS[2], ARGV[1]);
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

/// The start of a batched renewal (§4.2): the result array, and a Lua function that renews
/// `lock` with `ARGV[1]` and appends 1 when `alive`, else appends 0.
pub(super) const RENEW_RESULT: &str = r"
local result = {};
local function renewed(lock, alive)
    if alive then
        redis.call('pexpire', lock, ARGV[1]);
        table.insert(result, 1);
    else
        table.insert(result, 0);
    end;
end;
";

/// §4.2, 3.44+ (after `RENEW_RESULT`): KEYS = [lock1 … lockN]; ARGV = [lease, lockName1 …
/// lockNameN]. One flag per key.
const RENEW_BATCH: &str = r"
for i = 1, #KEYS do
    renewed(KEYS[i], redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1);
end;
return result;
";

/// The acquire script of an object over the `RLock`'s hash (`KEYS = [N]`, `ARGV = [lease,
/// lockName, extra…]`, nil when acquired, else the PTTL), by version, and the arguments it takes
/// after the lockName: the `RLock`'s ([`REENTERS`]), or the non-reentrant lock's, which refuses a
/// re-entry (§8.8).
#[derive(Clone, Copy, Debug)]
pub(super) struct Acquire {
    pub(super) script: fn(RedissonVersion) -> &'static str,
    pub(super) extra: &'static [&'static str],
}

/// The `RLock`'s acquire (§2.2): a holder re-enters.
const REENTERS: Acquire = Acquire {
    script: acquire_script,
    extra: &[],
};

/// The acquire script of `version` (§2.2).
fn acquire_script(version: RedissonVersion) -> &'static str {
    match version {
        RedissonVersion::V3_10_5 | RedissonVersion::V3_12 => ACQUIRE_HSET_FIRST,
        RedissonVersion::V3_21 => ACQUIRE_TWO_BLOCKS,
        _ => ACQUIRE,
    }
}

/// `renewExpirationAsync` of one lock (§4.3): `RENEW_ONE` for the hash field `field`. True when the
/// field was there and the lease was renewed.
pub(super) async fn renew_one(
    wire: &Wire,
    name: &str,
    field: &str,
    lease_ms: u64,
) -> RedisResult<bool> {
    let args = [lease_ms.to_string(), field.to_owned()];
    let flag: i64 = wire.eval(RENEW_ONE, &[name], &args).await?;
    Ok(flag == 1)
}

/// One batched renewal (§4.2 `LockTask`): `RENEW_BATCH` over `locks` (names and the hash field of
/// their first local thread, of one slot in a cluster). Per lock, whether it was renewed.
pub(super) async fn renew_batch(
    wire: &Wire,
    locks: &[(&str, String)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let keys: Vec<&str> = locks.iter().map(|(name, _)| *name).collect();
    let mut args = vec![lease_ms.to_string()];
    args.extend(locks.iter().map(|(_, field)| field.clone()));
    let script = [RENEW_RESULT, RENEW_BATCH].concat();
    let flags: Vec<i64> = wire.eval(&script, &keys, &args).await?;
    Ok(flags.into_iter().map(|flag| flag == 1).collect())
}

// ===== the client's RLock calls =====

impl JavaClient {
    /// `redisson.getLock(name)`: a new `RLock` object (with its own `internalLockLeaseTime`).
    pub fn get_lock(&self, name: impl Into<String>) -> JavaLock {
        self.lock_with(name.into(), REENTERS)
    }

    /// A new object over the `RLock`'s hash `name` that acquires with `acquire`.
    pub(super) fn lock_with(&self, name: String, acquire: Acquire) -> JavaLock {
        JavaLock {
            channel: lock_channel(&name),
            object: LockObject::new(self, name, Hold::Lock),
            acquire,
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
        let locks: Vec<(&str, String)> = locks
            .iter()
            .map(|(name, thread)| (*name, wire.lock_name(*thread)))
            .collect();
        if wire.version.has_batched_watchdog() {
            renew_batch(wire, &locks, lease_ms).await
        } else {
            let mut renewed = Vec::with_capacity(locks.len());
            for (name, field) in &locks {
                renewed.push(renew_one(wire, name, field, lease_ms).await?);
            }
            Ok(renewed)
        }
    }
}

// ===== the kind =====

/// The reentrant lock: Redisson's `RLock` (`getLock`), rlock's `Lock`. It is what the defaults of
/// [`ObjectKind`] describe.
#[derive(Clone, Copy, Debug)]
pub struct ReentrantKind;

impl ObjectKind for ReentrantKind {
    fn interface(&self) -> &'static str {
        "RLock"
    }

    fn described_as(&self) -> &'static str {
        "lock"
    }

    fn entry_suffix(&self) -> Option<&'static str> {
        Some("lock")
    }

    fn java(&self, client: &JavaClient, name: &str) -> JavaObject {
        JavaObject::Lock(client.get_lock(name))
    }

    fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject {
        RlockObject::Reentrant(client.lock(name))
    }
}

// ===== the lock object =====

/// An emulated `RLock` object (§2): one lock name plus this object's `internalLockLeaseTime`.
/// Its waiters share the client's entry of the name and sleep on `redisson_lock__channel:{N}`
/// until a message or the PTTL (§3.3, §3.4). Clones share the object (as Java threads share one
/// `RLock` reference).
#[derive(Clone, Debug)]
pub struct JavaLock {
    pub(super) object: LockObject,
    pub(super) channel: String,
    acquire: Acquire,
}

impl JavaLock {
    base_lock_calls!(object; exists);
    acquire_calls!(object, channel);

    /// The unlock channel this lock's waiters subscribe to.
    pub fn channel(&self) -> &str {
        &self.channel
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
        let attempt = |id: String| async move { self.unlock_attempt(thread, &id).await };
        self.object.unlock(thread, attempt).await
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
        let object = &self.object;
        let missing = match object.wire().version {
            RedissonVersion::V3_10_5 => UNLOCK_MISSING_PUBLISHES,
            _ => "",
        };
        let body = [missing, UNLOCK_LOCALS, UNLOCK_DECREMENT, UNLOCK_RELEASE].concat();
        let keys = [object.name.as_str(), &self.channel];
        let lease = object.internal_lease_ms().to_string();
        let args = vec![UNLOCK_MESSAGE.to_owned(), lease, object.field(thread)];
        object
            .unlock_script(request_id, &body, &keys, args, true)
            .await
    }

    /// `forceUnlock()` (§2.5): stops renewal of the lock, deletes it whoever holds it and publishes
    /// `0` if it existed. Returns whether it existed.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn force_unlock(&self) -> RedisResult<bool> {
        let keys = [self.object.name.as_str(), &self.channel];
        let args = vec![UNLOCK_MESSAGE.to_owned()];
        self.object
            .force_unlock_script(FORCE_UNLOCK, &keys, args)
            .await
    }

    /// `tryAcquire` (§2.2): one acquire script.
    async fn try_acquire(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
    ) -> RedisResult<Attempt<()>> {
        let script = (self.acquire.script)(self.object.wire().version);
        let extra: Vec<String> = self.acquire.extra.iter().map(|&a| a.to_owned()).collect();
        self.object.acquire_own(thread, lease, script, &extra).await
    }
}
