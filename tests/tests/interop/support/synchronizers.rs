//! The synchronizers of either side behind one interface, as [`Party::get`] does for the locks:
//! [`Party::semaphore`] hands out a [`PartySemaphore`] of either [`SemaphoreKind`] (the scenarios
//! both kinds share are written once over it, [`both_semaphores!`]), [`Party::expirable`] a
//! [`PartyExpirable`] for what only the permit-expirable semaphore has (ids, leases), and
//! [`Party::count_down_latch`] a [`PartyLatch`].
//!
//! Permit ids travel between the sides as Redisson's API has them: 32 lower-case hex characters
//! (rlock's [`rlock_redisson::PermitId`] prints and parses that form).

use std::fmt;
use std::time::Duration;

use rlock_redisson::PermitId;
use rlock_tests::redisson::{JavaCountDownLatch, JavaPermitExpirableSemaphore, JavaSemaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Party;

/// The two semaphores both sides implement, for the scenarios they share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SemaphoreKind {
    /// `RSemaphore` (`getSemaphore`), rlock's `Semaphore` (§8.5).
    Plain,
    /// `RPermitExpirableSemaphore` (`getPermitExpirableSemaphore`), rlock's
    /// `PermitExpirableSemaphore` (§8.6); its permits are taken without a lease here.
    Expirable,
}

impl fmt::Display for SemaphoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Plain => "RSemaphore",
            Self::Expirable => "RPermitExpirableSemaphore",
        })
    }
}

impl Party {
    /// The `kind` semaphore `name` (Java: a new object, as `getSemaphore` makes).
    pub(crate) fn semaphore(&self, kind: SemaphoreKind, name: &str) -> PartySemaphore {
        match (kind, self) {
            (SemaphoreKind::Plain, Self::Java(java)) => {
                PartySemaphore::Java(java.get_semaphore(name))
            }
            (SemaphoreKind::Plain, Self::Rlock(client)) => {
                PartySemaphore::Rlock(client.semaphore(name))
            }
            (SemaphoreKind::Expirable, _) => PartySemaphore::Expirable(self.expirable(name)),
        }
    }

    /// The permit-expirable semaphore `name`.
    pub(crate) fn expirable(&self, name: &str) -> PartyExpirable {
        match self {
            Self::Java(java) => PartyExpirable::Java(java.get_permit_expirable_semaphore(name)),
            Self::Rlock(client) => PartyExpirable::Rlock(client.permit_expirable_semaphore(name)),
        }
    }

    /// The count-down latch `name`.
    pub(crate) fn count_down_latch(&self, name: &str) -> PartyLatch {
        match self {
            Self::Java(java) => PartyLatch::Java(java.get_count_down_latch(name)),
            Self::Rlock(client) => PartyLatch::Rlock(client.count_down_latch(name)),
        }
    }
}

// ===== semaphores of either kind =====

/// A semaphore of either side and either [`SemaphoreKind`].
#[derive(Clone, Debug)]
pub(crate) enum PartySemaphore {
    Java(JavaSemaphore),
    Rlock(rlock_redisson::Semaphore),
    Expirable(PartyExpirable),
}

impl PartySemaphore {
    /// `trySetPermits(permits)`: whether the semaphore was set up now.
    pub(crate) async fn try_set_permits(&self, permits: u32) -> bool {
        match self {
            Self::Java(semaphore) => semaphore.try_set_permits(permits).await.expect("java"),
            Self::Rlock(semaphore) => semaphore.try_set_permits(permits).await.expect("rlock"),
            Self::Expirable(semaphore) => semaphore.try_set_permits(permits).await,
        }
    }

    /// `availablePermits()` (the permit-expirable semaphore's counts expired permits back in).
    pub(crate) async fn available_permits(&self) -> i64 {
        match self {
            Self::Java(semaphore) => semaphore.available_permits().await.expect("java"),
            Self::Rlock(semaphore) => semaphore.available_permits().await.expect("rlock"),
            Self::Expirable(semaphore) => semaphore.available_permits().await,
        }
    }

