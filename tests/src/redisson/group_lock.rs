//! Redisson's faster multi-lock, `RedissonFasterMultiLock` (docs/protocol.md §8.9):
//! [`JavaClient::get_multi_lock`] and the [`JavaGroupLock`] it returns, replaying Java 4.7's
//! scripts and its waiting, quirks included (every unlock publishes, `isHeldByThread` skips the
//! first value, `forceUnlock` fails on a value nobody holds).
//!
//! Java hashes each value (`Hash.hash128toBase64` of its encoding); the emulator takes the hashes,
//! which the tests check against Redisson's own goldens.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{AsyncCommands, RedisResult};

use super::{
    Attempt, JavaClient, MessageRule, ThreadId, Wire, lock_channel, new_request_id, unlock_latch,
};

/// `LockPubSub.UNLOCK_MESSAGE`.
const UNLOCK_MESSAGE: &str = "0";

// ===== scripts (paraphrased from docs/protocol.md §8.9) =====

/// `tryLockInnerAsync`: KEYS = [group]; ARGV = [lease, now, lockName, values...]. Nil when every
/// value was taken (or re-entered), else how long until the latest foreign hold ends.
const ACQUIRE: &str = r"
local leaseTime = tonumber(ARGV[1]);
local currentTime = tonumber(ARGV[2]);
local currentThread = ARGV[3];
local maxExpireTime = -1;
local keyExist = 0;
if (tonumber(redis.call('exists', KEYS[1])) > 0) then
    keyExist = 1;
    for i = 4, #ARGV, 1 do
        local lockThread = redis.call('hget', KEYS[1], ARGV[i]);
        if (lockThread ~= false and lockThread ~= currentThread) then
            local expireTime = redis.call('hget', KEYS[1], ARGV[i] .. ':' .. lockThread .. ':expire_time');
            if (expireTime ~= false and tonumber(expireTime) > currentTime
                    and tonumber(expireTime) > maxExpireTime) then
                maxExpireTime = tonumber(expireTime);
            end;
        end;
    end;
end;
if (maxExpireTime ~= -1) then
    return maxExpireTime - currentTime;
end;
for i = 4, #ARGV, 1 do
    redis.call('hset', KEYS[1], ARGV[i], currentThread);
    local expireField = ARGV[i] .. ':' .. currentThread .. ':expire_time';
    local expireTime = redis.call('hget', KEYS[1], expireField);
    if (expireTime == false or tonumber(expireTime) < leaseTime + currentTime) then
        redis.call('hset', KEYS[1], expireField, leaseTime + currentTime);
    end;
    redis.call('hincrby', KEYS[1], ARGV[i] .. ':' .. currentThread .. ':lock_count', 1);
end;
if (keyExist == 1) then
    local pttl = redis.call('pttl', KEYS[1]);
    if (tonumber(pttl) > 0 and leaseTime > tonumber(pttl)) then
        redis.call('pexpire', KEYS[1], leaseTime);
    end;
else
    redis.call('pexpire', KEYS[1], leaseTime);
end;
return nil;
";

/// `unlockInnerAsync`: KEYS = [group, channel, latch]; ARGV = [lockName, 0, lease, publish
/// command, latch TTL, now, values...]. 1 all freed, 0 still held, nil when a value was not held
/// (the others released all the same, nothing published, nothing latched).
const UNLOCK: &str = r"
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
if (redis.call('exists', KEYS[1]) == 0) then
    redis.call(ARGV[4], KEYS[2], ARGV[2]);
    return nil;
end;
local lockName = ARGV[1];
local hasFailed = 0;
local allDeleted = 1;
local hasDeleted = 0;
local newExpireTime = tonumber(ARGV[3]) + tonumber(ARGV[6]);
for i = 7, #ARGV, 1 do
    local expireField = ARGV[i] .. ':' .. lockName .. ':expire_time';
    local expireTime = redis.call('hget', KEYS[1], expireField);
    if (expireTime ~= false and tonumber(expireTime) >= tonumber(ARGV[6])) then
        local countField = ARGV[i] .. ':' .. lockName .. ':lock_count';
        if (tonumber(redis.call('hincrby', KEYS[1], countField, -1)) <= 0) then
            redis.call('hdel', KEYS[1], expireField);
            redis.call('hdel', KEYS[1], countField);
            redis.call('hdel', KEYS[1], ARGV[i]);
            hasDeleted = 1;
        else
            if (tonumber(expireTime) < newExpireTime) then
                redis.call('hset', KEYS[1], expireField, newExpireTime);
            end;
            allDeleted = 0;
        end;
    else
        allDeleted = 0;
        hasFailed = 1;
    end;
end;
if (hasFailed ~= 0) then
    return nil;
end;
-- 0 is true in Lua: every unlock that gets here publishes.
if (hasDeleted) then
    redis.call(ARGV[4], KEYS[2], ARGV[2]);
