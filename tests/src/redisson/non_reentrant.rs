//! Redisson 4.4+'s non-reentrant locks (docs/protocol.md §8.8, §6.9):
//! [`JavaClient::get_non_reentrant_lock`] and [`JavaClient::get_non_reentrant_fair_lock`], the
//! [`JavaNonReentrantLock`] and [`JavaNonReentrantFairLock`] objects they return, and the
//! [`JavaError`] their acquisitions throw.
//!
//! Each is its reentrant twin (the `RLock`, the fair lock) with other acquire scripts: where the
//! twin re-enters, they reply the error `NON_REENTRANT_REACQUIRE`, which Java turns into an
//! `IllegalMonitorStateException` from `lock()` and from every `tryLock` form. Everything else (the
//! hash, the channels, the queue, unlock, force unlock, give-up, the watchdog) is the twin's: the
//! objects dereference to it.

use std::fmt;
use std::ops::Deref;

use redis::RedisError;

use super::fair_lock::{FairKind, Reentry};
use super::kind::{JavaObject, ObjectKind, RlockObject};
use super::lock::{Acquire, ReentrantKind};
use super::{JavaClient, JavaFairLock, JavaLock};

/// The error reply of a refused re-entry, the acquire scripts' last argument (§6.9, §8.8).
pub const REACQUIRE: &str = "NON_REENTRANT_REACQUIRE";

// ===== scripts (paraphrased from docs/protocol.md) =====

/// §8.8: KEYS = [lock]; ARGV = [lease, lockName, refusal]. A missing hash is taken (nil); the
/// holder's own field gets the refusal as an error reply, nothing written; else the PTTL.
const LOCK_ACQUIRE: &str = r"
if (redis.call('exists', KEYS[1]) == 0) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    return redis.error_reply(ARGV[3]);
end;
return redis.call('pttl', KEYS[1]);
";

/// §6.9, in both fair acquire forms where the fair lock re-enters (over the Lua local `owner`):
/// the holder's own field gets the refusal (`ARGV[5]` of both forms) as an error reply, before
/// the enqueue step, so it never queues.
const FAIR_REFUSE: &str = r"
if (redis.call('hexists', KEYS[1], owner) == 1) then
    return redis.error_reply(ARGV[5]);
end;
";

/// The non-reentrant lock's acquire, for every version that has it.
const LOCK_REFUSES: Acquire = Acquire {
    script: |_| LOCK_ACQUIRE,
    extra: &[REACQUIRE],
};

/// The non-reentrant fair lock's step 3.
const FAIR_REFUSES: Reentry = Reentry {
    lua: FAIR_REFUSE,
    extra: &[REACQUIRE],
};

// ===== the error =====

/// What an acquisition of a non-reentrant lock throws.
#[derive(Debug)]
pub enum JavaError {
    /// `IllegalMonitorStateException`: the acquire script refused a re-entry (its error reply,
    /// kept here, contains [`REACQUIRE`]). Nothing changed in Redis.
    IllegalMonitorState(RedisError),
    /// Any other failure (Java's `RedisException` and friends).
    Redis(RedisError),
}

impl From<RedisError> for JavaError {
    /// Java's rule: an error reply that contains [`REACQUIRE`] is the refusal.
    fn from(error: RedisError) -> Self {
        if error.to_string().contains(REACQUIRE) {
            Self::IllegalMonitorState(error)
        } else {
            Self::Redis(error)
        }
    }
}

