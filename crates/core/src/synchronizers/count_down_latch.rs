//! Redisson's `RCountDownLatch` (docs/protocol.md §8.7): a count that opens a gate at zero, shared
//! with Java.
//!
//! # Implementation details
//!
//! The count is a string integer at the raw name. Counting down to zero deletes it and publishes
//! `0` on `redisson_countdownlatch__channel__{name}`; setting a count publishes `1`. Locally the
//! channel is a reclosable latch ([`WakeRule::CountDown`]): `0` opens it for every waiter armed
//! before it, `1` closes it. A waiter reads the count, and while it is above zero waits for an
//! opening (or the one-second re-check that bounds a lost message), then reads again. The engine's
//! wait loop arms the latch before each read, so an opening that lands while the read is on the
//! wire is not missed.
//!
//! A count-down is not idempotent and carries no id, so it is never re-sent: a lost reply is
//! [`Error::OutcomeUnknown`] (it may or may not have counted). Like Redisson, the latch's writes do
//! not wait for replicas.

use std::fmt;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;

use crate::engine::{self, Attempt, Object, Patience, Queueing, RECHECK, Replicas};
use crate::error::{Error, Operation, Result};
use crate::names;
use crate::scripts::lua;
use crate::services::Services;
use crate::wake::WakeRule;

static TRY_SET_COUNT: LazyLock<Script> = lua!("latch_try_set_count.lua");
static COUNT_DOWN: LazyLock<Script> = lua!("latch_count_down.lua");
static DELETE: LazyLock<Script> = lua!("latch_delete.lua");

/// The message that opens the latch (the count reached zero).
const OPEN: &str = "0";
/// The message that closes the latch (a new count was set, or the latch was deleted).
const CLOSE: &str = "1";

/// A distributed count-down latch shared with Redisson's `RCountDownLatch` of the same name:
/// waiters block until the count, set once, has been counted down to zero.
///
/// Unlike `java.util.concurrent.CountDownLatch` (and like Redisson's), it can be used again: once
/// open (the count reached zero, and the key is gone), [`CountDownLatch::try_set_count`] closes it
/// with a new count.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> rlock_redisson::Result<()> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
/// use std::time::Duration;
/// let client = rlock_redisson::Client::connect(&url).await?;
/// let shards_done = client.count_down_latch("doc:latch:nightly-batch");
/// # shards_done.delete().await?;
/// assert!(shards_done.try_set_count(2).await?);
///
/// for _shard in 0..2 {
///     let latch = shards_done.clone();
///     tokio::spawn(async move {
///         // ... process the shard ...
///         latch.count_down().await
///     });
/// }
/// assert!(shards_done.await_for(Duration::from_secs(5)).await?);
/// assert_eq!(shards_done.count().await?, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    object: Object,
}

impl CountDownLatch {
    pub(crate) fn new(services: Arc<Services>, name: String) -> Self {
        let channel = names::latch_channel(&name);
        Self {
            object: Object::new(services, "count-down latch", name, channel),
        }
    }

    /// The latch's name in Redis: the name it was made with, mapped by
    /// [`Config::name_mapper`](crate::Config::name_mapper) if one is set (Redisson's
    /// `getRawName()`).
    pub fn name(&self) -> &str {
        &self.object.name
    }

    /// Sets the count if the latch has none (it is open); returns whether it did. Setting a count
    /// closes the latch for waiters.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else, [`Error::Timeout`] or
    /// [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the count may or may not have been set.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        self.object.check_name()?;
        let call = self
            .object
            .call(&TRY_SET_COUNT)
            .arg(CLOSE)
            .arg(count)
            .arg(self.object.services.publish);
        let set: i64 = engine::update(
            &self.object.services,
            self.object.subject(),
            call,
            Replicas::Skip,
        )
        .await?;
        Ok(set == 1)
    }

    /// Counts down by one; at zero the latch opens and every waiter (Java's too) goes on. Counting
    /// down a latch without a count does nothing.
    ///
    /// # Errors
    ///
    /// [`Error::OutcomeUnknown`] when the reply was lost (it may or may not have counted),
    /// [`Error::WrongType`], [`Error::Timeout`] or [`Error::Backend`] as Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: once called, the count-down completes even if the future is dropped.
    pub async fn count_down(&self) -> Result<()> {
        self.object.check_name()?;
        let call = self
            .object
            .call(&COUNT_DOWN)
            .arg(OPEN)
            .arg(self.object.services.publish);
        let _ = engine::write_detached(
            &self.object.services,
            Operation::CountDown,
            self.object.subject(),
            call,
            Replicas::Skip,
            Queueing::Bounded,
            |_, _| async {},
        )
        .await?;
        Ok(())
    }

    /// The current count: 0 when the latch is open.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else, [`Error::UnexpectedReply`] when it
    /// is not a count, [`Error::Timeout`] or [`Error::Backend`] when Redis fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn count(&self) -> Result<u64> {
        self.object.read_integer(Queueing::Bounded).await
    }

    /// Deletes the latch (its count); returns whether it had one. Like Redisson, this publishes the
    /// closing message. A deleted latch has count 0, so rlock's waiters see it open at their next
    /// re-check (within a second); Java's stay asleep until the next opening message, as they
    /// only read the count when woken.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::try_set_count`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped, the latch may or may not have been deleted.
    pub async fn delete(&self) -> Result<bool> {
        self.object.check_name()?;
        let call = self
            .object
            .call(&DELETE)
            .arg(CLOSE)
            .arg(self.object.services.publish);
        let deleted: i64 = engine::update(
            &self.object.services,
            self.object.subject(),
            call,
            Replicas::Skip,
        )
        .await?;
        Ok(deleted == 1)
    }

    /// Waits until the count is zero: Redisson's `await()`.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count`], only as Redis fails a read that was sent, never because this
    /// client is busy: a read waits for its turn on a connection as long as it takes (see
    /// [`Error::Timeout`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting changes nothing in Redis.
    pub async fn await_zero(&self) -> Result<()> {
        self.await_open(Patience::Forever)
            .await?
            .ok_or_else(|| Error::timeout(Operation::Query, self.object.subject(), Duration::MAX))
    }

    /// Waits up to `timeout` for the count to reach zero; returns whether it did: Redisson's
    /// `await(timeout, unit)`. A `bool` where the `try_*_for` of the locks and semaphores return an
    /// `Option`: their `Some` carries what was acquired (a guard, permits), an opened latch gives
    /// nothing to hold.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting changes nothing in Redis.
    pub async fn await_for(&self, timeout: Duration) -> Result<bool> {
        Ok(self.await_open(Patience::For(timeout)).await?.is_some())
    }

    async fn await_open(&self, patience: Patience) -> Result<Option<()>> {
        self.object.check_name()?;
        let acquisition = self.object.acquisition("count_down_latch", patience);
        let listen = self.object.listen(WakeRule::CountDown, &acquisition);
        let open = self.object.wait(listen, patience, || {
            Box::pin(async {
                Ok(match self.object.read_integer(patience.queueing()).await? {
                    0 => Attempt::Acquired(()),
                    _ => Attempt::Busy(RECHECK),
                })
            })
        });
        acquisition.track(open).await
    }
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
