//! The read-write lock: Redisson's `RReadWriteLock` (docs/protocol.md §7).
//!
//! One hash at the lock's name for both sides: a `mode` field (`read` or `write`), readers' fields
//! `<node-uuid>:<owner-id>` and writers' `<node-uuid>:<owner-id>:write`, each counting holds. Every
//! read hold also has its own timeout key `{name}:<field>:rwlock_timeout:<k>`, renewed with the
//! hash, from which a read unlock computes the lock's TTL. Both sides share one channel,
//! `redisson_rwlock:{name}`: a read unlock publishes `0` (wake one), a write unlock `1` (wake all).
//!
//! Readers share; a writer excludes everyone but itself, and may also take the read lock (a
//! downgrade: its write unlock then leaves a read lock, without a message). A reader cannot take
//! the write lock: Redisson would wait forever, rlock refuses with [`Error::WouldDeadlock`].

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Script, Value};

use crate::engine::{Attempt, ChannelName, HandOff, LockWire, Patience, Taken};
use crate::error::{Error, Result};
use crate::locks::lock::Lock;
use crate::locks::reentrant::{self, UNLOCK_MESSAGE};
use crate::names;
use crate::scripts::{ScriptCall, lua};
use crate::services::Services;
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

static READ_ACQUIRE: LazyLock<Script> = lua!("rw_read_acquire.lua");
static READ_UNLOCK: LazyLock<Script> = lua!("rw_prelude.lua", "rw_read_unlock.lua");
static READ_UNDO_ACQUIRE: LazyLock<Script> = lua!("rw_prelude.lua", "rw_read_undo_acquire.lua");
static READ_RENEW: LazyLock<Script> = lua!("rw_read_renew.lua");
static WRITE_ACQUIRE: LazyLock<Script> = lua!("rw_write_acquire.lua");
static WRITE_UNLOCK: LazyLock<Script> = lua!("rw_prelude.lua", "rw_write_unlock.lua");
static WRITE_UNDO_ACQUIRE: LazyLock<Script> = lua!("rw_prelude.lua", "rw_write_undo_acquire.lua");
static WRITE_HAND_OFF: LazyLock<Script> = lua!("hand_off_prelude.lua", "rw_write_hand_off.lua");
static FORCE_UNLOCK: LazyLock<Script> = lua!("rw_force_unlock.lua");
static IS_LOCKED: LazyLock<Script> = lua!("rw_is_locked.lua");

/// Renewal of read locks (docs/protocol.md §4.2, HEAD's `ReadLockTask`): each lock with its key
/// prefix, then this client's holders, whose timeout keys are renewed with the hash.
static READ_RENEWAL: Renewal = Renewal {
    name: "read",
    script: &READ_RENEW,
    add: |call, key, fields, _whole_key| {
        fields.iter().fold(
            call.key(key)
                .key(names::read_key_prefix(key))
                .arg(fields.len()),
            |call, field| call.arg(field),
        )
    },
};

/// The message of a write unlock: wake every waiter (readers may all proceed).
const WRITE_UNLOCK_MESSAGE: &str = "1";

/// What both sides of one read-write lock share.
#[derive(Debug)]
struct Shared {
    name: String,
    channel: Arc<str>,
    publish: &'static str,
}

impl Shared {
    fn force_unlock_call(&self, mode: &str, message: &str) -> ScriptCall {
        ScriptCall::new(&FORCE_UNLOCK)
            .key(&self.name)
            .key(&*self.channel)
            .arg(mode)
            .arg(message)
            .arg(self.publish)
    }

    fn is_locked_call(&self, mode: &str) -> ScriptCall {
        ScriptCall::new(&IS_LOCKED).key(&self.name).arg(mode)
    }

    fn channel(&self) -> Option<(ChannelName<'_>, WakeRule)> {
        Some((Cow::Borrowed(&self.channel), WakeRule::OneOrAll))
    }
}

/// The read side's kind: the type parameter of [`ReadLock`](crate::ReadLock).
#[derive(Debug)]
pub struct Read {
    lock: Shared,
    /// What every reader's timeout keys start with: `{name}`.
    key_prefix: String,
}

/// The write side's kind: the type parameter of [`WriteLock`](crate::WriteLock).
#[derive(Debug)]
pub struct Write {
    lock: Shared,
}

impl LockWire for Read {
    type Token = ();

    fn name(&self) -> &str {
        &self.lock.name
    }

    fn channel(&self, _field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        self.lock.channel()
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&READ_ACQUIRE)
            .key(&self.lock.name)
            .key(names::read_timeouts(&self.lock.name, field))
            .arg(lease.as_millis())
            .arg(field)
            .arg(write_field(field))
            .arg(held_before)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<()>>> {
        Attempt::from_count_or_pttl(reply)
    }

