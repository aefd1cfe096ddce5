//! Redisson's `RedissonMultiLock` and `RedissonRedLock` (docs/protocol.md §8.3, §8.4): several
//! locks taken as one, all or nothing (or, for the red lock, a majority).
//!
//! # Implementation details
//!
//! A multi-lock is purely client-side: its members are ordinary locks of any kind, possibly on
//! different [`Client`](crate::Client)s (different Redis deployments), and the wire traffic is
//! theirs. It takes them in order, with one owner, following Redisson's arithmetic:
//!
//! * each member waits at most what is left of the whole wait (a red lock: that divided by the
//!   number of members, at least 1 ms); without a wait and a lease, each member is tried once;
//! * with a lease, members are taken for twice the wait (so the first ones cannot expire while the
//!   last ones are awaited), and set to the lease by `PEXPIRE` once all are held;
//! * when a member cannot be taken (busy, or an error), everything taken so far is released; with a
//!   wait left, it starts over from the first member, else it gives up; a red lock tolerates
//!   failures while a majority can still be taken. Before starting over rlock pauses 10–50 ms (at
//!   random), where Redisson starts over at once: the multi-lock that waits for what was just
//!   released then gets it, instead of the releaser taking it straight back (seen in a test: two
//!   opposite-order multi-locks re-taking their own halves round after round);
//! * waiting forever is a loop of tries with a wait of 1.5 s per member (randomised below the
//!   lease when there is one), so that two multi-locks taking the same locks in opposite orders
//!   cannot deadlock: one of them gives up its half and the other completes.
//!
//! Whatever is taken is released when the attempt fails or its future is dropped (each member's
//! guard releases on drop), so no partial hold is left behind.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, join_all, select_all};
use tokio::time::Instant;

use crate::engine::{Guard, Lease, Patience};
use crate::error::{Error, Result};
use crate::locks::lock::Lock;
use crate::locks::lock_kind::LockKind;
use crate::owner::Owner;

/// The wait per member when a multi-lock waits forever: 1.5 s times the number of members, as in
/// Redisson.
const WAIT_PER_MEMBER: Duration = Duration::from_millis(1500);

/// How long a multi-lock that released its members (one was busy) pauses before starting over,
/// drawn at random: long enough for a waiter on another client to be woken and take what was
/// released (a message and a script, about a millisecond on a LAN), so two multi-locks taking the
/// same locks in opposite orders do not keep re-taking their own halves.
const YIELD_AFTER_RELEASE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_millis(50));

/// A lock of any kind, on any client, as a member of a [`MultiLock`] or [`RedLock`]: made with
/// `From` (`lock.into()`, or `AnyLock::from(lock)`).
#[derive(Clone)]
pub struct AnyLock(Arc<dyn Member>);

impl<K: LockKind> From<Lock<K>> for AnyLock
where
    K::Token: Sync,
{
    fn from(lock: Lock<K>) -> Self {
        Self(Arc::new(lock))
    }
}

impl fmt::Debug for AnyLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AnyLock").field(&self.0.name()).finish()
    }
}

/// What a multi-lock needs of a member lock, whatever its kind.
trait Member: Send + Sync {
    fn name(&self) -> &str;

    fn try_lock(
        &self,
        owner: Owner,
        patience: Patience,
        lease: Lease,
    ) -> BoxFuture<'_, Result<Option<Box<dyn Held>>>>;

    fn is_held_by(&self, owner: Owner) -> BoxFuture<'_, Result<bool>>;
}

impl<K: LockKind> Member for Lock<K>
where
    K::Token: Sync,
{
    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn try_lock(
        &self,
        owner: Owner,
        patience: Patience,
        lease: Lease,
    ) -> BoxFuture<'_, Result<Option<Box<dyn Held>>>> {
        Box::pin(async move {
            let guard = self.acquire_as(owner, patience, lease).await?;
            Ok(guard.map(|guard| Box::new(guard) as Box<dyn Held>))
        })
    }

    fn is_held_by(&self, owner: Owner) -> BoxFuture<'_, Result<bool>> {
        Box::pin(Lock::is_held_by(self, owner))
    }
}

