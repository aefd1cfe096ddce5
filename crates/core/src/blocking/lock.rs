//! The blocking lock handle and its guard, for every lock kind.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::runtime::{Runtime, block_on, release_dropped};
use crate::error::Result;
use crate::kind::LockKind;
use crate::locks::lock::RemainingTtl;
use crate::locks::reentrant::Reentrant;
use crate::locks::rw_lock::{Read, Write};
use crate::owner::Owner;

/// The blocking counterpart of [`crate::ReadWriteLock`].
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl ReadWriteLock {
    pub(super) fn new(read: Lock<Read>, write: Lock<Write>) -> Self {
        Self { read, write }
    }

    /// See [`crate::ReadWriteLock::name`].
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read lock: shared by readers, excluded by a writer.
    pub fn read(&self) -> Lock<Read> {
        self.read.clone()
    }

    /// The write lock: excludes readers and other writers.
    pub fn write(&self) -> Lock<Write> {
        self.write.clone()
    }
}

/// The blocking counterpart of [`crate::Lock`], for every kind; each method blocks until its async
/// twin completes.
pub struct Lock<K: LockKind = Reentrant> {
    inner: crate::Lock<K>,
    runtime: Arc<Runtime>,
}

impl<K: LockKind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<K: LockKind> Lock<K> {
    pub(super) fn new(inner: crate::Lock<K>, runtime: Arc<Runtime>) -> Self {
        Self { inner, runtime }
    }

    /// The async handle and the runtime, for a multi-lock over blocking locks.
    pub(super) fn parts(&self) -> (&crate::Lock<K>, &Arc<Runtime>) {
        (&self.inner, &self.runtime)
    }

    fn guard(&self, guard: crate::Guard<K::Token>) -> Guard<K::Token> {
        Guard::new(guard, self.runtime.clone())
    }

    /// The async handle for a call made now, on this thread: bound to this thread's owner unless the
    /// handle has one of its own.
    fn here(&self) -> crate::Lock<K> {
        self.inner.clone().with_owner(self.acting_owner())
    }

    /// The owner a call here acts as: the bound owner, else the calling thread's (the calling
    /// task's on a thread of an async runtime: see the module docs).
    fn acting_owner(&self) -> Owner {
        self.inner.owner().unwrap_or_else(Owner::blocking_caller)
    }

    /// The owner this handle is bound to ([`Lock::with_owner`]), if any: see
    /// [`crate::Lock::owner`].
    pub fn owner(&self) -> Option<Owner> {
        self.inner.owner()
    }

    /// The owner a call here acts as: the bound owner, else the calling thread's ([`Owner::thread`];
    /// the calling task's on a thread of an async runtime); never `None` on the blocking side. See
    /// [`crate::Lock::current_owner`].
    pub fn current_owner(&self) -> Option<Owner> {
        Some(self.acting_owner())
    }

    /// The lock's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's `getRawName()`).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::Lock::with_owner`].
    pub fn with_owner(self, owner: Owner) -> Self {
        Self {
            inner: self.inner.with_owner(owner),
            runtime: self.runtime,
        }
    }

    /// See [`crate::Lock::channel_of`].
    pub fn channel_of(&self, field: &str) -> Option<String> {
        self.inner.channel_of(field)
    }

    /// See [`crate::Lock::lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock`].
    pub fn lock(&self) -> Result<Guard<K::Token>> {
        block_on(&self.runtime, self.here().lock()).map(|g| self.guard(g))
    }