impl fmt::Display for JavaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::IllegalMonitorState(error) => write!(f, "IllegalMonitorStateException: {error}"),
            Self::Redis(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for JavaError {}

/// The result of an acquisition of a non-reentrant lock.
pub type JavaResult<T> = Result<T, JavaError>;

// ===== the client's factories =====

impl JavaClient {
    /// `redisson.getNonReentrantLock(name)` (4.4+, §8.8): a new `RNonReentrantLock` object.
    ///
    /// # Panics
    ///
    /// When the emulated version predates the class.
    pub fn get_non_reentrant_lock(&self, name: impl Into<String>) -> JavaNonReentrantLock {
        self.assert_has_non_reentrant_locks();
        JavaNonReentrantLock {
            twin: self.lock_with(name.into(), LOCK_REFUSES),
        }
    }

    /// `redisson.getNonReentrantFairLock(name)` (4.4+, §6.9): a new `RNonReentrantFairLock`
    /// object.
    ///
    /// # Panics
    ///
    /// When the emulated version predates the class.
    pub fn get_non_reentrant_fair_lock(&self, name: impl Into<String>) -> JavaNonReentrantFairLock {
        self.assert_has_non_reentrant_locks();
        JavaNonReentrantFairLock {
            twin: self.fair_lock_with(name.into(), FAIR_REFUSES),
        }
    }

    fn assert_has_non_reentrant_locks(&self) {
        let version = self.version();
        assert!(
            version.has_non_reentrant_locks(),
            "Redisson {version:?} has no non-reentrant locks (4.4+)"
        );
    }
}

// ===== the objects =====

/// The acquisition calls of a non-reentrant object: its twin's, with the refusal thrown as
/// [`JavaError::IllegalMonitorState`] (`tryLock()` throws too, rather than returning false).
macro_rules! refusing_acquire_calls {
    () => {
        /// `lock()` on `thread`: waits without limit; the watchdog keeps the hold.
        ///
        /// # Errors
        ///
        /// [`JavaError::IllegalMonitorState`] when `thread` holds the lock already; else as the
        /// twin's.
        pub async fn lock(&self, thread: super::ThreadId) -> JavaResult<()> {
            Ok(self.twin.lock(thread).await?)
        }

        /// `lock(leaseTime)` on `thread`: waits without limit; the hold expires after `lease`.
        ///
        /// # Errors
        ///
        /// As `lock`.
        pub async fn lock_with_lease(
            &self,
            thread: super::ThreadId,
            lease: std::time::Duration,
        ) -> JavaResult<()> {
            Ok(self.twin.lock_with_lease(thread, lease).await?)
        }

        /// `tryLock()` on `thread`: one attempt; watchdog lease if acquired.
        ///
        /// # Errors
        ///
        /// As `lock`.
        pub async fn try_lock(&self, thread: super::ThreadId) -> JavaResult<bool> {
            Ok(self.twin.try_lock(thread).await?)
        }

        /// `tryLock(waitTime, leaseTime)` on `thread`: waits up to `wait`; `lease` `None` means the
        /// watchdog. Returns whether the lock was acquired.
        ///
        /// # Errors
        ///
        /// As `lock`.
        pub async fn try_lock_for(
            &self,
            thread: super::ThreadId,
            wait: std::time::Duration,
            lease: Option<std::time::Duration>,
        ) -> JavaResult<bool> {
            Ok(self.twin.try_lock_for(thread, wait, lease).await?)
        }
    };
}

// ===== the kinds =====

/// The non-reentrant lock (Redisson 4.4+): `RNonReentrantLock` (`getNonReentrantLock`), rlock's
/// `NonReentrantLock`. The reentrant lock's hash and channel; a re-entry is refused.
#[derive(Clone, Copy, Debug)]
pub struct NonReentrantKind;

impl ObjectKind for NonReentrantKind {
    fn interface(&self) -> &'static str {
        "RNonReentrantLock"
    }

    fn described_as(&self) -> &'static str {
        "non-reentrant lock"
    }

    fn twin(&self) -> Option<&'static dyn ObjectKind> {
        Some(&ReentrantKind)
    }

    fn java(&self, client: &JavaClient, name: &str) -> JavaObject {
        JavaObject::NonReentrant(client.get_non_reentrant_lock(name))
    }

    fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject {
        RlockObject::NonReentrant(client.non_reentrant_lock(name))
    }
}

/// The non-reentrant fair lock (4.4+): `RNonReentrantFairLock` (`getNonReentrantFairLock`),
/// rlock's `NonReentrantFairLock`. The fair lock's hash and queue; a re-entry is refused.
#[derive(Clone, Copy, Debug)]
pub struct NonReentrantFairKind;

impl ObjectKind for NonReentrantFairKind {
    fn interface(&self) -> &'static str {
        "RNonReentrantFairLock"
    }

    fn described_as(&self) -> &'static str {
        "non-reentrant fair lock"
    }

    fn twin(&self) -> Option<&'static dyn ObjectKind> {
        Some(&FairKind)
    }

    fn java(&self, client: &JavaClient, name: &str) -> JavaObject {
        JavaObject::NonReentrantFair(client.get_non_reentrant_fair_lock(name))
    }

    fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject {
        RlockObject::NonReentrantFair(client.non_reentrant_fair_lock(name))
    }
}

