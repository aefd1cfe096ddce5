//! `--kind`: which Redisson lock object a command works on, and one dispatch from the flag to the
//! typed handle, so each command is written once, generic over kinds. `inspect` also takes the other
//! synchronizers' kinds ([`Object`]); the lock commands take lock kinds only.

use std::sync::LazyLock;

use clap::ValueEnum;
use clap::builder::PossibleValue;
use rlock_redisson::kind::LockKind;
use rlock_redisson::{Client, EntryObject, Lock};

/// A lock kind, as named on the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LockKindArg {
    /// The reentrant lock (Redisson's `RLock`).
    #[default]
    Lock,
    /// The fair lock (`RFairLock`).
    Fair,
    /// The spin lock (`RSpinLock`).
    Spin,
    /// The fenced lock (`RFencedLock`); `acquired` events carry the token.
    Fenced,
    /// The read side of a read-write lock (`RReadWriteLock.readLock()`).
    Read,
    /// The write side of a read-write lock (`RReadWriteLock.writeLock()`).
    Write,
    /// The non-reentrant lock (`RNonReentrantLock`, Redisson 4.4+).
    #[value(name = "nonreentrant", alias = "non-reentrant")]
    NonReentrant,
    /// The non-reentrant fair lock (`RNonReentrantFairLock`, Redisson 4.4+).
    #[value(name = "nonreentrant-fair", alias = "non-reentrant-fair")]
    NonReentrantFair,
}

impl LockKindArg {
    /// The object of a map's, multimap's or set's entry this kind is, if Java hands one out.
    pub(crate) fn entry_object(self) -> Option<EntryObject> {
        match self {
            Self::Lock => Some(EntryObject::Lock),
            Self::Fair => Some(EntryObject::FairLock),
            Self::Read | Self::Write => Some(EntryObject::ReadWriteLock),
            Self::Spin | Self::Fenced | Self::NonReentrant | Self::NonReentrantFair => None,
        }
    }

    /// The kind as `--kind` spells it.
    pub(crate) fn as_arg(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |value| value.get_name().to_owned())
    }
}

/// What an acquisition yields, as it goes into JSON.
pub(crate) trait Token {
    /// The fencing token, if the kind hands one out.
    fn fencing(&self) -> Option<u64>;
}

impl Token for () {
    fn fencing(&self) -> Option<u64> {
        None
    }
}

impl Token for u64 {
    fn fencing(&self) -> Option<u64> {
        Some(*self)
    }
}

/// A command's work on one lock handle, whatever its kind.
pub(crate) trait OnLock {
    type Output;

    async fn on<K: LockKind>(self, lock: Lock<K>) -> Self::Output
    where
        K::Token: Token;
}

impl LockKindArg {
    /// Runs `work` on the lock of this kind called `name`.
    pub(crate) async fn with<W: OnLock>(self, client: &Client, name: &str, work: W) -> W::Output {
        match self {
            Self::Lock => work.on(client.lock(name)).await,
            Self::Fair => work.on(client.fair_lock(name)).await,
            Self::Spin => work.on(client.spin_lock(name)).await,
            Self::Fenced => work.on(client.fenced_lock(name)).await,
            Self::Read => work.on(client.read_write_lock(name).read()).await,
            Self::Write => work.on(client.read_write_lock(name).write()).await,
            Self::NonReentrant => work.on(client.non_reentrant_lock(name)).await,
            Self::NonReentrantFair => work.on(client.non_reentrant_fair_lock(name)).await,
        }
    }
}

/// What `inspect --kind` reads: a lock of any kind (named as for the lock commands), or one of
/// Redisson's other synchronizers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Object {
    /// A lock of this kind: every kind has the same report.
    Lock(LockKindArg),
    /// Redisson's `RSemaphore`.
    Semaphore,
    /// Redisson's `RPermitExpirableSemaphore`.
    ExpirableSemaphore,
    /// Redisson's `RCountDownLatch`.
    Latch,
}

impl Default for Object {
    fn default() -> Self {
        Self::Lock(LockKindArg::default())
    }
}

impl ValueEnum for Object {
    fn value_variants<'a>() -> &'a [Self] {
        static VARIANTS: LazyLock<Vec<Object>> = LazyLock::new(|| {
            let locks = LockKindArg::value_variants()
                .iter()
                .copied()
                .map(Object::Lock);
            let others = [Object::Semaphore, Object::ExpirableSemaphore, Object::Latch];
            locks.chain(others).collect()
        });
        &VARIANTS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (name, help) = match self {
            Self::Lock(kind) => return kind.to_possible_value(),
            Self::Semaphore => ("semaphore", "The semaphore (`RSemaphore`)"),
            Self::ExpirableSemaphore => (
                "expirable-semaphore",
                "The permit-expirable semaphore (`RPermitExpirableSemaphore`)",
            ),
            Self::Latch => ("latch", "The count-down latch (`RCountDownLatch`)"),
        };
        Some(PossibleValue::new(name).help(help))
    }
}
