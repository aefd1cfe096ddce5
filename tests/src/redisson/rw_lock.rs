//! The `RReadWriteLock` (docs/protocol.md §7, §4): its scripts,
//! [`JavaClient::get_read_write_lock`], the [`JavaReadWriteLock`] it returns with its read and
//! write [`JavaRwLock`]s, and the read-lock renewals the client's watchdog makes.

use std::time::Duration;

use redis::{AsyncCommands, RedisResult};

use super::kind::{JavaObject, MissingUnlock, ObjectKind, RlockObject};
use super::lock::{RENEW_RESULT, UNLOCK_DECREMENT};
use super::{
    Attempt, Hold, JavaClient, LockObject, RedissonVersion, ThreadId, Wire, acquire_calls,
    base_lock_calls, prefix_name, suffix_name,
};

// ===== scripts (paraphrased from the numbered steps of docs/protocol.md) =====

/// §7.2: KEYS = [lock, timeoutPrefix]; ARGV = [lease, lockName, writeField]. Nil when acquired
/// (first reader, another reader, or the write holder taking a read hold), else the PTTL. Every
/// hold gets its own timeout key `timeoutPrefix:<k>`.
const READ_ACQUIRE: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'read');
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('set', KEYS[2] .. ':1', 1);
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    local key = KEYS[2] .. ':' .. count;
    redis.call('set', key, 1);
    redis.call('pexpire', key, ARGV[1]);
    local remaining = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remaining, tonumber(ARGV[1])));
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

/// §7.4: KEYS = [lock]; ARGV = [lease, writeField]. Nil when acquired or re-entered (the re-entry
/// adds the lease to the PTTL), else the PTTL.
const WRITE_ACQUIRE: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'write');
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (mode == 'write') and (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    local remaining = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], remaining + tonumber(ARGV[1]));
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

/// A Lua function over a lock hash and a key prefix (`{N}`): the timeout keys of every hash field
/// with a numeric value, for k = value down to 1 (§7.3 step 6, §4.2, §4.3). Writer fields have
/// none, but are listed too, as Java does.
const TIMEOUT_KEYS: &str = r"
local function timeout_keys(lock, prefix)
    local keys = {};
    local fields = redis.call('hgetall', lock);
    for n = 1, #fields, 2 do
        local count = tonumber(fields[n + 1]);
        if (count ~= nil) then
            for k = count, 1, -1 do
                table.insert(keys, prefix .. ':' .. fields[n] .. ':rwlock_timeout:' .. k);
            end;
        end;
    end;
    return keys;
end;
";

/// The start of both unlocks (§7.3 and §7.5, step 2; after the latch replay), over the Lua local
/// `missing`: without a `mode` the hash is missing: publish the message, latch 1, reply `missing`.
/// KEYS = [lock, channel, …]; ARGV = [message, …].
const UNLOCK_MISSING: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    publish(KEYS[2], ARGV[1]);
    latched(1);
    return missing;
end;
";

