//! The blocking group lock: [`crate::GroupLock`], owned by the calling thread.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::lock::Guard;
use super::runtime::{Runtime, block_on};
use crate::error::Result;
use crate::owner::Owner;

/// The blocking counterpart of [`crate::GroupLock`]. As for every blocking lock, the owner of a
/// call is the calling thread unless the handle is bound to an owner.
#[derive(Clone)]
pub struct GroupLock {
    inner: crate::GroupLock,
    runtime: Arc<Runtime>,
}

impl GroupLock {
    pub(super) fn new(inner: crate::GroupLock, runtime: Arc<Runtime>) -> Self {
        Self { inner, runtime }
    }

    /// The async handle for a call made now, on this thread: bound to this thread's owner unless the
    /// handle has one of its own.
    fn here(&self) -> crate::GroupLock {
        self.inner.clone().with_owner(self.acting_owner())
    }

    fn acting_owner(&self) -> Owner {
        self.inner.owner().unwrap_or_else(Owner::blocking_caller)
    }

    fn guard(&self, guard: crate::GroupGuard) -> GroupGuard {
        GroupGuard(Guard::new(guard.into_inner(), self.runtime.clone()))
    }

    /// See [`crate::GroupLock::name`].
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::GroupLock::value_hashes`].
    pub fn value_hashes(&self) -> &[String] {
        self.inner.value_hashes()
    }

    /// See [`crate::GroupLock::with_owner`].
    #[must_use]
    pub fn with_owner(self, owner: Owner) -> Self {
        Self {
            inner: self.inner.with_owner(owner),
            runtime: self.runtime,
        }
    }

    /// The owner this handle is bound to, if any.
    pub fn owner(&self) -> Option<Owner> {
        self.inner.owner()
    }

    /// The owner a call here acts as: the bound owner, else the calling thread's; never `None` on
    /// the blocking side. See [`crate::GroupLock::current_owner`].
    pub fn current_owner(&self) -> Option<Owner> {
        Some(self.acting_owner())
    }

    /// See [`crate::GroupLock::lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::lock`].
    pub fn lock(&self) -> Result<GroupGuard> {
        block_on(&self.runtime, self.here().lock()).map(|g| self.guard(g))
    }

    /// See [`crate::GroupLock::lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<GroupGuard> {
        block_on(&self.runtime, self.here().lock_with_lease(lease)).map(|g| self.guard(g))
    }

    /// See [`crate::GroupLock::try_lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<GroupGuard>> {
        block_on(&self.runtime, self.here().try_lock()).map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::GroupLock::try_lock_for`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<GroupGuard>> {
        block_on(&self.runtime, self.here().try_lock_for(wait)).map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::GroupLock::try_lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::try_lock_with_lease`].
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<GroupGuard>> {
        block_on(&self.runtime, self.here().try_lock_with_lease(wait, lease))
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::GroupLock::unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::unlock`].
    pub fn unlock(&self, owner: Owner) -> Result<()> {
        block_on(&self.runtime, self.inner.unlock(owner))
    }

    /// See [`crate::GroupLock::force_unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.force_unlock())
    }

    /// See [`crate::GroupLock::is_locked`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_locked())
    }

    /// See [`crate::GroupLock::is_held_by`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::is_held_by`].
    pub fn is_held_by(&self, owner: Owner) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_held_by(owner))
    }

    /// Whether this thread's owner (or the bound owner) holds every value: Redisson's
    /// `isHeldByCurrentThread`.
    ///
    /// # Errors
    ///
    /// As [`crate::GroupLock::is_held_by`].
    pub fn is_held_by_current(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_held_by(self.acting_owner()))
    }
}

impl fmt::Debug for GroupLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::GroupLock")
            .field(&self.inner)
            .finish()
    }
}

/// The blocking counterpart of [`crate::GroupGuard`]. Dropping it releases the values before
/// `drop` returns, or in the background when dropped on a thread of an async runtime.
#[must_use = "dropping the guard releases the values at once"]
#[derive(Debug)]
pub struct GroupGuard(Guard<()>);

impl GroupGuard {
    /// See [`crate::GroupGuard::name`].
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The owner of the holds.
    pub fn owner(&self) -> Owner {
        self.0.owner()
    }

    /// See [`crate::GroupGuard::field`].
    pub fn field(&self) -> &str {
        self.0.field()
    }

    /// See [`crate::GroupGuard::is_lease_lost`].
    pub fn is_lease_lost(&self) -> bool {
        self.0.is_lease_lost()
    }

    /// Blocks until the holds are lost (see [`crate::GroupGuard::lease_lost`]).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`](crate::Error::Closed) when the client's runtime is gone.
    pub fn lease_lost(&self) -> Result<()> {
        self.0.lease_lost()
    }

    /// See [`crate::GroupGuard::unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::GroupGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        self.0.unlock()
    }
}
