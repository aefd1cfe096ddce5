//! Redisson's `RSemaphore` (docs/protocol.md §8.5): a counter of available permits, shared with
//! Java.
//!
//! # Implementation details
//!
//! The semaphore is a string integer at the raw name: the permits available. Taking `p` permits is
//! a script that decrements it when at least `p` are there; giving them back increments it and
//! publishes the new count on `redisson_sc:{name}`. A message carrying `n` wakes up to `n` of this
//! client's waiters ([`WakeRule::Permits`]), each of which tries again; waiting is the engine's
//! loop (try, subscribe, arm, retry, wait), so a release that lands while a waiter's retry is on
//! the wire is never lost. Nothing bounds a semaphore's wait (its key has no TTL), so a waiter also
//! re-checks every second: a message lost during a reconnect costs at most that.
//!
//! # Outcomes that are not known
//!
//! Permits are not owned: an acquire or a release leaves nothing behind that says who did it, and
//! neither is idempotent. So rlock never re-sends them. An acquire whose caller drops the future
//! while the script is on the wire still gets its reply (in the background), and gives the permits
//! back if it took them. A reply that is really lost (a timeout, a broken connection) is
//! [`Error::OutcomeUnknown`]: the permits may or may not have been taken (or given back), exactly
//! as Redisson leaves it.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Script, Value};

use crate::engine::{
    self, Applied, Attempt, Object, Patience, Queueing, RECHECK, Replicas, Synced,
};
use crate::error::{Error, Operation, Result};
use crate::names;
use crate::scripts::{ScriptCall, lua};
use crate::services::Services;
use crate::wake::WakeRule;

static TRY_ACQUIRE: LazyLock<Script> = lua!("semaphore_try_acquire.lua");
static RELEASE: LazyLock<Script> = lua!("semaphore_release.lua");
static RELEASE_IF_EXISTS: LazyLock<Script> = lua!("semaphore_release_if_exists.lua");
pub(crate) static TRY_SET_PERMITS: LazyLock<Script> = lua!("semaphore_try_set_permits.lua");
static ADD_PERMITS: LazyLock<Script> = lua!("semaphore_add_permits.lua");
static DRAIN: LazyLock<Script> = lua!("semaphore_drain.lua");

/// A distributed semaphore shared with Redisson's `RSemaphore` of the same name: a number of
/// permits that callers take and give back, across processes and languages.
///
/// Permits are not owned: anyone may [`release`](Semaphore::release) them, as in Java. Taking
/// permits returns a [`SemaphorePermits`] guard that gives them back when dropped; call
/// [`SemaphorePermits::forget`] to keep them taken and release them later with
/// [`Semaphore::release`] (Redisson's style).
///
/// A semaphore has no permits until they are set up ([`Semaphore::try_set_permits`] or
/// [`Semaphore::add_permits`]); acquiring before then waits.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let partner_api = client.semaphore("doc:semaphore:partner-api");
/// # partner_api.delete().await?;
/// partner_api.try_set_permits(3).await?; // at most 3 calls at once, fleet-wide
///
/// let permit = partner_api.acquire(1).await?;
/// assert_eq!(partner_api.available_permits().await?, 2);
/// // ... call the partner API ...
/// permit.release().await?;
/// assert_eq!(partner_api.available_permits().await?, 3);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    object: Object,
}

impl Semaphore {
    pub(crate) fn new(services: Arc<Services>, name: String) -> Self {
        let channel = names::semaphore_channel(&name);
        Self {
            object: Object::new(services, "semaphore", name, channel),
        }
    }

