//! The guard of one hold, for every kind.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::Either;
use tokio::time::Instant;

use super::hand_off::{held_in_streak, hold_count};
use super::hold::books;
use super::lock_wire::LockWire;
use super::release::Releasing;
use crate::error::{Error, Operation, Result};
use crate::ledger::Expiry;
use crate::owner::Owner;
use crate::services::Services;

/// One hold of a lock. Dropping it releases the hold in the background (never blocking); call
/// [`Guard::unlock`] to release it and see the outcome.
///
/// `T` is what the acquisition yielded: nothing for a plain [`Lock`](crate::Lock) (whose guard is
/// [`LockGuard`](crate::LockGuard)), a fencing token for the fenced lock
/// ([`Guard::token`]).
///
/// A guard also tells whether its lease was lost (the lock expired, was deleted or force-unlocked
/// while held): [`Guard::lease_lost`] completes then, so a critical section can stop instead of
/// running on unprotected.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// # let client = rlock_redisson::Client::connect(&url).await?;
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
pub struct Guard<T: fmt::Debug + Send + 'static = ()> {
    kind: Arc<dyn LockWire<Token = T>>,
    services: Arc<Services>,
    owner: Owner,
    /// Shared with the acquisition's local queue entry, and with the release.
    field: Arc<str>,
    token: T,
    expiry: Expiry,
    released: bool,
}

impl<T: fmt::Debug + Send + 'static> Guard<T> {
    pub(crate) fn new(
        kind: Arc<dyn LockWire<Token = T>>,
        services: Arc<Services>,
        owner: Owner,
        field: Arc<str>,
        token: T,
        expiry: Expiry,
    ) -> Self {
        services.telemetry.held(kind.label());
        Self {
            kind,
            services,
            owner,
            field,
            token,
            expiry,
            released: false,
        }
    }

    /// The lock's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        self.kind.name()
    }

    /// The owner of this hold.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The hash field this hold is counted in: `<node-uuid>:<owner-id>` (with the kind's suffix,
    /// if it has one).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What the acquisition yielded (e.g. a fencing token).
    pub fn token(&self) -> &T {
        &self.token
    }

    /// Whether the hold's lease is known to be lost: the watchdog found the lock gone or could not
    /// renew it for a whole lease, an acquisition of the same owner found its field created afresh
    /// (it had been deleted), or the fixed lease has run out.
    pub fn is_lease_lost(&self) -> bool {
        self.expiry.is_lost()
    }

    /// Completes when the lease is lost (see [`Guard::is_lease_lost`]); pends forever while the
    /// watchdog keeps the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn lease_lost(&self) {
        self.expiry.lost().await;
    }

    /// How many holds this guard's owner has on the lock.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a lock, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails, [`Error::UnexpectedReply`] when the field is not a
    /// count.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn hold_count(&self) -> Result<u32> {
        hold_count(
            &self.services,
            self.kind.subject(),
            self.kind.key(),
            &self.field,
        )
        .await
    }

    /// Releases the hold. Renewal stops before the unlock is sent; the unlock is re-sent with the
    /// same request id if its reply is lost, so it applies at most once.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold was already gone (expired or deleted), [`Error::Timeout`]
    /// or [`Error::Backend`] when Redis could not be reached even after re-sending; the hold then
    /// expires with its lease, as renewal has stopped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release runs to completion in the background even if this future is
    /// dropped.
    ///
    /// A plain function returning the release rather than an `async fn`, which would keep the
    /// guard and the release twice in the caller's future (a task that waits for a lock, then
    /// unlocks it, is as large as the larger of the two futures).
    pub fn unlock(mut self) -> impl Future<Output = Result<()>> + Send + 'static + use<T> {
        match self.release() {
            Some(releasing) => Either::Left(releasing),
            None => Either::Right(std::future::ready(Ok(()))),
        }
    }

    /// Marks the hold released and returns its release, for a caller that runs it on its own terms
    /// (the blocking guard, on its own runtime); `None` once released. The release owns what it
    /// needs, and finishes in the background if dropped.
    pub(crate) fn release(
        &mut self,
    ) -> Option<impl Future<Output = Result<()>> + Send + 'static + use<T>> {
        if self.released {
            return None;
        }
        self.released = true;
        let releasing = self.releasing();
        Some(async move {
            match releasing.finish().await {
                Ok(_) => Ok(()),
                Err(Error::NotOwner { kind, name, .. }) => Err(Error::LeaseLost { kind, name }),
                Err(e) => Err(e),
            }
        })
    }

    /// Sets the lock's expiry to `lease` from now, whoever holds it (a plain `PEXPIRE` of the lock
    /// key, Redisson's `expire` on a lock, which checks no owner): how a multi-lock gives its
    /// members their final lease once it holds them all (docs/protocol.md §8.3).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the expiry may or may not have been set.
    pub(crate) async fn expire(&mut self, lease: Duration) -> Result<()> {
        // A hold lent along a streak of free hand-offs keeps the streak's watchdog lease, as a
        // fixed-lease re-entry of it does: the key's expiry is the streak's registration's, which
        // counts on a whole watchdog lease from its last renewal (see `Watchdog::surely_held`).
        if held_in_streak(&self.services, self.kind.scope(), &self.field).is_some() {
            return Ok(());
        }
        // The hold becomes a fixed-lease member of its record (its renewal stops if it was the
        // last renewed one); the key keeps at least what the owner's other holds were promised.
        let sent_at = Instant::now();
        let books = books(&self.services, &*self.kind);
        let Some((expiry, key_lease)) =
            self.services
                .ledger
                .relet(&books, &self.field, &self.expiry, sent_at + lease)
        else {
            return Err(Error::LeaseLost {
                kind: self.kind.what(),
                name: self.kind.name().to_owned(),
            });
        };
        self.expiry = expiry;
        let _: i64 = self
            .services
            .commands
            .query(
                Operation::Update,
                self.kind.subject(),
                redis::cmd("PEXPIRE")
                    .arg(self.kind.key())
                    .arg(key_lease.as_millis()),
            )
            .await?;
        Ok(())
    }

    fn releasing(&self) -> Releasing {
        Releasing::new(
            &self.services,
            self.kind.clone(),
            self.field.clone(),
            Some(self.expiry.clone()),
        )
    }
}

impl<T: fmt::Debug + Send + 'static> Drop for Guard<T> {
    fn drop(&mut self) {
        self.services.telemetry.released(self.kind.label());
        if !self.released {
            // Dropping the release finishes it in the background.
            drop(Releasing::new(
                &self.services,
                self.kind.clone(),
                std::mem::take(&mut self.field),
                Some(self.expiry.clone()),
            ));
        }
    }
}

impl<T: fmt::Debug + Send + 'static> fmt::Debug for Guard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.kind.name())
            .field("field", &self.field)
            .field("token", &self.token)
            .field("lease_lost", &self.expiry.is_lost())
            .finish()
    }
}