    /// Waits for `permits` permits and takes them (the permit-expirable semaphore's never expire).
    pub(crate) async fn acquire(&self, permits: u32) -> Permits {
        match self {
            Self::Java(semaphore) => {
                semaphore.acquire(permits).await.expect("java acquire");
                Permits::Java {
                    semaphore: semaphore.clone(),
                    permits,
                }
            }
            Self::Rlock(semaphore) => {
                Permits::Rlock(semaphore.acquire(permits).await.expect("rlock acquire"))
            }
            Self::Expirable(semaphore) => Permits::Expirable {
                ids: semaphore.acquire_many(permits, None).await,
                semaphore: semaphore.clone(),
            },
        }
    }

    /// Waits up to `wait` (zero: one try) for `permits` permits.
    pub(crate) async fn try_acquire_for(&self, permits: u32, wait: Duration) -> Option<Permits> {
        match self {
            Self::Java(semaphore) => {
                let taken = semaphore.try_acquire_for(permits, wait).await;
                taken.expect("java tryAcquire").then(|| Permits::Java {
                    semaphore: semaphore.clone(),
                    permits,
                })
            }
            Self::Rlock(semaphore) => {
                let taken = semaphore.try_acquire_for(permits, wait).await;
                taken.expect("rlock try_acquire_for").map(Permits::Rlock)
            }
            Self::Expirable(semaphore) => {
                let ids = semaphore.try_acquire_many(permits, wait, None).await?;
                Some(Permits::Expirable {
                    semaphore: semaphore.clone(),
                    ids,
                })
            }
        }
    }

    /// [`PartySemaphore::acquire`] on a task; the task returns when it took the permits.
    pub(crate) fn spawn_acquire(&self, permits: u32) -> JoinHandle<(Instant, Permits)> {
        let semaphore = self.clone();
        tokio::spawn(async move {
            let taken = semaphore.acquire(permits).await;
            (Instant::now(), taken)
        })
    }

    /// The plain semaphore behind this one.
    fn plain(&self) -> PlainSemaphore<'_> {
        match self {
            Self::Java(semaphore) => PlainSemaphore::Java(semaphore),
            Self::Rlock(semaphore) => PlainSemaphore::Rlock(semaphore),
            Self::Expirable(_) => panic!("not an RSemaphore"),
        }
    }

    /// `releaseIfExists(permits)` of an `RSemaphore`.
    pub(crate) async fn release_if_exists(&self, permits: u32) -> bool {
        match self.plain() {
            PlainSemaphore::Java(semaphore) => {
                semaphore.release_if_exists(permits).await.expect("java")
            }
            PlainSemaphore::Rlock(semaphore) => {
                semaphore.release_if_exists(permits).await.expect("rlock")
            }
        }
    }

    /// `trySetPermits(permits, timeToLive)` of an `RSemaphore`.
    pub(crate) async fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> bool {
        match self.plain() {
            PlainSemaphore::Java(semaphore) => {
                let set = semaphore.try_set_permits_with_ttl(permits, ttl).await;
                set.expect("java")
            }
            PlainSemaphore::Rlock(semaphore) => {
                let set = semaphore.try_set_permits_with_ttl(permits, ttl).await;
                set.expect("rlock")
            }
        }
    }

    /// `addPermits(permits)` of either kind (negative: removes them).
    pub(crate) async fn add_permits(&self, permits: i64) {
        match self {
            Self::Java(semaphore) => semaphore.add_permits(permits).await.expect("java"),
            Self::Rlock(semaphore) => semaphore.add_permits(permits).await.expect("rlock"),
            Self::Expirable(semaphore) => semaphore.add_permits(permits).await,
        }
    }

    /// `drainPermits()` of an `RSemaphore`: how many there were.
    pub(crate) async fn drain_permits(&self) -> i64 {
        match self.plain() {
            PlainSemaphore::Java(semaphore) => semaphore.drain_permits().await.expect("java"),
            PlainSemaphore::Rlock(semaphore) => semaphore.drain_permits().await.expect("rlock"),
        }
    }
}

