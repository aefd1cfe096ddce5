//! The blocking multi-lock: [`crate::MultiLock`] over blocking locks, owned by the calling thread.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::lock::Lock;
use super::runtime::{Runtime, block_on, release_dropped};
use crate::error::{Error, Result};
use crate::kind::LockKind;
use crate::owner::Owner;

/// A blocking lock of any kind, as a member of a [`MultiLock`]: made with `From`.
#[derive(Clone, Debug)]
pub struct AnyLock {
    inner: crate::AnyLock,
    runtime: Arc<Runtime>,
}

impl<K: LockKind> From<Lock<K>> for AnyLock
where
    K::Token: Sync,
{
    fn from(lock: Lock<K>) -> Self {
        let (inner, runtime) = lock.parts();
        Self {
            inner: inner.clone().into(),
            runtime: runtime.clone(),
        }
    }
}

/// The blocking counterpart of [`crate::MultiLock`]. As for every blocking lock, the owner of a
/// call is the calling thread unless the multi-lock is bound to an owner.
#[derive(Clone)]
pub struct MultiLock {
    inner: crate::MultiLock,
    /// The first member's client runtime, which the calls block on; `None` without members.
    runtime: Option<Arc<Runtime>>,
}

impl MultiLock {
    /// A multi-lock over `locks`, taken in this order (they may come from different clients).
    pub fn new<L: Into<AnyLock>>(locks: impl IntoIterator<Item = L>) -> Self {
        Self::over(locks, crate::MultiLock::new)
    }

    /// A red lock over `locks`: see [`crate::RedLock`], and why Redisson deprecates it.
    #[deprecated(
        note = "Redisson deprecates RedLock: use a Lock, or a FencedLock where correctness matters"
    )]
    pub fn red_lock<L: Into<AnyLock>>(locks: impl IntoIterator<Item = L>) -> Self {
        #[allow(deprecated)]
        Self::over(locks, |members| {
            crate::RedLock::new(members).as_multi_lock().clone()
        })
    }

    fn over<L: Into<AnyLock>>(
        locks: impl IntoIterator<Item = L>,
        make: impl FnOnce(Vec<crate::AnyLock>) -> crate::MultiLock,
    ) -> Self {
        let members: Vec<AnyLock> = locks.into_iter().map(Into::into).collect();
        let runtime = members.first().map(|member| member.runtime.clone());
        Self {
            inner: make(members.into_iter().map(|member| member.inner).collect()),
            runtime,
        }
    }

    fn run<T: Send>(&self, work: impl Future<Output = Result<T>> + Send) -> Result<T> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("a multi-lock needs at least one lock".into()))?;
        block_on(runtime, work)
    }

    /// The async multi-lock for a call made now, on this thread.
    fn here(&self) -> crate::MultiLock {
        self.inner.clone().with_owner(self.acting_owner())
    }

    fn guard(&self, inner: crate::MultiGuard) -> MultiGuard {
        MultiGuard {
            owner: inner.owner(),
            inner: Some(inner),
            runtime: self.runtime.clone(),
        }
    }

    /// The owner a call here acts as: the bound owner, else the calling thread's (the calling
    /// task's on a thread of an async runtime: see the module docs).
    fn acting_owner(&self) -> Owner {
        self.inner.owner().unwrap_or_else(Owner::blocking_caller)
    }

    /// The owner this multi-lock is bound to, if any: see [`crate::MultiLock::owner`].
    pub fn owner(&self) -> Option<Owner> {
        self.inner.owner()
    }

    /// See [`crate::MultiLock::with_owner`].
    pub fn with_owner(self, owner: Owner) -> Self {
        Self {
            inner: self.inner.with_owner(owner),
            runtime: self.runtime,
        }
    }

    /// The members' names in Redis (mapped, as [`Lock::name`](crate::Lock::name)), in order.
    pub fn names(&self) -> Vec<&str> {
        self.inner.names()
    }

    /// See [`crate::MultiLock::lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::lock`].
    pub fn lock(&self) -> Result<MultiGuard> {
        self.run(self.here().lock()).map(|g| self.guard(g))
    }

    /// See [`crate::MultiLock::lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        self.run(self.here().lock_with_lease(lease))
            .map(|g| self.guard(g))
    }

    /// See [`crate::MultiLock::try_lock`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.run(self.here().try_lock())
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::MultiLock::try_lock_for`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.run(self.here().try_lock_for(wait))
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::MultiLock::try_lock_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::try_lock_with_lease`].
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.run(self.here().try_lock_with_lease(wait, lease))
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// See [`crate::MultiLock::is_held_by`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::is_held_by`].
    pub fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.run(self.inner.is_held_by(owner))
    }

    /// Whether this thread's owner (or the bound owner) holds every member: see
    /// [`crate::MultiLock::is_held_by_current`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::is_held_by`].
    pub fn is_held_by_current(&self) -> Result<bool> {
        self.is_held_by(self.acting_owner())
    }

    /// The former name of [`MultiLock::is_held_by_current`].
    ///
    /// # Errors
    ///
    /// As [`MultiLock::is_held_by_current`].
    #[deprecated(note = "use `is_held_by_current`, the async API's name")]
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.is_held_by_current()
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::MultiLock")
            .field(&self.inner)
            .finish()
    }
}

/// The blocking counterpart of [`crate::MultiGuard`]. Dropping it releases every member before
/// `drop` returns, or in the background when dropped inside a runtime.
#[must_use = "dropping the guard releases every member at once"]
pub struct MultiGuard {
    owner: Owner,
    inner: Option<crate::MultiGuard>,
    runtime: Option<Arc<Runtime>>,
}

impl MultiGuard {
    /// The owner of every member's hold.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// Blocks until a member's lease is lost: see [`crate::MultiGuard::lease_lost`].
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the client's runtime is gone.
    pub fn lease_lost(&self) -> Result<()> {
        match (&self.inner, &self.runtime) {
            (Some(guard), Some(runtime)) => block_on(runtime, async {
                guard.lease_lost().await;
                Ok(())
            }),
            _ => Ok(()),
        }
    }

    /// The names of the members held.
    pub fn names(&self) -> Vec<&str> {
        self.inner
            .as_ref()
            .map_or_else(Vec::new, crate::MultiGuard::names)
    }

    /// See [`crate::MultiGuard::is_lease_lost`].
    pub fn is_lease_lost(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(crate::MultiGuard::is_lease_lost)
    }

    /// See [`crate::MultiGuard::unlock`].
    ///
    /// # Errors
    ///
    /// As [`crate::MultiGuard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        match (self.inner.take(), &self.runtime) {
            (Some(guard), Some(runtime)) => block_on(runtime, guard.unlock()),
            _ => Ok(()),
        }
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        if let (Some(guard), Some(runtime)) = (self.inner.take(), &self.runtime) {
            release_dropped(runtime, guard, crate::MultiGuard::unlock);
        }
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::MultiGuard")
            .field(&self.inner)
            .finish()
    }
}