end;
if (allDeleted == 1) then
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
else
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    local pttl = redis.call('pttl', KEYS[1]);
    if (tonumber(ARGV[3]) > tonumber(pttl)) then
        redis.call('pexpire', KEYS[1], ARGV[3]);
    end;
end;
return allDeleted;
";

/// `forceUnlockAsync`: KEYS = [group, channel]; ARGV = [0, publish command, values...]. How many
/// values were freed; a value nobody holds fails the script (after the ones before it were freed).
const FORCE_UNLOCK: &str = r"
local removeCount = 0;
for i = 3, #ARGV, 1 do
    local lockName = redis.call('hget', KEYS[1], ARGV[i]);
    local count = redis.call('hdel', KEYS[1], ARGV[i]);
    redis.call('hdel', KEYS[1], ARGV[i] .. ':' .. lockName .. ':expire_time');
    redis.call('hdel', KEYS[1], ARGV[i] .. ':' .. lockName .. ':lock_count');
    removeCount = removeCount + count;
end;
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return removeCount;
";

/// `FastMultilockTask`, one group per script: KEYS = [group]; ARGV = [lease, now, lockName,
/// values...]. 1 renewed; 0 (renewal cancelled) when a value is not the thread's, after renewing
/// the ones before it.
const RENEW: &str = r"
local leaseTime = tonumber(ARGV[1]);
local currentTime = tonumber(ARGV[2]);
local currentThread = ARGV[3];
if (redis.call('exists', KEYS[1]) > 0) then
    local newExpireTime = leaseTime + currentTime;
    for i = 4, #ARGV, 1 do
        local lockThread = redis.call('hget', KEYS[1], ARGV[i]);
        if (lockThread ~= false and lockThread == currentThread) then
            local expireField = ARGV[i] .. ':' .. lockThread .. ':expire_time';
            local expireTime = redis.call('hget', KEYS[1], expireField);
            if (tonumber(expireTime) < newExpireTime) then
                redis.call('hset', KEYS[1], expireField, newExpireTime);
            end;
        else
            return 0;
        end;
    end;
    local pttl = redis.call('pttl', KEYS[1]);
    if (tonumber(pttl) < tonumber(leaseTime)) then
        redis.call('pexpire', KEYS[1], leaseTime);
    end;
    return 1;
end;
return 0;
";

/// `isLockedAsync`: KEYS = [group]; ARGV = [now, values...]. 1 when a value's holder's hold has
/// not ended.
const IS_LOCKED: &str = r"
local currentTime = tonumber(ARGV[1]);
for i = 2, #ARGV, 1 do
    local holder = redis.call('hget', KEYS[1], ARGV[i]);
    if (holder ~= false) then
        local expireTime = redis.call('hget', KEYS[1], ARGV[i] .. ':' .. holder .. ':expire_time');
        if (expireTime ~= false and tonumber(expireTime) >= currentTime) then
            return 1;
        end;
    end;
end;
return 0;
";

/// `isHeldByThreadAsync`: KEYS = [group]; ARGV = [now, lockName, values...], but its loop starts
/// at ARGV[4]: the first value is never looked at.
const IS_HELD: &str = r"
local currentTime = tonumber(ARGV[1]);
local currentThread = ARGV[2];
if (redis.call('exists', KEYS[1]) > 0) then
    for i = 4, #ARGV, 1 do
        local expireTime = redis.call('hget', KEYS[1], ARGV[i] .. ':' .. currentThread .. ':expire_time');
        if (expireTime == false or tonumber(expireTime) < currentTime) then
            return 0;
        end;
    end;
else
    return 0;
end;
return 1;
";

/// `System.currentTimeMillis()`.
fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(since.as_millis()).expect("a 64-bit epoch")
}

impl JavaClient {
    /// `redisson.getMultiLock(group, values)`, with the values' hashes as Java computes them.
    pub fn get_multi_lock(&self, group: &str, hashes: &[&str]) -> JavaGroupLock {
        let mut values: Vec<String> = hashes.iter().map(|&h| h.to_owned()).collect();
        values.sort_unstable();
        values.dedup();
        JavaGroupLock {
            client: self.clone(),
            name: group.to_owned(),
            values,
            internal_lease_ms: Mutex::new(self.watchdog_timeout_ms()),
        }
    }
}

/// An emulated `RedissonFasterMultiLock`. Its watchdog is [`JavaGroupLock::renew`], run by hand.
#[derive(Debug)]
pub struct JavaGroupLock {
    client: JavaClient,
    name: String,
    values: Vec<String>,
    /// `internalLockLeaseTime`: the lease of the last acquire with one, else the watchdog timeout;
    /// what its unlock re-applies.
    internal_lease_ms: Mutex<u64>,
}

