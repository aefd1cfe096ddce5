//! Redisson's `RPermitExpirableSemaphore` (docs/protocol.md §8.6): a semaphore whose permits have
//! ids and may expire, shared with Java.
//!
//! # Implementation details
//!
//! The available permits are a string integer at the raw name, as for
//! [`Semaphore`](crate::Semaphore); taken permits are members of the sorted set `{name}:timeout`,
//! each a random 16-byte id (raw bytes on the wire, 32 hex characters on the API) scored by its
//! expiry in epoch milliseconds (a non-expiring permit scores `922337203685477`). Every script
//! first counts expired permits back in (and publishes the new count on `redisson_sc:{name}`, the
//! channel the plain semaphore uses), so a permit whose holder died comes back by itself. A failed
//! acquire replies with the nearest expiry of a taken permit: the waiter sleeps until then at the
//! latest (or until a release wakes it, or the one-second re-check that bounds a lost message).
//!
//! Expiries are computed from this machine's clock, as Redisson computes them from the JVM's: keep
//! the clocks of processes that share a semaphore in sync.
//!
//! # Outcomes that are not known
//!
//! Unlike a plain semaphore's, an acquire here is reconciled: its permit ids are chosen before it
//! is sent, so an acquire whose reply is lost (or whose future is dropped) is followed, on the same
//! connection, by an undo that gives back whichever of those ids it finds taken.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{Script, Value};

use crate::engine::{self, Attempt, Object, Patience, RECHECK, Replicas, Undo, epoch_millis};
use crate::error::{Error, Operation, Result};
use crate::names;
use crate::scripts::{ScriptCall, lua};
use crate::services::Services;
use crate::synchronizers::semaphore::TRY_SET_PERMITS;
use crate::telemetry::Reconciles;
use crate::wake::WakeRule;

static ACQUIRE: LazyLock<Script> = lua!("expirable_prelude.lua", "expirable_acquire.lua");
static UNDO_ACQUIRE: LazyLock<Script> = lua!("expirable_undo_acquire.lua");
static RELEASE: LazyLock<Script> = lua!("expirable_release.lua");
static RELEASE_MANY: LazyLock<Script> = lua!("expirable_prelude.lua", "expirable_release_many.lua");
static UPDATE_LEASE: LazyLock<Script> = lua!("expirable_prelude.lua", "expirable_update_lease.lua");
static LEASE_TIME: LazyLock<Script> = lua!("expirable_prelude.lua", "expirable_lease_time.lua");
static PERMITS: LazyLock<Script> = lua!("expirable_prelude.lua", "expirable_permits.lua");
static SET_PERMITS: LazyLock<Script> = lua!("expirable_set_permits.lua");
static ADD_PERMITS: LazyLock<Script> = lua!("expirable_add_permits.lua");

/// The score of a permit that never expires (Redisson's `nonExpirableTimeout`).
const NON_EXPIRING: &str = "922337203685477";

/// The id of one permit of a [`PermitExpirableSemaphore`]: 16 random bytes, written as 32
/// lower-case hex characters (Redisson's form, so ids can be passed between Java and Rust).
///
/// An id, not a guard that releases on drop: an expirable permit is made to outlive the code that
/// took it. Redisson's pattern hands the id on (to another request, task or process, Java's
/// included) to be released there by id, with the lease as the safety net when nobody does; a guard
/// would release it when the acquiring scope ends. Release it with
/// [`PermitExpirableSemaphore::release`], or let its lease run out.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId([u8; 16]);

impl PermitId {
    fn random() -> Self {
        Self(fastrand::u128(..).to_le_bytes())
    }

    /// The id's 16 bytes, as stored in Redis.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The id made of these 16 bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

impl FromStr for PermitId {
    type Err = Error;

    /// Parses 32 hex characters (either case).
    fn from_str(hex: &str) -> Result<Self> {
        let invalid = || Error::InvalidArgument(format!("not a 32-hex-digit permit id: {hex:?}"));
        if hex.len() != 32 || !hex.is_ascii() {
            return Err(invalid());
        }
        let mut bytes = [0; 16];
        for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| invalid())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| invalid())?;
        }
        Ok(Self(bytes))
    }
}