/// An emulated `RNonReentrantLock` object (§8.8): an `RLock` (which it dereferences to: the same
/// hash, channel, unlock, force unlock and watchdog) whose acquisitions refuse a re-entry.
#[derive(Clone, Debug)]
pub struct JavaNonReentrantLock {
    twin: JavaLock,
}

impl JavaNonReentrantLock {
    refusing_acquire_calls!();
}

impl Deref for JavaNonReentrantLock {
    type Target = JavaLock;

    fn deref(&self) -> &JavaLock {
        &self.twin
    }
}

/// An emulated `RNonReentrantFairLock` object (§6.9): a fair lock (which it dereferences to: the
/// same hash, queue, deadlines, channels, unlock, force unlock and give-up) whose acquisitions
/// refuse a re-entry before it could queue.
#[derive(Clone, Debug)]
pub struct JavaNonReentrantFairLock {
    twin: JavaFairLock,
}

impl JavaNonReentrantFairLock {
    refusing_acquire_calls!();
}

impl Deref for JavaNonReentrantFairLock {
    type Target = JavaFairLock;

    fn deref(&self) -> &JavaFairLock {
        &self.twin
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redis::AsyncCommands;

    use super::*;
    use crate::RedisServer;
    use crate::harness::raw;
    use crate::redisson::RedissonVersion;
    use crate::redisson::testing::{Listener, java};

    /// Every acquisition form refuses the holder's re-entry and changes nothing; another thread
    /// is kept out as by an `RLock`, and the one unlock releases and publishes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reentry_is_refused_by_every_form() {
        let server = RedisServer::start();
        let mut redis = raw(&server).await;
        let java = java(&server, RedissonVersion::V4).await;
        let lock = java.get_non_reentrant_lock("nr:refused");
        lock.lock(1).await.expect("lock");
        let wait = Duration::from_millis(100);
        let refusals = [
            lock.lock(1).await.err(),
            lock.lock_with_lease(1, wait).await.err(),
            lock.try_lock(1).await.err(),
            lock.try_lock_for(1, wait, None).await.err(),
            lock.try_lock_for(1, wait, Some(wait)).await.err(),
        ];
        for refusal in refusals {
            assert!(
                matches!(refusal, Some(JavaError::IllegalMonitorState(_))),
                "{refusal:?}"
            );
        }
        assert_eq!(lock.hold_count(1).await.expect("HGET"), 1);
        let pttl: i64 = redis.pttl(lock.name()).await.expect("PTTL");
        assert!(pttl > 29_000, "no lease re-applied: {pttl}");
        assert!(!lock.try_lock(2).await.expect("tryLock() of another thread"));

        let mut listener = Listener::start(&server).await;
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
        assert_eq!(
            listener.next().await,
            (lock.channel().to_owned(), "0".into())
        );
        assert!(!lock.is_locked().await.expect("EXISTS"));
    }

    /// A refused fair re-entry never queues, from either form, with others queued or not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_fair_reentry_never_queues() {
        let server = RedisServer::start();
        let java = java(&server, RedissonVersion::V4).await;
        let lock = java.get_non_reentrant_fair_lock("nr:fair");
        lock.lock(1).await.expect("lock");
        assert!(!lock.try_lock(2).await.expect("tryLock() of another thread"));
        let wait = Duration::from_millis(100);
        for refusal in [
            lock.try_lock(1).await.err(),
            lock.try_lock_for(1, wait, None).await.err(),
            lock.lock(1).await.err(),
        ] {
            assert!(matches!(refusal, Some(JavaError::IllegalMonitorState(_))));
        }
        assert!(lock.queue().await.expect("LRANGE").is_empty());
        assert!(lock.timeouts().await.expect("ZRANGE").is_empty());
        assert_eq!(lock.hold_count(1).await.expect("HGET"), 1);
        assert!(!lock.try_lock_for(2, wait, None).await.expect("2 gives up"));
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
    }

    /// The classes are 4.4+: older clients have none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn older_versions_have_no_non_reentrant_locks() {
        assert!(!RedissonVersion::V3_52.has_non_reentrant_locks());
        let server = RedisServer::start();
        let java = java(&server, RedissonVersion::V3_52).await;
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            java.get_non_reentrant_lock("nr:old")
        }));
        assert!(made.is_err());
    }
}