impl JavaGroupLock {
    fn wire(&self) -> &Wire {
        &self.client.inner.wire
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `getLockName(threadId)`.
    pub fn lock_name(&self, thread: ThreadId) -> String {
        self.wire().lock_name(thread)
    }

    fn channel(&self) -> String {
        lock_channel(&self.name)
    }

    fn lease_ms(&self) -> u64 {
        *self.internal_lease_ms.lock().expect("not poisoned")
    }

    fn args(&self, head: Vec<String>) -> Vec<String> {
        head.into_iter()
            .chain(self.values.iter().cloned())
            .collect()
    }

    /// One `tryLockInnerAsync` with `lease_ms` (Java's `-1`: the watchdog timeout).
    async fn attempt(&self, thread: ThreadId, lease_ms: Option<u64>) -> RedisResult<Attempt<()>> {
        let lease = lease_ms.unwrap_or_else(|| self.client.watchdog_timeout_ms());
        let args = self.args(vec![
            lease.to_string(),
            now_ms().to_string(),
            self.lock_name(thread),
        ]);
        let ttl: Option<i64> = self.wire().eval(ACQUIRE, &[&self.name], &args).await?;
        Ok(match ttl {
            None => {
                if let Some(lease) = lease_ms {
                    *self.internal_lease_ms.lock().expect("not poisoned") = lease;
                }
                Attempt::Acquired(())
            }
            Some(ttl) => Attempt::Busy(ttl),
        })
    }

    fn entry_name(&self) -> String {
        format!("{}:{}", self.wire().id, self.name)
    }

    /// `lock()` / `lock(leaseTime)`: try, subscribe, and retry on each message or when the latest
    /// foreign hold ends.
    pub async fn lock(&self, thread: ThreadId, lease: Option<Duration>) -> RedisResult<()> {
        let lease_ms = lease.map(super::millis);
        self.client
            .inner
            .acquire_waiting(
                &self.entry_name(),
                &self.channel(),
                MessageRule::Lock,
                || self.attempt(thread, lease_ms),
            )
            .await
    }

    /// `tryLock(waitTime, leaseTime)`: as [`JavaGroupLock::lock`], for at most `wait`.
    pub async fn try_lock_for(
        &self,
        thread: ThreadId,
        wait: Duration,
        lease: Option<Duration>,
    ) -> RedisResult<bool> {
        let lease_ms = lease.map(super::millis);
        let held = self
            .client
            .inner
            .try_acquire_waiting(
                &self.entry_name(),
                &self.channel(),
                MessageRule::Lock,
                wait,
                || self.attempt(thread, lease_ms),
            )
            .await?;
        Ok(held.is_some())
    }

    /// `unlock()`: its script under a fresh latch, then the latch deleted. `None` is Java's
    /// `IllegalMonitorStateException`.
    pub async fn unlock(&self, thread: ThreadId) -> RedisResult<Option<i64>> {
        let request_id = new_request_id();
        let latch = unlock_latch(&self.name, &request_id);
        let args = self.args(vec![
            self.lock_name(thread),
            UNLOCK_MESSAGE.to_owned(),
            self.lease_ms().to_string(),
            self.wire().publish.to_owned(),
            "20000".to_owned(),
            now_ms().to_string(),
        ]);
        let channel = self.channel();
        let result = self
            .wire()
            .eval(UNLOCK, &[&self.name, &channel, &latch], &args)
            .await;
        let _: RedisResult<i64> = self.wire().conn.clone().del(latch).await;
        result
    }

    /// `forceUnlock()`: how many values it freed (Java's boolean is whether that is exactly 1).
    pub async fn force_unlock(&self) -> RedisResult<i64> {
        let args = self.args(vec![
            UNLOCK_MESSAGE.to_owned(),
            self.wire().publish.to_owned(),
        ]);
        let channel = self.channel();
        self.wire()
            .eval(FORCE_UNLOCK, &[&self.name, &channel], &args)
            .await
    }

    /// `isLocked()`.
    pub async fn is_locked(&self) -> RedisResult<bool> {
        let args = self.args(vec![now_ms().to_string()]);
        let locked: i64 = self.wire().eval(IS_LOCKED, &[&self.name], &args).await?;
        Ok(locked == 1)
    }

    /// `isHeldByThread(threadId)`, which never looks at the first value.
    pub async fn is_held_by_thread(&self, thread: ThreadId) -> RedisResult<bool> {
        let args = self.args(vec![now_ms().to_string(), self.lock_name(thread)]);
        let held: i64 = self.wire().eval(IS_HELD, &[&self.name], &args).await?;
        Ok(held == 1)
    }

    /// One renewal by the watchdog (`FastMultilockTask`) for `thread`: whether it renewed.
    pub async fn renew(&self, thread: ThreadId) -> RedisResult<bool> {
        let args = self.args(vec![
            self.client.watchdog_timeout_ms().to_string(),
            now_ms().to_string(),
            self.lock_name(thread),
        ]);
        let renewed: i64 = self.wire().eval(RENEW, &[&self.name], &args).await?;
        Ok(renewed == 1)
    }
}