/// An `RSemaphore` of either side, borrowed from a [`PartySemaphore`].
enum PlainSemaphore<'a> {
    Java(&'a JavaSemaphore),
    Rlock(&'a rlock_redisson::Semaphore),
}

/// Permits taken from a [`PartySemaphore`], given back together by [`Permits::release`].
#[derive(Debug)]
#[must_use = "permits should be given back"]
pub(crate) enum Permits {
    /// Taken by Java from an `RSemaphore`: a count, released as such (`release(permits)`).
    Java {
        semaphore: JavaSemaphore,
        permits: u32,
    },
    /// rlock's guard.
    Rlock(rlock_redisson::SemaphorePermits),
    /// Taken from a permit-expirable semaphore: their ids.
    Expirable {
        semaphore: PartyExpirable,
        ids: Vec<String>,
    },
}

impl Permits {
    /// Gives them back: `release(permits)`, the guard's release, or, by id, `release(id)` for one
    /// permit and `tryRelease(ids)` for several (which publishes how many).
    pub(crate) async fn release(self) {
        match self {
            Self::Java { semaphore, permits } => {
                semaphore.release(permits).await.expect("java release");
            }
            Self::Rlock(guard) => guard.release().await.expect("rlock release"),
            Self::Expirable { semaphore, ids } => match ids.as_slice() {
                [id] => semaphore.release(id).await,
                ids => {
                    let released = semaphore.try_release_many(ids).await;
                    assert_eq!(released, ids.len(), "every permit was still held");
                }
            },
        }
    }
}

// ===== the permit-expirable semaphore =====

/// A permit-expirable semaphore of either side. Ids are hex; leases are `None` for permits that
/// never expire.
#[derive(Clone, Debug)]
pub(crate) enum PartyExpirable {
    Java(JavaPermitExpirableSemaphore),
    Rlock(rlock_redisson::PermitExpirableSemaphore),
}

/// An id in hex, as rlock takes it.
fn permit_id(hex: &str) -> PermitId {
    hex.parse().expect("a 32-hex-digit permit id")
}

impl PartyExpirable {
    /// `trySetPermits(permits)`.
    pub(crate) async fn try_set_permits(&self, permits: u32) -> bool {
        match self {
            Self::Java(semaphore) => semaphore.try_set_permits(permits).await.expect("java"),
            Self::Rlock(semaphore) => semaphore.try_set_permits(permits).await.expect("rlock"),
        }
    }

    /// `setPermits(permits)`: the total, taken permits included.
    pub(crate) async fn set_permits(&self, permits: u32) {
        match self {
            Self::Java(semaphore) => semaphore.set_permits(permits.into()).await.expect("java"),
            Self::Rlock(semaphore) => semaphore.set_permits(permits).await.expect("rlock"),
        }
    }

    /// `addPermits(permits)` (negative: removes them).
    pub(crate) async fn add_permits(&self, permits: i64) {
        match self {
            Self::Java(semaphore) => semaphore.add_permits(permits).await.expect("java"),
            Self::Rlock(semaphore) => semaphore.add_permits(permits).await.expect("rlock"),
        }
    }

    /// `availablePermits()`, expired permits counted back in first.
    pub(crate) async fn available_permits(&self) -> i64 {
        match self {
            Self::Java(semaphore) => semaphore.available_permits().await.expect("java"),
            Self::Rlock(semaphore) => semaphore.available_permits().await.expect("rlock"),
        }
    }

    /// `acquiredPermits()`, expired permits counted back in first.
    pub(crate) async fn acquired_permits(&self) -> i64 {
        match self {
            Self::Java(semaphore) => semaphore.acquired_permits().await.expect("java"),
            Self::Rlock(semaphore) => {
                let taken = semaphore.acquired_permits().await.expect("rlock");
                i64::try_from(taken).expect("a count")
            }
        }
    }

    /// Waits for one permit and takes it for `lease`: its id.
    pub(crate) async fn acquire(&self, lease: Option<Duration>) -> String {
        let mut ids = self.acquire_many(1, lease).await;
        ids.pop().expect("one id")
    }

    /// Waits for `permits` permits and takes them together for `lease`: their ids.
    pub(crate) async fn acquire_many(&self, permits: u32, lease: Option<Duration>) -> Vec<String> {
        match self {
            Self::Java(semaphore) => semaphore.acquire_many(permits, lease).await.expect("java"),
            Self::Rlock(semaphore) => {
                let ids = semaphore.acquire_many(permits, lease).await.expect("rlock");
                ids.iter().map(PermitId::to_string).collect()
            }
        }
    }

    /// Waits up to `wait` (zero: one try) for one permit, taken for `lease`.
    pub(crate) async fn try_acquire(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Option<String> {
        let mut ids = self.try_acquire_many(1, wait, lease).await?;
        ids.pop()
    }

    /// Waits up to `wait` (zero: one try) for `permits` permits, taken together for `lease`. Java
    /// takes one permit per call.
    async fn try_acquire_many(
        &self,
        permits: u32,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Option<Vec<String>> {
        match self {
            Self::Java(semaphore) => {
                assert_eq!(permits, 1, "the emulator's tryAcquire takes one permit");
                let id = semaphore.try_acquire(wait, lease).await.expect("java");
                id.map(|id| vec![id])
            }
            Self::Rlock(semaphore) => {
                let ids = semaphore.try_acquire_many(permits, wait, lease).await;
                let ids = ids.expect("rlock try_acquire_many")?;
                Some(ids.iter().map(PermitId::to_string).collect())
            }
        }
    }

    /// [`PartyExpirable::acquire`] on a task; the task returns when it took the permit.
    pub(crate) fn spawn_acquire(&self, lease: Option<Duration>) -> JoinHandle<(Instant, String)> {
        let semaphore = self.clone();
        tokio::spawn(async move {
            let id = semaphore.acquire(lease).await;
            (Instant::now(), id)
        })
    }

    /// `tryRelease(id)`: whether the permit was held (and had not expired).
    pub(crate) async fn try_release(&self, id: &str) -> bool {
        match self {
            Self::Java(semaphore) => semaphore.try_release(id).await.expect("java"),
            Self::Rlock(semaphore) => semaphore.try_release(permit_id(id)).await.expect("rlock"),
        }
    }

    /// `release(id)` of a permit that must still be held.
    pub(crate) async fn release(&self, id: &str) {
        assert!(self.try_release(id).await, "permit {id} was still held");
    }

    /// `tryRelease(ids)`: all or nothing; how many were released.
    pub(crate) async fn try_release_many(&self, ids: &[String]) -> usize {
        match self {
            Self::Java(semaphore) => {
                let released = semaphore.try_release_many(ids).await.expect("java");
                usize::try_from(released).expect("a count")
            }
            Self::Rlock(semaphore) => {
                let ids: Vec<PermitId> = ids.iter().map(|id| permit_id(id)).collect();
                semaphore.try_release_many(&ids).await.expect("rlock")
            }
        }
    }

    /// `getLeaseTime(id)` in Java's terms: the ms left, `-1` for a permit that never expires;
    /// `None` for one that is not held (Java throws).
    pub(crate) async fn lease_time(&self, id: &str) -> Option<i64> {
        match self {
            Self::Java(semaphore) => semaphore.lease_time(id).await.expect("java"),
            Self::Rlock(semaphore) => match semaphore.lease_time(permit_id(id)).await {
                Ok(None) => Some(-1),
                Ok(Some(left)) => Some(i64::try_from(left.as_millis()).expect("ms")),
                Err(rlock_redisson::Error::PermitNotFound { .. }) => None,
                Err(e) => panic!("rlock lease_time: {e}"),
            },
        }
    }

    /// `updateLeaseTime(id, lease)`: whether the permit was held.
    pub(crate) async fn update_lease_time(&self, id: &str, lease: Duration) -> bool {
        match self {
            Self::Java(semaphore) => semaphore.update_lease_time(id, lease).await.expect("java"),
            Self::Rlock(semaphore) => {
                let updated = semaphore.update_lease_time(permit_id(id), lease).await;
                updated.expect("rlock")
            }
        }
    }
}

// ===== the count-down latch =====

/// A count-down latch of either side.
#[derive(Clone, Debug)]
pub(crate) enum PartyLatch {
    Java(JavaCountDownLatch),
    Rlock(rlock_redisson::CountDownLatch),
}

impl PartyLatch {
    /// `trySetCount(count)`: whether the count was set now.
    pub(crate) async fn try_set_count(&self, count: u64) -> bool {
        match self {
            Self::Java(latch) => latch.try_set_count(count).await.expect("java"),
            Self::Rlock(latch) => latch.try_set_count(count).await.expect("rlock"),
        }
    }

    /// `countDown()`.
    pub(crate) async fn count_down(&self) {
        match self {
            Self::Java(latch) => latch.count_down().await.expect("java"),
            Self::Rlock(latch) => latch.count_down().await.expect("rlock"),
        }
    }

    /// `getCount()`: 0 when open.
    pub(crate) async fn count(&self) -> u64 {
        match self {
            Self::Java(latch) => {
                let count = latch.count().await.expect("java");
                u64::try_from(count).expect("a count is never negative")
            }
            Self::Rlock(latch) => latch.count().await.expect("rlock"),
        }
    }

    /// `delete()`: whether there was a count.
    pub(crate) async fn delete(&self) -> bool {
        match self {
            Self::Java(latch) => latch.delete().await.expect("java"),
            Self::Rlock(latch) => latch.delete().await.expect("rlock"),
        }
    }

    /// `await(timeout)`: whether the count reached zero in time.
    pub(crate) async fn await_for(&self, timeout: Duration) -> bool {
        match self {
            Self::Java(latch) => latch.await_for(timeout).await.expect("java"),
            Self::Rlock(latch) => latch.await_for(timeout).await.expect("rlock"),
        }
    }

    /// `await()` on a task; the task returns when the latch let it through.
    pub(crate) fn spawn_await(&self) -> JoinHandle<Instant> {
        let latch = self.clone();
        tokio::spawn(async move {
            match &latch {
                PartyLatch::Java(latch) => latch.await_zero().await.expect("java await"),
                PartyLatch::Rlock(latch) => latch.await_zero().await.expect("rlock await"),
            }
            Instant::now()
        })
    }
}

/// Instantiates a scenario written over a [`SemaphoreKind`] for both kinds, as module
/// `<scenario>::<plain|expirable>`:
/// - `both_semaphores!(one_test: scenario)` for `scenario(kind: SemaphoreKind)`: the tests
///   `<scenario>::plain` and `<scenario>::expirable`;
/// - `both_semaphores!(both_directions: scenario)` for `scenario(kind, a: Side, b: Side)`: the
///   tests `<scenario>::<kind>::java_to_rlock` and `…::rlock_to_java`.
macro_rules! both_semaphores {
    ($shape:ident: $($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            $crate::support::both_semaphores!(
                @$shape plain, $crate::support::SemaphoreKind::Plain, $scenario
            );
            $crate::support::both_semaphores!(
                @$shape expirable, $crate::support::SemaphoreKind::Expirable, $scenario
            );
        }
    )*};
    (@one_test $name:ident, $kind:expr, $scenario:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::$scenario($kind).await;
        }
    };
    (@both_directions $name:ident, $kind:expr, $scenario:ident) => {
        mod $name {
            $crate::support::directions!(super::super::$scenario, $kind);
        }
    };
}

pub(crate) use both_semaphores;