/// §7.3 from step 3 (after `UNLOCK_MISSING`, with `TIMEOUT_KEYS`): KEYS = [lock, channel,
/// timeoutPrefix, keyPrefix]; ARGV = [0, lockName]. Nil when not a reader; 0 when others still
/// hold (the hash lives as long as the longest timeout key) or the writer remains; else 1, with the
/// hash deleted and `0` published, even when the other readers' timeout keys are all gone.
const READ_UNLOCK: &str = r"
if (redis.call('hexists', KEYS[1], ARGV[2]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
if (counter == 0) then
    redis.call('hdel', KEYS[1], ARGV[2]);
end;
redis.call('del', KEYS[3] .. ':' .. (counter + 1));
if (redis.call('hlen', KEYS[1]) > 1) then
    local maxRemain = -3;
    for _, key in ipairs(timeout_keys(KEYS[1], KEYS[4])) do
        maxRemain = math.max(maxRemain, redis.call('pttl', key));
    end;
    if (maxRemain > 0) then
        redis.call('pexpire', KEYS[1], maxRemain);
        latched(0);
        return 0;
    end;
    if (mode == 'write') then
        latched(0);
        return 0;
    end;
end;
redis.call('del', KEYS[1]);
publish(KEYS[2], ARGV[1]);
latched(1);
return 1;
";

/// §7.5 from step 3 (after `UNLOCK_MISSING`; `UNLOCK_DECREMENT` and `WRITE_RELEASE` follow):
/// KEYS = [lock, channel]; ARGV = [1, lease, writeField]. Nil unless in write mode.
const WRITE_UNLOCK: &str = r"
if (mode ~= 'write') then
    return nil;
end;
local lock, owner, lease = KEYS[1], ARGV[3], ARGV[2];
";

/// §7.5, the last hold of the writer: with no reader left the hash goes and `1` is published;
/// else the writer's own read holds remain, in read mode, and nothing is published (a downgrade).
const WRITE_RELEASE: &str = r"
redis.call('hdel', lock, owner);
if (redis.call('hlen', lock) == 1) then
    redis.call('del', lock);
    publish(KEYS[2], ARGV[1]);
else
    redis.call('hset', lock, 'mode', 'read');
end;
latched(1);
return 1;
";

/// §7.6 force unlocks, over the Lua local `held` (the half's mode): KEYS = [lock, channel];
/// ARGV = [message]. 1 when the hash was in that mode (deleted, published), else 0.
const FORCE_UNLOCK: &str = r"
if (redis.call('hget', KEYS[1], 'mode') == held) then
    redis.call('del', KEYS[1]);
    publish(KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
";

/// §7.6, 3.24+: the read lock's `isLocked()`. KEYS = [lock]. 1 in read mode, or in write mode when
/// the writer also holds reads.
const READ_IS_LOCKED: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == 'read') or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1;
end;
return 0;
";

/// A Lua function (after `TIMEOUT_KEYS`): renew every holder's timeout keys with `ARGV[1]`.
const RENEW_HOLDERS: &str = r"
local function renew_holders(lock, prefix)
    for _, key in ipairs(timeout_keys(lock, prefix)) do
        redis.call('pexpire', key, ARGV[1]);
    end;
end;
";

/// §4.3 (≤3.43, after `TIMEOUT_KEYS` and `RENEW_HOLDERS`): KEYS = [lock, keyPrefix];
/// ARGV = [lease, lockName]. 1 when `lockName` still reads: the hash and every holder's timeout
/// keys are renewed.
const READ_RENEW_ONE: &str = r"
if (redis.call('hget', KEYS[1], ARGV[2]) ~= false) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    if (redis.call('hlen', KEYS[1]) > 1) then
        renew_holders(KEYS[1], KEYS[2]);
    end;
    return 1;
end;
return 0;
";

/// §4.2, 3.44 – 4.3 (after `TIMEOUT_KEYS` and `RENEW_HOLDERS`): KEYS = [lock1, keyPrefix1, …];
/// ARGV = [lease, lockName1, …], one lockName (the first local holder) per pair. Per pair, 1 when
/// it still reads: the hash and every holder's timeout keys, other clients' too, are renewed.
const READ_RENEW_EVERY_HOLDER: &str = r"
local result = {};
for i = 1, #KEYS, 2 do
    if (redis.call('hget', KEYS[i], ARGV[(i + 1) / 2 + 1]) ~= false) then
        redis.call('pexpire', KEYS[i], ARGV[1]);
        renew_holders(KEYS[i], KEYS[i + 1]);
        table.insert(result, 1);
    else
        table.insert(result, 0);
    end;
end;
return result;
";

/// §4.2, 4.4+ (`ReadLockTask`, after `RENEW_RESULT`): KEYS = [lock1, keyPrefix1, …];
/// ARGV = [lease, then per pair the count M and M lockNames, every local holder]. Per pair, 1 when
/// one of them still reads: their timeout keys (only theirs) and then the hash are renewed.
const READ_RENEW_OWN_HOLDERS: &str = r"
local arg = 2;
for i = 1, #KEYS, 2 do
    local alive = false;
    local holders = tonumber(ARGV[arg]);
    for h = arg + 1, arg + holders do
        local count = redis.call('hget', KEYS[i], ARGV[h]);
        if (count ~= false) then
            alive = true;
            for k = tonumber(count), 1, -1 do
                local key = KEYS[i + 1] .. ':' .. ARGV[h] .. ':rwlock_timeout:' .. k;
                redis.call('pexpire', key, ARGV[1]);
            end;
        end;
    end;
    arg = arg + holders + 1;
    renewed(KEYS[i], alive);
end;
return result;
";

/// The Lua local `missing` of `UNLOCK_MISSING`: a missing hash unlocks with nil from 3.44 (Java
/// throws), with 1 before.
fn missing_reply(version: RedissonVersion) -> &'static str {
    if version >= RedissonVersion::V3_44 {
        "local missing = nil;"
    } else {
        "local missing = 1;"
    }
}

/// Whether the read lock's `isLocked()` is a script that also counts a writer holding reads
/// (3.24+, §7.6), rather than `HGET mode == read`.
fn reads_is_locked_by_script(version: RedissonVersion) -> bool {
    version >= RedissonVersion::V3_31
}

/// Whether the read renewal names only this client's holders and renews only their keys (4.4+,
/// §4.2), rather than renewing every holder's keys after checking one local holder.
fn renews_own_holders_only(version: RedissonVersion) -> bool {
    version >= RedissonVersion::V4
}

/// The timeout prefix of `lock_name`'s read holds (§7.2): `suffixName(N, lockName) +
/// ":rwlock_timeout"`, e.g. `{N}:<uuid>:<tid>:rwlock_timeout`.
fn timeout_prefix(name: &str, lock_name: &str) -> String {
    format!("{}:rwlock_timeout", suffix_name(name, lock_name))
}

/// The prefix of every holder's timeout keys (§7.3): the timeout prefix up to the first
/// `":" + lockName`, as Java's `split` cuts it: `{N}`, or `N` when `N` contains `{`.
fn key_prefix(name: &str, lock_name: &str) -> String {
    let prefix = timeout_prefix(name, lock_name);
    let separator = format!(":{lock_name}");
    prefix
        .split(separator.as_str())
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A renewal of the read lock `name` by its timer (≤3.43, §4.3), for `thread`: `READ_RENEW_ONE`.
/// True when the thread still reads.
pub(super) async fn renew_read_one(
    wire: &Wire,
    name: &str,
    thread: ThreadId,
    lease_ms: u64,
) -> RedisResult<bool> {
    let lock_name = wire.lock_name(thread);
    let prefix = key_prefix(name, &lock_name);
    let script = [TIMEOUT_KEYS, RENEW_HOLDERS, READ_RENEW_ONE].concat();
    let args = [lease_ms.to_string(), lock_name];
    let flag: i64 = wire.eval(&script, &[name, &prefix], &args).await?;
    Ok(flag == 1)
}

/// One batched read renewal (3.44+, §4.2) over `locks`: names and their local holder threads (in
/// registration order; of one slot in a cluster). Per lock, whether it was renewed.
pub(super) async fn renew_read_batch(
    wire: &Wire,
    locks: &[(&str, &[ThreadId])],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let own_only = renews_own_holders_only(wire.version);
    let mut keys = Vec::with_capacity(locks.len() * 2);
    let mut args = vec![lease_ms.to_string()];
    for (name, threads) in locks {
        let holders: Vec<String> = threads.iter().map(|t| wire.lock_name(*t)).collect();
        keys.push((*name).to_owned());
        keys.push(key_prefix(name, &holders[0]));
        if own_only {
            args.push(holders.len().to_string());
            args.extend(holders);
        } else {
            args.extend(holders.into_iter().take(1));
        }
    }
    let script = if own_only {
        [RENEW_RESULT, READ_RENEW_OWN_HOLDERS].concat()
    } else {
        [TIMEOUT_KEYS, RENEW_HOLDERS, READ_RENEW_EVERY_HOLDER].concat()
    };
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let flags: Vec<i64> = wire.eval(&script, &keys, &args).await?;
    Ok(flags.into_iter().map(|flag| flag == 1).collect())
}

// ===== the client's RReadWriteLock =====

impl JavaClient {
    /// `redisson.getReadWriteLock(name)`.
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> JavaReadWriteLock {
        JavaReadWriteLock {
            client: self.clone(),
            name: name.into(),
        }
    }
}

/// An emulated `RReadWriteLock` (§7): it hands out read and write locks, which share the hash
/// `name`, the channel `redisson_rwlock:{name}` and the local entry of their waiters.
#[derive(Clone, Debug)]
pub struct JavaReadWriteLock {
    client: JavaClient,
    name: String,
}

impl JavaReadWriteLock {
    /// The lock name (also its hash key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel both halves publish and wait on: `redisson_rwlock:{name}` (§1.4).
    pub fn channel(&self) -> String {
        prefix_name("redisson_rwlock", &self.name)
    }

    /// `readLock()`: a new read lock object (with its own `internalLockLeaseTime`).
    pub fn read_lock(&self) -> JavaRwLock {
        self.half(Hold::Read)
    }

    /// `writeLock()`: a new write lock object (with its own `internalLockLeaseTime`).
    pub fn write_lock(&self) -> JavaRwLock {
        self.half(Hold::Write)
    }

    fn half(&self, hold: Hold) -> JavaRwLock {
        JavaRwLock {
            channel: self.channel(),
            object: LockObject::new(&self.client, self.name.clone(), hold),
        }
    }
}

// ===== the kinds =====

/// The read half of a read-write lock: `getReadWriteLock(name).readLock()`, rlock's `ReadLock`.
/// Its holders share.
#[derive(Clone, Copy, Debug)]
pub struct ReadKind;

/// The write half: `writeLock()`, rlock's `WriteLock`.
#[derive(Clone, Copy, Debug)]
pub struct WriteKind;

/// `impl ObjectKind` for a half: `$mode` is its hash's `mode` and its name in Java's
/// `readLock()` / `writeLock()` and rlock's `read()` / `write()`, `$payload` its unlock message.
/// Both halves share the read-write channel, and a missing lock's unlock is refused with that
/// message (§7.3, §7.5 step 2).
macro_rules! rw_kind {
    (
        $kind:ident, $interface:literal, $mode:literal, $payload:literal,
        $java_half:ident, $variant:ident, $rlock_half:ident { $($own:item)* }
    ) => {
        impl ObjectKind for $kind {
            fn interface(&self) -> &'static str {
                $interface
            }

            fn described_as(&self) -> &'static str {
                concat!($mode, " lock")
            }

            fn entry_suffix(&self) -> Option<&'static str> {
                Some("rw_lock")
            }

            fn mode(&self) -> Option<&'static str> {
                Some($mode)
            }

            fn channel(&self, name: &str, _owner: &str) -> Option<String> {
                Some(prefix_name("redisson_rwlock", name))
            }

            fn release_message(&self, name: &str) -> Option<(String, &'static str)> {
                Some((prefix_name("redisson_rwlock", name), $payload))
            }

            fn missing_unlock(&self) -> MissingUnlock {
                MissingUnlock::RefusedPublishing
            }

            fn java(&self, client: &JavaClient, name: &str) -> JavaObject {
                JavaObject::Rw(client.get_read_write_lock(name).$java_half())
            }

            fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject {
                RlockObject::$variant(client.read_write_lock(name).$rlock_half())
            }

            $($own)*
        }
    };
}