/// A distributed semaphore whose permits have ids and may expire, shared with Redisson's
/// `RPermitExpirableSemaphore` of the same name.
///
/// Acquiring returns a [`PermitId`]; whoever has the id releases the permit with it. A permit taken
/// with a lease comes back by itself when the lease runs out, so a worker that dies cannot leak it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let slots = client.permit_expirable_semaphore("doc:expirable:render-slots");
/// # slots.delete().await?;
/// slots.try_set_permits(2).await?;
///
/// // A slot that comes back by itself after 10 s if this worker dies.
/// let id = slots.acquire_with_lease(Duration::from_secs(10)).await?;
/// assert_eq!(slots.acquired_permits().await?, 1);
/// assert!(slots.lease_time(id).await?.is_some_and(|left| left <= Duration::from_secs(10)));
/// slots.release(id).await?;
/// assert_eq!(slots.available_permits().await?, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    object: Object,
    /// The taken permits' expiries: `{name}:timeout`.
    timeouts: Arc<str>,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(services: Arc<Services>, name: String) -> Self {
        let (timeouts, channel) = (
            names::permit_timeouts(&name),
            names::semaphore_channel(&name),
        );
        Self {
            object: Object::new(services, "permit-expirable semaphore", name, channel),
            timeouts: timeouts.into(),
        }
    }

    /// The semaphore's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        &self.object.name
    }

    /// Sets the number of permits if the semaphore does not exist yet; returns whether it did.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when a key holds something else, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the permits may or may not have been set.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.object.check_name()?;
        let call = self
            .object
            .call(&TRY_SET_PERMITS)
            .arg(permits)
            .arg(self.object.services.publish);
        Ok(self.object.update::<i64>(call, Replicas::Wait).await? == 1)
    }

    /// Sets the total number of permits, taken ones included: the available permits move by the
    /// difference. Creates the semaphore when it does not exist.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the permits may or may not have been set.
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        self.object.check_name()?;
        let call = self
            .release_keys(&SET_PERMITS)
            .arg(permits)
            .arg(self.object.services.publish);
        self.object
            .update::<i64>(call, Replicas::Wait)
            .await
            .map(|_| ())
    }

    /// Adds `permits` available permits (removes them when negative), creating the semaphore if
    /// needed.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_set_permits`].
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
        self.object
            .update::<i64>(call, Replicas::Wait)
            .await
            .map(|_| ())
    }

    /// Waits for a permit that does not expire and takes it.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Timeout`] or [`Error::Backend`] only as Redis fails an attempt
    /// that was sent (one whose reply was lost is undone first), never because this client is busy
    /// (see [`Error::Timeout`]); [`Error::NoSyncedReplicas`] when no replica acknowledged the
    /// acquire even after retrying (it was undone).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped acquire leaves no permit taken (one that may have been taken is given
    /// back by id, in the background).
    pub async fn acquire(&self) -> Result<PermitId> {
        self.acquire_one(Patience::Forever, None).await
    }

    /// Waits for a permit and takes it for `lease`, after which it comes back by itself.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquire`], plus [`Error::InvalidArgument`] for a lease under
    /// 1 ms.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::acquire`].
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<PermitId> {
        self.acquire_one(Patience::Forever, Some(lease)).await
    }

    /// Waits until `permits` permits are available and takes them together, for `lease` (`None`:
    /// they do not expire).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquire_with_lease`], plus [`Error::InvalidArgument`] for
    /// zero permits.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::acquire`].
    pub async fn acquire_many(
        &self,
        permits: u32,
        lease: Option<Duration>,
    ) -> Result<Vec<PermitId>> {
        self.take(permits, Patience::Forever, lease)
            .await?
            .ok_or_else(|| Error::timeout(Operation::Acquire, self.object.subject(), Duration::MAX))
    }

    /// Takes a permit that does not expire if one is available now.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquire`], except that the attempt waits at most the command
    /// timeout for its turn on a connection (then [`Error::Timeout`], with nothing sent), as every
    /// bounded wait's attempts do.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<PermitId>> {
        self.try_acquire_one(Duration::ZERO, None).await
    }

    /// Waits up to `wait` for a permit that does not expire and takes it.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_acquire`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::acquire`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<PermitId>> {
        self.try_acquire_one(wait, None).await
    }

    /// Waits up to `wait` for a permit and takes it for `lease`: Redisson's
    /// `tryAcquire(waitTime, leaseTime, unit)`.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquire_with_lease`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::acquire`].
    pub async fn try_acquire_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        self.try_acquire_one(wait, Some(lease)).await
    }

    /// Waits up to `wait` until `permits` permits are available and takes them together, for
    /// `lease` (`None`: they do not expire).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::acquire_many`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::acquire`].
    pub async fn try_acquire_many(
        &self,
        permits: u32,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<PermitId>>> {
        self.take(permits, Patience::For(wait), lease).await
    }

    async fn acquire_one(&self, patience: Patience, lease: Option<Duration>) -> Result<PermitId> {
        self.take(1, patience, lease)
            .await?
            .and_then(|ids| ids.into_iter().next())
            .ok_or_else(|| Error::timeout(Operation::Acquire, self.object.subject(), Duration::MAX))
    }

    async fn try_acquire_one(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<PermitId>> {
        let ids = self.take(1, Patience::For(wait), lease).await?;
        Ok(ids.and_then(|ids| ids.into_iter().next()))
    }

    async fn take(
        &self,
        permits: u32,
        patience: Patience,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<PermitId>>> {
        self.object.check_name()?;
        if permits == 0 {
            return Err(Error::InvalidArgument("acquire at least one permit".into()));
        }
        let lease = lease
            .map(|lease| engine::millis(lease, "a permit's lease"))
            .transpose()?;
        let acquisition = self
            .object
            .acquisition("permit_expirable_semaphore", patience);
        let listen = self.object.listen(WakeRule::Permits, &acquisition);
        acquisition
            .track(self.object.wait(listen, patience, || {
                Box::pin(self.attempt(permits, lease, patience))
            }))
            .await
    }

    /// One try to take `permits` with fresh ids: undone and tried again while no replica
    /// acknowledges it.
    async fn attempt(
        &self,
        permits: u32,
        lease: Option<u64>,
        patience: Patience,
    ) -> Result<Attempt<Vec<PermitId>>> {
        engine::until_synced(
            &self.object.services,
            Operation::Acquire,
            self.object.subject(),
            || async {
                let ids: Vec<PermitId> = (0..permits).map(|_| PermitId::random()).collect();
                let now = epoch_millis();
                let conn = self
                    .object
                    .services
                    .commands
                    .get(Operation::Acquire, self.object.subject())
                    .await?
                    .queueing(patience.queueing());
                // A permit that does not expire is undone for as long as a watchdog hold would
                // live.
                let undo_for = lease.map_or(
                    self.object.services.watchdog.timeout(),
                    Duration::from_millis,
                );
                let mut undo = Undo::arm(
                    &self.object.services,
                    conn,
                    // Built now: the permit ids move into the result.
                    {
                        let call = self.undo_call(&ids);
                        move || call
                    },
                    undo_for,
                    Reconciles::Acquire,
                );
                let expiry =
                    lease.map_or_else(|| NON_EXPIRING.to_owned(), |l| (now + l).to_string());
                let mut call = ScriptCall::new(&ACQUIRE)
                    .key(&*self.object.name)
                    .key(&*self.timeouts)
                    .key(&*self.object.channel)
                    .arg(permits)
                    .arg(expiry)
                    .arg(now)
                    .arg(NON_EXPIRING)
                    .arg(self.object.services.publish);
                for id in &ids {
                    call = call.arg_bytes(id.as_bytes());
                }
                let taken = engine::write_armed(
                    &self.object.services,
                    &mut undo,
                    &call,
                    self.object.subject(),
                    |reply| decode_acquire(reply, now),
                    |e| Error::from_redis(Operation::Acquire, self.object.subject(), e),
                )
                .await?;
                Ok(taken.map(|attempt| match attempt {
                    Attempt::Acquired(()) => Attempt::Acquired(ids),
                    Attempt::Busy(bound) => Attempt::Busy(bound),
                }))
            },
        )
        .await
    }

    fn undo_call(&self, ids: &[PermitId]) -> ScriptCall {
        let mut call = self
            .release_keys(&UNDO_ACQUIRE)
            .arg(self.object.services.publish);
        for id in ids {
            call = call.arg_bytes(id.as_bytes());
        }
        call
    }

    /// Gives the permit `id` back; returns `false` when it was not held (released already, or
    /// never acquired) or had expired (it is counted back in, but its holder had lost it):
    /// Redisson's `tryRelease(id)`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Timeout`] or [`Error::Backend`] as Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the permit may or may not have been given back (releasing it
    /// again then returns `false`).
    pub async fn try_release(&self, id: PermitId) -> Result<bool> {
        self.object.check_name()?;
        let call = self
            .release_keys(&RELEASE)
            .arg_bytes(id.as_bytes())
            .arg(1)
            .arg(epoch_millis())
            .arg(self.object.services.publish);
        Ok(self.object.update::<i64>(call, Replicas::Wait).await? == 1)
    }

    /// Gives the permit `id` back: Redisson's `release(id)`.
    ///
    /// # Errors
    ///
    /// [`Error::PermitNotFound`] when it was not held or had expired, else as
    /// [`PermitExpirableSemaphore::try_release`].
    ///
    /// # Cancel safety
    ///
    /// As [`PermitExpirableSemaphore::try_release`].
    pub async fn release(&self, id: PermitId) -> Result<()> {
        if self.try_release(id).await? {
            Ok(())
        } else {
            Err(self.not_found(id))
        }
    }

    /// Gives several permits back, all or none: if any of `ids` is not held (or expired), nothing
    /// is released and the result is 0; otherwise it is the number released.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_release`].
    ///
    /// # Cancel safety
    ///
    /// As [`PermitExpirableSemaphore::try_release`].
    pub async fn try_release_many(&self, ids: &[PermitId]) -> Result<usize> {
        self.object.check_name()?;
        if ids.is_empty() {
            return Ok(0);
        }
        let mut call = self
            .release_keys(&RELEASE_MANY)
            .arg(epoch_millis())
            .arg(self.object.services.publish);
        for id in ids {
            call = call.arg_bytes(id.as_bytes());
        }
        let released: i64 = self.object.update(call, Replicas::Wait).await?;
        Ok(usize::try_from(released).unwrap_or(0))
    }

    /// Gives the held permit `id` a new lease, from now; returns `false` when it is not held (or
    /// had already expired).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_release`], plus [`Error::InvalidArgument`] for a lease
    /// under 1 ms.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the lease may or may not have been updated.
    pub async fn update_lease_time(&self, id: PermitId, lease: Duration) -> Result<bool> {
        self.object.check_name()?;
        let lease = engine::millis(lease, "a permit's lease")?;
        let now = epoch_millis();
        let call = self
            .reclaiming(&UPDATE_LEASE)
            .arg_bytes(id.as_bytes())
            .arg(now + lease)
            .arg(now)
            .arg(self.object.services.publish);
        Ok(self.object.update::<i64>(call, Replicas::Wait).await? == 1)
    }

    /// How long the held permit `id` has left: `None` for a permit that does not expire.
    ///
    /// # Errors
    ///
    /// [`Error::PermitNotFound`] when it is not held (or expired), else as
    /// [`PermitExpirableSemaphore::try_release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it reads (and counts expired permits back in, which any call may do).
    pub async fn lease_time(&self, id: PermitId) -> Result<Option<Duration>> {
        self.object.check_name()?;
        let call = self
            .reclaiming(&LEASE_TIME)
            .arg_bytes(id.as_bytes())
            .arg(epoch_millis())
            .arg(self.object.services.publish)
            .arg(NON_EXPIRING);
        match self
            .object
            .update::<Option<i64>>(call, Replicas::Wait)
            .await?
        {
            None => Err(self.not_found(id)),
            Some(-1) => Ok(None),
            Some(left) => Ok(Some(Duration::from_millis(left.max(0).unsigned_abs()))),
        }
    }

    /// How many permits are available right now (expired ones counted back in).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::lease_time`].
    pub async fn available_permits(&self) -> Result<i64> {
        Ok(self.counts().await?.0)
    }

    /// How many permits are taken right now (expired ones counted back in).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::lease_time`].
    pub async fn acquired_permits(&self) -> Result<u64> {
        Ok(self.counts().await?.1)
    }

    /// How many permits there are in all, available and taken: Redisson's `getPermits`.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::try_release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`PermitExpirableSemaphore::lease_time`].
    pub async fn permits(&self) -> Result<i64> {
        let (available, taken) = self.counts().await?;
        Ok(available.saturating_add(i64::try_from(taken).unwrap_or(i64::MAX)))
    }

    async fn counts(&self) -> Result<(i64, u64)> {
        self.object.check_name()?;
        let call = self
            .reclaiming(&PERMITS)
            .arg(epoch_millis())
            .arg(self.object.services.publish);
        self.object.update(call, Replicas::Wait).await
    }

    /// The taken permits and when each expires (`None`: never), soonest first, as stored (expired
    /// ones included until a call counts them back in).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::UnexpectedReply`] for a member that is not a 16-byte id,
    /// [`Error::Timeout`] or [`Error::Backend`] as Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn permit_expiries(&self) -> Result<Vec<(PermitId, Option<SystemTime>)>> {
        self.object.check_name()?;
        let members: Vec<(Vec<u8>, String)> = self
            .object
            .services
            .commands
            .query(
                Operation::Query,
                self.object.subject().at(&self.timeouts),
                redis::cmd("ZRANGE")
                    .arg(&*self.timeouts)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES"),
            )
            .await?;
        members
            .into_iter()
            .map(|(id, score)| {
                let bad =
                    || Error::unexpected(Operation::Query, self.object.subject(), (&id, &score));
                let id = PermitId(<[u8; 16]>::try_from(id.as_slice()).map_err(|_| bad())?);
                if score == NON_EXPIRING {
                    return Ok((id, None));
                }
                let at: f64 = score.parse().map_err(|_| bad())?;
                Ok((id, Some(UNIX_EPOCH + Duration::from_millis(millis_of(at)))))
            })
            .collect()
    }

    /// Deletes the semaphore (its available permits and its taken permits); returns whether it
    /// existed.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the semaphore may or may not have been deleted.
    pub async fn delete(&self) -> Result<bool> {
        self.object.delete(&[&self.timeouts]).await
    }

    fn not_found(&self, id: PermitId) -> Error {
        Error::PermitNotFound {
            name: self.object.name.to_string(),
            permit: id.to_string(),
        }
    }

    /// A call with the release scripts' keys: the permits, the channel, the timeouts.
    fn release_keys(&self, script: &'static LazyLock<Script>) -> ScriptCall {
        ScriptCall::new(script)
            .key(&*self.object.name)
            .key(&*self.object.channel)
            .key(&*self.timeouts)
    }

    /// A call with the reclaiming scripts' keys: the permits, the timeouts, the channel.
    fn reclaiming(&self, script: &'static LazyLock<Script>) -> ScriptCall {
        ScriptCall::new(script)
            .key(&*self.object.name)
            .key(&*self.timeouts)
            .key(&*self.object.channel)
    }
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// Decodes the acquire script's reply: `OK` taken; `:<score>` busy until that expiry at the
/// latest; nil busy with nothing that expires.
fn decode_acquire(reply: &Value, now: u64) -> Option<Attempt<()>> {
    let text = match reply {
        Value::Okay => return Some(Attempt::Acquired(())),
        Value::Nil => return Some(Attempt::Busy(RECHECK)),
        Value::SimpleString(text) => text.as_str(),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?,
        _ => return None,
    };
    if text == "OK" {
        return Some(Attempt::Acquired(()));
    }
    let nearest: f64 = text.strip_prefix(':')?.parse().ok()?;
    let until_then = Duration::from_millis(millis_of(nearest).saturating_sub(now));
    Some(Attempt::Busy(until_then.min(RECHECK)))
}

/// An epoch-ms score as whole milliseconds (Redis prints integral scores without a fraction).
fn millis_of(score: f64) -> u64 {
    if score.is_finite() && score > 0.0 {
        // Scores are integral milliseconds well below 2^53; the cast keeps them exactly.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let millis = score as u64;
        millis
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permit_ids_are_32_lower_hex_and_parse_back() {
        let id = PermitId::from_bytes([
            0x00, 0x01, 0x0a, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0,
            0xb0, 0xc0,
        ]);
        assert_eq!(id.to_string(), "00010aff102030405060708090a0b0c0");
        assert_eq!(
            "00010AFF102030405060708090A0B0C0".parse::<PermitId>().ok(),
            Some(id)
        );
        for bad in [
            "",
            "00",
            "zz010aff102030405060708090a0b0c0",
            "é0010aff102030405060708090a0b0c",
        ] {
            assert!(bad.parse::<PermitId>().is_err(), "{bad:?}");
        }
        assert_ne!(PermitId::random(), PermitId::random());
    }

    #[test]
    fn acquire_replies_decode_to_taken_or_a_bound() {
        let now = 1_000_000;
        assert_eq!(
            decode_acquire(&Value::Okay, now),
            Some(Attempt::Acquired(()))
        );
        assert_eq!(
            decode_acquire(&Value::BulkString(b"OK".to_vec()), now),
            Some(Attempt::Acquired(()))
        );
        assert_eq!(
            decode_acquire(&Value::Nil, now),
            Some(Attempt::Busy(RECHECK))
        );
        assert_eq!(
            decode_acquire(&Value::BulkString(b":1000250".to_vec()), now),
            Some(Attempt::Busy(Duration::from_millis(250)))
        );
        assert_eq!(
            decode_acquire(&Value::BulkString(b":999000".to_vec()), now),
            Some(Attempt::Busy(Duration::ZERO)),
            "an expiry already passed: retry at once"
        );
        assert_eq!(
            decode_acquire(&Value::BulkString(b":9000000".to_vec()), now),
            Some(Attempt::Busy(RECHECK)),
            "a far expiry is re-checked"
        );
        assert_eq!(
            decode_acquire(&Value::BulkString(b"nope".to_vec()), now),
            None
        );
        assert_eq!(decode_acquire(&Value::Int(1), now), None);
    }
}
