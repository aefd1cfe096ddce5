//! The count-down latch (`RCountDownLatch`, docs/protocol.md §8.7): its scripts,
//! [`JavaClient::get_count_down_latch`] and the [`JavaCountDownLatch`] object it returns. Key `N`
//! is a string integer count, deleted when it reaches zero; the channel
//! `redisson_countdownlatch__channel__{N}` carries `1` (a count was set or the latch deleted:
//! close) and `0` (zero reached: open) to the waiters' reclosable local latch.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncCommands, RedisResult};
use tokio::time::Instant;

use super::{ClientInner, JavaClient, MessageRule, Publishing, count_down_latch_channel, text_arg};

/// `NEW_COUNT_MESSAGE`: closes the waiters' latch.
const NEW_COUNT_MESSAGE: u8 = 1;

/// `ZERO_COUNT_MESSAGE`: opens the waiters' latch.
const ZERO_COUNT_MESSAGE: u8 = 0;

// ===== scripts (paraphrased from the table of docs/protocol.md §8.7) =====

/// `trySetCount(c)` (run by `Wire::eval_publishing`): KEYS = [N, channel]; argv = [1, c,
/// publish command]. When the key is missing, sets it to `c` and publishes `1`: 1; else 0.
const TRY_SET_COUNT: &str = r"
if (redis.call('exists', KEYS[1]) == 0) then
    redis.call('set', KEYS[1], argv[2]);
    publish(KEYS[2], argv[1]);
    return 1;
end;
return 0;
";

/// `countDown()`: KEYS = [N, channel]; argv = [0, publish command]. Decrements; at or below zero
/// deletes the key (a missing one becomes -1, silently); at exactly zero publishes `0`.
const COUNT_DOWN: &str = r"
local value = redis.call('decr', KEYS[1]);
if (value <= 0) then
    redis.call('del', KEYS[1]);
end;
if (value == 0) then
    publish(KEYS[2], argv[1]);
end;
";

/// `delete()`: KEYS = [N, channel]; argv = [1, publish command]. When a key was deleted,
/// publishes `1`: 1; else 0.
const DELETE: &str = r"
if (redis.call('del', KEYS[1]) == 1) then
    publish(KEYS[2], argv[1]);
    return 1;
end;
return 0;
";

// ===== the client's RCountDownLatch =====

impl JavaClient {
    /// `redisson.getCountDownLatch(name)`: a new `RCountDownLatch` object.
    pub fn get_count_down_latch(&self, name: impl Into<String>) -> JavaCountDownLatch {
        let name = name.into();
        JavaCountDownLatch {
            client: self.inner.clone(),
            channel: count_down_latch_channel(&name),
            name,
        }
    }
}

/// An emulated `RCountDownLatch` object (§8.7). Its writes are plain scripts (no `WAIT`, §5.1).
/// Waiters share the client's entry `<uuid><N>` (no separator) and its reclosable latch, which is
/// closed when the entry is created, opened by `0` and closed by `1`; they re-read the count each
/// time it lets them through. Clones share the object.
#[derive(Clone)]
pub struct JavaCountDownLatch {
    client: Arc<ClientInner>,
    name: String,
    channel: String,
}

impl JavaCountDownLatch {
    /// The latch name (also its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel: `redisson_countdownlatch__channel__{N}`, braces always added.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// `trySetCount(count)`: when the latch does not exist, sets its count and publishes `1`.
    /// Returns whether it did.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn try_set_count(&self, count: u64) -> RedisResult<bool> {
        let head = vec![text_arg(NEW_COUNT_MESSAGE), text_arg(count)];
        let set: i64 = self.publishing(TRY_SET_COUNT, head).await?;
        Ok(set == 1)
    }

    /// `countDown()`: decrements the count; the key goes at zero (publishing `0`) or below.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn count_down(&self) -> RedisResult<()> {
        let head = vec![text_arg(ZERO_COUNT_MESSAGE)];
        self.publishing(COUNT_DOWN, head).await
    }

    /// `getCount()`: `GET N`, nil → 0.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn count(&self) -> RedisResult<i64> {
        let count: Option<i64> = self.client.wire.conn.clone().get(&self.name).await?;
        Ok(count.unwrap_or(0))
    }

    /// `delete()`: deletes the latch, publishing `1` when it existed. Returns whether it did.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn delete(&self) -> RedisResult<bool> {
        let head = vec![text_arg(NEW_COUNT_MESSAGE)];
        let deleted: i64 = self.publishing(DELETE, head).await?;
        Ok(deleted == 1)
    }

    /// `await()`: returns at once when the count is 0; else subscribes (within
    /// `subscriptionTimeout`) and loops `while getCount() > 0: latch.await()` without limit.
    ///
    /// # Errors
    ///
    /// When Redis fails, or the subscription is not confirmed within `subscriptionTimeout`.
    pub async fn await_zero(&self) -> RedisResult<()> {
        if self.count().await? == 0 {
            return Ok(());
        }
        let (entry_name, rule) = (self.entry_name(), MessageRule::CountDownLatch);
        let entry = self
            .client
            .subscribe_in_time(&entry_name, &self.channel, rule)
            .await?;
        let result = async {
            while self.count().await? > 0 {
                entry.state.gate.wait(None).await;
            }
            Ok(())
        }
        .await;
        self.client.unsubscribe(&entry_name, rule).await;
        result
    }

    /// `await(timeout)`: as [`JavaCountDownLatch::await_zero`], but subscribing and every sleep
    /// are bounded by what is left of `timeout`. Returns whether the count reached 0 in time.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn await_for(&self, timeout: Duration) -> RedisResult<bool> {
        let deadline = Instant::now() + timeout;
        if self.count().await? == 0 {
            return Ok(true);
        }
        let (entry_name, rule) = (self.entry_name(), MessageRule::CountDownLatch);
        let subscribe = self.client.subscribe(&entry_name, &self.channel, rule);
        let remaining = deadline.saturating_duration_since(Instant::now());
        let entry = match tokio::time::timeout(remaining, subscribe).await {
            Err(_) => return Ok(false),
            Ok(entry) => entry?,
        };
        let result = async {
            while self.count().await? > 0 {
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Ok(false);
                }
                entry.state.gate.wait(Some(remaining)).await;
            }
            Ok(true)
        }
        .await;
        self.client.unsubscribe(&entry_name, rule).await;
        result
    }

    /// The local entry its waiters share: `<uuid><N>`, with no separator (§8.7).
    fn entry_name(&self) -> String {
        format!("{}{}", self.client.wire.id, self.name)
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

impl fmt::Debug for JavaCountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JavaCountDownLatch")
            .field("name", &self.name)
            .field("client", &self.client.wire.id)
            .finish_non_exhaustive()
    }
}