rw_kind!(ReadKind, "RReadWriteLock.readLock", "read", "0", read_lock, Read, read {
    /// A writer: readers share.
    fn contender(&self) -> Option<&'static dyn ObjectKind> {
        Some(&WriteKind)
    }
});

rw_kind!(WriteKind, "RReadWriteLock.writeLock", "write", "1", write_lock, Write, write {
    fn field_suffix(&self) -> &'static str {
        ":write"
    }
});

/// An emulated `RedissonReadLock` or `RedissonWriteLock` object (§7), from
/// [`JavaReadWriteLock::read_lock`] or [`JavaReadWriteLock::write_lock`]. A read hold is the field
/// `<uuid>:<tid>` plus one timeout key per hold; a write hold is the field `<uuid>:<tid>:write`.
/// Waiters of both halves share the client's entry of the name and sleep on
/// `redisson_rwlock:{N}` until a message or the PTTL (§3.3, §3.4). Clones share the object.
#[derive(Clone, Debug)]
pub struct JavaRwLock {
    object: LockObject,
    channel: String,
}

impl JavaRwLock {
    base_lock_calls!(object);
    acquire_calls!(object, channel);

    /// Whether this is the write lock.
    pub fn is_write(&self) -> bool {
        self.object.hold == Hold::Write
    }

