//! The reentrant lock: Redisson's `RLock` (docs/protocol.md §2).
//!
//! The lock is a Redis hash at the lock's name with one field, `<node-uuid>:<owner-id>`, whose
//! value is the hold count. Acquire, unlock, undo, renewal and force-unlock are the scripts in
//! `lua/lock_*.lua`; waiting, leases and cancellation are the [engine](crate::engine)'s.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Script, Value};

use crate::engine::{Attempt, ChannelName, HandOff, LockWire, Patience, Taken};
use crate::names;
use crate::scripts::{ScriptCall, lua};
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

static ACQUIRE: LazyLock<Script> = lua!("lock_acquire.lua");
static UNLOCK: LazyLock<Script> = lua!("lock_unlock.lua");
static UNDO_ACQUIRE: LazyLock<Script> = lua!("lock_undo_acquire.lua");
static FORCE_UNLOCK: LazyLock<Script> = lua!("lock_force_unlock.lua");
static RENEW: LazyLock<Script> = lua!("lock_renew.lua");
static HAND_OFF: LazyLock<Script> = lua!("hand_off_prelude.lua", "lock_hand_off.lua");

/// Renewal of hash locks held by one field: `HEXISTS` then `PEXPIRE` (docs/protocol.md §4.2
/// `LockTask`). Only one owner holds a reentrant lock at a time, so the first of this client's
/// fields is the one.
pub(crate) static RENEWAL: Renewal = Renewal {
    name: "lock",
    script: &RENEW,
    add: |call, key, fields, _whole_key| {
        call.key(key).arg(fields.first().map_or("", String::as_str))
    },
};

/// The message that wakes one waiter.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// The reentrant lock's kind (Redisson's `RLock`): the type parameter of [`Lock`](crate::Lock).
#[derive(Debug)]
pub struct Reentrant {
    name: String,
    channel: Arc<str>,
    /// `PUBLISH` or `SPUBLISH`, as the client decided (docs/protocol.md §2.6).
    publish: &'static str,
}

impl Reentrant {
    pub(crate) fn new(name: String, publish: &'static str) -> Self {
        Self {
            channel: names::lock_channel(&name).into(),
            publish,
            name,
        }
    }
}

impl LockWire for Reentrant {
    type Token = ();

    fn name(&self) -> &str {
        &self.name
    }

    fn channel(&self, _field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        Some((Cow::Borrowed(&self.channel), WakeRule::OneOrAll))
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&ACQUIRE)
            .key(&self.name)
            .arg(lease.as_millis())
            .arg(field)
            .arg(held_before)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<()>>> {
        Attempt::from_count_or_pttl(reply)
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&UNDO_ACQUIRE)
            .key(&self.name)
            .key(&*self.channel)
            .arg(field)
            .arg(held_before)
            .arg(lease.as_millis())
            .arg(self.publish)
            .arg(UNLOCK_MESSAGE)
    }

    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        ScriptCall::new(&UNLOCK)
            .key(&self.name)
            .key(&*self.channel)
            .key(latch)
            .arg(UNLOCK_MESSAGE)
            .arg(lease.as_millis())
            .arg(field)
            .arg(self.publish)
            .arg(latch_ttl.as_millis())
    }

    fn force_unlock_call(&self) -> ScriptCall {
        ScriptCall::new(&FORCE_UNLOCK)
            .key(&self.name)
            .key(&*self.channel)
            .arg(UNLOCK_MESSAGE)
            .arg(self.publish)
    }

    fn label(&self) -> &'static str {
        "lock"
    }

    fn what(&self) -> &'static str {
        "lock"
    }

    fn renewal(&self) -> &'static Renewal {
        &RENEWAL
    }

    fn hand_off(&self) -> Option<&dyn HandOff<Token = ()>> {
        Some(self)
    }

    fn local_reentry(&self) -> Option<()> {
        Some(())
    }
}

impl HandOff for Reentrant {
    type Token = ();

    fn hand_off_call(
        &self,
        from: &str,
        to: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        ScriptCall::new(&HAND_OFF)
            .key(&self.name)
            .key(latch)
            .arg(from)
            .arg(to)
            .arg(lease.as_millis())
            .arg(latch_ttl.as_millis())
    }

    fn handed_off(&self, _reply: u64) {}

    /// A plain hold changes nothing in Redis but its owner's field, which a streak keeps as the
    /// root's: it passes freely.
    fn passed_freely(&self) -> Option<()> {
        Some(())
    }
}
