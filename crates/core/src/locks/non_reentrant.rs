//! The non-reentrant locks: Redisson 4.4+'s `RNonReentrantLock` (docs/protocol.md §8.8) and
//! `RNonReentrantFairLock` (§6.9).
//!
//! Each is its reentrant twin ([`Reentrant`], [`Fair`]) with one change, in the acquire script:
//! where the twin re-enters (the caller's field is already in the hash), it replies the error
//! `NON_REENTRANT_REACQUIRE`, which Java turns into `IllegalMonitorStateException` and rlock into
//! [`Error::ReentryRefused`]. The check comes before the fair lock's enqueue step, so a refused
//! re-entry changes nothing in Redis and never queues. Everything else (the hash, its field and
//! count of 1, the channel, unlock, force-unlock, the watchdog's renewal, the fair queue, undo and
//! give-up) is the twin's, so a non-reentrant lock and its twin on one name are one lock to every
//! client, Java's included.
//!
//! A re-entry is a second acquisition by the same [`Owner`](crate::Owner): inside one
//! [`Owner::scope`](crate::Owner::scope), on one blocking thread, or through handles bound with
//! [`Lock::with_owner`] to one owner. Outside a scope every async acquisition is its own owner, so
//! a second one simply waits. A re-entry never joins this client's local queue (the engine queues
//! only owners that hold nothing), so it is refused in one round trip.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{RedisError, Script, Value};

use crate::engine::{Attempt, ChannelName, HandOff, LockWire, Patience, Taken};
use crate::error::{Error, Result};
use crate::locks::fair_lock::{Fair, FairQueue};
use crate::locks::lock::Lock;
use crate::locks::reentrant::Reentrant;
use crate::scripts::{ScriptCall, lua};
use crate::services::Services;
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

static ACQUIRE: LazyLock<Script> = lua!("non_reentrant_acquire.lua");

/// The error reply of a refused re-entry, passed to the acquire script as its last argument
/// (docs/protocol.md §6.9, §8.8).
const REACQUIRE: &str = "NON_REENTRANT_REACQUIRE";

/// A reentrant kind with a non-reentrant twin: the twin's label and its acquire script, with the
/// re-entry refused. Sealed: implemented by [`Reentrant`] and [`Fair`] only.
pub trait Twin: LockWire<Token = ()> {
    /// The twin's `kind` label.
    #[doc(hidden)]
    const LABEL: &'static str;

    /// The twin's kind, in words.
    #[doc(hidden)]
    const WHAT: &'static str;

    /// The twin's acquire call for what [`LockWire::acquire_call`] is given: the reentrant one's
    /// arguments, then [`REACQUIRE`].
    #[doc(hidden)]
    fn refusing_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall;
}

impl Twin for Reentrant {
    const LABEL: &'static str = "non_reentrant_lock";
    const WHAT: &'static str = "non-reentrant lock";

    fn refusing_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&ACQUIRE)
            .key(self.name())
            .arg(lease.as_millis())
            .arg(field)
            .arg(REACQUIRE)
            .arg(held_before)
    }
}

impl Twin for Fair {
    const LABEL: &'static str = "non_reentrant_fair_lock";
    const WHAT: &'static str = "non-reentrant fair lock";

    fn refusing_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        // The fair lock's own script: a last argument turns its re-entry into the refusal.
        self.acquire_call(field, held_before, lease, patience)
            .arg(REACQUIRE)
    }
}

/// The non-reentrant lock's kind, over its reentrant twin `K`: `NonReentrant` (the default) is
/// Redisson's `RNonReentrantLock`, [`NonReentrantFair`] its `RNonReentrantFairLock`. The type
/// parameter of [`NonReentrantLock`] and [`NonReentrantFairLock`].
#[derive(Debug)]
pub struct NonReentrant<K = Reentrant> {
    twin: K,
}

/// The non-reentrant fair lock's kind (Redisson's `RNonReentrantFairLock`).
pub type NonReentrantFair = NonReentrant<Fair>;