    /// The channel both halves publish and wait on: `redisson_rwlock:{name}`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The timeout key of `thread`'s `k`-th read hold (§7.1):
    /// `{N}:<uuid>:<tid>:rwlock_timeout:<k>`. Only read holds have them.
    pub fn timeout_key(&self, thread: ThreadId, k: u64) -> String {
        let lock_name = self.object.wire().lock_name(thread);
        format!("{}:{k}", timeout_prefix(&self.object.name, &lock_name))
    }

    /// `unlock()` on `thread` (§7.3, §7.5), with the client side of §2.3. Returns the script's
    /// reply: `Some(1)` released (a read unlock that empties the hash publishes `0`, a write unlock
    /// `1`; a write unlock that leaves the writer's reads publishes nothing), `Some(0)` still held,
    /// `None` not held by `thread`. A missing hash publishes and returns `None` (3.44+) or
    /// `Some(1)` (≤3.43).
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn unlock(&self, thread: ThreadId) -> RedisResult<Option<i64>> {
        let attempt = |id: String| async move { self.unlock_attempt(thread, &id).await };
        self.object.unlock(thread, attempt).await
    }

    /// `forceUnlock()` (§7.6): stops renewal; when the hash is in this half's mode, deletes it and
    /// publishes (`0` read, `1` write). Returns whether it did.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn force_unlock(&self) -> RedisResult<bool> {
        let held = format!("local held = '{}';", self.mode());
        let body = [held.as_str(), FORCE_UNLOCK].concat();
        let keys = [self.object.name.as_str(), &self.channel];
        let args = vec![self.message().to_owned()];
        self.object.force_unlock_script(&body, &keys, args).await
    }

    /// `isLocked()` (§7.6). Read: in read mode, or a writer that also reads (a script, 3.24+;
    /// before, `HGET mode == read`). Write: `HGET mode == write`.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn is_locked(&self) -> RedisResult<bool> {
        let wire = self.object.wire();
        let name = self.object.name.as_str();
        if !self.is_write() && reads_is_locked_by_script(wire.version) {
            let locked: i64 = wire.eval(READ_IS_LOCKED, &[name], &[]).await?;
            return Ok(locked == 1);
        }
        let mode: Option<String> = wire.conn.clone().hget(name, "mode").await?;
        Ok(mode.as_deref() == Some(self.mode()))
    }

    /// The hash's `mode` while this half holds it.
    fn mode(&self) -> &'static str {
        if self.is_write() { "write" } else { "read" }
    }

    /// What this half's unlocks publish: `0` (wake one) for the read lock, `1` (wake all) for the
    /// write lock (§7.1).
    fn message(&self) -> &'static str {
        if self.is_write() { "1" } else { "0" }
    }

    /// One acquire script: §7.2 or §7.4.
    async fn try_acquire(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
    ) -> RedisResult<Attempt<()>> {
        let object = &self.object;
        let name = object.name.as_str();
        if self.is_write() {
            return object.acquire_own(thread, lease, WRITE_ACQUIRE, &[]).await;
        }
        let prefix = timeout_prefix(name, &object.field(thread));
        let write_field = Hold::Write.field(object.wire(), thread);
        object
            .acquire(
                thread,
                lease,
                READ_ACQUIRE,
                &[name, &prefix],
                &[write_field],
                Option::into,
            )
            .await
    }

    /// One unlock script call under `request_id`: §7.3 or §7.5.
    async fn unlock_attempt(&self, thread: ThreadId, request_id: &str) -> RedisResult<Option<i64>> {
        let object = &self.object;
        let name = object.name.as_str();
        let missing = missing_reply(object.wire().version);
        let field = object.field(thread);
        let (body, keys, args) = if self.is_write() {
            let body = [
                missing,
                UNLOCK_MISSING,
                WRITE_UNLOCK,
                UNLOCK_DECREMENT,
                WRITE_RELEASE,
            ];
            let lease = object.internal_lease_ms().to_string();
            let args = vec![self.message().to_owned(), lease, field];
            (
                body.concat(),
                vec![name.to_owned(), self.channel.clone()],
                args,
            )
        } else {
            let body = [missing, TIMEOUT_KEYS, UNLOCK_MISSING, READ_UNLOCK];
            let keys = vec![
                name.to_owned(),
                self.channel.clone(),
                timeout_prefix(name, &field),
                key_prefix(name, &field),
            ];
            (body.concat(), keys, vec![self.message().to_owned(), field])
        };
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        object
            .unlock_script(request_id, &body, &keys, args, true)
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use redis::AsyncCommands;
    use redis::aio::MultiplexedConnection;

    use super::*;
    use crate::RedisServer;
    use crate::harness::raw;
    use crate::redisson::testing::{Listener, finished, java, java_watchdog, two_javas};

    async fn hash(redis: &mut MultiplexedConnection, name: &str) -> HashMap<String, String> {
        redis.hgetall(name).await.expect("HGETALL")
    }

    async fn pttl(redis: &mut MultiplexedConnection, key: &str) -> i64 {
        redis.pttl(key).await.expect("PTTL")
    }

    #[test]
    fn timeout_keys_follow_suffix_name() {
        assert_eq!(timeout_prefix("rw", "u:1"), "{rw}:u:1:rwlock_timeout");
        assert_eq!(key_prefix("rw", "u:1"), "{rw}");
        assert_eq!(timeout_prefix("a{b}c", "u:1"), "a{b}c:u:1:rwlock_timeout");
        assert_eq!(key_prefix("a{b}c", "u:1"), "a{b}c");
    }

    /// Readers of two clients share the lock, each hold with its own timeout key; writers are
    /// kept out; the last read unlock deletes the hash and publishes `0` (§7.2, §7.3).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_share_with_a_timeout_key_per_hold() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        let (a, b) = two_javas(&server).await;
        let (rw_a, rw_b) = (
            a.get_read_write_lock("rw:share"),
            b.get_read_write_lock("rw:share"),
        );
        assert_eq!(rw_a.channel(), "redisson_rwlock:{rw:share}");
        let (read_a, read_b, write_b) = (rw_a.read_lock(), rw_b.read_lock(), rw_b.write_lock());
        let key = read_a.timeout_key(1, 2);
        assert_eq!(key, format!("{{rw:share}}:{}:1:rwlock_timeout:2", a.id()));

        read_a.lock(1).await.expect("read");
        read_a.lock(1).await.expect("read again");
        read_b.lock(7).await.expect("read on b");
        let fields = hash(&mut redis, "rw:share").await;
        assert_eq!(fields.get("mode").map(String::as_str), Some("read"));
        assert_eq!(fields.get(&a.lock_name(1)).map(String::as_str), Some("2"));
        assert_eq!(fields.get(&b.lock_name(7)).map(String::as_str), Some("1"));
        for key in [
            read_a.timeout_key(1, 1),
            read_a.timeout_key(1, 2),
            read_b.timeout_key(7, 1),
        ] {
            assert!(
                (29_000..=30_000).contains(&pttl(&mut redis, &key).await),
                "{key}"
            );
        }
        assert!(read_b.is_locked().await.expect("isLocked"));
        assert!(!write_b.is_locked().await.expect("isLocked"));
        assert!(!write_b.try_lock(8).await.expect("tryLock()"));
        let wait = Duration::from_millis(100);
        assert!(
            !write_b
                .try_lock_for(8, wait, None)
                .await
                .expect("tryLock(wait)")
        );

        let mut listener = Listener::start(&server).await;
        assert_eq!(read_a.unlock(1).await.expect("unlock"), Some(0));
        assert_eq!(pttl(&mut redis, &read_a.timeout_key(1, 2)).await, -2);
        assert_eq!(read_a.unlock(1).await.expect("unlock"), Some(0));
        assert_eq!(read_a.hold_count(1).await.expect("HGET"), 0);
        listener.assert_quiet().await;
        assert_eq!(read_b.unlock(7).await.expect("unlock"), Some(1));
        assert_eq!(listener.next().await, (rw_a.channel(), "0".into()));
        assert!(hash(&mut redis, "rw:share").await.is_empty());
    }

    /// A write unlock publishes `1` and wakes a waiting reader; a read unlock publishes `0` and
    /// wakes a waiting writer; both wait on the shared channel (§7.1).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unlocks_wake_the_other_side() {
        let server = RedisServer::start();
        let (a, b) = two_javas(&server).await;
        let (rw_a, rw_b) = (
            a.get_read_write_lock("rw:wake"),
            b.get_read_write_lock("rw:wake"),
        );
        let mut listener = Listener::start(&server).await;

        let write = rw_a.write_lock();
        write.lock(1).await.expect("write");
        assert_eq!(write.lock_name(1), format!("{}:1:write", a.id()));
        assert!(write.is_held_by_thread(1).await.expect("HEXISTS"));
        let spawn_lock =
            |lock: JavaRwLock, thread| tokio::spawn(async move { lock.lock(thread).await });
        let read = rw_b.read_lock();
        let reader = spawn_lock(read.clone(), 2);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(write.unlock(1).await.expect("unlock"), Some(1));
        assert_eq!(listener.next().await, (rw_a.channel(), "1".into()));
        finished(reader).await.expect("the reader acquires");

        let writer = spawn_lock(write.clone(), 3);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(read.unlock(2).await.expect("unlock"), Some(1));
        assert_eq!(listener.next().await, (rw_a.channel(), "0".into()));
        finished(writer).await.expect("the writer acquires");
        assert!(write.force_unlock().await.expect("forceUnlock"));
        assert_eq!(listener.next().await, (rw_a.channel(), "1".into()));
    }

    /// A writer takes a read hold, then releases the write hold: the hash stays in read mode and
    /// nothing is published (§7.5).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_downgrade_publishes_nothing() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        let java = java(&server, RedissonVersion::V4).await;
        let rw = java.get_read_write_lock("rw:downgrade");
        let (read, write) = (rw.read_lock(), rw.write_lock());
        write.lock(1).await.expect("write");
        read.lock(1).await.expect("read while writing");
        assert!(
            read.is_locked().await.expect("isLocked"),
            "writer that reads"
        );
        let mut listener = Listener::start(&server).await;

        assert_eq!(write.unlock(1).await.expect("unlock"), Some(1));
        listener.assert_quiet().await;
        let fields = hash(&mut redis, rw.name()).await;
        assert_eq!(fields.get("mode").map(String::as_str), Some("read"));
        assert_eq!(fields.len(), 2, "mode and the read hold: {fields:?}");
        assert_eq!(read.unlock(1).await.expect("unlock"), Some(1));
        assert_eq!(listener.next().await, (rw.channel(), "0".into()));
    }

    /// Unlocking a missing hash publishes and replies nil (3.44+) or 1 (≤3.43) (§7.3, §7.5).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_missing_hash_unlocks_by_version() {
        let server = RedisServer::start();
        let mut listener = Listener::start(&server).await;
        for (version, reply) in [
            (RedissonVersion::V3_31, Some(1)),
            (RedissonVersion::V4, None),
        ] {
            let java = java(&server, version).await;
            let rw = java.get_read_write_lock("rw:missing");
            assert_eq!(rw.read_lock().unlock(1).await.expect("unlock"), reply);
            assert_eq!(listener.next().await, (rw.channel(), "0".into()));
            assert_eq!(rw.write_lock().unlock(1).await.expect("unlock"), reply);
            assert_eq!(listener.next().await, (rw.channel(), "1".into()));
        }
    }

    /// The read renewal of each version (§4.2, §4.3): it keeps this client's holds alive; before
    /// 4.4 it renews other clients' timeout keys too (here shortening one with a longer lease).
    /// The ≤3.43 write renewal falls back to the read renewal for a downgraded writer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_renewal_follows_the_version() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        let watchdog = Duration::from_millis(300);
        let leased = java(&server, RedissonVersion::V4).await;
        for (version, renews_others) in [
            (RedissonVersion::V3_31, true),
            (RedissonVersion::V3_44, true),
            (RedissonVersion::V4, false),
        ] {
            let java = java_watchdog(&server, version, watchdog).await;
            let name = format!("rw:renewal:{version:?}");
            let other = leased.get_read_write_lock(name.as_str()).read_lock();
            other
                .lock_with_lease(9, Duration::from_secs(3))
                .await
                .expect("leased read");
            let read = java.get_read_write_lock(name.as_str()).read_lock();
            read.lock(1).await.expect("read");
            tokio::time::sleep(watchdog * 2).await;
            let own = pttl(&mut redis, &read.timeout_key(1, 1)).await;
            assert!((1..=300).contains(&own), "{version:?}: {own}");
            let others = pttl(&mut redis, &other.timeout_key(9, 1)).await;
            assert_eq!(others <= 300, renews_others, "{version:?}: {others}");
        }

        let java = java_watchdog(&server, RedissonVersion::V3_31, watchdog).await;
        let rw = java.get_read_write_lock("rw:renewal:downgraded");
        let (read, write) = (rw.read_lock(), rw.write_lock());
        write.lock(1).await.expect("write");
        read.lock(1).await.expect("read");
        assert_eq!(write.unlock(1).await.expect("unlock"), Some(1));
        tokio::time::sleep(watchdog * 2).await;
        assert!(read.is_held_by_thread(1).await.expect("HEXISTS"));
        assert!((1..=300).contains(&pttl(&mut redis, &read.timeout_key(1, 1)).await));
    }
}
