//! The semaphore (`RSemaphore`, docs/protocol.md §8.5): its scripts, [`JavaClient::get_semaphore`]
//! and the [`JavaSemaphore`] object it returns. Key `N` is a string integer of available permits;
//! every call that adds permits publishes the new count on `redisson_sc:{N}`, and the client's
//! waiters share its entry of the name (`SemaphorePubSub`: `n` wakes `min(subscribers, n)`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncCommands, RedisResult};

use super::{
    Attempt, ClientInner, JavaClient, MessageRule, Publishing, millis, semaphore_channel, text_arg,
};

// ===== scripts (paraphrased from the table of docs/protocol.md §8.5) =====

/// `tryAcquire(p)`: KEYS = [N]; ARGV = [p]. Takes `p` permits if that many are there: 1, else 0.
const TRY_ACQUIRE: &str = r"
local available = redis.call('get', KEYS[1]);
if (available ~= false) and (tonumber(available) >= tonumber(ARGV[1])) then
    redis.call('decrby', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
";

/// `release(p)` (run by `Wire::eval_publishing`): KEYS = [N, channel]; argv = [p, publish
/// command]. Adds `p` (creating the key if missing) and publishes the new value.
const RELEASE: &str = r"
local value = redis.call('incrby', KEYS[1], argv[1]);
publish(KEYS[2], value);
";

/// `releaseIfExists(p)`: as `RELEASE` when the key exists (1); else nothing (0).
const RELEASE_IF_EXISTS: &str = r"
if (redis.call('exists', KEYS[1]) == 0) then
    return 0;
end;
local value = redis.call('incrby', KEYS[1], argv[1]);
publish(KEYS[2], value);
return 1;
";

/// `trySetPermits(p)` (also the permit-expirable semaphore's, §8.6): KEYS = [N, channel];
/// argv = [p, publish command]. Sets and publishes `p` when the key is missing (1); else 0.
pub(super) const TRY_SET_PERMITS: &str = r"
if (redis.call('get', KEYS[1]) == false) then
    redis.call('set', KEYS[1], argv[1]);
    publish(KEYS[2], argv[1]);
    return 1;
end;
return 0;
";

/// `trySetPermits(p, ttl)`: KEYS = [N, channel]; argv = [p, ttl ms, publish command]. As
/// `TRY_SET_PERMITS`, the key expiring after `ttl`.
const TRY_SET_PERMITS_WITH_TTL: &str = r"
if (redis.call('get', KEYS[1]) == false) then
    redis.call('set', KEYS[1], argv[1], 'px', argv[2]);
    publish(KEYS[2], argv[1]);
    return 1;
end;
return 0;
";

/// `addPermits(p)`: KEYS = [N, channel]; argv = [p, publish command]. Sets `(GET or 0) + p` (a
/// Lua number, written without a decimal point, §11.15) and publishes it; `p` may be negative.
const ADD_PERMITS: &str = r"
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
value = tonumber(value) + tonumber(argv[1]);
redis.call('set', KEYS[1], value);
publish(KEYS[2], value);
";

/// `drainPermits()`: KEYS = [N]. Sets 0 and returns what was there (0 when missing).
const DRAIN_PERMITS: &str = r"
local value = redis.call('get', KEYS[1]);
if (value == false) then
    return 0;
end;
redis.call('set', KEYS[1], 0);
return tonumber(value);
";

// ===== the client's RSemaphore =====

impl JavaClient {
    /// `redisson.getSemaphore(name)`: a new `RSemaphore` object.
    pub fn get_semaphore(&self, name: impl Into<String>) -> JavaSemaphore {
        let name = name.into();
        JavaSemaphore {
            client: self.inner.clone(),
            channel: semaphore_channel(&name),
            name,
        }
    }
}

/// An emulated `RSemaphore` object (§8.5): the count of available permits in key `N`. Waiters
/// share the client's entry of the raw name (the entry name is `N` itself) and sleep on its latch,
/// which a message `n` on `redisson_sc:{N}` releases `min(subscribers, n)` times. Permit counts
/// are unsigned where Java throws `IllegalArgumentException` on negative ones. Clones share the
/// object.
#[derive(Clone)]
pub struct JavaSemaphore {
    client: Arc<ClientInner>,
    name: String,
    channel: String,
}

impl JavaSemaphore {
    /// The semaphore name (also its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel the releases publish on and the waiters subscribe to: `redisson_sc:{N}`.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// `trySetPermits(permits)`: sets the count (and publishes it) only when the key is missing.
    /// Returns whether it did.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn try_set_permits(&self, permits: u32) -> RedisResult<bool> {
        let flag: i64 = self
            .publishing(TRY_SET_PERMITS, vec![text_arg(permits)])
            .await?;
        Ok(flag == 1)
    }

    /// `trySetPermits(permits, ttl)`: as [`JavaSemaphore::try_set_permits`], with `SET … PX ttl`.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> RedisResult<bool> {
        let head = vec![text_arg(permits), text_arg(millis(ttl))];
        let flag: i64 = self.publishing(TRY_SET_PERMITS_WITH_TTL, head).await?;
        Ok(flag == 1)
    }

    /// `acquire(permits)`: tries; then subscribes and loops { try; sleep on the entry's latch
    /// without limit }. A missed message stalls it until the next release (§8.5).
    ///
    /// # Errors
    ///
    /// When a script fails, or the subscription is not confirmed within `subscriptionTimeout`.
    pub async fn acquire(&self, permits: u32) -> RedisResult<()> {
        let attempt = || self.attempt(permits);
        let rule = MessageRule::Semaphore;
        let waiting = self
            .client
            .acquire_waiting(&self.name, &self.channel, rule, attempt);
        waiting.await
    }

    /// `tryAcquire(permits)`: one attempt; 0 permits succeed without a call. Returns whether the
    /// permits were taken.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn try_acquire(&self, permits: u32) -> RedisResult<bool> {
        Ok(self.attempt(permits).await?.is_acquired())
    }

    /// `tryAcquire(permits, waitTime)`: as [`JavaSemaphore::acquire`], but subscribing and every
    /// sleep are bounded by what is left of `wait`. Returns whether the permits were taken.
    ///
    /// # Errors
    ///
    /// When a script fails.
    pub async fn try_acquire_for(&self, permits: u32, wait: Duration) -> RedisResult<bool> {
        let attempt = || self.attempt(permits);
        let rule = MessageRule::Semaphore;
        let client = &self.client;
        let waiting = client.try_acquire_waiting(&self.name, &self.channel, rule, wait, attempt);
        Ok(waiting.await?.is_some())
    }

    /// `release(permits)`: adds the permits (creating the key if missing) and publishes the new
    /// count. 0 permits make no call.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn release(&self, permits: u32) -> RedisResult<()> {
        if permits == 0 {
            return Ok(());
        }
        self.publishing(RELEASE, vec![text_arg(permits)]).await
    }

    /// `releaseIfExists(permits)` (4.x): as [`JavaSemaphore::release`] when the key exists.
    /// Returns whether it did.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn release_if_exists(&self, permits: u32) -> RedisResult<bool> {
        let flag: i64 = self
            .publishing(RELEASE_IF_EXISTS, vec![text_arg(permits)])
            .await?;
        Ok(flag == 1)
    }

    /// `addPermits(permits)`: adds to the count (a missing key counting 0; `permits` may be
    /// negative) and publishes the new count.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn add_permits(&self, permits: i64) -> RedisResult<()> {
        self.publishing(ADD_PERMITS, vec![text_arg(permits)]).await
    }

    /// `drainPermits()`: takes every available permit (the count becomes 0, without a message).
    /// Returns how many there were (0 when the key is missing).
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn drain_permits(&self) -> RedisResult<i64> {
        let keys = [self.name.as_str()];
        let no_args: [String; 0] = [];
        self.client.wire.eval(DRAIN_PERMITS, &keys, &no_args).await
    }

    /// `availablePermits()`: `GET N`, nil → 0.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn available_permits(&self) -> RedisResult<i64> {
        let available: Option<i64> = self.client.wire.conn.clone().get(&self.name).await?;
        Ok(available.unwrap_or(0))
    }

    /// One `tryAcquire(permits)`: acquired, or busy until a message (there is no ttl to bound the
    /// sleep).
    async fn attempt(&self, permits: u32) -> RedisResult<Attempt<()>> {
        if permits == 0 {
            return Ok(Attempt::Acquired(()));
        }
        let keys = [self.name.as_str()];
        let args = [permits.to_string()];
        let taken: i64 = self.client.wire.eval(TRY_ACQUIRE, &keys, &args).await?;
        Ok(if taken == 1 {
            Attempt::Acquired(())
        } else {
            Attempt::Busy(-1)
        })
    }

    /// Runs a publishing script over KEYS = [N, channel] with `head` then the publish command as
    /// its arguments.
    async fn publishing<T: redis::FromRedisValue>(
        &self,
        body: &str,
        head: Vec<Vec<u8>>,
    ) -> RedisResult<T> {
        let keys = [self.name.as_str(), &self.channel];
        let script = Publishing {
            body,
            keys: &keys,
            head,
            tail: Vec::new(),
        };
        self.client.wire.eval_publishing(script).await
    }
}

impl fmt::Debug for JavaSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JavaSemaphore")
            .field("name", &self.name)
            .field("client", &self.client.wire.id)
            .finish_non_exhaustive()
    }
}
