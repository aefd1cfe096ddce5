//! The blocking semaphores and count-down latch: each method blocks until its async twin completes.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::runtime::{Runtime, block_on, release_dropped};
use crate::PermitId;
use crate::error::Result;

/// The blocking counterpart of [`crate::Semaphore`].
#[derive(Clone)]
pub struct Semaphore {
    inner: crate::Semaphore,
    runtime: Arc<Runtime>,
}

impl Semaphore {
    pub(super) fn new(inner: crate::Semaphore, runtime: Arc<Runtime>) -> Self {
        Self { inner, runtime }
    }

    fn permits(&self, inner: crate::SemaphorePermits) -> SemaphorePermits {
        SemaphorePermits {
            inner: Some(inner),
            runtime: self.runtime.clone(),
        }
    }

    /// The semaphore's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's `getRawName()`).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::Semaphore::try_set_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        block_on(&self.runtime, self.inner.try_set_permits(permits))
    }

    /// See [`crate::Semaphore::try_set_permits_with_ttl`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::try_set_permits_with_ttl`].
    pub fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        block_on(
            &self.runtime,
            self.inner.try_set_permits_with_ttl(permits, ttl),
        )
    }

    /// See [`crate::Semaphore::add_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::add_permits`].
    pub fn add_permits(&self, permits: i64) -> Result<()> {
        block_on(&self.runtime, self.inner.add_permits(permits))
    }

    /// See [`crate::Semaphore::drain_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::drain_permits`].
    pub fn drain_permits(&self) -> Result<i64> {
        block_on(&self.runtime, self.inner.drain_permits())
    }

    /// See [`crate::Semaphore::available_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        block_on(&self.runtime, self.inner.available_permits())
    }

    /// See [`crate::Semaphore::delete`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::delete`].
    pub fn delete(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.delete())
    }

    /// See [`crate::Semaphore::acquire`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::acquire`].
    pub fn acquire(&self, permits: u32) -> Result<SemaphorePermits> {
        block_on(&self.runtime, self.inner.acquire(permits)).map(|p| self.permits(p))
    }

    /// See [`crate::Semaphore::try_acquire`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::try_acquire`].
    pub fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermits>> {
        block_on(&self.runtime, self.inner.try_acquire(permits)).map(|p| p.map(|p| self.permits(p)))
    }

    /// See [`crate::Semaphore::try_acquire_for`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::try_acquire_for`].
    pub fn try_acquire_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<SemaphorePermits>> {
        block_on(&self.runtime, self.inner.try_acquire_for(permits, wait))
            .map(|p| p.map(|p| self.permits(p)))
    }

    /// See [`crate::Semaphore::release`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::release`].
    pub fn release(&self, permits: u32) -> Result<()> {
        block_on(&self.runtime, self.inner.release(permits))
    }

    /// See [`crate::Semaphore::release_if_exists`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::release_if_exists`].
    pub fn release_if_exists(&self, permits: u32) -> Result<bool> {
        block_on(&self.runtime, self.inner.release_if_exists(permits))
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Semaphore")
            .field(&self.inner)
            .finish()
    }
}

/// The blocking counterpart of [`crate::SemaphorePermits`]. Dropping it gives the permits back
/// before `drop` returns, or in the background when dropped inside a runtime.
#[must_use = "dropping the guard gives the permits back at once"]
pub struct SemaphorePermits {
    inner: Option<crate::SemaphorePermits>,
    runtime: Arc<Runtime>,
}

impl SemaphorePermits {
    /// See [`crate::SemaphorePermits::name`].
    pub fn name(&self) -> &str {
        self.inner
            .as_ref()
            .map_or("", crate::SemaphorePermits::name)
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.inner
            .as_ref()
            .map_or(0, crate::SemaphorePermits::permits)
    }

