//! The locks and synchronizers Redisson hands out per entry of a map, a multimap or a set:
//! [`Client::map`], [`Client::multimap`], [`Client::set`].
//!
//! Those three factories are written here, beside the handle they return, so that `client.rs`
//! does not import this file, which imports the client (no import circle).

use crate::client::Client;
use crate::codec::{Codec, EntryKey};
use crate::entry_names::{Container, EntryNames, EntryObject};
use crate::error::Result;
use crate::locks::fair_lock::FairLock;
use crate::locks::lock::Lock;
use crate::locks::rw_lock::ReadWriteLock;
use crate::synchronizers::count_down_latch::CountDownLatch;
use crate::synchronizers::expirable_semaphore::PermitExpirableSemaphore;
use crate::synchronizers::semaphore::Semaphore;

/// The entries of one Redisson map, multimap or set, for their locks: what Java's
/// `map.getLock(key)`, `map.getFairLock(key)`, ... return, named exactly as Java names them
/// (docs/protocol.md §13.1), so that a Java service and rlock exclude and wake each other on one
/// entry.
///
/// Made by [`Client::map`], [`Client::multimap`] or [`Client::set`] with the client's
/// [`Config::codec`](crate::Config::codec); [`EntryLocks::with_codec`] for a container Java made
/// with a codec of its own. Making it costs nothing and sends nothing; each method hashes the key
/// and returns the same handle the client's factory of that kind returns for the entry's name.
///
/// # Examples
///
/// ```no_run
/// # async fn run(client: rlock_redisson::Client) -> rlock_redisson::Result<()> {
/// // Java: redisson.getMap("orders").getLock(42L)
/// let lock = client.map("orders").lock(42i64)?;
/// let guard = lock.lock().await?;
/// // ... the entry is ours, in Rust and in Java ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct EntryLocks {
    client: Client,
    names: EntryNames,
}

impl EntryLocks {
    pub(crate) fn new(client: Client, names: EntryNames) -> Self {
        Self { client, names }
    }

    /// The same entries with their keys encoded by `codec`: Java's
    /// `redisson.getMap("orders", codec)`.
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

    fn name(&self, key: impl Into<EntryKey>, object: EntryObject) -> Result<String> {
        self.names.name(key, object)
    }

    /// The entry's reentrant lock: Java's `getLock(key)`.
    ///
    /// # Errors
    ///
    /// [`Error::Codec`](crate::Error::Codec) when the codec cannot encode `key` as Java does.
    pub fn lock(&self, key: impl Into<EntryKey>) -> Result<Lock> {
        Ok(self.client.lock(self.name(key, EntryObject::Lock)?))
    }

    /// The entry's fair lock: Java's `getFairLock(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn fair_lock(&self, key: impl Into<EntryKey>) -> Result<FairLock> {
        Ok(self
            .client
            .fair_lock(self.name(key, EntryObject::FairLock)?))
    }

    /// The entry's read-write lock: Java's `getReadWriteLock(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn read_write_lock(&self, key: impl Into<EntryKey>) -> Result<ReadWriteLock> {
        Ok(self
            .client
            .read_write_lock(self.name(key, EntryObject::ReadWriteLock)?))
    }

    /// The entry's semaphore: Java's `getSemaphore(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn semaphore(&self, key: impl Into<EntryKey>) -> Result<Semaphore> {
        Ok(self
            .client
            .semaphore(self.name(key, EntryObject::Semaphore)?))
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
        Ok(self
            .client
            .permit_expirable_semaphore(self.name(key, EntryObject::PermitExpirableSemaphore)?))
    }

    /// The entry's count-down latch: Java's `getCountDownLatch(key)`.
    ///
    /// # Errors
    ///
    /// As [`EntryLocks::lock`].
    pub fn count_down_latch(&self, key: impl Into<EntryKey>) -> Result<CountDownLatch> {
        Ok(self
            .client
            .count_down_latch(self.name(key, EntryObject::CountDownLatch)?))
    }
}

impl Client {
    /// The entries of the map called `name`, for the locks Java hands out per entry:
    /// `redisson.getMap(name).getLock(key)` is `client.map(name).lock(key)`, and so on for every
    /// kind of [`EntryLocks`]. The keys are encoded with [`Config::codec`](crate::Config::codec)
    /// ([`EntryLocks::with_codec`] for a map Java made with a codec of its own). The same for
    /// `RMapCache` and `RLocalCachedMap`, which name their entries alike.
    pub fn map(&self, name: impl Into<String>) -> EntryLocks {
        self.entries(Container::Map, name)
    }

    /// The entries of the multimap called `name`: `redisson.getListMultimap(name).getLock(key)`
    /// (or a set multimap's) is `client.multimap(name).lock(key)`; see [`Client::map`].
    pub fn multimap(&self, name: impl Into<String>) -> EntryLocks {
        self.entries(Container::Multimap, name)
    }

    /// The values of the set called `name`: `redisson.getSet(name).getLock(value)` (or a
    /// `RSetCache`'s) is `client.set(name).lock(value)`; see [`Client::map`].
    pub fn set(&self, name: impl Into<String>) -> EntryLocks {
        self.entries(Container::Set, name)
    }

    fn entries(&self, container: Container, name: impl Into<String>) -> EntryLocks {
        EntryLocks::new(
            self.clone(),
            EntryNames::of_client(self.config(), container, name),
        )
    }
}
