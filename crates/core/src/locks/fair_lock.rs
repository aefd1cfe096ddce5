//! The fair lock: Redisson's `RFairLock` (docs/protocol.md §6).
//!
//! The reentrant lock's hash, plus a FIFO queue of waiting owner fields
//! (`redisson_lock_queue:{name}`) and their deadlines (`redisson_lock_timeout:{name}`, epoch ms of
//! the client's wall clock). Only the queue head may take a free lock; an unlock wakes the head
//! alone, on its own channel (`redisson_lock__channel:{name}:<field>`). A waiter that stops polling
//! goes stale at its deadline and the next script purges it. rlock takes its waiter out of the
//! queue when it gives up: when its wait runs out (as Redisson does), when its future is dropped,
//! and when an acquire's reply was lost (the undo also leaves the queue).

use std::borrow::Cow;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{Script, Value};

use crate::engine::{Attempt, ChannelName, LockWire, Patience, Taken};
use crate::error::{Operation, Result};
use crate::locks::lock::Lock;
use crate::locks::lock_kind::LockKind;
use crate::locks::reentrant::{self, UNLOCK_MESSAGE};
use crate::names;
use crate::scripts::{ScriptCall, lua};
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

static ACQUIRE: LazyLock<Script> = lua!("fair_prelude.lua", "fair_acquire.lua");
static GIVE_UP: LazyLock<Script> = lua!("fair_prelude.lua", "fair_give_up.lua");
static UNLOCK: LazyLock<Script> = lua!("fair_prelude.lua", "fair_unlock.lua");
static UNDO_ACQUIRE: LazyLock<Script> = lua!("fair_prelude.lua", "fair_undo_acquire.lua");
static FORCE_UNLOCK: LazyLock<Script> = lua!("fair_prelude.lua", "fair_force_unlock.lua");

/// How soon a queued waiter polls again when the lock is free but another waiter heads the queue
/// (the acquire script's `0`): the head was woken and is about to take it, or has died and goes
/// stale at its deadline. Redisson re-polls at once; a short pause keeps that from spinning.
const HEAD_PENDING_REPOLL: Duration = Duration::from_millis(10);

/// The fair lock's kind (Redisson's `RFairLock`): the type parameter of
/// [`FairLock`](crate::FairLock).
#[derive(Debug)]
pub struct Fair {
    name: String,
    queue: String,
    timeouts: String,
    /// The reentrant lock's channel; each waiter listens on `<base>:<field>`.
    channel_base: String,
    publish: &'static str,
    /// How long a waiter without a wait limit stays queued before it counts as stale.
    wait_timeout: Duration,
}

impl Fair {
    pub(crate) fn new(name: String, publish: &'static str, wait_timeout: Duration) -> Self {
        Self {
            queue: names::fair_queue(&name),
            timeouts: names::fair_timeouts(&name),
            channel_base: names::lock_channel(&name),
            publish,
            wait_timeout,
            name,
        }
    }

    /// The stale-deadline allowance a waiter queues with: its wait, or the configured timeout for a
    /// waiter without a limit (docs/protocol.md §6.1).
    fn queue_wait(&self, patience: Patience) -> Duration {
        match patience {
            Patience::For(wait) if !wait.is_zero() => wait,
            _ => self.wait_timeout,
        }
    }
}

/// The client's wall clock in epoch ms: fair-lock deadlines are absolute, as Redisson's.
fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis())
}

impl LockWire for Fair {
    type Token = ();

    fn name(&self) -> &str {
        &self.name
    }

