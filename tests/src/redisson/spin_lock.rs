//! The spin lock (`RedissonSpinLock`, docs/protocol.md §8.1): its scripts,
//! [`JavaClient::get_spin_lock`] and the [`JavaSpinLock`] object it returns. It holds like the
//! `RLock` (renewed alike, §4), but has no channel: waiters poll with an exponential back-off, and
//! unlocks publish nothing.

use std::time::Duration;

use redis::{AsyncCommands, RedisResult};
use tokio::time::Instant;

use super::kind::{JavaObject, ObjectKind, Polling, RlockObject};
use super::lock::{ACQUIRE_TWO_BLOCKS, UNLOCK_DECREMENT};
use super::{Attempt, Hold, JavaClient, LockObject, ThreadId, acquire_calls, base_lock_calls};

/// §8.1 (run by `Wire::release`): KEYS = [lock]; ARGV = [lease, lockName]. The `RLock`'s unlock
/// without the publish: nil when not the owner; 0 still held; 1 released.
const UNLOCK_LOCALS: &str = r"
local lock, owner, lease = KEYS[1], ARGV[2], ARGV[1];
";
const UNLOCK_RELEASE: &str = r"
redis.call('del', lock);
latched(1);
return 1;
";

/// `LockOptions.ExponentialBackOff` with its defaults (§8.1): the first delay is 1 ms; each next
/// one is `min(128, previous * 2 + rand[0, fails))` ms, `fails` counting the delays computed.
#[derive(Debug)]
struct ExponentialBackOff {
    next_ms: u64,
    fails: u64,
}

impl ExponentialBackOff {
    const INITIAL_MS: u64 = 1;
    const MAX_MS: u64 = 128;
    const MULTIPLIER: u64 = 2;

    fn new() -> Self {
        Self {
            next_ms: Self::INITIAL_MS,
            fails: 0,
        }
    }

    /// `getNextSleepPeriod()`.
    fn next_delay(&mut self) -> Duration {
        let delay = self.next_ms;
        self.fails += 1;
        let grown = delay * Self::MULTIPLIER + fastrand::u64(0..self.fails);
        self.next_ms = grown.min(Self::MAX_MS);
        Duration::from_millis(delay)
    }
}

impl JavaClient {
    /// `redisson.getSpinLock(name)`: a new spin lock object (default back-off, its own
    /// `internalLockLeaseTime`).
    pub fn get_spin_lock(&self, name: impl Into<String>) -> JavaSpinLock {
        JavaSpinLock {
            object: LockObject::new(self, name.into(), Hold::Lock),
        }
    }
}

// ===== the kind =====

/// The spin lock: `RSpinLock` (`getSpinLock`), rlock's `SpinLock`. Its waiters poll, and its
/// unlocks publish nothing.
#[derive(Clone, Copy, Debug)]
pub struct SpinKind;

impl ObjectKind for SpinKind {
    fn interface(&self) -> &'static str {
        "RSpinLock"
    }

    fn described_as(&self) -> &'static str {
        "spin lock"
    }

    fn channel(&self, _name: &str, _owner: &str) -> Option<String> {
        None
    }

    /// Both sides' default back-off (§8.1) doubles from 1 ms up to its cap: 1, 2, 4, … 128 ms.
    fn polling(&self) -> Option<Polling> {
        Some(Polling {
            max_delay: Duration::from_millis(ExponentialBackOff::MAX_MS),
            tries_to_max_delay: u64::from(ExponentialBackOff::MAX_MS.ilog2()) + 1,
        })
    }

    fn release_message(&self, _name: &str) -> Option<(String, &'static str)> {
        None
    }

    fn java(&self, client: &JavaClient, name: &str) -> JavaObject {
        JavaObject::Spin(client.get_spin_lock(name))
    }

    fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject {
        RlockObject::Spin(client.spin_lock(name))
    }
}

/// An emulated spin lock object (§8.1): the `RLock`'s hash, acquired with the two-block script;
/// waiting is polling with `ExponentialBackOff`, a `try_lock_for` sleeping each delay in full even
/// past its wait. Unlocks publish nothing. Clones share the object.
#[derive(Clone, Debug)]
pub struct JavaSpinLock {
    object: LockObject,
}

impl JavaSpinLock {
    base_lock_calls!(object; exists);
    acquire_calls!();

    /// `unlock()` on `thread` (§8.1), with the client side of §2.3: the `RLock`'s unlock without
    /// a channel, so nobody is woken. Returns `Some(1)` released, `Some(0)` still held, `None` not
    /// the owner.
    ///
    /// # Errors
    ///
    /// When the script fails.
    pub async fn unlock(&self, thread: ThreadId) -> RedisResult<Option<i64>> {
        let attempt = |id: String| async move { self.unlock_attempt(thread, &id).await };
        self.object.unlock(thread, attempt).await
    }

    /// `forceUnlock()` (§8.1): stops renewal and sends `DEL N`. Returns whether the lock existed.
    ///
    /// # Errors
    ///
    /// When Redis fails.
    pub async fn force_unlock(&self) -> RedisResult<bool> {
        let object = &self.object;
        let delete = async { object.wire().conn.clone().del(&object.name).await };
        object.force_unlock(delete).await
    }