    /// See [`crate::Lock::lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<Guard<K::Token>> {
        block_on(&self.runtime, self.here().lock_with_lease(lease)).map(|g| self.guard(g))
    }

    /// See [`crate::Lock::try_lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<Guard<K::Token>>> {
        block_on(&self.runtime, self.here().try_lock()).map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::Lock::try_lock_for`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<Guard<K::Token>>> {
        block_on(&self.runtime, self.here().try_lock_for(wait)).map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::Lock::try_lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock_with_lease`].
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Guard<K::Token>>> {
        block_on(&self.runtime, self.here().try_lock_with_lease(wait, lease))
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::Lock::unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::unlock`].
    pub fn unlock(&self, owner: Owner) -> Result<()> {
        block_on(&self.runtime, self.inner.unlock(owner))
    }

    /// See [`crate::Lock::force_unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.force_unlock())
    }

    /// See [`crate::Lock::is_locked`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_locked())
    }

    /// See [`crate::Lock::is_held_by`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_held_by`].
    pub fn is_held_by(&self, owner: Owner) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_held_by(owner))
    }

    /// How many holds this thread's owner (or the bound owner) has: Redisson's `getHoldCount`.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::hold_count_of`].
    pub fn hold_count(&self) -> Result<u32> {
        block_on(&self.runtime, self.inner.hold_count_of(self.acting_owner()))
    }

    /// See [`crate::Lock::hold_count_of`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::hold_count_of`].
    pub fn hold_count_of(&self, owner: Owner) -> Result<u32> {
        block_on(&self.runtime, self.inner.hold_count_of(owner))
    }

    /// Whether this thread's owner (or the bound owner) holds the lock: Redisson's
    /// `isHeldByCurrentThread`, as [`crate::Lock::is_held_by_current`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_held_by`].
    pub fn is_held_by_current(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_held_by(self.acting_owner()))
    }

    /// The former name of [`Lock::is_held_by_current`].
    ///
    /// # Errors
    ///
    /// As [`Lock::is_held_by_current`].
    #[deprecated(note = "use `is_held_by_current`, the async API's name")]
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.is_held_by_current()
    }

    /// See [`crate::Lock::holders`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::holders`].
    pub fn holders(&self) -> Result<Vec<crate::Holder>> {
        block_on(&self.runtime, self.inner.holders())
    }

    /// See [`crate::Lock::remaining_ttl`].
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::remaining_ttl`].
    pub fn remaining_ttl(&self) -> Result<RemainingTtl> {
        block_on(&self.runtime, self.inner.remaining_ttl())
    }
}

impl<K: LockKind> fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Lock").field(&self.inner).finish()
    }
}

impl Lock<crate::kind::Fenced> {
    /// See [`crate::FencedLock::token`].
    ///
    /// # Errors
    ///
    /// As [`crate::FencedLock::token`].
    pub fn token(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.token())
    }
}

impl<K: crate::kind::FairQueue> Lock<K> {
    /// See [`crate::FairLock::queue`].
    ///
    /// # Errors
    ///
    /// As [`crate::FairLock::queue`].
    pub fn queue(&self) -> Result<Vec<crate::QueuedWaiter>> {
        block_on(&self.runtime, self.inner.queue())
    }
}

/// The blocking counterpart of [`crate::Guard`], with the same methods. Dropping it releases the
/// hold before `drop` returns (like a `std::sync::MutexGuard`), or in the background when dropped on
/// a thread of an async runtime (`Drop` never blocks one).
#[must_use = "dropping the guard releases the hold at once"]
pub struct Guard<T: fmt::Debug + Send + 'static = ()> {
    inner: crate::Guard<T>,
    runtime: Arc<Runtime>,
}

/// The blocking counterpart of [`crate::LockGuard`].
pub type LockGuard = Guard<()>;

impl<T: fmt::Debug + Send + 'static> Guard<T> {
    pub(super) fn new(inner: crate::Guard<T>, runtime: Arc<Runtime>) -> Self {
        Self { inner, runtime }
    }

    /// See [`crate::Guard::name`].
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The owner of this hold.
    pub fn owner(&self) -> Owner {
        self.inner.owner()
    }

    /// See [`crate::Guard::field`].
    pub fn field(&self) -> &str {
        self.inner.field()
    }

    /// What the acquisition yielded (a fencing token for a fenced lock); see
    /// [`crate::Guard::token`].
    pub fn token(&self) -> &T {
        self.inner.token()
    }

    /// See [`crate::Guard::is_lease_lost`].
    pub fn is_lease_lost(&self) -> bool {
        self.inner.is_lease_lost()
    }

    /// Blocks until the lease is lost (see [`crate::Guard::lease_lost`]): for a thread that watches
    /// over another's critical section.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`](crate::Error::Closed) when the client's runtime is gone.
    pub fn lease_lost(&self) -> Result<()>
    where
        T: Sync,
    {
        block_on(&self.runtime, async {
            self.inner.lease_lost().await;
            Ok(())
        })
    }

    /// See [`crate::Guard::hold_count`].
    ///
    /// # Errors
    ///
    /// As [`crate::Guard::hold_count`].
    pub fn hold_count(&self) -> Result<u32>
    where
        T: Sync,
    {
        block_on(&self.runtime, self.inner.hold_count())
    }

    /// See [`crate::Guard::unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::Guard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        match self.inner.release() {
            Some(releasing) => block_on(&self.runtime, releasing),
            None => Ok(()),
        }
    }
}

impl<T: fmt::Debug + Send + 'static> Drop for Guard<T> {
    fn drop(&mut self) {
        // A release dropped unawaited finishes in the background, as the async guard's does.
        if let Some(releasing) = self.inner.release() {
            release_dropped(&self.runtime, releasing, |releasing| releasing);
        }
    }
}

impl<T: fmt::Debug + Send + 'static> fmt::Debug for Guard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Guard").field(&self.inner).finish()
    }
}
