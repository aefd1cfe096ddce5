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
//! reasoning: logged intervals inside real holds, a shared monotonic clock, fences from `INCR`), and
//! [`fleet`] the worker processes and fault hooks.

pub mod checker;
pub mod fleet;
pub mod record;

pub use checker::{
    AttemptId, Handoff, History, Hold, Overlap, Overtake, PermitExcess, Report, Summary,
};
pub use fleet::{Fleet, WorkerSpec};
pub use record::{Event, FaultKind, LogWriter, Mode, Record, error_kind, now_ns, read_log};