    fn reentry_keeps_ttl(&self) -> bool {
        true
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        _lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&READ_UNDO_ACQUIRE)
            .key(&self.lock.name)
            .key(&*self.lock.channel)
            .key(names::read_timeouts(&self.lock.name, field))
            .key(&self.key_prefix)
            .arg(field)
            .arg(held_before)
            .arg(self.lock.publish)
            .arg(UNLOCK_MESSAGE)
    }

    fn unlock_call(
        &self,
        field: &str,
        _lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        // The lock's TTL after a read unlock comes from the remaining readers' timeout keys.
        ScriptCall::new(&READ_UNLOCK)
            .key(&self.lock.name)
            .key(&*self.lock.channel)
            .key(names::read_timeouts(&self.lock.name, field))
            .key(&self.key_prefix)
            .key(latch)
            .arg(UNLOCK_MESSAGE)
            .arg(field)
            .arg(self.lock.publish)
            .arg(latch_ttl.as_millis())
    }

    fn force_unlock_call(&self) -> ScriptCall {
        self.lock.force_unlock_call("read", UNLOCK_MESSAGE)
    }

    fn is_locked_call(&self) -> Option<ScriptCall> {
        Some(self.lock.is_locked_call("read"))
    }

    fn label(&self) -> &'static str {
        "read_lock"
    }

    fn what(&self) -> &'static str {
        "read lock"
    }

    fn renewal(&self) -> &'static Renewal {
        &READ_RENEWAL
    }
}

/// A writer's field: the owner's field with `:write` (docs/protocol.md §1.2).
fn write_field(field: &str) -> String {
    format!("{field}:write")
}

impl LockWire for Write {
    type Token = ();

    fn name(&self) -> &str {
        &self.lock.name
    }

    fn field(&self, field: String) -> String {
        write_field(&field)
    }

    fn channel(&self, _field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        self.lock.channel()
    }

    fn refuse(&self, services: &Services, base_field: &str) -> Result<()> {
        let name = &self.lock.name;
        let reads = services.ledger.count(name, base_field);
        let writes = services.ledger.count(name, &write_field(base_field));
        if reads > 0 && writes == 0 {
            return Err(Error::WouldDeadlock { name: name.clone() });
        }
        Ok(())
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&WRITE_ACQUIRE)
            .key(&self.lock.name)
            .arg(lease.as_millis())
            .arg(field)
            .arg(held_before)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<()>>> {
        Attempt::from_count_or_pttl(reply)
    }

    fn reentry_keeps_ttl(&self) -> bool {
        true
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&WRITE_UNDO_ACQUIRE)
            .key(&self.lock.name)
            .key(&*self.lock.channel)
            .arg(field)
            .arg(held_before)
            .arg(lease.as_millis())
            .arg(self.lock.publish)
            .arg(WRITE_UNLOCK_MESSAGE)
    }

    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        ScriptCall::new(&WRITE_UNLOCK)
            .key(&self.lock.name)
            .key(&*self.lock.channel)
            .key(latch)
            .arg(WRITE_UNLOCK_MESSAGE)
            .arg(lease.as_millis())
            .arg(field)
            .arg(self.lock.publish)
            .arg(latch_ttl.as_millis())
    }

    fn force_unlock_call(&self) -> ScriptCall {
        self.lock.force_unlock_call("write", WRITE_UNLOCK_MESSAGE)
    }

    fn is_locked_call(&self) -> Option<ScriptCall> {
        Some(self.lock.is_locked_call("write"))
    }

    fn label(&self) -> &'static str {
        "write_lock"
    }

    fn what(&self) -> &'static str {
        "write lock"
    }

    fn renewal(&self) -> &'static Renewal {
        &reentrant::RENEWAL
    }

    fn hand_off(&self) -> Option<&dyn HandOff<Token = ()>> {
        Some(self)
    }
}

/// Only writers hand off: read holds are shared, and a writer that also holds read locks of the
/// same lock never passes it (the script refuses).
impl HandOff for Write {
    type Token = ();

    fn hand_off_call(
        &self,
        from: &str,
        to: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        ScriptCall::new(&WRITE_HAND_OFF)
            .key(&self.lock.name)
            .key(latch)
            .arg(from)
            .arg(to)
            .arg(lease.as_millis())
            .arg(latch_ttl.as_millis())
    }

    fn handed_off(&self, _reply: u64) {}
}

/// The read side of a [`ReadWriteLock`].
pub type ReadLock = Lock<Read>;

/// The write side of a [`ReadWriteLock`].
pub type WriteLock = Lock<Write>;

/// A read-write lock, shared with Redisson's `RReadWriteLock` of the same name: a
/// [read lock](ReadWriteLock::read) that readers share and a [write lock](ReadWriteLock::write)
/// that excludes everyone else. Each side is a [`Lock`] with the whole lock API.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let rw = client.read_write_lock("doc:rw:example");
/// let a = rw.read().lock().await?;
/// let b = rw.read().lock().await?; // readers share
/// assert!(rw.write().try_lock().await?.is_none()); // a writer waits for them
/// a.unlock().await?;
/// b.unlock().await?;
/// let w = rw.write().lock().await?;
/// assert!(rw.read().try_lock().await?.is_none()); // and readers for the writer
/// w.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl ReadWriteLock {
    pub(crate) fn new(services: &std::sync::Arc<Services>, name: String) -> Self {
        let shared = || Shared {
            channel: names::rw_channel(&name).into(),
            publish: services.publish,
            name: name.clone(),
        };
        Self {
            read: Lock::new(
                services.clone(),
                Read {
                    key_prefix: names::read_key_prefix(&name),
                    lock: shared(),
                },
            ),
            write: Lock::new(services.clone(), Write { lock: shared() }),
        }
    }

    /// The lock's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read lock (Redisson's `readLock()`): shared by readers, excluded by a writer.
    pub fn read(&self) -> Lock<Read> {
        self.read.clone()
    }

    /// The write lock (Redisson's `writeLock()`): excludes readers and other writers.
    pub fn write(&self) -> Lock<Write> {
        self.write.clone()
    }
}
