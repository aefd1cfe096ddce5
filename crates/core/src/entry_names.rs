//! How Redisson names the objects it hands out per entry of a map, a multimap or a set
//! (docs/protocol.md §13.1): `map.getLock(key)` is the lock called
//! `suffixName(<map's mapped name>, hash128toBase64(<key as the codec encodes it>) + ":lock")`,
//! through the name mapper once more (Java's lock maps every name it is given).
//!
//! With a prefix mapper `app:`, the map `orders` and the key `"42"` (StringCodec) give the lock
//! `app:{app:orders}:RE0IojEvPTY8Dofe3IkBNA:lock`: the map's mapped name inside the hash tag, the
//! lock's own mapping in front.

use std::fmt;

use crate::codec::{Codec, EntryKey};
use crate::config::Config;
use crate::error::Result;
use crate::name_mapper::NameMapper;
use crate::names::suffix_name;

/// The Redisson object whose entries have locks: which Java class hands them out.
///
/// Maps (`RMap`, and so `RMapCache` and `RLocalCachedMap`) and multimaps encode an entry's key with
/// the codec's map-key encoder, sets (`RSet`, `RSetCache`) a value with its value encoder; every
/// codec rlock reproduces uses one encoder for both, so the three name their entries' objects
/// alike, and differ only in what Java calls them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Container {
    /// `RMap`, `RMapCache`, `RLocalCachedMap`: `getLock(key)`, ...
    Map,
    /// `RListMultimap`, `RSetMultimap` (and their caches): `getLock(key)`, ...
    Multimap,
    /// `RSet`, `RSetCache`: `getLock(value)`, ...
    Set,
}

impl Container {
    /// The container's word in the CLI: `map`, `multimap`, `set`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Map => "map",
            Self::Multimap => "multimap",
            Self::Set => "set",
        }
    }
}

impl fmt::Display for Container {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which of an entry's objects: Java's `getLock`, `getFairLock`, `getReadWriteLock`,
/// `getSemaphore`, `getPermitExpirableSemaphore` or `getCountDownLatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryObject {
    /// `getLock(key)`: a reentrant lock (`RTransaction` locks entries with it too).
    Lock,
    /// `getFairLock(key)`.
    FairLock,
    /// `getReadWriteLock(key)`: its read and write locks share the name.
    ReadWriteLock,
    /// `getSemaphore(key)`.
    Semaphore,
    /// `getPermitExpirableSemaphore(key)`.
    PermitExpirableSemaphore,
    /// `getCountDownLatch(key)`.
    CountDownLatch,
}

impl EntryObject {
    /// The suffix Redisson puts after the key's hash.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::FairLock => "fairlock",
            Self::ReadWriteLock => "rw_lock",
            Self::Semaphore => "semaphore",
            Self::PermitExpirableSemaphore => "permitexpirablesemaphore",
            Self::CountDownLatch => "countdownlatch",
        }
    }
}

/// The names of the objects of one container's entries, computed without a connection: what
/// [`Client::map`](crate::Client::map) and its kin use, and what `rlock entry-name` prints.
///
/// # Examples
///
/// ```
/// use rlock_redisson::{Codec, Container, EntryNames, EntryObject, NameMapper};
///
/// let orders = EntryNames::new(Container::Map, "orders", Codec::String, None);
/// assert_eq!(
///     orders.redis_name(42i64, EntryObject::Lock)?,
///     "{orders}:RE0IojEvPTY8Dofe3IkBNA:lock"
/// );
/// let mapped = EntryNames::new(Container::Map, "orders", Codec::String, Some(NameMapper::prefix("app:")));
/// assert_eq!(
///     mapped.redis_name("42", EntryObject::Lock)?,
///     "app:{app:orders}:RE0IojEvPTY8Dofe3IkBNA:lock"
/// );
/// # Ok::<(), rlock_redisson::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryNames {
    container: Container,
    /// The container's name through the mapper (Java's `getRawName()`).
    raw_name: String,
    codec: Codec,
    mapper: Option<NameMapper>,
}

impl EntryNames {
    /// The entries of the `container` called `name` (before mapping), whose keys `codec` encodes,
    /// in a client whose name mapper is `mapper`.
    pub fn new(
        container: Container,
        name: impl Into<String>,
        codec: Codec,
        mapper: Option<NameMapper>,
    ) -> Self {
        let name = name.into();
        let raw_name = match &mapper {
            Some(mapper) => mapper.map(&name),
            None => name,
        };
        Self {
            container,
            raw_name,
            codec,
            mapper,
        }
    }

    /// The entries of the `container` called `name` in a client configured by `config`: its
    /// codec and name mapper.
    pub(crate) fn of_client(
        config: &Config,
        container: Container,
        name: impl Into<String>,
    ) -> Self {
        Self::new(
            container,
            name,
            config.codec.clone(),
            config.name_mapper.clone(),
        )
    }

    /// The same entries, encoded with `codec` (a map whose Java side was given a codec of its own,
    /// `redisson.getMap("orders", StringCodec.INSTANCE)`).
    #[must_use]
    pub fn with_codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// What holds the entries.
    pub fn container(&self) -> Container {
        self.container
    }

    /// The container's name in Redis (through the mapper).
    pub fn raw_name(&self) -> &str {
        &self.raw_name
    }

    /// The codec the keys are encoded with.
    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    /// The name the Java side gives the `object` of the entry `key`, before the lock maps it: the
    /// name to hand to a [`Client`](crate::Client) factory, which maps it as Java's object does.
    ///
    /// # Errors
    ///
    /// [`Error::Codec`](crate::Error::Codec) when the codec cannot encode `key` as Java does.
    pub fn name(&self, key: impl Into<EntryKey>, object: EntryObject) -> Result<String> {
        let hash = self.codec.hash(&key.into())?;
        Ok(suffix_name(
            &self.raw_name,
            &format!("{hash}:{}", object.suffix()),
        ))
    }

    /// The key the object has in Redis: [`EntryNames::name`] through the mapper.
    ///
    /// # Errors
    ///
    /// As [`EntryNames::name`].
    pub fn redis_name(&self, key: impl Into<EntryKey>, object: EntryObject) -> Result<String> {
        let name = self.name(key, object)?;
        Ok(match &self.mapper {
            Some(mapper) => mapper.map(&name),
            None => name,
        })
    }
}
