//! The lock handle every hash-based kind shares: [`Lock<K>`](Lock), Redisson's `RLock` interface.
//!
//! A handle is a kind (what goes over the wire, see [`crate::kind`]) plus the client's services and
//! an optional bound owner. Every kind gets the whole lock API from this one generic type; a kind's
//! own extras (a fencing token, a fair lock's queue) are inherent methods on its `Lock<Kind>`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::Either;

use crate::engine::{self, Guard, Lease, Patience};
use crate::error::{Error, Operation, Result};
use crate::locks::lock_kind::LockKind;
use crate::locks::reentrant::Reentrant;
use crate::owner::Owner;
use crate::services::Services;

/// How long a lock has left, as Redis' `PTTL` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemainingTtl {
    /// The lock is not held (`-2`).
    NotLocked,
    /// The lock key exists without an expiry (`-1`): not something rlock or Redisson writes.
    NoExpiry,
    /// The lock expires after this long unless renewed or released.
    Expires(Duration),
}

/// One holder of a lock, as found in its hash.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The client's node id (a Redisson client's UUID, or an rlock
    /// [`Client::node_id`](crate::Client::node_id)).
    pub node: String,
    /// The owner: a Java thread id, an rlock [`Owner`] id, possibly with a suffix such as `:write`.
    pub owner: String,
    /// How many holds the owner has.
    pub count: u64,
}

impl Holder {
    /// Parses a `<36-char uuid>:<owner>` field and its count.
    fn parse(field: &str, count: &str) -> Option<Self> {
        let (node, owner) = field.split_at_checked(36)?;
        let owner = owner.strip_prefix(':')?;
        let _ = uuid::Uuid::parse_str(node).ok()?;
        Some(Self {
            node: node.to_owned(),
            owner: owner.to_owned(),
            count: count.parse().ok()?,
        })
    }
}

/// A guard of a [`Lock`] hold.
pub type LockGuard = Guard<()>;

/// A distributed lock of kind `K`, shared with Redisson's lock of that kind and name: by default
/// the reentrant lock, Redisson's `RLock`.
///
/// Acquiring returns a [`Guard`] ([`LockGuard`] for the reentrant lock) that releases the hold when
/// dropped (in the background) or explicitly with [`Guard::unlock`]. Acquisitions re-enter the
/// holds of their [owner](Owner), as a Java thread re-enters its `RLock`; which owner a call uses:
///
/// | where the call is made | owner |
/// |---|---|
/// | a handle bound with [`Lock::with_owner`] | that owner |
/// | async code inside [`Owner::scope`] | the scope's owner (nested locks re-enter) |
/// | a thread outside any async runtime (the [blocking](crate::blocking) API) | the thread's owner
/// |
/// | other async code | a fresh owner per acquisition (tasks exclude each other like a mutex) |
///
/// Holds taken without a lease (`lock`, `try_lock`, `try_lock_for`) live for the watchdog timeout
/// and are renewed while held; holds with a lease expire after it unless released first.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let lock = client.lock("doc:lock:example");
///
/// let guard = lock.lock().await?;
/// assert!(lock.is_locked().await?);
/// // Another owner cannot take it meanwhile.
/// assert!(lock.try_lock().await?.is_none());
/// guard.unlock().await?;
///
/// // Wait up to 100 ms, hold for at most 5 s.
/// let patience = Duration::from_millis(100);
/// if let Some(guard) = lock.try_lock_with_lease(patience, Duration::from_secs(5)).await? {
///     guard.unlock().await?;
/// }
/// # Ok(())
/// # }
/// ```
pub struct Lock<K: LockKind = Reentrant> {
    services: Arc<Services>,
    kind: Arc<K>,
    owner: Option<Owner>,
}

impl<K: LockKind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Self {
            services: self.services.clone(),
            kind: self.kind.clone(),
            owner: self.owner,
        }
    }
}

impl<K: LockKind> Lock<K> {
    pub(crate) fn new(services: Arc<Services>, kind: K) -> Self {
        Self {
            services,
            kind: Arc::new(kind),
            owner: None,
        }
    }

