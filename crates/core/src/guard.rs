//! The guard of one hold.

use std::fmt;

use crate::engine::{Expiry, Held};
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::owner::Owner;

/// One hold of a [`Lock`]. Dropping it releases the hold in the background (never blocking); call
/// [`LockGuard::unlock`] to release it and see the outcome.
///
/// A guard also tells whether its lease was lost (the lock expired, was deleted or force-unlocked while
/// held): [`LockGuard::lease_lost`] completes then, so a critical section can stop instead of running
/// on unprotected.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// # let client = rlock::Client::connect(&url).await?;
/// # async fn do_work() {}
/// let guard = client.lock("doc:guard:example").lock().await?;
/// tokio::select! {
///     () = do_work() => guard.unlock().await?,
///     () = guard.lease_lost() => eprintln!("lost the lock; stopping"),
/// }
/// # Ok(())
/// # }
/// ```
#[must_use = "dropping the guard releases the hold at once"]
pub struct LockGuard {
    lock: Lock,
    owner: Owner,
    field: String,
    expiry: Expiry,
    released: bool,
}

impl LockGuard {
    pub(crate) fn new(lock: Lock, owner: Owner, held: Held) -> Self {
        Self {
            lock,
            owner,
            field: held.field,
            expiry: held.expiry,
            released: false,
        }
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The owner of this hold.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The hash field this hold is counted in: `<node-uuid>:<owner-id>`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// Whether the hold's lease is known to be lost: the watchdog found the lock gone or could not
    /// renew it for a whole lease, or the fixed lease has run out.
    pub fn is_lease_lost(&self) -> bool {
        match &self.expiry {
            Expiry::Watchdog(lost) => lost.is_cancelled(),
            Expiry::At(at) => tokio::time::Instant::now() >= *at,
        }
    }

    /// Completes when the lease is lost (see [`LockGuard::is_lease_lost`]); pends forever while the
    /// watchdog keeps the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn lease_lost(&self) {
        match &self.expiry {
            Expiry::Watchdog(lost) => lost.cancelled().await,
            Expiry::At(at) => tokio::time::sleep_until(*at).await,
        }
    }

    /// How many holds this guard's owner has on the lock.
    ///
    /// # Errors
    ///
    /// As [`Lock::hold_count`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn hold_count(&self) -> Result<u32> {
        self.lock.hold_count(self.owner).await
    }

    /// Releases the hold. Renewal stops before the unlock is sent; the unlock is re-sent with the same
    /// request id if its reply is lost, so it applies at most once.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold was already gone (expired or deleted), [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis could not be reached even after re-sending; the hold then expires
    /// with its lease, as renewal has stopped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release runs to completion in the background even if this future is dropped.
    pub async fn unlock(mut self) -> Result<()> {
        self.released = true;
        match self.lock.release(self.owner).await {
            Ok(_) => Ok(()),
            Err(Error::NotOwner { name, .. }) => Err(Error::LeaseLost { name }),
            Err(e) => Err(e),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            self.lock.release_in_background(self.owner);
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name())
            .field("field", &self.field)
            .field("lease_lost", &self.is_lease_lost())
            .finish()
    }
}