    /// The semaphore's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        &self.object.name
    }

    /// Sets the number of permits if the semaphore does not exist yet; returns whether it did.
    /// Waiters are woken by the new permits.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the permits may or may not have been set.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.set_up(
            self.object
                .call(&TRY_SET_PERMITS)
                .arg(permits)
                .arg(self.object.services.publish),
        )
        .await
    }

    /// As [`Semaphore::try_set_permits`], for a semaphore that expires after `ttl` (Redisson's
    /// `trySetPermits(permits, timeToLive)`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_set_permits`], plus [`Error::InvalidArgument`] for a TTL under 1 ms.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the permits may or may not have been set.
    pub async fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        let ttl = engine::millis(ttl, "a semaphore's time to live")?;
        self.set_up(
            self.object
                .call(&TRY_SET_PERMITS)
                .arg(permits)
                .arg(self.object.services.publish)
                .arg(ttl),
        )
        .await
    }

    async fn set_up(&self, call: ScriptCall) -> Result<bool> {
        self.object.check_name()?;
        let set: i64 = self.object.update(call, Replicas::Wait).await?;
        Ok(set == 1)
    }

    /// Adds `permits` available permits (removes them when negative), creating the semaphore if
    /// needed, and wakes waiters: Redisson's `addPermits`. Like Redisson, this drops a TTL the
    /// semaphore had.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_set_permits`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the permits may or may not have been added.
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        self.object.check_name()?;
        let call = self
            .object
            .call(&ADD_PERMITS)
            .arg(permits)
            .arg(self.object.services.publish);
        let _: i64 = self.object.update(call, Replicas::Wait).await?;
        Ok(())
    }

    /// Takes every available permit and returns how many that was (0 for a semaphore that does
    /// not exist): Redisson's `drainPermits`.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_set_permits`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the permits may or may not have been taken.
    pub async fn drain_permits(&self) -> Result<i64> {
        self.object.check_name()?;
        self.object
            .update(self.object.call(&DRAIN), Replicas::Wait)
            .await
    }

    /// How many permits are available right now (0 for a semaphore that does not exist); negative
    /// when more were removed than there were.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else, [`Error::UnexpectedReply`] when
    /// it is not a number, [`Error::Timeout`] or [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn available_permits(&self) -> Result<i64> {
        self.object.read_integer(Queueing::Bounded).await
    }

    /// Deletes the semaphore; returns whether it existed. Waiters keep waiting until permits are
    /// set up again.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the semaphore may or may not have been deleted.
    pub async fn delete(&self) -> Result<bool> {
        self.object.delete(&[]).await
    }

    /// Waits until `permits` permits are available and takes them: Redisson's `acquire(permits)`.
    /// Zero permits are taken at once without asking Redis, as in Java.
    ///
    /// # Errors
    ///
    /// [`Error::OutcomeUnknown`] when an attempt's reply was lost (the permits may have been
    /// taken), [`Error::NoSyncedReplicas`] when no replica acknowledged the take even after
    /// retrying (it was given back), [`Error::WrongType`], [`Error::Timeout`] or [`Error::Backend`]
    /// only as Redis fails an attempt that was sent, never because this client is busy (an attempt
    /// waits for its turn on a connection as long as it takes, see [`Error::Timeout`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped acquire takes no permit. One whose script was on the wire gets its
    /// reply in the background and gives back the permits it took.
    pub async fn acquire(&self, permits: u32) -> Result<SemaphorePermits> {
        self.take(permits, Patience::Forever)
            .await?
            .ok_or_else(|| Error::timeout(Operation::Acquire, self.object.subject(), Duration::MAX))
    }

    /// Takes `permits` permits if they are available now; `None` if not: Redisson's
    /// `tryAcquire(permits)`.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`], except that the attempt waits at most the command timeout for its
    /// turn on a connection (then [`Error::Timeout`], with nothing sent).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Semaphore::acquire`].
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermits>> {
        self.take(permits, Patience::For(Duration::ZERO)).await
    }

    /// Waits up to `wait` for `permits` permits and takes them; `None` if they did not become
    /// available in time: Redisson's `tryAcquire(permits, waitTime, unit)`.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire`]: each attempt's turn is bounded, so that the call keeps its
    /// bound.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Semaphore::acquire`].
    pub async fn try_acquire_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<SemaphorePermits>> {
        self.take(permits, Patience::For(wait)).await
    }

    async fn take(&self, permits: u32, patience: Patience) -> Result<Option<SemaphorePermits>> {
        self.object.check_name()?;
        if permits == 0 {
            return Ok(Some(SemaphorePermits::new(self.clone(), 0)));
        }
        let acquisition = self.object.acquisition("semaphore", patience);
        let listen = self.object.listen(WakeRule::Permits, &acquisition);
        let taken = acquisition
            .track(self.object.wait(listen, patience, || {
                Box::pin(self.attempt(permits, patience.queueing()))
            }))
            .await?;
        Ok(taken.map(|()| SemaphorePermits::new(self.clone(), permits)))
    }

    /// One try to take `permits`: given back and tried again while no replica acknowledges it.
    async fn attempt(&self, permits: u32, queueing: Queueing) -> Result<Attempt<()>> {
        engine::until_synced(
            &self.object.services,
            Operation::Acquire,
            self.object.subject(),
            || async {
                // The one script of the semaphore that publishes nothing takes no channel key.
                let call = ScriptCall::new(&TRY_ACQUIRE)
                    .key(&*self.object.name)
                    .arg(permits);
                let semaphore = self.clone();
                let Applied { reply, unsynced } = engine::write_detached(
                    &self.object.services,
                    Operation::Acquire,
                    self.object.subject(),
                    call,
                    Replicas::Wait,
                    queueing,
                    move |_, applied| async move {
                        if applied.reply == Value::Int(1) {
                            semaphore.give_back(permits, "its caller went away").await;
                        }
                    },
                )
                .await?;
                match (reply, unsynced) {
                    (Value::Int(1), None) => Ok(Synced::Done(Attempt::Acquired(()))),
                    (Value::Int(1), Some(replicas)) => {
                        // Redisson's `handleNoSync`: give the permits back, then try again.
                        let semaphore = self.clone();
                        drop(self.object.services.background.spawn(async move {
                            semaphore
                                .give_back(permits, "no replica acknowledged")
                                .await;
                        }));
                        Ok(Synced::Unsynced { replicas })
                    }
                    (Value::Int(0), _) => Ok(Synced::Done(Attempt::Busy(RECHECK))),
                    (other, _) => Err(Error::unexpected(
                        Operation::Acquire,
                        self.object.subject(),
                        other,
                    )),
                }
            },
        )
        .await
    }

    /// Gives back permits taken by an acquire nobody will use; logs what it cannot.
    async fn give_back(&self, permits: u32, why: &str) {
        match self.release(permits).await {
            Ok(()) => {
                tracing::debug!(semaphore = %self.object.name, permits, why, "gave back permits")
            }
            Err(e) => tracing::warn!(
                semaphore = %self.object.name,
                permits,
                why,
                error = %e,
                "could not give back permits taken by a cancelled acquire"
            ),
        }
    }

    /// Gives `permits` permits back (whoever took them) and wakes waiters: Redisson's
    /// `release(permits)`. Creates the semaphore when it does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::OutcomeUnknown`] when the reply was lost (the permits may or may not be back),
    /// [`Error::NoSyncedReplicas`] when no replica acknowledged it (applied on the master only),
    /// [`Error::WrongType`], [`Error::Timeout`] or [`Error::Backend`] as Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: once called, the release completes even if the future is dropped.
    pub async fn release(&self, permits: u32) -> Result<()> {
        self.object.check_name()?;
        if permits == 0 {
            return Ok(());
        }
        let call = self
            .object
            .call(&RELEASE)
            .arg(permits)
            .arg(self.object.services.publish);
        self.release_with(call).await.map(|_| ())
    }

    /// Gives `permits` permits back only if the semaphore exists; returns whether it did:
    /// Redisson's `releaseIfExists`.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Semaphore::release`].
    pub async fn release_if_exists(&self, permits: u32) -> Result<bool> {
        self.object.check_name()?;
        if permits == 0 {
            return Ok(false);
        }
        let call = self
            .object
            .call(&RELEASE_IF_EXISTS)
            .arg(permits)
            .arg(self.object.services.publish);
        Ok(self.release_with(call).await? == 1)
    }

    async fn release_with(&self, call: ScriptCall) -> Result<i64> {
        let Applied { reply, unsynced } = engine::write_detached(
            &self.object.services,
            Operation::Release,
            self.object.subject(),
            call,
            Replicas::Wait,
            Queueing::Bounded,
            |_, _| async {},
        )
        .await?;
        if let Some(replicas) = unsynced {
            return Err(Error::no_synced_replicas(
                Operation::Release,
                self.object.subject(),
                replicas,
            ));
        }
        match reply {
            Value::Int(value) => Ok(value),
            other => Err(Error::unexpected(
                Operation::Release,
                self.object.subject(),
                other,
            )),
        }
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// Permits taken from a [`Semaphore`]. Dropping the guard gives them back in the background (never
/// blocking); [`SemaphorePermits::release`] gives them back and reports the outcome;
/// [`SemaphorePermits::forget`] keeps them taken.
#[must_use = "dropping the guard gives the permits back at once"]
pub struct SemaphorePermits {
    semaphore: Semaphore,
    permits: u32,
}

impl SemaphorePermits {
    fn new(semaphore: Semaphore, permits: u32) -> Self {
        Self { semaphore, permits }
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    /// Gives the permits back and wakes waiters.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: once called, the release completes even if the future is dropped.
    pub async fn release(mut self) -> Result<()> {
        let permits = std::mem::take(&mut self.permits);
        self.semaphore.release(permits).await
    }

    /// Keeps the permits taken (release them later with [`Semaphore::release`], from anywhere);
    /// returns how many they are.
    pub fn forget(mut self) -> u32 {
        std::mem::take(&mut self.permits)
    }
}

impl Drop for SemaphorePermits {
    fn drop(&mut self) {
        let permits = std::mem::take(&mut self.permits);
        if permits > 0 {
            let semaphore = self.semaphore.clone();
            drop(self.semaphore.object.services.background.spawn(async move {
                semaphore.give_back(permits, "its guard was dropped").await;
            }));
        }
    }
}

impl fmt::Debug for SemaphorePermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermits")
            .field("name", &self.semaphore.name())
            .field("permits", &self.permits)
            .finish()
    }
}
