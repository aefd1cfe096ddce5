//! Histories of lock acquisitions, their checker, and a fleet of worker processes that writes them.
//!
//! The reliability suite (`tests/tests/faults.rs`, `scripts/soak.sh`) runs several `rlock-torture`
//! worker processes against one private Redis, injects faults, and then proves from what the workers
//! logged that
//!
//! * no lock had more holders at once than its model allows (one exclusive holder, or any number of
//!   readers, or as many as its permits), except where a holder was told its lease was lost (the
//!   known unsafe window of every lease-based lock),
//! * no fair lock was acquired out of queue order, and
//! * every acquisition attempt completed: it acquired, gave up at its deadline, failed with a typed
//!   error, or was cancelled on purpose — none hung.
//!
//! [`record`] defines the log format and writer, [`checker`] the proof (its module docs explain the
//! reasoning: logged intervals inside real holds, a shared monotonic clock, fences from `INCR`),
//! [`fleet`] the worker processes and fault hooks, [`monitor`] what a scenario watches in Redis
//! itself (acquires applied twice, local hand-offs), and [`operator`] what it does to the locks
//! from outside the fleet (force unlocks by another client, silent deletes).

pub mod checker;
pub mod fleet;
pub mod monitor;
pub mod operator;
pub mod record;

pub use checker::{
    AttemptId, Handoff, History, Hold, Overlap, Overtake, PermitExcess, Report, ReportedHandOffs,
    Summary,
};
pub use fleet::{Fleet, Synchronizer, WorkerSpec};
pub use monitor::{Counted, DoubleApplies, local_hand_offs, script_sha1};
pub use operator::Operator;
pub use record::{Event, FaultKind, LogWriter, Mode, Record, error_kind, now_ns, read_log};

/// How long a fault scenario runs: `default`, or `$RLOCK_SOAK_SECS` under `scripts/soak.sh` if
/// longer (a scenario's default is what it needs for one round of its fault).
pub fn scenario_length(default: std::time::Duration) -> std::time::Duration {
    std::env::var("RLOCK_SOAK_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .map_or(default, |secs| {
            default.max(std::time::Duration::from_secs(secs))
        })
}

/// Prints a scenario's figures and appends them to `$RLOCK_FAULTS_REPORT` (one JSON line), where
/// `scripts/soak.sh` adds them up.
pub fn publish(summary: &Summary) {
    eprintln!("{summary}");
    if let Ok(path) = std::env::var("RLOCK_FAULTS_REPORT") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open the figures file");
        writeln!(file, "{summary}").expect("append the figures");
    }
}
