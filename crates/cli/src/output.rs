//! Machine-readable output: one JSON object per line on stdout, and the clocks its timestamps use.
//!
//! Commands that wait for or hold something print events: `{"event":..,"t":..}` plus details, `t` in
//! epoch milliseconds. An event the command observes (`acquired`, `opened`) is stamped once Redis has
//! confirmed it; a change the command makes that ends something (`released`, `counted`) is stamped
//! just before it is sent. So an `acquired`–`released` interval lies within the real hold, and a
//! latch's `counted` never comes after the `opened` it caused: the events of several processes are
//! ordered as what they report was.

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

/// `{"ok":..}`: whether a command that changes something did.
#[derive(Debug, Serialize)]
struct Outcome {
    ok: bool,
}

/// Prints `{"ok":ok}`.
pub(crate) fn outcome(ok: bool) -> Result<()> {
    emit(&Outcome { ok })
}

/// One step of a command that waits for something or holds it: `{"event":..,"t":..}` followed by
/// the fields of `details` (none for `()`).
#[derive(Debug, Serialize)]
struct Event<'a, D> {
    event: &'a str,
    /// When it happened, in epoch milliseconds.
    t: u64,
    #[serde(flatten)]
    details: D,
}

/// Prints event `event` as happening now.
pub(crate) fn event(event: &str, details: impl Serialize) -> Result<()> {
    event_at(event, epoch_ms(), details)
}

/// Prints event `event` as having happened at `t` (epoch ms).
pub(crate) fn event_at(event: &str, t: u64, details: impl Serialize) -> Result<()> {
    emit(&Event { event, t, details })
}

/// Milliseconds since the Unix epoch.
pub(crate) fn epoch_ms() -> u64 {
    epoch_ms_of(SystemTime::now())
}

/// Microseconds since the Unix epoch: the wall clock is the one clock processes on a host share.
pub(crate) fn epoch_us() -> u64 {
    epoch_us_of(SystemTime::now())
}

/// Milliseconds since the Unix epoch of `time` (0 for a time before it).
pub(crate) fn epoch_ms_of(time: SystemTime) -> u64 {
    epoch_us_of(time) / 1000
}

fn epoch_us_of(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn json(value: impl Serialize) -> String {
        serde_json::to_string(&value).expect("serializable")
    }

    #[test]
    fn events_put_their_details_after_the_name_and_the_time() {
        #[derive(Serialize)]
        struct Permit {
            permit: &'static str,
        }
        let details = Permit { permit: "ab" };
        let acquired = json(Event {
            event: "acquired",
            t: 7,
            details,
        });
        assert_eq!(acquired, r#"{"event":"acquired","t":7,"permit":"ab"}"#);
        let released = json(Event {
            event: "released",
            t: 8,
            details: (),
        });
        assert_eq!(released, r#"{"event":"released","t":8}"#);
    }

    #[test]
    fn epoch_ms_of_a_time() {
        assert_eq!(
            epoch_ms_of(UNIX_EPOCH + Duration::from_micros(1_500_999)),
            1_500
        );
        assert_eq!(epoch_ms_of(UNIX_EPOCH - Duration::from_millis(20)), 0);
    }
}