    fn channel(&self, field: &str) -> Option<(ChannelName<'_>, WakeRule)> {
        let channel = format!("{}:{field}", self.channel_base);
        Some((Cow::Owned(channel.into()), WakeRule::OneOrAll))
    }

    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        // A single try (`tryLock()`) never queues.
        let queues = !patience.one_try();
        ScriptCall::new(&ACQUIRE)
            .key(&self.name)
            .key(&self.queue)
            .key(&self.timeouts)
            .arg(lease.as_millis())
            .arg(field)
            .arg(self.queue_wait(patience).as_millis())
            .arg(now_ms())
            .arg(u8::from(queues))
            .arg(held_before)
    }

    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<()>>> {
        match *reply {
            Value::Int(0) => Some(Attempt::Busy(HEAD_PENDING_REPOLL)),
            _ => Attempt::from_count_or_pttl(reply),
        }
    }

    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall {
        ScriptCall::new(&UNDO_ACQUIRE)
            .key(&self.name)
            .key(&self.queue)
            .key(&self.timeouts)
            .key(&self.channel_base)
            .arg(field)
            .arg(held_before)
            .arg(lease.as_millis())
            .arg(self.publish)
            .arg(UNLOCK_MESSAGE)
            .arg(self.queue_wait(patience).as_millis())
    }

    fn give_up_call(&self, field: &str, patience: Patience) -> Option<ScriptCall> {
        if patience.one_try() {
            return None;
        }
        Some(
            ScriptCall::new(&GIVE_UP)
                .key(&self.queue)
                .key(&self.timeouts)
                .key(&self.name)
                .key(&self.channel_base)
                .arg(field)
                .arg(self.queue_wait(patience).as_millis())
                .arg(self.publish)
                .arg(UNLOCK_MESSAGE),
        )
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
            .key(&self.queue)
            .key(&self.timeouts)
            .key(&self.channel_base)
            .key(latch)
            .arg(UNLOCK_MESSAGE)
            .arg(lease.as_millis())
            .arg(field)
            .arg(now_ms())
            .arg(self.publish)
            .arg(latch_ttl.as_millis())
    }

    fn force_unlock_call(&self) -> ScriptCall {
        ScriptCall::new(&FORCE_UNLOCK)
            .key(&self.name)
            .key(&self.queue)
            .key(&self.timeouts)
            .key(&self.channel_base)
            .arg(UNLOCK_MESSAGE)
            .arg(now_ms())
            .arg(self.publish)
    }

    fn label(&self) -> &'static str {
        "fair_lock"
    }

    fn what(&self) -> &'static str {
        "fair lock"
    }

    fn renewal(&self) -> &'static Renewal {
        &reentrant::RENEWAL
    }

    fn local_reentry(&self) -> Option<()> {
        Some(())
    }
}

/// A fair lock, shared with Redisson's `RFairLock` of the same name: waiters (Java's included)
/// acquire in the order they first asked, whichever client they are on.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let lock = client.fair_lock("doc:fair:example");
/// let guard = lock.lock().await?;
/// // A waiter that gives up leaves the queue again.
/// assert!(lock.try_lock_for(Duration::from_millis(50)).await?.is_none());
/// assert!(lock.queue().await?.is_empty());
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub type FairLock = Lock<Fair>;

/// One owner waiting in a fair lock's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// Its hash field, `<node-uuid>:<owner-id>` (a Java thread's or an rlock owner's).
    pub field: String,
    /// When it counts as stale, should it stop polling (epoch ms of its client's clock); `None` if
    /// the queue lists it without a deadline (a state Redisson's purge tolerates).
    pub deadline_ms: Option<i64>,
}

/// The kinds whose waiters queue in Redis as the fair lock's do: the fair lock and the kinds built
/// on it, whose handles list that queue ([`Lock::queue`]). Sealed, as [`LockKind`] is.
pub trait FairQueue: LockKind {
    /// The fair lock whose queue this kind's waiters join.
    #[doc(hidden)]
    fn fair(&self) -> &Fair;
}

impl FairQueue for Fair {
    fn fair(&self) -> &Fair {
        self
    }
}

impl<K: FairQueue> Lock<K> {
    /// The waiters queued for the lock, head first, with their deadlines.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`](crate::Error::Timeout) or [`Error::Backend`](crate::Error::Backend) when
    /// Redis fails, [`Error::WrongType`](crate::Error::WrongType) when the queue keys hold
    /// something else.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn queue(&self) -> Result<Vec<QueuedWaiter>> {
        let (commands, fair) = (&self.services().commands, self.kind().fair());
        let fields: Vec<String> = commands
            .query(
                Operation::Query,
                self.kind().subject().at(&fair.queue),
                redis::cmd("LRANGE").arg(&fair.queue).arg(0).arg(-1),
            )
            .await?;
        let deadlines: Vec<(String, f64)> = commands
            .query(
                Operation::Query,
                self.kind().subject().at(&fair.timeouts),
                redis::cmd("ZRANGE")
                    .arg(&fair.timeouts)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES"),
            )
            .await?;
        Ok(fields
            .into_iter()
            .map(|field| {
                // Epoch ms fit an i64 with room to spare; a deadline is an integral score.
                #[expect(clippy::cast_possible_truncation, reason = "epoch ms fit an i64")]
                let deadline_ms = deadlines
                    .iter()
                    .find(|(member, _)| *member == field)
                    .map(|(_, score)| *score as i64);
                QueuedWaiter { field, deadline_ms }
            })
            .collect())
    }
}
