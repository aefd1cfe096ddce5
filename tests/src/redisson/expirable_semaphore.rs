//! The permit-expirable semaphore (`RPermitExpirableSemaphore`, docs/protocol.md §8.6): its
//! scripts, [`JavaClient::get_permit_expirable_semaphore`] and the [`JavaPermitExpirableSemaphore`]
//! object it returns. Key `N` holds the available permits, the sorted set `{N}:timeout` the
//! acquired ones: each a raw 16-byte id scored with its expiry (epoch ms, or `922337203685477` for
//! a permit that never expires). Expired permits are counted back in by the next call that looks.
//! It shares the semaphore's channel `redisson_sc:{N}`, message rule and local entry.
//!
//! docs/protocol.md gives the acquire and both release scripts step by step; it only names the
//! others, which are written here from Redisson's documented behaviour. Their layout is this
//! module's own: `KEYS = [N, {N}:timeout, channel]`, `ARGV = [now, publish command, …]` for the
//! calls that reclaim first (the counts, the list release and the lease calls), and the
//! semaphore's `KEYS = [N, channel]`, `ARGV = [p, publish command]` for the setters (`setPermits`
//! with the timeout set between).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{ErrorKind, FromRedisValue, RedisError, RedisResult, Value};

use super::semaphore::TRY_SET_PERMITS;
use super::{
    Attempt, ClientInner, JavaClient, MessageRule, Publishing, millis, new_request_id,
    semaphore_channel, suffix_name, text_arg,
};
use crate::harness::epoch_ms;

/// The score of a permit that never expires (`nonExpirableTimeout`), compared as a string with
/// the scores Redis reports (§11.15).
pub const NON_EXPIRING_SCORE: &str = "922337203685477";

// ===== scripts (paraphrased from the numbered steps of docs/protocol.md §8.6) =====

/// The acquire's Lua locals (§8.6): KEYS = [N, timeouts, channel]; argv = [count, timeoutDate,
/// now, non-expiring score, publish command, id1 … idN].
const ACQUIRE_LOCALS: &str = r"
local permits, timeouts, channel, now = KEYS[1], KEYS[2], KEYS[3], argv[3];
";

/// The Lua locals of the calls that reclaim first (this module's layout): KEYS = [N, timeouts,
/// channel]; argv = [now, publish command, …].
const RECLAIMING_LOCALS: &str = r"
local permits, timeouts, channel, now = KEYS[1], KEYS[2], KEYS[3], argv[1];
";