    /// The lock's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        self.kind.name()
    }

    /// The kind's wire state, for a kind's own methods.
    pub(crate) fn kind(&self) -> &K {
        &self.kind
    }

    /// The client's services, for a kind's own methods.
    pub(crate) fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// The hash field `owner` writes for this kind.
    pub(crate) fn field_of(&self, owner: Owner) -> String {
        self.kind.field(self.services.field(owner))
    }

    /// This lock handle bound to `owner`: its acquisitions re-enter each other (and any other hold
    /// of
    /// `owner` on this lock), like Redisson's `threadId` overloads.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rlock_redisson::Result<()> {
    /// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    /// # let client = rlock_redisson::Client::connect(&url).await?;
    /// let owner = rlock_redisson::Owner::new();
    /// let lock = client.lock("doc:lock:reentrant").with_owner(owner);
    /// let outer = lock.lock().await?;
    /// let inner = lock.lock().await?; // re-enters
    /// assert_eq!(lock.hold_count().await?, 2);
    /// inner.unlock().await?;
    /// outer.unlock().await?;
    /// assert!(!lock.is_locked().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The owner this handle is bound to, if any.
    pub fn owner(&self) -> Option<Owner> {
        self.owner
    }

    /// The owner an acquisition through this handle would use right now, if it is known in advance:
    /// the bound owner, else [`Owner::current`]. `None` means every acquisition gets a fresh owner.
    pub fn current_owner(&self) -> Option<Owner> {
        self.owner.or_else(Owner::current)
    }

    /// Waits until the lock is acquired; the hold is kept alive by the watchdog until released.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::WrongType`] when the key holds
    /// something else than a lock, and [`Error::Timeout`] or [`Error::Backend`] only when Redis fails
    /// an attempt that was sent (its reply later than the command timeout, a broken connection),
    /// never because this client is busy: an attempt waits for its turn on a connection as long as
    /// it takes, and its command timeout starts once it is sent (see [`Error::Timeout`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future never leaves a hold behind. If the acquire script may have
    /// run, it is undone in the background.
    ///
    /// A plain function returning the acquisition: an `async fn` would wrap it in a future of its
    /// own, one more word in every waiting task.
    pub fn lock(&self) -> impl Future<Output = Result<Guard<K::Token>>> + '_ {
        self.acquire_until_held(Lease::Watchdog)
    }

    /// Waits until the lock is acquired, for a hold that expires after `lease` unless released
    /// first.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], plus [`Error::InvalidArgument`] for a lease under 1 ms or over ten years.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Lock::lock`].
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<Guard<K::Token>> {
        self.acquire_until_held(Lease::fixed(lease)?).await
    }

    /// Tries once; `None` if someone else holds the lock. The hold is kept alive by the watchdog.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], except that the attempt waits at most the command timeout for its turn
    /// on a connection (then [`Error::Timeout`], with nothing sent), as every bounded wait does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Lock::lock`].
    pub async fn try_lock(&self) -> Result<Option<Guard<K::Token>>> {
        self.acquire(Patience::For(Duration::ZERO), Lease::Watchdog)
            .await
    }

    /// Waits up to `wait` for the lock; `None` if it stayed held. The hold is kept alive by the
    /// watchdog.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock`]: each attempt waits at most the command timeout for its turn on a
    /// connection, so that the call keeps its bound.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Lock::lock`].
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<Guard<K::Token>>> {
        self.acquire(Patience::For(wait), Lease::Watchdog).await
    }

    /// Waits up to `wait` for the lock, for a hold that expires after `lease` unless released
    /// first.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_with_lease`], with the bounded turn of [`Lock::try_lock`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Lock::lock`].
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Guard<K::Token>>> {
        self.acquire(Patience::For(wait), Lease::fixed(lease)?)
            .await
    }

    // Plain functions returning the engine's future, not `async fn`s: each `async fn` layer would
    // keep its arguments in every waiting task's future once more (issue 38: a waiter's memory).

    fn acquire_until_held(
        &self,
        lease: Lease,
    ) -> impl Future<Output = Result<Guard<K::Token>>> + '_ {
        self.acquire(Patience::Forever, lease).map(move |acquired| {
            acquired?.ok_or_else(|| {
                Error::timeout(Operation::Acquire, self.kind.subject(), Duration::MAX)
            })
        })
    }

    fn acquire(
        &self,
        patience: Patience,
        lease: Lease,
    ) -> impl Future<Output = Result<Option<Guard<K::Token>>>> + '_ {
        // The owner current where the future first runs (the `Owner::scope` it is awaited in), as
        // in an `async fn`, not where it was made.
        futures::future::lazy(move |_| self.current_owner().unwrap_or_else(Owner::new))
            .then(move |owner| self.acquire_as(owner, patience, lease))
    }

    /// Acquires for `owner`, whatever owner the handle has: for composites of locks (a
    /// [`MultiLock`](crate::MultiLock) takes all its locks with one owner).
    pub(crate) fn acquire_as(
        &self,
        owner: Owner,
        patience: Patience,
        lease: Lease,
    ) -> impl Future<Output = Result<Option<Guard<K::Token>>>> + '_ {
        match self.check_name() {
            Ok(()) => Either::Left(engine::acquire(
                &self.services,
                &self.kind,
                owner,
                patience,
                lease,
            )),
            Err(e) => Either::Right(std::future::ready(Err(e))),
        }
    }

    /// Releases one hold of `owner`, like Redisson's `unlock(threadId)`: the lock is free once
    /// every hold of the owner is released. Usually you release through the [`LockGuard`] instead.
    ///
    /// # Errors
    ///
    /// [`Error::NotOwner`] when `owner` holds no hold on the lock (nothing is changed), and
    /// [`Error::Timeout`] or [`Error::Backend`] when Redis could not be reached even after
    /// re-sending.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release runs to completion in the background even if this future is
    /// dropped.
    pub async fn unlock(&self, owner: Owner) -> Result<()> {
        self.check_name()?;
        let field = self.field_of(owner);
        engine::Releasing::new(&self.services, self.kind.clone(), field.into(), None)
            .finish()
            .await
            .map(|_| ())
    }

    /// Deletes the lock whoever holds it and wakes a waiter (Java's included). Returns whether a
    /// lock was deleted. This client's guards of the lock see their lease lost.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a lock (it is left alone), and
    /// [`Error::Timeout`] or [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the lock may or may not have been deleted.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.check_name()?;
        engine::force_unlock(&self.services, &*self.kind).await
    }

    /// Whether anyone holds the lock (its key is a hash; for a read or write lock, whether it is
    /// held in that mode).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a lock, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_locked(&self) -> Result<bool> {
        self.check_name()?;
        let locked: i64 = match self.kind.is_locked_call() {
            // `TYPE` rather than `EXISTS`: a key that holds something else is no lock, and says so
            // as every other call on it does.
            None => {
                let held: String = self.query(redis::cmd("TYPE").arg(self.kind.key())).await?;
                match held.as_str() {
                    "none" => 0,
                    "hash" => 1,
                    _ => {
                        return Err(Error::WrongType {
                            kind: self.kind.what(),
                            key: self.kind.key().to_owned(),
                        });
                    }
                }
            }
            Some(call) => {
                self.services
                    .commands
                    .script(Operation::Query, self.kind.subject(), &call)
                    .await?
            }
        };
        Ok(locked == 1)
    }

    /// Whether `owner` holds the lock (`HEXISTS`): Redisson's `isHeldByThread`. While this client
    /// passes the lock among its owners without Redis (a streak of free hand-offs, see
    /// [`Config::local_handoff`](crate::Config::local_handoff)), this client answers for its own
    /// owners.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a lock, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.check_name()?;
        let field = self.field_of(owner);
        if let Some(count) = engine::held_in_streak(&self.services, self.kind.key(), &field) {
            return Ok(count > 0);
        }
        let held: i64 = self
            .query(redis::cmd("HEXISTS").arg(self.kind.key()).arg(field))
            .await?;
        Ok(held == 1)
    }

    /// Whether the [current owner](Lock::current_owner) holds the lock: Redisson's
    /// `isHeldByCurrentThread`.
    ///
    /// # Errors
    ///
    /// As [`Lock::hold_count`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.is_held_by(self.known_owner()?).await
    }

    /// How many holds the [current owner](Lock::current_owner) has on the lock: Redisson's
    /// `getHoldCount`; 0 when none.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when there is no current owner (async code outside
    /// [`Owner::scope`] with an unbound handle: each acquisition there is a new owner, so ask
    /// [`Lock::hold_count_of`] or the guard). Otherwise as [`Lock::hold_count_of`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn hold_count(&self) -> Result<u32> {
        self.hold_count_of(self.known_owner()?).await
    }

    /// How many holds `owner` has on the lock (`HGET`); 0 when none. During a streak of free
    /// hand-offs this client answers for its own owners, as [`Lock::is_held_by`] does.
    ///
    /// # Errors
    ///
    /// As [`Lock::is_held_by`], plus [`Error::UnexpectedReply`] when the field is not a count.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn hold_count_of(&self, owner: Owner) -> Result<u32> {
        self.check_name()?;
        let field = self.field_of(owner);
        engine::hold_count(&self.services, self.kind.subject(), self.kind.key(), &field).await
    }

    /// How long until the lock expires (`PTTL`): Redisson's `remainTimeToLive`.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn remaining_ttl(&self) -> Result<RemainingTtl> {
        self.check_name()?;
        let pttl: i64 = self.query(redis::cmd("PTTL").arg(self.kind.key())).await?;
        Ok(match pttl {
            -2 => RemainingTtl::NotLocked,
            -1 => RemainingTtl::NoExpiry,
            ms if ms >= 0 => RemainingTtl::Expires(Duration::from_millis(ms.unsigned_abs())),
            other => {
                return Err(Error::unexpected(
                    Operation::Query,
                    self.kind.subject(),
                    other,
                ));
            }
        })
    }

    /// Who holds the lock, as its hash says: every `<node-uuid>:<owner-id>` field with its count,
    /// whichever client (Java's included) wrote it. Fields of another shape are skipped.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a lock, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn holders(&self) -> Result<Vec<Holder>> {
        self.check_name()?;
        let fields: Vec<(String, String)> = self
            .query(redis::cmd("HGETALL").arg(self.kind.key()))
            .await?;
        Ok(fields
            .into_iter()
            .filter_map(|(field, count)| Holder::parse(&field, &count))
            .collect())
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.services
            .commands
            .query(Operation::Query, self.kind.subject(), cmd)
            .await
    }

    fn known_owner(&self) -> Result<Owner> {
        Owner::known(self.owner)
    }

    fn check_name(&self) -> Result<()> {
        if self.name().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "a {} name must not be empty",
                self.kind.what()
            )));
        }
        Ok(())
    }
}

impl<K: LockKind> fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.kind.name())
            .field("owner", &self.owner)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Holder;

    #[test]
    fn holders_are_parsed_from_uuid_fields_only() {
        let node = "3b241101-e2bb-4255-8caf-4136c566a962";
        let holder = Holder::parse(&format!("{node}:57"), "2").expect("a holder");
        assert_eq!(
            (holder.node.as_str(), holder.owner.as_str(), holder.count),
            (node, "57", 2)
        );
        let writer = Holder::parse(&format!("{node}:57:write"), "1").expect("a writer");
        assert_eq!(writer.owner, "57:write");
        assert_eq!(Holder::parse("mode", "read"), None);
        assert_eq!(Holder::parse(&format!("{node}:57"), "lots"), None);
        assert_eq!(
            Holder::parse("not-a-uuid-but-thirty-six-characters:1", "1"),
            None
        );
    }
}
