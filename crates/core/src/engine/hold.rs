//! What this client knows of its own holds.

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
