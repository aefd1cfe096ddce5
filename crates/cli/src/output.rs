//! Machine-readable output: one JSON object per line on stdout, and the clocks its timestamps use.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::Result;

/// Prints `value` as one JSON line on stdout. A closed stdout is an error, not a panic.
pub(crate) fn emit(value: &impl Serialize) -> Result<()> {
    let line = serde_json::to_string(value)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub(crate) fn epoch_ms() -> u64 {
    epoch_us() / 1000
}

/// Microseconds since the Unix epoch: the wall clock is the one clock processes on a host share.
pub(crate) fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}
