//! The spin lock: Redisson's `RSpinLock` (docs/protocol.md §8.1).
//!
//! The reentrant lock's hash and acquire script, without pub/sub: waiters poll with a back-off
//! instead of subscribing, and an unlock publishes nothing. That is the point of the kind (no
//! pub/sub traffic for very many locks), and its interop consequence: a spin-lock unlock does not
//! wake reentrant-lock waiters of the same name (Java's or rlock's), which then retry when the
//! lock's TTL runs out or their poll comes. Watchdog holds are renewed as the reentrant lock's are.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, Value};

use crate::engine::{Attempt, ChannelName, LockWire, Patience, Taken};
use crate::locks::reentrant::Reentrant;
use crate::scripts::{ScriptCall, lua};
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

static UNLOCK: LazyLock<Script> = lua!("spin_unlock.lua");

/// How a spin-lock waiter spaces its tries (Redisson's `LockOptions.BackOff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpinBackoff {
    /// Starts at `initial`; each next delay is `min(max, previous × multiplier + a random 0..n ms)`
    /// after `n` tries. Redisson's default: 1 ms, 128 ms, ×2.
    Exponential {
        /// The first delay.
        initial: Duration,
        /// The longest delay.
        max: Duration,
        /// How much each delay grows.
        multiplier: u32,
    },
    /// The same delay every time (Redisson's `ConstantBackOff`, 64 ms by default).
    Constant(Duration),
}

impl Default for SpinBackoff {
    fn default() -> Self {
        Self::Exponential {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

/// A spin lock, shared with Redisson's `RSpinLock` of the same name: waiters poll with a back-off
/// instead of subscribing to a channel.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let lock = client.spin_lock("doc:spin:example");
/// let guard = lock.lock().await?;
/// assert!(lock.try_lock_for(Duration::from_millis(20)).await?.is_none());
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub type SpinLock = crate::locks::lock::Lock<Spin>;

/// The spin lock's kind (Redisson's `RSpinLock`): the type parameter of
/// [`SpinLock`](crate::SpinLock).
#[derive(Debug)]
pub struct Spin {
    lock: Reentrant,
    backoff: SpinBackoff,
}

impl Spin {
    pub(crate) fn new(name: String, publish: &'static str, backoff: SpinBackoff) -> Self {
        Self {
            lock: Reentrant::new(name, publish),
            backoff,
        }
    }
}

impl LockWire for Spin {
    type Token = ();

    fn name(&self) -> &str {
        self.lock.name()
    }

    fn channel(&self, _field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        None
    }

    fn poll_delay(&self, previous: Option<Duration>, polls: u32) -> Duration {
        match (self.backoff, previous) {
            (SpinBackoff::Constant(delay), _) => delay,
            (SpinBackoff::Exponential { initial, .. }, None) => initial,
            (
                SpinBackoff::Exponential {
                    max, multiplier, ..
                },
                Some(previous),
            ) => {
                let jitter = Duration::from_millis(fastrand::u64(0..u64::from(polls.max(1))));
                previous
                    .saturating_mul(multiplier)
                    .saturating_add(jitter)
                    .min(max)
            }
        }
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        self.lock.acquire_call(field, held_before, lease, patience)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<()>>> {
        self.lock.decode_acquire(reply)
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        // Its `0` on the lock channel, should the undo free the lock, only helps reentrant-lock
        // waiters of the same name.
        self.lock
            .undo_acquire_call(field, held_before, lease, patience)
    }

    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        ScriptCall::new(&UNLOCK)
            .key(self.lock.key())
            .key(latch)
            .arg(lease.as_millis())
            .arg(field)
            .arg(latch_ttl.as_millis())
    }

    fn force_unlock_call(&self) -> ScriptCall {
        // Redisson's is a bare `DEL`; rlock's also publishes the unlock on the lock's channel, as
        // `RLock.forceUnlock` does for the same hash (docs/protocol.md §8.1), so that waiters of
        // the other kinds sharing it, and a streak of free hand-offs, hear it.
        self.lock.force_unlock_call()
    }

    fn label(&self) -> &'static str {
        "spin_lock"
    }

    fn what(&self) -> &'static str {
        "spin lock"
    }

    fn renewal(&self) -> &'static Renewal {
        self.lock.renewal()
    }

    fn local_reentry(&self) -> Option<()> {
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(backoff: SpinBackoff) -> Spin {
        Spin::new("s".into(), "PUBLISH", backoff)
    }

    #[test]
    fn exponential_back_off_doubles_with_jitter_up_to_its_cap() {
        let kind = spin(SpinBackoff::default());
        let ms = Duration::from_millis;
        assert_eq!(kind.poll_delay(None, 0), ms(1));
        let second = kind.poll_delay(Some(ms(1)), 1);
        assert_eq!(second, ms(2), "rand[0, 1) is 0");
        let later = kind.poll_delay(Some(ms(16)), 5);
        assert!((ms(32)..ms(37)).contains(&later), "{later:?}");
        assert_eq!(kind.poll_delay(Some(ms(100)), 3), ms(128));
        let constant = spin(SpinBackoff::Constant(ms(64)));
        assert_eq!(constant.poll_delay(None, 0), ms(64));
        assert_eq!(constant.poll_delay(Some(ms(64)), 9), ms(64));
    }
}