    /// `lock(leaseTime)`: try, then sleep the next back-off delay and try again until acquired.
    async fn lock_inner(&self, thread: ThreadId, lease: Option<Duration>) -> RedisResult<()> {
        let mut back_off = ExponentialBackOff::new();
        while let Attempt::Busy(_) = self.try_acquire(thread, lease).await? {
            tokio::time::sleep(back_off.next_delay()).await;
        }
        Ok(())
    }

    /// `tryLock()`: one attempt.
    async fn try_lock_once(&self, thread: ThreadId) -> RedisResult<bool> {
        Ok(self.try_acquire(thread, None).await?.is_acquired())
    }

    /// `tryLock(waitTime, leaseTime)`: tries, then while time is left sleeps the next back-off
    /// delay (in full, even past the wait) and tries again.
    async fn try_lock_inner(
        &self,
        thread: ThreadId,
        wait: Duration,
        lease: Option<Duration>,
    ) -> RedisResult<bool> {
        let deadline = Instant::now() + wait;
        let mut back_off = ExponentialBackOff::new();
        loop {
            if let Attempt::Acquired(()) = self.try_acquire(thread, lease).await? {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(back_off.next_delay()).await;
        }
    }

    /// One acquire with the `RLock`'s two-block script (§2.2).
    async fn try_acquire(
        &self,
        thread: ThreadId,
        lease: Option<Duration>,
    ) -> RedisResult<Attempt<()>> {
        self.object
            .acquire_own(thread, lease, ACQUIRE_TWO_BLOCKS, &[])
            .await
    }

    /// One unlock script call under `request_id`.
    async fn unlock_attempt(&self, thread: ThreadId, request_id: &str) -> RedisResult<Option<i64>> {
        let object = &self.object;
        let body = [UNLOCK_LOCALS, UNLOCK_DECREMENT, UNLOCK_RELEASE].concat();
        let lease = object.internal_lease_ms().to_string();
        let args = vec![lease, object.field(thread)];
        object
            .unlock_script(request_id, &body, &[&object.name], args, false)
            .await
    }
}

#[cfg(test)]
mod tests {
    use redis::AsyncCommands;

    use super::*;
    use crate::RedisServer;
    use crate::harness::raw;
    use crate::redisson::RedissonVersion;
    use crate::redisson::testing::{Listener, finished, java, two_javas};

    #[test]
    fn the_back_off_doubles_up_to_its_cap() {
        let mut back_off = ExponentialBackOff::new();
        let delays: Vec<u64> = (0..12)
            .map(|_| back_off.next_delay().as_millis().try_into().expect("ms"))
            .collect();
        assert_eq!(delays[..2], [1, 2]);
        for pair in delays.windows(2) {
            assert!(pair[1] >= (pair[0] * 2).min(128), "{delays:?}");
            assert!(pair[1] <= 128, "{delays:?}");
        }
        assert_eq!(delays[11], 128, "{delays:?}");
    }

    /// Spin unlocks publish nothing (no channel), but keep the latch (§8.1); force unlock is a
    /// plain `DEL`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unlocks_publish_nothing() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        for version in [RedissonVersion::V3_23, RedissonVersion::V4] {
            let java = java(&server, version).await;
            let lock = java.get_spin_lock("spin:quiet");
            let mut listener = Listener::start(&server).await;
            lock.lock(1).await.expect("lock");
            lock.lock(1).await.expect("lock again");
            let field: Option<u64> = redis
                .hget(lock.name(), lock.lock_name(1))
                .await
                .expect("HGET");
            assert_eq!(field, Some(2));
            assert_eq!(lock.unlock(2).await.expect("unlock"), None);
            assert_eq!(lock.unlock(1).await.expect("unlock"), Some(0));
            assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
            listener.assert_quiet().await;
            assert!(!lock.is_locked().await.expect("EXISTS"));

            lock.lock(1).await.expect("lock");
            assert!(lock.force_unlock().await.expect("forceUnlock"));
            assert!(!lock.force_unlock().await.expect("forceUnlock"));
            listener.assert_quiet().await;
        }
    }

    /// A waiter polls, so it takes the lock within one back-off delay of the unlock, without any
    /// message; a `tryLock(wait)` gives up when the wait is over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_poll_until_the_lock_is_free() {
        let server = RedisServer::start();
        let (a, b) = two_javas(&server).await;
        let (lock, other) = (a.get_spin_lock("spin:poll"), b.get_spin_lock("spin:poll"));
        lock.lock(1).await.expect("lock");
        let started = Instant::now();
        let wait = Duration::from_millis(100);
        assert!(
            !other
                .try_lock_for(2, wait, None)
                .await
                .expect("tryLock(wait)")
        );
        assert!(started.elapsed() >= wait);

        let waiter = tokio::spawn({
            let other = other.clone();
            async move { other.lock(2).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
        let released = Instant::now();
        finished(waiter).await.expect("the waiter acquires");
        assert!(
            released.elapsed() < Duration::from_millis(500),
            "{:?}",
            released.elapsed()
        );
        assert!(other.is_held_by_thread(2).await.expect("HEXISTS"));
    }
}
