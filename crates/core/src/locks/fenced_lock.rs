//! The fenced lock: Redisson's `RFencedLock` (docs/protocol.md §8.2).
//!
//! A reentrant lock whose every successful acquisition, re-entry included, also increments a token
//! counter (`redisson_lock_token:{name}`, which never expires) and yields its new value: a fencing
//! token that a protected resource can check to refuse a stale holder's writes. Everything but the
//! acquire script is the reentrant lock's.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, Value};

use crate::engine::{Attempt, ChannelName, HandOff, LockWire, Patience, Taken, hold_count_reply};
use crate::error::{Error, Operation, Result};
use crate::locks::lock::Lock;
use crate::locks::reentrant::Reentrant;
use crate::names;
use crate::scripts::{ScriptCall, lua};
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

static ACQUIRE: LazyLock<Script> = lua!("fenced_acquire.lua");
static HAND_OFF: LazyLock<Script> = lua!("hand_off_prelude.lua", "fenced_hand_off.lua");

/// The fenced lock's kind (Redisson's `RFencedLock`): the type parameter of
/// [`FencedLock`](crate::FencedLock).
#[derive(Debug)]
pub struct Fenced {
    lock: Reentrant,
    token: String,
}

impl Fenced {
    pub(crate) fn new(name: String, publish: &'static str) -> Self {
        Self {
            token: names::fenced_token(&name),
            lock: Reentrant::new(name, publish),
        }
    }
}

impl LockWire for Fenced {
    /// The fencing token of the acquisition.
    type Token = u64;

    fn name(&self) -> &str {
        self.lock.name()
    }

    fn channel(&self, field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        self.lock.channel(field)
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        _patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&ACQUIRE)
            .key(self.lock.key())
            .key(&self.token)
            .arg(lease.as_millis())
            .arg(field)
            .arg(held_before)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<u64>>> {
        let Value::Array(pair) = reply else {
            return None;
        };
        match pair.as_slice() {
            [Value::Int(-1), Value::Int(token), count] if *token > 0 => {
                Some(Attempt::Acquired(Taken::Held {
                    token: token.unsigned_abs(),
                    count: hold_count_reply(count)?,
                }))
            }
            [Value::Int(0)] => Some(Attempt::Acquired(Taken::Gone)),
            // Unlike Java, a held lock without a TTL (`[-1, -1]`) is not taken for an acquisition.
            [Value::Int(pttl), Value::Int(-1)] => Some(Attempt::busy_for_pttl(*pttl)),
            _ => None,
        }
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        // The token taken stays taken: tokens only have to increase.
        self.lock
            .undo_acquire_call(field, held_before, lease, patience)
    }

    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        self.lock.unlock_call(field, lease, latch, latch_ttl)
    }

    fn force_unlock_call(&self) -> ScriptCall {
        self.lock.force_unlock_call()
    }

    fn label(&self) -> &'static str {
        "fenced_lock"
    }

    fn what(&self) -> &'static str {
        "fenced lock"
    }

    fn renewal(&self) -> &'static Renewal {
        self.lock.renewal()
    }

    fn hand_off(&self) -> Option<&dyn HandOff<Token = u64>> {
        Some(self)
    }
}

impl HandOff for Fenced {
    /// The next owner's fencing token: a hand-off is an acquisition, and takes a new one.
    type Token = u64;

    fn hand_off_call(
        &self,
        from: &str,
        to: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall {
        ScriptCall::new(&HAND_OFF)
            .key(self.lock.key())
            .key(&self.token)
            .key(latch)
            .arg(from)
            .arg(to)
            .arg(lease.as_millis())
            .arg(latch_ttl.as_millis())
    }

    fn handed_off(&self, reply: u64) -> u64 {
        reply
    }
}

/// A fenced lock, shared with Redisson's `RFencedLock` of the same name: a reentrant lock whose
/// every acquisition yields a strictly increasing fencing token
/// ([`Guard::token`](crate::Guard::token)).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let lock = client.fenced_lock("doc:fenced:example");
/// let first = lock.lock().await?;
/// let token = *first.token();
/// first.unlock().await?;
/// let second = lock.lock().await?;
/// assert!(*second.token() > token);
/// assert_eq!(lock.token().await?, *second.token());
/// second.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub type FencedLock = Lock<Fenced>;

/// A guard of a [`FencedLock`] hold, carrying its fencing token.
pub type FencedGuard = crate::engine::Guard<u64>;

impl Lock<Fenced> {
    /// The latest fencing token handed out for this lock, whoever took it (Redisson's `getToken`);
    /// 0 before the first acquisition. A guard's own token is
    /// [`Guard::token`](crate::Guard::token).
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Backend`] when Redis fails, [`Error::UnexpectedReply`] when
    /// the counter is not a number.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn token(&self) -> Result<u64> {
        let token: Option<String> = self
            .services()
            .commands
            .query(
                Operation::Query,
                self.kind().subject().at(&self.kind().token),
                redis::cmd("GET").arg(&self.kind().token),
            )
            .await?;
        token.map_or(Ok(0), |token| {
            token
                .parse()
                .map_err(|_| Error::unexpected(Operation::Query, self.kind().subject(), token))
        })
    }
}
