//! The lock kinds as the interop tests see them: an [`ObjectKind`] says what a kind looks like on
//! the wire (its hash fields, channels and messages) and makes its objects on both sides, a
//! [`JavaObject`] of the emulator and an [`RlockObject`] of rlock, which
//! [`java_object!`](crate::java_object) and [`rlock_object!`](crate::rlock_object) open whatever
//! their type. Each kind's impl lives in the module that emulates it; [`KINDS`] lists them all.
//!
//! A new kind: its impl (a unit struct) next to its emulator, its line in
//! [`lock_kinds!`](crate::lock_kinds) (which [`KINDS`] is made from), and, if its objects are of new
//! types, a variant in [`JavaObject`] and [`RlockObject`] with its arm in each macro.

use std::time::Duration;

use super::{
    JavaClient, JavaFairLock, JavaFencedLock, JavaLock, JavaNonReentrantFairLock,
    JavaNonReentrantLock, JavaRwLock, JavaSpinLock, lock_channel,
};

/// A kind of Redisson lock object that both the emulator and rlock implement. The defaults are the
/// `RLock`'s. A kind with a [`twin`](ObjectKind::twin) takes its hash, channels, messages and
/// release from it, and answers only for its name and its objects.
pub trait ObjectKind: Sync {
    /// Redisson's interface (and, for the read-write lock's halves, the method that gives it).
    fn interface(&self) -> &'static str;

    /// What rlock's messages call its objects: an error of one says `a fair lock "name"`.
    fn described_as(&self) -> &'static str;

    /// The suffix of its object per map entry (`map.getLock(key)` is `…:lock`, docs/protocol.md
    /// §13.1); `None` for the kinds Redisson hands out by name only.
    fn entry_suffix(&self) -> Option<&'static str> {
        None
    }

    /// The kind whose hash, channels, messages and release this one shares, acquiring otherwise:
    /// the reentrant twin of a non-reentrant lock.
    fn twin(&self) -> Option<&'static dyn ObjectKind> {
        None
    }

    /// The kind that a holder of this kind keeps out, when it is not this kind: a writer for a
    /// reader (readers share).
    fn contender(&self) -> Option<&'static dyn ObjectKind> {
        None
    }

    /// What the hash field of an owner ends in after its client-wide `<client id>:<thread>`: the
    /// write lock's `:write` (docs/protocol.md §1.2).
    fn field_suffix(&self) -> &'static str {
        ""
    }

    /// The `mode` field of its hash while held: a read-write lock's (§7.1).
    fn mode(&self) -> Option<&'static str> {
        None
    }

    /// The channel that a waiter whose owner field is `owner` sleeps on (§1.4); `None` when its
    /// waiters poll instead.
    fn channel(&self, name: &str, _owner: &str) -> Option<String> {
        Some(lock_channel(name))
    }

    /// How its waiters poll when they have no channel: the longest delay between two tries, and
    /// how many tries it takes to reach it.
    fn polling(&self) -> Option<Polling> {
        None
    }

    /// What a holder's last unlock publishes while nobody waits (channel, payload): the lock's
    /// `0` (§2.3).
    fn release_message(&self, name: &str) -> Option<(String, &'static str)> {
        Some((lock_channel(name), "0"))
    }

    /// What an unlock of a lock that does not exist answers (Java HEAD and rlock alike): refused,
    /// silently, for the `RLock` (§2.3 step 2).
    fn missing_unlock(&self) -> MissingUnlock {
        MissingUnlock::Refused
    }

    /// Its object `name` of the emulated client (a new object, as `getLock` and its siblings make).
    fn java(&self, client: &JavaClient, name: &str) -> JavaObject;

    /// Its handle `name` of the rlock client.
    fn rlock(&self, client: &rlock_redisson::Client, name: &str) -> RlockObject;
}

/// [`KINDS`] of [`lock_kinds!`](crate::lock_kinds)' rows.
macro_rules! object_kinds {
    ($($name:ident: $variant:ident($object:path)),+ $(,)?) => {
        &[$(&$object),+]
    };
}

/// Every kind, in the order the scenarios run them: the kinds of
/// [`lock_kinds!`](crate::lock_kinds).
pub const KINDS: &[&dyn ObjectKind] = crate::lock_kinds!(all object_kinds);

/// How a waiter that hears nothing polls ([`ObjectKind::polling`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polling {
    /// The longest delay between two tries.
    pub max_delay: Duration,
    /// How many tries a waiter makes before its delay reaches `max_delay`.
    pub tries_to_max_delay: u64,
}

/// What an unlock of a missing lock answers and publishes ([`ObjectKind::missing_unlock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingUnlock {
    /// Refused, silently.
    Refused,
    /// Refused, but with the kind's [release message](ObjectKind::release_message).
    RefusedPublishing,
    /// A success: nothing is published.
    Released,
}

/// A lock object of the emulated Redisson client, one variant per object type.
#[derive(Clone, Debug)]
pub enum JavaObject {
    Lock(JavaLock),
    Fair(JavaFairLock),
    Spin(JavaSpinLock),
    Fenced(JavaFencedLock),
    /// Either half of a read-write lock.
    Rw(JavaRwLock),
    NonReentrant(JavaNonReentrantLock),
    NonReentrantFair(JavaNonReentrantFairLock),
}

/// An rlock lock handle, one variant per kind.
#[derive(Clone, Debug)]
pub enum RlockObject {
    Reentrant(rlock_redisson::Lock),
    Fair(rlock_redisson::FairLock),
    Spin(rlock_redisson::SpinLock),
    Fenced(rlock_redisson::FencedLock),
    Read(rlock_redisson::ReadLock),
    Write(rlock_redisson::WriteLock),
    NonReentrant(rlock_redisson::NonReentrantLock),
    NonReentrantFair(rlock_redisson::NonReentrantFairLock),
}

/// `$body` with `$lock` bound to the object inside a [`JavaObject`], whatever its type: the
/// objects share their method names (the non-reentrant ones' acquisitions fail with a
/// [`JavaError`](super::JavaError), the others' with a `RedisError`, which converts into one).
#[macro_export]
macro_rules! java_object {
    ($object:expr, $lock:ident => $body:expr) => {
        match $object {
            $crate::redisson::JavaObject::Lock($lock) => $body,
            $crate::redisson::JavaObject::Fair($lock) => $body,
            $crate::redisson::JavaObject::Spin($lock) => $body,
            $crate::redisson::JavaObject::Fenced($lock) => $body,
            $crate::redisson::JavaObject::Rw($lock) => $body,
            $crate::redisson::JavaObject::NonReentrant($lock) => $body,
            $crate::redisson::JavaObject::NonReentrantFair($lock) => $body,
        }
    };
}

/// `$body` with `$lock` bound to the `rlock_redisson::Lock<K>` inside an [`RlockObject`],
/// whatever its kind.
#[macro_export]
macro_rules! rlock_object {
    ($object:expr, $lock:ident => $body:expr) => {
        match $object {
            $crate::redisson::RlockObject::Reentrant($lock) => $body,
            $crate::redisson::RlockObject::Fair($lock) => $body,
            $crate::redisson::RlockObject::Spin($lock) => $body,
            $crate::redisson::RlockObject::Fenced($lock) => $body,
            $crate::redisson::RlockObject::Read($lock) => $body,
            $crate::redisson::RlockObject::Write($lock) => $body,
            $crate::redisson::RlockObject::NonReentrant($lock) => $body,
            $crate::redisson::RlockObject::NonReentrantFair($lock) => $body,
        }
    };
}
