//! How long a hold lasts, and the durations a kind sends as milliseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// How long a hold lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    /// The watchdog timeout, renewed by the watchdog until released.
    Watchdog,
    /// A fixed lease: the lock expires then unless released first.
    Fixed(Duration),
}

impl Lease {
    /// A fixed lease, validated: at least a millisecond (Redis' resolution), at most
    /// [`crate::config::MAX_LEASE`].
    pub(crate) fn fixed(lease: Duration) -> Result<Self> {
        millis(lease, "a lease").map(|_| Self::Fixed(lease))
    }
}

/// A duration in whole milliseconds, at least one, at most [`crate::config::MAX_LEASE`].
pub(crate) fn millis(duration: Duration, what: &str) -> Result<u64> {
    let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    if millis == 0 || duration > crate::config::MAX_LEASE {
        return Err(Error::InvalidArgument(format!(
            "{what} must be between 1 ms and {} ms (ten years), got {duration:?}",
            crate::config::MAX_LEASE.as_millis()
        )));
    }
    Ok(millis)
}

/// Now, in epoch milliseconds: the clock Redisson writes absolute expiries in (a permit's, a group
/// lock value's).
pub(crate) fn epoch_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
