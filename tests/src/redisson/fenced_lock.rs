//! The `RFencedLock` (docs/protocol.md §8.2): its scripts, [`JavaClient::get_fenced_lock`] and the
//! [`JavaFencedLock`] object it returns. It is an `RLock` (same hash, channel, unlock, force
//! unlock and renewal) whose every acquisition, re-entry included, counts up a token key.

use std::time::Duration;

use redis::{AsyncCommands, RedisResult};

use super::kind::{JavaObject, ObjectKind, RlockObject};
use super::{Attempt, JavaClient, JavaLock, ThreadId, acquire_calls, base_lock_calls, prefix_name};

// ===== scripts (paraphrased from the numbered steps of docs/protocol.md) =====

/// §8.2, the `RLock` acquire (§2.2) that also counts the token up: KEYS = [lock, token];
/// ARGV = [lease, lockName]. The acquiring branch is left open with the new token in the Lua local
/// `token`; a reply closes it.
const COUNTING_HOLD: &str = r"
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    local token = redis.call('incr', KEYS[2]);
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
";

/// `tryLockInnerAsync` of the token calls (`EVAL_LONG_LIST`): `[-1, token]` when acquired, else
/// `[pttl, -1]`.
const TOKEN_REPLY: &str = r"
    return {-1, token};
end;
return {redis.call('pttl', KEYS[1]), -1};
";

/// The plain calls (`lock`, `tryLock`): nil when acquired, else the PTTL, as the `RLock`'s.
const PLAIN_REPLY: &str = r"
    return nil;
end;
return redis.call('pttl', KEYS[1]);
";

// ===== the client's RFencedLock =====

impl JavaClient {
    /// `redisson.getFencedLock(name)`: a new `RFencedLock` object (with its own
    /// `internalLockLeaseTime`).
    pub fn get_fenced_lock(&self, name: impl Into<String>) -> JavaFencedLock {
        let lock = self.get_lock(name);
        JavaFencedLock {
            token: prefix_name("redisson_lock_token", lock.name()),
            lock,
        }
    }
}

// ===== the kind =====

/// The fenced lock: `RFencedLock` (`getFencedLock`), rlock's `FencedLock`: the `RLock`'s hash,
/// channel and messages.
#[derive(Clone, Copy, Debug)]
pub struct FencedKind;

impl ObjectKind for FencedKind {
    fn interface(&self) -> &'static str {
        "RFencedLock"
    }

    fn described_as(&self) -> &'static str {
        "fenced lock"
    }

    fn java(&self, client: &JavaClient, name: &str) -> JavaObject {
        JavaObject::Fenced(client.get_fenced_lock(name))
    }

    fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject {
        RlockObject::Fenced(client.fenced_lock(name))
    }
}

/// An emulated `RFencedLock` object (§8.2): an `RLock` plus the token key
/// `redisson_lock_token:{N}`, a counter without TTL that every successful acquisition (re-entry
/// included) increments; the plain calls count too. Waiters sleep on the `RLock` channel. Clones
/// share the object.
#[derive(Clone, Debug)]
pub struct JavaFencedLock {
    lock: JavaLock,
    token: String,
}

impl JavaFencedLock {
    base_lock_calls!(lock.object; exists);
    acquire_calls!(lock.object, lock.channel);

    /// The unlock channel this lock's waiters subscribe to: the `RLock`'s.
    pub fn channel(&self) -> &str {
        self.lock.channel()
    }

    /// The token key: `redisson_lock_token:{N}`.
    pub fn token_name(&self) -> &str {
        &self.token
    }

    /// `lockAndGetToken()` on `thread` (§3.3 with the token script): waits without limit; the
    /// watchdog keeps the hold. Returns the token of this acquisition.
    ///
    /// # Errors
    ///
    /// When a script fails, or the subscription is not confirmed within `subscriptionTimeout`.
    pub async fn lock_and_get_token(&self, thread: ThreadId) -> RedisResult<i64> {
        let attempt = || self.acquire_token(thread, None);
        self.lock.object.lock_on(self.channel(), attempt).await
    }

    /// `tryLockAndGetToken(waitTime, leaseTime)` on `thread` (§3.4 with the token script): waits
    /// up to `wait`; `lease` `None` means the watchdog. Returns the token, or `None` (Java's null)
    /// when the lock was not acquired.
    ///
    /// # Errors
    ///
    /// When a script fails.
    pub async fn try_lock_and_get_token(
        &self,
        thread: ThreadId,
        wait: Duration,
        lease: Option<Duration>,
    ) -> RedisResult<Option<i64>> {
        let attempt = || self.acquire_token(thread, lease);
        let object = &self.lock.object;
        object.try_lock_on(self.channel(), wait, attempt).await
    }