/// One member's hold, whatever its kind.
trait Held: Send + Sync + fmt::Debug {
    fn name(&self) -> &str;

    fn expire(&mut self, lease: Duration) -> BoxFuture<'_, Result<()>>;

    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<()>>;

    fn is_lease_lost(&self) -> bool;

    fn lease_lost(&self) -> BoxFuture<'_, ()>;
}

impl<T: fmt::Debug + Send + Sync + 'static> Held for Guard<T> {
    fn name(&self) -> &str {
        Guard::name(self)
    }

    fn expire(&mut self, lease: Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(Guard::expire(self, lease))
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        Box::pin(Guard::unlock(*self))
    }

    fn is_lease_lost(&self) -> bool {
        Guard::is_lease_lost(self)
    }

    fn lease_lost(&self) -> BoxFuture<'_, ()> {
        Box::pin(Guard::lease_lost(self))
    }
}

/// How many members must be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Quorum {
    /// Every member (the multi-lock).
    All,
    /// A majority (the red lock).
    Majority,
}

impl Quorum {
    /// How many members may fail: Redisson's `failedLocksLimit`.
    fn failures_allowed(self, members: usize) -> usize {
        match self {
            Self::All => 0,
            Self::Majority => members - (members / 2 + 1),
        }
    }

    /// How long each member may wait, out of what is left: Redisson's `calcLockWaitTime`.
    fn member_wait(self, remaining: Duration, members: usize) -> Duration {
        match self {
            Self::All => remaining,
            Self::Majority => (remaining / u32::try_from(members).unwrap_or(u32::MAX))
                .max(Duration::from_millis(1)),
        }
    }
}

