//! The blocking counterpart of [`crate::EntryLocks`], and the blocking client's factories of it.

use super::client::Client;
use super::lock::{Lock, ReadWriteLock};
use super::synchronizers::{CountDownLatch, PermitExpirableSemaphore, Semaphore};
use crate::codec::{Codec, EntryKey};
use crate::entry_names::{Container, EntryNames, EntryObject};
use crate::error::Result;

/// The blocking counterpart of [`crate::EntryLocks`]: the locks Java hands out per entry of a map,
/// a multimap or a set, named as Java names them.
///
/// ```
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// let client = rlock_redisson::blocking::Client::connect(url)?;
/// // Java: redisson.getMap("doc:orders").getLock(42L)
/// let lock = client.map("doc:orders").lock(42i64)?;
/// let guard = lock.lock()?;
/// assert!(lock.name().ends_with(":lock"));
/// guard.unlock()?;
/// # Ok::<(), rlock_redisson::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct EntryLocks {
    client: Client,
    names: EntryNames,
}

impl EntryLocks {
    /// The same entries with their keys encoded by `codec` (see [`crate::EntryLocks::with_codec`]).
    #[must_use]
    pub fn with_codec(self, codec: Codec) -> Self {
        Self {
            client: self.client,
            names: self.names.with_codec(codec),
        }
    }

    /// How the entries' objects are named.
    pub fn names(&self) -> &EntryNames {
        &self.names
    }

    /// The entry's reentrant lock: Java's `getLock(key)`.
    ///
    /// # Errors
    ///
    /// [`Error::Codec`](crate::Error::Codec) when the codec cannot encode `key` as Java does.
    pub fn lock(&self, key: impl Into<EntryKey>) -> Result<Lock> {
        Ok(self.client.lock(self.names.name(key, EntryObject::Lock)?))
    }

    /// The entry's fair lock: Java's `getFairLock(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn fair_lock(&self, key: impl Into<EntryKey>) -> Result<Lock<crate::kind::Fair>> {
        Ok(self
            .client
            .fair_lock(self.names.name(key, EntryObject::FairLock)?))
    }

    /// The entry's read-write lock: Java's `getReadWriteLock(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn read_write_lock(&self, key: impl Into<EntryKey>) -> Result<ReadWriteLock> {
        Ok(self
            .client
            .read_write_lock(self.names.name(key, EntryObject::ReadWriteLock)?))
    }

    /// The entry's semaphore: Java's `getSemaphore(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn semaphore(&self, key: impl Into<EntryKey>) -> Result<Semaphore> {
        Ok(self
            .client
            .semaphore(self.names.name(key, EntryObject::Semaphore)?))
    }

    /// The entry's permit-expirable semaphore: Java's `getPermitExpirableSemaphore(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn permit_expirable_semaphore(
        &self,
        key: impl Into<EntryKey>,
    ) -> Result<PermitExpirableSemaphore> {
        Ok(self.client.permit_expirable_semaphore(
            self.names
                .name(key, EntryObject::PermitExpirableSemaphore)?,
        ))
    }

    /// The entry's count-down latch: Java's `getCountDownLatch(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn count_down_latch(&self, key: impl Into<EntryKey>) -> Result<CountDownLatch> {
        Ok(self
            .client
            .count_down_latch(self.names.name(key, EntryObject::CountDownLatch)?))
    }
}

/// Written here, beside the handle they return (see `crate::entries`).
impl Client {
    /// The entries of the map called `name`: see [`crate::Client::map`].
    pub fn map(&self, name: impl Into<String>) -> EntryLocks {
        self.entries(Container::Map, name)
    }

    /// The entries of the multimap called `name`: see [`crate::Client::multimap`].
    pub fn multimap(&self, name: impl Into<String>) -> EntryLocks {
        self.entries(Container::Multimap, name)
    }

    /// The values of the set called `name`: see [`crate::Client::set`].
    pub fn set(&self, name: impl Into<String>) -> EntryLocks {
        self.entries(Container::Set, name)
    }

    fn entries(&self, container: Container, name: impl Into<String>) -> EntryLocks {
        EntryLocks {
            client: self.clone(),
            names: EntryNames::of_client(self.config(), container, name),
        }
    }
}