    /// See [`crate::SemaphorePermits::release`].
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::release`].
    pub fn release(mut self) -> Result<()> {
        match self.inner.take() {
            Some(permits) => block_on(&self.runtime, permits.release()),
            None => Ok(()),
        }
    }

    /// See [`crate::SemaphorePermits::forget`].
    pub fn forget(mut self) -> u32 {
        self.inner.take().map_or(0, crate::SemaphorePermits::forget)
    }
}

impl Drop for SemaphorePermits {
    fn drop(&mut self) {
        if let Some(permits) = self.inner.take() {
            release_dropped(&self.runtime, permits, crate::SemaphorePermits::release);
        }
    }
}

impl fmt::Debug for SemaphorePermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::SemaphorePermits")
            .field(&self.inner)
            .finish()
    }
}

/// The blocking counterpart of [`crate::PermitExpirableSemaphore`].
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    inner: crate::PermitExpirableSemaphore,
    runtime: Arc<Runtime>,
}

impl PermitExpirableSemaphore {
    pub(super) fn new(inner: crate::PermitExpirableSemaphore, runtime: Arc<Runtime>) -> Self {
        Self { inner, runtime }
    }

    /// The semaphore's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's `getRawName()`).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::PermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        block_on(&self.runtime, self.inner.try_set_permits(permits))
    }

    /// See [`crate::PermitExpirableSemaphore::set_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::set_permits`].
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        block_on(&self.runtime, self.inner.set_permits(permits))
    }

    /// See [`crate::PermitExpirableSemaphore::add_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::add_permits`].
    pub fn add_permits(&self, permits: i64) -> Result<()> {
        block_on(&self.runtime, self.inner.add_permits(permits))
    }

    /// See [`crate::PermitExpirableSemaphore::acquire`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::acquire`].
    pub fn acquire(&self) -> Result<PermitId> {
        block_on(&self.runtime, self.inner.acquire())
    }

    /// See [`crate::PermitExpirableSemaphore::acquire_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::acquire_with_lease`].
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<PermitId> {
        block_on(&self.runtime, self.inner.acquire_with_lease(lease))
    }

    /// See [`crate::PermitExpirableSemaphore::acquire_many`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::acquire_many`].
    pub fn acquire_many(&self, permits: u32, lease: Option<Duration>) -> Result<Vec<PermitId>> {
        block_on(&self.runtime, self.inner.acquire_many(permits, lease))
    }

    /// See [`crate::PermitExpirableSemaphore::try_acquire`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<PermitId>> {
        block_on(&self.runtime, self.inner.try_acquire())
    }

    /// See [`crate::PermitExpirableSemaphore::try_acquire_for`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::try_acquire_for`].
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<PermitId>> {
        block_on(&self.runtime, self.inner.try_acquire_for(wait))
    }

    /// See [`crate::PermitExpirableSemaphore::try_acquire_with_lease`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::try_acquire_with_lease`].
    pub fn try_acquire_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        block_on(
            &self.runtime,
            self.inner.try_acquire_with_lease(wait, lease),
        )
    }

    /// See [`crate::PermitExpirableSemaphore::try_acquire_many`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::try_acquire_many`].
    pub fn try_acquire_many(
        &self,
        permits: u32,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<PermitId>>> {
        block_on(
            &self.runtime,
            self.inner.try_acquire_many(permits, wait, lease),
        )
    }

    /// See [`crate::PermitExpirableSemaphore::try_release`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::try_release`].
    pub fn try_release(&self, id: PermitId) -> Result<bool> {
        block_on(&self.runtime, self.inner.try_release(id))
    }

    /// See [`crate::PermitExpirableSemaphore::release`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::release`].
    pub fn release(&self, id: PermitId) -> Result<()> {
        block_on(&self.runtime, self.inner.release(id))
    }

    /// See [`crate::PermitExpirableSemaphore::try_release_many`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::try_release_many`].
    pub fn try_release_many(&self, ids: &[PermitId]) -> Result<usize> {
        block_on(&self.runtime, self.inner.try_release_many(ids))
    }

    /// See [`crate::PermitExpirableSemaphore::update_lease_time`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::update_lease_time`].
    pub fn update_lease_time(&self, id: PermitId, lease: Duration) -> Result<bool> {
        block_on(&self.runtime, self.inner.update_lease_time(id, lease))
    }

    /// See [`crate::PermitExpirableSemaphore::lease_time`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::lease_time`].
    pub fn lease_time(&self, id: PermitId) -> Result<Option<Duration>> {
        block_on(&self.runtime, self.inner.lease_time(id))
    }

    /// See [`crate::PermitExpirableSemaphore::available_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        block_on(&self.runtime, self.inner.available_permits())
    }

    /// See [`crate::PermitExpirableSemaphore::acquired_permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::acquired_permits`].
    pub fn acquired_permits(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.acquired_permits())
    }

    /// See [`crate::PermitExpirableSemaphore::permits`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::permits`].
    pub fn permits(&self) -> Result<i64> {
        block_on(&self.runtime, self.inner.permits())
    }

    /// See [`crate::PermitExpirableSemaphore::permit_expiries`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::permit_expiries`].
    pub fn permit_expiries(&self) -> Result<Vec<(PermitId, Option<SystemTime>)>> {
        block_on(&self.runtime, self.inner.permit_expiries())
    }

    /// See [`crate::PermitExpirableSemaphore::delete`].
    ///
    /// # Errors
    ///
    /// As [`crate::PermitExpirableSemaphore::delete`].
    pub fn delete(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.delete())
    }
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::PermitExpirableSemaphore")
            .field(&self.inner)
            .finish()
    }
}

/// The blocking counterpart of [`crate::CountDownLatch`].
#[derive(Clone)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    runtime: Arc<Runtime>,
}

impl CountDownLatch {
    pub(super) fn new(inner: crate::CountDownLatch, runtime: Arc<Runtime>) -> Self {
        Self { inner, runtime }
    }

    /// The latch's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's `getRawName()`).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::CountDownLatch::try_set_count`].
    ///
    /// # Errors
    ///
    /// As [`crate::CountDownLatch::try_set_count`].
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        block_on(&self.runtime, self.inner.try_set_count(count))
    }

    /// See [`crate::CountDownLatch::count_down`].
    ///
    /// # Errors
    ///
    /// As [`crate::CountDownLatch::count_down`].
    pub fn count_down(&self) -> Result<()> {
        block_on(&self.runtime, self.inner.count_down())
    }

    /// See [`crate::CountDownLatch::count`].
    ///
    /// # Errors
    ///
    /// As [`crate::CountDownLatch::count`].
    pub fn count(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.count())
    }

    /// See [`crate::CountDownLatch::await_zero`].
    ///
    /// # Errors
    ///
    /// As [`crate::CountDownLatch::await_zero`].
    pub fn await_zero(&self) -> Result<()> {
        block_on(&self.runtime, self.inner.await_zero())
    }

    /// See [`crate::CountDownLatch::await_for`].
    ///
    /// # Errors
    ///
    /// As [`crate::CountDownLatch::await_for`].
    pub fn await_for(&self, timeout: Duration) -> Result<bool> {
        block_on(&self.runtime, self.inner.await_for(timeout))
    }

    /// See [`crate::CountDownLatch::delete`].
    ///
    /// # Errors
    ///
    /// As [`crate::CountDownLatch::delete`].
    pub fn delete(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.delete())
    }
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::CountDownLatch")
            .field(&self.inner)
            .finish()
    }
}