    /// `getToken()`: `GET` of the token key, nil → 0.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn get_token(&self) -> RedisResult<i64> {
        let mut conn = self.lock.object.wire().conn.clone();
        let token: Option<i64> = conn.get(&self.token).await?;
        Ok(token.unwrap_or(0))
    }

    /// `unlock()` on `thread`: the `RLock`'s ([`JavaLock::unlock`]).
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn unlock(&self, thread: ThreadId) -> RedisResult<Option<i64>> {
        self.lock.unlock(thread).await
    }

    /// `forceUnlock()`: the `RLock`'s ([`JavaLock::force_unlock`]); the token stays.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn force_unlock(&self) -> RedisResult<bool> {
        self.lock.force_unlock().await
    }

    /// The plain acquire, counting the token up: nil or the PTTL.
    async fn try_acquire(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
    ) -> RedisResult<Attempt<()>> {
        let script = [COUNTING_HOLD, PLAIN_REPLY].concat();
        let keys = [self.name(), self.token.as_str()];
        let object = &self.lock.object;
        object
            .acquire(thread, lease, &script, &keys, &[], Option::into)
            .await
    }

    /// The token acquire: `[-1, token]` or `[pttl, -1]`. Like Java, it looks at the first element
    /// only, so a contended lock without TTL (PTTL -1) reads as acquired with token -1 (§8.2).
    async fn acquire_token(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
    ) -> RedisResult<Attempt<i64>> {
        let script = [COUNTING_HOLD, TOKEN_REPLY].concat();
        let keys = [self.name(), self.token.as_str()];
        let read = |(ttl, token): (i64, i64)| {
            if ttl == -1 {
                Attempt::Acquired(token)
            } else {
                Attempt::Busy(ttl)
            }
        };
        let object = &self.lock.object;
        object
            .acquire(thread, lease, &script, &keys, &[], read)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedisServer;
    use crate::harness::raw;
    use crate::redisson::RedissonVersion;
    use crate::redisson::testing::{Listener, finished, java, two_javas};

    /// Every acquisition counts the token up, re-entries and plain calls included; the token key
    /// never expires; a contended token call returns nothing (§8.2).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tokens_increase_with_every_acquisition() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        let (a, b) = two_javas(&server).await;
        let (lock, other) = (a.get_fenced_lock("fenced"), b.get_fenced_lock("fenced"));
        assert_eq!(lock.token_name(), "redisson_lock_token:{fenced}");
        assert_eq!(lock.channel(), "redisson_lock__channel:{fenced}");
        assert_eq!(lock.get_token().await.expect("GET"), 0);

        assert_eq!(lock.lock_and_get_token(1).await.expect("token"), 1);
        assert_eq!(lock.lock_and_get_token(1).await.expect("token"), 2);
        lock.lock(1).await.expect("lock");
        assert_eq!(lock.get_token().await.expect("GET"), 3);
        assert!(lock.try_lock(1).await.expect("tryLock()"));
        let wait = Duration::from_millis(50);
        let lease = Some(Duration::from_secs(10));
        assert!(
            lock.try_lock_for(1, wait, lease)
                .await
                .expect("tryLock(wait)")
        );
        assert_eq!(lock.get_token().await.expect("GET"), 5);
        assert_eq!(lock.hold_count(1).await.expect("HGET"), 5);
        let token_ttl: i64 = redis.pttl(lock.token_name()).await.expect("PTTL");
        assert_eq!(token_ttl, -1);

        assert_eq!(
            other
                .try_lock_and_get_token(2, wait, None)
                .await
                .expect("token"),
            None
        );
        assert!(!other.try_lock(2).await.expect("tryLock()"));
        assert_eq!(
            other.get_token().await.expect("GET"),
            5,
            "failed tries count nothing"
        );
        for _ in 0..4 {
            assert_eq!(lock.unlock(1).await.expect("unlock"), Some(0));
        }
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
        let token = other
            .try_lock_and_get_token(2, wait, None)
            .await
            .expect("token");
        assert_eq!(token, Some(6));
        assert!(other.force_unlock().await.expect("forceUnlock"));
        assert_eq!(
            other.get_token().await.expect("GET"),
            6,
            "the token outlives the lock"
        );
    }

    /// A token waiter sleeps on the `RLock` channel and is woken by the unlock's `0`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_waiter_is_woken_by_the_unlock() {
        let server = RedisServer::start();
        let java = java(&server, RedissonVersion::V4).await;
        let lock = java.get_fenced_lock("fenced:wake");
        assert_eq!(lock.lock_and_get_token(1).await.expect("token"), 1);
        let mut listener = Listener::start(&server).await;
        let waiter = tokio::spawn({
            let lock = lock.clone();
            async move {
                let wait = Duration::from_secs(20);
                lock.try_lock_and_get_token(2, wait, None).await
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
        assert_eq!(
            listener.next().await,
            (lock.channel().to_owned(), "0".into())
        );
        assert_eq!(finished(waiter).await.expect("token"), Some(2));
    }
}