/// The reclaim of expired permits (§8.6 acquire step 1), over the Lua locals `permits`,
/// `timeouts`, `channel` and `now`: `reclaim(limit)` removes at most `limit` (nil: all) permits
/// whose expiry is at most `now`, counts them back in, and publishes the new count when it is
/// positive.
const RECLAIM: &str = r"
local function reclaim(limit)
    local expired;
    if limit then
        expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, limit);
    else
        expired = redis.call('zrangebyscore', timeouts, 0, now);
    end;
    if #expired > 0 then
        redis.call('zrem', timeouts, unpack(expired));
        local value = redis.call('incrby', permits, #expired);
        if value > 0 then
            publish(channel, value);
        end;
    end;
end;
";

/// §8.6 acquire steps 1–4: reclaims at most `count` expired permits; takes `count` permits if
/// there, each id scored with `timeoutDate` and the set given the key's PTTL, and answers `OK`;
/// else the nearest expiry as `:<score>` unless it is the non-expiring score; else nil.
const ACQUIRE: &str = r"
reclaim(argv[1]);
local available = redis.call('get', permits);
if (available ~= false) and (tonumber(available) >= tonumber(argv[1])) then
    redis.call('decrby', permits, argv[1]);
    for i = 6, #argv do
        redis.call('zadd', timeouts, argv[2], argv[i]);
    end;
    local ttl = redis.call('pttl', permits);
    if ttl > 0 then
        redis.call('pexpire', timeouts, ttl);
    end;
    return 'OK';
end;
local nearest = redis.call('zrange', timeouts, 0, 0, 'withscores');
if (nearest[1] ~= nil) and (nearest[2] ~= argv[4]) then
    return ':' .. nearest[2];
end;
return nil;
";

/// §8.6 `tryRelease(id)`: KEYS = [N, channel, timeouts]; argv = [id, 1, now, publish command].
/// 0 when the id is not there; else counts it back in and publishes the new count, answering 1,
/// or 0 when the permit had expired.
const TRY_RELEASE: &str = r"
local expires = redis.call('zscore', KEYS[3], argv[1]);
if (redis.call('zrem', KEYS[3], argv[1]) ~= 1) then
    return 0;
end;
local value = redis.call('incrby', KEYS[1], argv[2]);
publish(KEYS[2], value);
if tonumber(expires) <= tonumber(argv[3]) then
    return 0;
end;
return 1;
";

/// §8.6 `tryRelease(ids)` (HEAD), after `RECLAIMING_LOCALS` and `RECLAIM`; argv = [now,
/// publish command, id1 … idN]. 0 when any id is missing or expired; else reclaims, removes the
/// ids, counts them back in, publishes how many were released and answers that.
const TRY_RELEASE_MANY: &str = r"
for i = 3, #argv do
    local expires = redis.call('zscore', timeouts, argv[i]);
    if (expires == false) or (tonumber(expires) <= tonumber(now)) then
        return 0;
    end;
end;
reclaim(nil);
local released = redis.call('zrem', timeouts, unpack(argv, 3));
redis.call('incrby', permits, released);
publish(channel, released);
return released;
";

/// `availablePermits()`, after the reclaiming start: `GET N`, nil → 0.
const AVAILABLE_PERMITS: &str = r"
reclaim(nil);
local available = redis.call('get', permits);
if (available == false) then
    return 0;
end;
return tonumber(available);
";

/// `acquiredPermits()`, after the reclaiming start: `ZCARD` of the timeout set.
const ACQUIRED_PERMITS: &str = r"
reclaim(nil);
return redis.call('zcard', timeouts);
";

/// `getPermits()`, after the reclaiming start: available plus acquired.
const PERMITS: &str = r"
reclaim(nil);
local available = redis.call('get', permits);
if (available == false) then
    available = 0;
end;
return tonumber(available) + redis.call('zcard', timeouts);
";

/// `updateLeaseTime(id, lease)`, after the reclaiming start; argv = [now, publish command, id,
/// new expiry]. When the id is (still) there, rescores it: 1; else 0.
const UPDATE_LEASE_TIME: &str = r"
reclaim(nil);
if (redis.call('zscore', timeouts, argv[3]) == false) then
    return 0;
end;
redis.call('zadd', timeouts, argv[4], argv[3]);
return 1;
";

/// `getLeaseTime(id)`, after the reclaiming start; argv = [now, publish command, id,
/// non-expiring score]. Nil when the id is not there; -1 when it never expires; else its
/// remaining ms.
const LEASE_TIME: &str = r"
reclaim(nil);
local expires = redis.call('zscore', timeouts, argv[3]);
if (expires == false) then
    return nil;
end;
if (expires == argv[4]) then
    return -1;
end;
return tonumber(expires) - tonumber(now);
";

/// §8.6 `setPermits(p)`: KEYS = [N, timeouts, channel]; argv = [p, publish command]. A missing
/// key is set to `p`; else, unless available plus acquired is `p` already, the difference is
/// added. Either change publishes `p`.
const SET_PERMITS: &str = r"
local available = redis.call('get', KEYS[1]);
if (available == false) then
    redis.call('set', KEYS[1], argv[1]);
    publish(KEYS[3], argv[1]);
    return;
end;
local total = tonumber(available) + redis.call('zcard', KEYS[2]);
if (total ~= tonumber(argv[1])) then
    redis.call('incrby', KEYS[1], tonumber(argv[1]) - total);
    publish(KEYS[3], argv[1]);
end;
";

/// §8.6 `addPermits(p)`: KEYS = [N, channel]; argv = [p, publish command]. Sets `(GET or 0) + p`
/// and, when `p` is positive, publishes `p` (not the new count).
const ADD_PERMITS: &str = r"
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
redis.call('set', KEYS[1], tonumber(value) + tonumber(argv[1]));
if (tonumber(argv[1]) > 0) then
    publish(KEYS[2], argv[1]);
end;
";

/// `ByteBufUtil.decodeHexDump(id)`: the raw bytes of a hex permit id, as the scripts take it.
fn id_bytes(id: &str) -> RedisResult<Vec<u8>> {
    let invalid = || {
        let detail = format!("{id:?} is not a hex permit id");
        RedisError::from((ErrorKind::Client, "invalid permit id", detail))
    };
    if !id.len().is_multiple_of(2) {
        return Err(invalid());
    }
    (0..id.len())
        .step_by(2)
        .map(|at| {
            id.get(at..at + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(invalid)
        })
        .collect()
}

/// What one acquire script answered (§8.6 steps 2–4).
enum AcquireReply {
    /// `OK`: the ids were taken.
    Taken,
    /// `:<score>`: the nearest expiry of an acquired permit, in epoch ms.
    NearestExpiry(i64),
    /// Nil: nothing acquired expires.
    NothingExpires,
}

impl FromRedisValue for AcquireReply {
    fn from_redis_value(value: Value) -> Result<Self, redis::ParsingError> {
        let text = match value {
            Value::Nil => return Ok(Self::NothingExpires),
            Value::SimpleString(text) => text,
            other => String::from_redis_value(other)?,
        };
        if text == "OK" {
            return Ok(Self::Taken);
        }
        text.strip_prefix(':')
            .and_then(|score| score.parse().ok())
            .map(Self::NearestExpiry)
            .ok_or_else(|| format!("unexpected acquire reply {text:?}").into())
    }
}

// ===== the client's RPermitExpirableSemaphore =====

impl JavaClient {
    /// `redisson.getPermitExpirableSemaphore(name)`: a new `RPermitExpirableSemaphore` object.
    pub fn get_permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> JavaPermitExpirableSemaphore {
        let name = name.into();
        JavaPermitExpirableSemaphore {
            client: self.inner.clone(),
            channel: semaphore_channel(&name),
            timeouts: suffix_name(&name, "timeout"),
            name,
        }
    }
}

/// An emulated `RPermitExpirableSemaphore` object (§8.6). Permit ids are 32-character lower-case
/// hex strings here, as in Java's API, and travel to Redis as their 16 raw bytes. Waiters share
/// the client's semaphore entry of the raw name, and sleep on its latch until a message, or at
/// most until the nearest expiry of an acquired permit. Clones share the object.
#[derive(Clone)]
pub struct JavaPermitExpirableSemaphore {
    client: Arc<ClientInner>,
    name: String,
    timeouts: String,
    channel: String,
}

impl JavaPermitExpirableSemaphore {
    /// The semaphore name (also the key of its available permits).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sorted set of acquired permits: `{N}:timeout`.
    pub fn timeout_name(&self) -> &str {
        &self.timeouts
    }

    /// The channel the releases publish on and the waiters subscribe to: `redisson_sc:{N}`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// `acquire(leaseTime)`: one permit, waiting without limit; `lease` `None` means a permit
    /// that never expires. Returns its id.
    ///
    /// # Errors
    ///
    /// When a script fails, or the subscription is not confirmed within `subscriptionTimeout`.
    pub async fn acquire(&self, lease: Option<Duration>) -> RedisResult<String> {
        let mut ids = self.acquire_many(1, lease).await?;
        ids.pop()
            .ok_or_else(|| RedisError::from((ErrorKind::Client, "acquire answered no permit id")))
    }

    /// `acquire(permits, leaseTime)`: `permits` permits at once, waiting without limit: tries;
    /// then subscribes and loops { try; sleep on the entry's latch until the nearest expiry, or
    /// without limit when nothing acquired expires }. Returns their ids.
    ///
    /// # Errors
    ///
    /// As [`JavaPermitExpirableSemaphore::acquire`].
    pub async fn acquire_many(
        &self,
        permits: u32,
        lease: Option<Duration>,
    ) -> RedisResult<Vec<String>> {
        let ids: Vec<String> = (0..permits).map(|_| new_request_id()).collect();
        let attempt = || self.attempt(&ids, lease);
        let rule = MessageRule::Semaphore;
        let waiting = self
            .client
            .acquire_waiting(&self.name, &self.channel, rule, attempt);
        waiting.await
    }

    /// `tryAcquire(waitTime, leaseTime)`: as [`JavaPermitExpirableSemaphore::acquire`], but
    /// subscribing and every sleep are bounded by what is left of `wait` (a sleep also by the
    /// nearest expiry). Returns the id, or `None` (Java's null) when `wait` ran out.
    ///
    /// # Errors
    ///
    /// When a script fails.
    pub async fn try_acquire(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> RedisResult<Option<String>> {
        let ids = [new_request_id()];
        let attempt = || self.attempt(&ids, lease);
        let rule = MessageRule::Semaphore;
        let client = &self.client;
        let waiting = client.try_acquire_waiting(&self.name, &self.channel, rule, wait, attempt);
        Ok(waiting.await?.and_then(|mut ids| ids.pop()))
    }

    /// `tryRelease(id)`: gives the permit back and publishes the new count. Returns true when it
    /// was released; false when it was not there, or had expired (it is still counted back in).
    ///
    /// # Errors
    ///
    /// When the script fails, or `id` is not hex.
    pub async fn try_release(&self, id: &str) -> RedisResult<bool> {
        let keys = [self.name.as_str(), &self.channel, &self.timeouts];
        let head = vec![id_bytes(id)?, text_arg(1), text_arg(epoch_ms())];
        let script = Publishing {
            body: TRY_RELEASE,
            keys: &keys,
            head,
            tail: Vec::new(),
        };
        let released: i64 = self.client.wire.eval_publishing(script).await?;
        Ok(released == 1)
    }

    /// `release(id)`: [`JavaPermitExpirableSemaphore::try_release`], failing where Java throws
    /// `IllegalArgumentException` (the permit was not released).
    ///
    /// # Errors
    ///
    /// When the script fails, or the permit was not released.
    pub async fn release(&self, id: &str) -> RedisResult<()> {
        if self.try_release(id).await? {
            return Ok(());
        }
        let detail = format!("permit with id {id} has already been released or does not exist");
        Err(RedisError::from((
            ErrorKind::Client,
            "permit not released",
            detail,
        )))
    }

    /// `tryRelease(ids)` (HEAD's list form): all or nothing. Returns how many permits were
    /// released (and published), or 0 when any id is missing or expired. No ids make no call.
    ///
    /// # Errors
    ///
    /// When the script fails, or an id is not hex.
    pub async fn try_release_many(&self, ids: &[impl AsRef<str>]) -> RedisResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let tail = ids
            .iter()
            .map(|id| id_bytes(id.as_ref()))
            .collect::<RedisResult<_>>()?;
        self.reclaiming(TRY_RELEASE_MANY, tail).await
    }

    /// `availablePermits()`: reclaims expired permits, then `GET N` (nil → 0).
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn available_permits(&self) -> RedisResult<i64> {
        self.reclaiming(AVAILABLE_PERMITS, Vec::new()).await
    }

    /// `acquiredPermits()`: reclaims expired permits, then counts the acquired ones.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn acquired_permits(&self) -> RedisResult<i64> {
        self.reclaiming(ACQUIRED_PERMITS, Vec::new()).await
    }

    /// `getPermits()`: reclaims expired permits, then available plus acquired.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn permits(&self) -> RedisResult<i64> {
        self.reclaiming(PERMITS, Vec::new()).await
    }

    /// `setPermits(permits)`: makes available plus acquired equal `permits` (a missing key is set
    /// to it) and publishes `permits` when anything changed.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn set_permits(&self, permits: i64) -> RedisResult<()> {
        let keys = [self.name.as_str(), &self.timeouts, &self.channel];
        self.publishing(SET_PERMITS, &keys, permits).await
    }

    /// `trySetPermits(permits)`: the semaphore's: sets the count (and publishes it) only when the
    /// key is missing. Returns whether it did.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn try_set_permits(&self, permits: u32) -> RedisResult<bool> {
        let keys = [self.name.as_str(), &self.channel];
        let flag: i64 = self.publishing(TRY_SET_PERMITS, &keys, permits).await?;
        Ok(flag == 1)
    }

    /// `addPermits(permits)`: adds to the available count (a missing key counting 0; `permits`
    /// may be negative) and, when `permits` is positive, publishes `permits`.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn add_permits(&self, permits: i64) -> RedisResult<()> {
        let keys = [self.name.as_str(), &self.channel];
        self.publishing(ADD_PERMITS, &keys, permits).await
    }

    /// `updateLeaseTime(id, lease)`: reclaims expired permits, then gives permit `id`, if still
    /// there, the expiry now + `lease`. Returns whether it did.
    ///
    /// # Errors
    ///
    /// When the script fails, or `id` is not hex.
    pub async fn update_lease_time(&self, id: &str, lease: Duration) -> RedisResult<bool> {
        let expiry = epoch_ms().saturating_add(millis(lease));
        let tail = vec![id_bytes(id)?, text_arg(expiry)];
        let updated: i64 = self.reclaiming(UPDATE_LEASE_TIME, tail).await?;
        Ok(updated == 1)
    }

    /// `getLeaseTime(id)`: reclaims expired permits, then the remaining lease of permit `id` in
    /// ms: -1 when it never expires, `None` when it is not there (Java throws).
    ///
    /// # Errors
    ///
    /// When the script fails, or `id` is not hex.
    pub async fn lease_time(&self, id: &str) -> RedisResult<Option<i64>> {
        let tail = vec![id_bytes(id)?, text_arg(NON_EXPIRING_SCORE)];
        self.reclaiming(LEASE_TIME, tail).await
    }

    /// One acquire of `ids` (§8.6) with the clock now: acquired (with the ids); or busy until the
    /// nearest expiry (at once if it is past), or until a message when nothing acquired expires.
    async fn attempt(
        &self,
        ids: &[String],
        lease: Option<Duration>,
    ) -> RedisResult<Attempt<Vec<String>>> {
        let now = epoch_ms();
        let expiry = lease.map_or_else(
            || NON_EXPIRING_SCORE.to_owned(),
            |lease| now.saturating_add(millis(lease)).to_string(),
        );
        let keys = [self.name.as_str(), &self.timeouts, &self.channel];
        let head = vec![
            text_arg(ids.len()),
            text_arg(expiry),
            text_arg(now),
            text_arg(NON_EXPIRING_SCORE),
        ];
        let tail = ids
            .iter()
            .map(|id| id_bytes(id))
            .collect::<RedisResult<_>>()?;
        let body = [ACQUIRE_LOCALS, RECLAIM, ACQUIRE].concat();
        let script = Publishing {
            body: &body,
            keys: &keys,
            head,
            tail,
        };
        Ok(match self.client.wire.eval_publishing(script).await? {
            AcquireReply::Taken => Attempt::Acquired(ids.to_vec()),
            AcquireReply::NearestExpiry(expiry) => {
                let now = i64::try_from(epoch_ms()).unwrap_or(i64::MAX);
                Attempt::Busy(expiry.saturating_sub(now).max(0))
            }
            AcquireReply::NothingExpires => Attempt::Busy(-1),
        })
    }

    /// Runs `body` after the reclaiming start (this module's layout) with `tail` after `now` and
    /// the publish command.
    async fn reclaiming<T: FromRedisValue>(
        &self,
        body: &str,
        tail: Vec<Vec<u8>>,
    ) -> RedisResult<T> {
        let keys = [self.name.as_str(), &self.timeouts, &self.channel];
        let body = [RECLAIMING_LOCALS, RECLAIM, body].concat();
        let script = Publishing {
            body: &body,
            keys: &keys,
            head: vec![text_arg(epoch_ms())],
            tail,
        };
        self.client.wire.eval_publishing(script).await
    }

    /// Runs a setter over `keys` with `permits` then the publish command as its arguments.
    async fn publishing<T: FromRedisValue>(
        &self,
        body: &str,
        keys: &[&str],
        permits: impl fmt::Display,
    ) -> RedisResult<T> {
        let script = Publishing {
            body,
            keys,
            head: vec![text_arg(permits)],
            tail: Vec::new(),
        };
        self.client.wire.eval_publishing(script).await
    }
}

impl fmt::Debug for JavaPermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JavaPermitExpirableSemaphore")
            .field("name", &self.name)
            .field("client", &self.client.wire.id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_decode_to_their_raw_bytes() {
        let id = new_request_id();
        let bytes = id_bytes(&id).expect("a generated id is hex");
        assert_eq!(bytes.len(), 16);
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, id);
        assert_eq!(id_bytes("00Ff").expect("hex"), [0x00, 0xff]);
        assert!(id_bytes("abc").is_err());
        assert!(id_bytes("zz").is_err());
    }
}
