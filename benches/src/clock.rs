//! The clock shared by every benchmark process.
//!
//! Hand-off latency compares an instant taken in one process with an instant taken in another, so it
//! needs a clock common to both: `SystemTime` (Linux `CLOCK_REALTIME`, read through the vDSO), as
//! nanoseconds since the Unix epoch. All processes run on the same machine, so they read the very same
//! clock; an NTP step during a run would show up as outliers, a slew changes durations by parts per
//! million.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch, on the clock all benchmark processes share.
pub(crate) fn epoch_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
        })
}