/// Several locks taken as one, all or nothing: Redisson's `RedissonMultiLock`. The members may be
/// of any kind and on different clients (different Redis deployments); they are taken in order,
/// with one owner (the bound owner, else [`Owner::current`], else a fresh one per acquisition).
///
/// The wait and lease arithmetic is Redisson's: each member waits at most what is left of the whole
/// wait, and with a lease the members are taken for twice the wait, then set to the lease once all
/// are held. A member that cannot be taken releases what was taken; with wait left, it starts over.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// use rlock_redisson::MultiLock;
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let transfer = MultiLock::new([
///     client.lock("doc:multi:account:1"),
///     client.lock("doc:multi:account:2"),
/// ]);
/// let both = transfer.try_lock_for(Duration::from_secs(1)).await?.expect("both free");
/// assert!(client.lock("doc:multi:account:2").is_locked().await?);
/// // ... move money between the two accounts ...
/// both.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    members: Arc<[AnyLock]>,
    quorum: Quorum,
    owner: Option<Owner>,
}

impl MultiLock {
    /// A multi-lock over `locks`, taken in this order. Locks of different kinds go through
    /// [`AnyLock`]: `MultiLock::new([AnyLock::from(a), b.into()])`.
    pub fn new<L: Into<AnyLock>>(locks: impl IntoIterator<Item = L>) -> Self {
        Self::with_quorum(locks, Quorum::All)
    }

    fn with_quorum<L: Into<AnyLock>>(locks: impl IntoIterator<Item = L>, quorum: Quorum) -> Self {
        Self {
            members: locks.into_iter().map(Into::into).collect(),
            quorum,
            owner: None,
        }
    }

    /// The members' names in Redis (mapped, as [`Lock::name`](crate::Lock::name)), in order.
    pub fn names(&self) -> Vec<&str> {
        self.members.iter().map(|member| member.0.name()).collect()
    }

    /// This multi-lock bound to `owner`, as [`Lock::with_owner`].
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The owner this multi-lock is bound to, if any.
    pub fn owner(&self) -> Option<Owner> {
        self.owner
    }

    /// Waits until every member is taken, for holds the watchdog keeps alive.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a multi-lock without members; a member's error when a round
    /// of tries failed because of it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future releases whatever it had taken, and each member's own
    /// acquire is cancel safe.
    pub async fn lock(&self) -> Result<MultiGuard> {
        self.lock_until_held(None).await
    }

    /// Waits until every member is taken, for holds that expire after `lease`.
    ///
    /// # Errors
    ///
    /// As [`MultiLock::lock`], plus [`Error::InvalidArgument`] for a lease under 1 ms.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`MultiLock::lock`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        let _ = Lease::fixed(lease)?;
        self.lock_until_held(Some(lease)).await
    }

    /// Tries every member once; `None` (and nothing held) if one is busy.
    ///
    /// # Errors
    ///
    /// As [`MultiLock::lock`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`MultiLock::lock`].
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.try_lock_as(self.acquiring_owner(), None, None).await
    }

    /// Waits up to `wait` to take every member; `None` (and nothing held) if that did not happen.
    ///
    /// # Errors
    ///
    /// As [`MultiLock::lock`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`MultiLock::lock`].
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.try_lock_as(self.acquiring_owner(), Some(wait), None)
            .await
    }

    /// Waits up to `wait` to take every member, for holds that expire after `lease`.
    ///
    /// # Errors
    ///
    /// As [`MultiLock::lock_with_lease`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`MultiLock::lock`].
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        let _ = Lease::fixed(lease)?;
        self.try_lock_as(self.acquiring_owner(), Some(wait), Some(lease))
            .await
    }

    /// Whether `owner` holds every member: Redisson's `isHeldByThread`.
    ///
    /// # Errors
    ///
    /// A member's error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        for held in join_all(self.members.iter().map(|member| member.0.is_held_by(owner))).await {
            if !held? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether the current owner holds every member: the bound owner, else the enclosing
    /// [`Owner::scope`]'s (or the thread's, outside an async runtime), as
    /// [`Lock::is_held_by_current`](crate::Lock::is_held_by_current).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when there is no current owner
    /// (async code outside a scope with an unbound multi-lock); otherwise a member's error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.is_held_by(Owner::known(self.owner)?).await
    }

    /// A red lock over `locks`: [`RedLock`] as a multi-lock, the blocking API's spelling.
    #[deprecated(
        note = "Redisson deprecates RedLock: use a Lock, or a FencedLock where correctness matters"
    )]
    pub fn red_lock<L: Into<AnyLock>>(locks: impl IntoIterator<Item = L>) -> Self {
        #[allow(deprecated)]
        RedLock::new(locks).0
    }

    fn acquiring_owner(&self) -> Owner {
        self.owner
            .or_else(Owner::current)
            .unwrap_or_else(Owner::new)
    }

    async fn lock_until_held(&self, lease: Option<Duration>) -> Result<MultiGuard> {
        let owner = self.acquiring_owner();
        let base = WAIT_PER_MEMBER * u32::try_from(self.members.len()).unwrap_or(u32::MAX);
        loop {
            let wait = match lease {
                None => base,
                Some(lease) if lease <= base => random_between(lease / 2, lease),
                Some(lease) => random_between(base, lease),
            };
            if let Some(guard) = self.try_lock_as(owner, Some(wait), lease).await? {
                return Ok(guard);
            }
        }
    }

    /// One acquisition by `owner`: docs/protocol.md §8.3's `tryLock(waitTime, leaseTime)`, with
    /// `None` for Redisson's -1 (no wait; no lease, i.e. the watchdog).
    async fn try_lock_as(
        &self,
        owner: Owner,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>> {
        let members = self.members.len();
        if members == 0 {
            return Err(Error::InvalidArgument(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        // A zero wait is no wait, as Redisson's `waitTime <= 0`.
        let wait = wait.filter(|wait| !wait.is_zero());
        let member_lease = match (lease, wait) {
            // Members taken early must not expire while the later ones are awaited.
            (Some(_), Some(wait)) => {
                Lease::fixed(wait.saturating_mul(2).min(crate::config::MAX_LEASE))?
            }
            (Some(lease), None) => Lease::fixed(lease)?,
            (None, _) => Lease::Watchdog,
        };
        let once = wait.is_none() && lease.is_none();
        let allowed = self.quorum.failures_allowed(members);
        let mut remaining = wait;
        let member_wait = remaining.map(|remaining| self.quorum.member_wait(remaining, members));
        let mut failures_left = allowed;
        let mut held: Vec<Box<dyn Held>> = Vec::with_capacity(members);
        let mut last_error = None;
        let mut next = 0;
        let mut mark = Instant::now();
        while next < members {
            let member = &self.members[next].0;
            next += 1;
            let patience = match (member_wait, remaining) {
                (Some(member_wait), Some(remaining)) if !once => member_wait.min(remaining),
                _ => Duration::ZERO,
            };
            match member
                .try_lock(owner, Patience::For(patience), member_lease)
                .await
            {
                Ok(Some(guard)) => held.push(guard),
                failed => {
                    if let Err(e) = failed {
                        tracing::debug!(lock = member.name(), error = %e, "a multi-lock member failed");
                        last_error = Some(e);
                    }
                    if members - held.len() == allowed {
                        break;
                    }
                    if failures_left > 0 {
                        failures_left -= 1;
                    } else {
                        release_all(std::mem::take(&mut held)).await;
                        if wait.is_none() {
                            return last_error.map_or(Ok(None), Err);
                        }
                        // Start over from the first member, with what is left of the wait; but
                        // first let whoever waits for what was just released take it.
                        let pause = random_between(YIELD_AFTER_RELEASE.0, YIELD_AFTER_RELEASE.1);
                        tokio::time::sleep(pause.min(remaining.unwrap_or(pause))).await;
                        failures_left = allowed;
                        last_error = None;
                        next = 0;
                    }
                }
            }
            if let Some(left) = remaining {
                let now = Instant::now();
                let left = left.saturating_sub(now - mark);
                mark = now;
                remaining = Some(left);
                if left.is_zero() {
                    release_all(held).await;
                    return last_error.map_or(Ok(None), Err);
                }
            }
        }
        if let Some(lease) = lease {
            for guard in &mut held {
                guard.expire(lease).await?;
            }
        }
        Ok(Some(MultiGuard {
            held,
            owner,
            quorum: self.quorum,
        }))
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLock")
            .field("members", &self.names())
            .field("quorum", &self.quorum)
            .field("owner", &self.owner)
            .finish()
    }
}

/// A uniformly random duration in `[low, high)`, in whole milliseconds (`low` when empty).
fn random_between(low: Duration, high: Duration) -> Duration {
    let (low, high) = (millis(low), millis(high));
    Duration::from_millis(if low < high {
        fastrand::u64(low..high)
    } else {
        low
    })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Releases holds taken by a failed attempt, all at once; failures are logged (each hold then
/// expires with its lease).
async fn release_all(held: Vec<Box<dyn Held>>) {
    for (name, outcome) in join_all(held.into_iter().map(|guard| {
        let name = guard.name().to_owned();
        async move { (name, guard.unlock().await) }
    }))
    .await
    {
        if let Err(e) = outcome {
            tracing::warn!(lock = %name, error = %e, "releasing a multi-lock member failed");
        }
    }
}

/// The holds of a [`MultiLock`] (or [`RedLock`]), released together. Dropping it releases every
/// member in the background (never blocking); [`MultiGuard::unlock`] releases them and reports.
#[must_use = "dropping the guard releases every member at once"]
pub struct MultiGuard {
    held: Vec<Box<dyn Held>>,
    owner: Owner,
    quorum: Quorum,
}

impl MultiGuard {
    /// The owner of the holds.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The names of the members held, in order (a red lock may hold only a majority).
    pub fn names(&self) -> Vec<&str> {
        self.held.iter().map(|guard| guard.name()).collect()
    }

    /// Whether any member's lease is known to be lost.
    pub fn is_lease_lost(&self) -> bool {
        self.held.iter().any(|guard| guard.is_lease_lost())
    }

    /// Completes when any member's lease is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn lease_lost(&self) {
        let _ = select_all(self.held.iter().map(|guard| guard.lease_lost())).await;
    }

    /// Releases every member, all at once (Redisson's `unlockAsync`).
    ///
    /// # Errors
    ///
    /// The first member's error, for a multi-lock (the other members are released all the same);
    /// none for a red lock, which ignores them as Redisson does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: each member's release completes in the background if dropped.
    pub async fn unlock(mut self) -> Result<()> {
        let held = std::mem::take(&mut self.held);
        let outcomes = join_all(held.into_iter().map(Held::unlock)).await;
        match self.quorum {
            Quorum::All => outcomes.into_iter().collect(),
            Quorum::Majority => Ok(()),
        }
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiGuard")
            .field("held", &self.held)
            .field("owner", &self.owner)
            .finish()
    }
}

/// Redisson's `RedissonRedLock`: a [`MultiLock`] that succeeds with a majority of its members,
/// each waited for at most its share of the wait.
///
/// **Deprecated by Redisson, and not recommended here.** A quorum of independent Redis servers
/// does not make a lock safe: process pauses, network delays and clock jumps can still let two
/// holders overlap (Kleppmann, "How to do distributed locking", 2016), and its random values are
/// no fencing tokens. Redisson's own advice, which rlock follows: one [`Lock`] (with replica
/// acknowledgement, see [`Config`](crate::Config)) for efficiency, and a
/// [`FencedLock`](crate::FencedLock) whose token the protected resource checks where correctness
/// matters. It is here for code that shares red locks with Java.
#[deprecated(
    note = "Redisson deprecates RedLock: use a Lock, or a FencedLock where correctness matters"
)]
#[derive(Clone, Debug)]
pub struct RedLock(MultiLock);

#[allow(deprecated)]
impl RedLock {
    /// A red lock over `locks` (usually one per independent Redis deployment).
    pub fn new<L: Into<AnyLock>>(locks: impl IntoIterator<Item = L>) -> Self {
        tracing::warn!("RedLock is deprecated (as in Redisson): use a Lock or a FencedLock");
        Self(MultiLock::with_quorum(locks, Quorum::Majority))
    }

    /// The multi-lock API, with the red lock's quorum.
    pub fn as_multi_lock(&self) -> &MultiLock {
        &self.0
    }

    /// This red lock bound to `owner`.
    pub fn with_owner(self, owner: Owner) -> Self {
        Self(self.0.with_owner(owner))
    }
}

#[allow(deprecated)]
impl std::ops::Deref for RedLock {
    type Target = MultiLock;

    fn deref(&self) -> &MultiLock {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorums_follow_redisson() {
        assert_eq!(Quorum::All.failures_allowed(3), 0);
        assert_eq!(Quorum::Majority.failures_allowed(1), 0);
        assert_eq!(Quorum::Majority.failures_allowed(3), 1);
        assert_eq!(Quorum::Majority.failures_allowed(4), 1);
        assert_eq!(Quorum::Majority.failures_allowed(5), 2);
        let second = Duration::from_secs(1);
        assert_eq!(Quorum::All.member_wait(second, 3), second);
        assert_eq!(
            Quorum::Majority.member_wait(second, 4),
            Duration::from_millis(250)
        );
        assert_eq!(
            Quorum::Majority.member_wait(Duration::ZERO, 3),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn random_waits_stay_in_their_range() {
        for _ in 0..100 {
            let wait = random_between(Duration::from_millis(10), Duration::from_millis(20));
            assert!((10..20).contains(&wait.as_millis()), "{wait:?}");
        }
        assert_eq!(
            random_between(Duration::from_millis(1), Duration::from_millis(1)),
            Duration::from_millis(1)
        );
    }
}