impl<K> NonReentrant<K> {
    pub(crate) fn new(twin: K) -> Self {
        Self { twin }
    }
}

impl<K: Twin> LockWire for NonReentrant<K> {
    type Token = ();

    fn name(&self) -> &str {
        self.twin.name()
    }

    fn label(&self) -> &'static str {
        K::LABEL
    }

    fn what(&self) -> &'static str {
        K::WHAT
    }

    fn key(&self) -> &str {
        self.twin.key()
    }

    fn field(&self, field: String) -> String {
        self.twin.field(field)
    }

    fn channel(&self, field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        self.twin.channel(field)
    }

    fn poll_delay(&self, previous: Option<Duration>, polls: u32) -> Duration {
        self.twin.poll_delay(previous, polls)
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        self.twin
            .refusing_acquire_call(field, held_before, lease, patience)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<()>>> {
        self.twin.decode_acquire(reply)
    }

    fn refuses_reentry(&self) -> bool {
        true
    }

    fn acquire_refused(&self, error: &RedisError) -> Option<Error> {
        // Redis passes a script's error reply on as it is; Java, too, looks for the word in it.
        error
            .to_string()
            .contains(REACQUIRE)
            .then(|| Error::reentry_refused(self.subject()))
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        // A refused re-entry changed nothing, and the engine runs this owner's attempts one at a
        // time (`refuses_reentry`): the count the undo compares with is the one the attempt saw.
        self.twin
            .undo_acquire_call(field, held_before, lease, patience)
    }

    fn give_up_call(&self, field: &str, patience: Patience) -> Option<ScriptCall> {
        self.twin.give_up_call(field, patience)
    }

    fn refuse(&self, services: &Services, base_field: &str) -> Result<()> {
        self.twin.refuse(services, base_field)
    }

    fn is_locked_call(&self) -> Option<ScriptCall> {
        self.twin.is_locked_call()
    }

    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        self.twin.unlock_call(field, lease, latch, latch_ttl)
    }

    fn force_unlock_call(&self) -> ScriptCall {
        self.twin.force_unlock_call()
    }

    fn renewal(&self) -> &'static Renewal {
        self.twin.renewal()
    }

    fn hand_off(&self) -> Option<&dyn HandOff<Token = ()>> {
        self.twin.hand_off()
    }
}

impl FairQueue for NonReentrantFair {
    fn fair(&self) -> &Fair {
        &self.twin
    }
}

/// A non-reentrant lock, shared with Redisson's `RNonReentrantLock` and `RLock` of the same name
/// (one hash layout): an owner that holds it and asks again gets [`Error::ReentryRefused`] instead
/// of a second hold, from every acquisition form.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use rlock_redisson::{Error, Owner};
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let lock = client.non_reentrant_lock("doc:non-reentrant:example");
/// Owner::scope(Owner::new(), async {
///     let guard = lock.lock().await?;
///     // The scope's owner holds it: a nested acquisition is refused, not granted twice.
///     assert!(matches!(lock.try_lock().await, Err(Error::ReentryRefused { .. })));
///     assert_eq!(lock.hold_count().await?, 1);
///     guard.unlock().await
/// })
/// .await?;
/// # Ok(())
/// # }
/// ```
pub type NonReentrantLock = Lock<NonReentrant>;

/// A non-reentrant fair lock, shared with Redisson's `RNonReentrantFairLock` and `RFairLock` of
/// the same name: one queue of waiters in first-come order, and a re-entry refused with
/// [`Error::ReentryRefused`] before it could join that queue.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// use rlock_redisson::{Error, Owner};
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let lock = client.non_reentrant_fair_lock("doc:non-reentrant-fair:example");
/// let owner = Owner::new();
/// let guard = lock.clone().with_owner(owner).lock().await?;
/// let again = lock.clone().with_owner(owner).try_lock_for(Duration::from_secs(1)).await;
/// assert!(matches!(again, Err(Error::ReentryRefused { .. })));
/// assert!(lock.queue().await?.is_empty(), "a refused re-entry never queues");
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub type NonReentrantFairLock = Lock<NonReentrantFair>;
