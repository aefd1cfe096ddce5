//! What this client knows of its own holds.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Operation, Result};
use crate::services::Services;

/// How a hold can end without being released.
#[derive(Clone, Debug)]
pub(crate) enum Expiry {
    /// Watchdog hold: cancelled when the watchdog finds the lock lost.
    Watchdog(CancellationToken),
    /// Fixed lease: ends at this instant (measured from when the acquire was sent).
    At(Instant),
}

impl Expiry {
    pub(crate) fn is_lost(&self) -> bool {
        match self {
            Self::Watchdog(lost) => lost.is_cancelled(),
            Self::At(at) => Instant::now() >= *at,
        }
    }

    /// Completes when the hold is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn lost(&self) {
        match self {
            Self::Watchdog(lost) => lost.cancelled().await,
            Self::At(at) => tokio::time::sleep_until(*at).await,
        }
    }
}

/// What this client has seen confirmed of each (key, field)'s holds: how many, and the lease of the
/// latest. The count tells an undo what the owner held before the acquire it undoes; the lease is
/// what a partial release re-applies, as Redisson re-applies the lease its holds were taken with.
#[derive(Debug, Default)]
pub(crate) struct Holds(Mutex<HashMap<(String, String), (u32, Duration)>>);

impl Holds {
    pub(crate) fn count(&self, key: &str, field: &str) -> u32 {
        self.0
            .lock()
            .get(&(key.to_owned(), field.to_owned()))
            .map_or(0, |(count, _)| *count)
    }

    pub(crate) fn add(&self, key: &str, field: &str, lease: Duration) {
        let mut holds = self.0.lock();
        let (count, latest) = holds
            .entry((key.to_owned(), field.to_owned()))
            .or_insert((0, lease));
        *count += 1;
        *latest = lease;
    }

    /// Forgets one hold; returns the lease of the field's latest hold, if this client knew of any.
    pub(crate) fn remove(&self, key: &str, field: &str) -> Option<Duration> {
        let mut holds = self.0.lock();
        let id = (key.to_owned(), field.to_owned());
        let (count, lease) = holds.get_mut(&id)?;
        let lease = *lease;
        *count -= 1;
        if *count == 0 {
            let _ = holds.remove(&id);
        }
        Some(lease)
    }
}

/// How many holds `field` has in the lock hash `key` (`HGET`); 0 when none.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub(crate) async fn hold_count(
    services: &Services,
    name: &str,
    key: &str,
    field: &str,
) -> Result<u32> {
    let count: Option<String> = services
        .commands
        .query(
            Operation::Query,
            name,
            redis::cmd("HGET").arg(key).arg(field),
        )
        .await?;
    match count {
        None => Ok(0),
        Some(count) => count
            .parse()
            .map_err(|_| Error::unexpected(Operation::Query, name, count)),
    }
}
