//! The history format: one JSON object per line, written by workers as things happen.
//!
//! Every line is a [`Record`]: which process it is about, when it happened on the shared clock
//! ([`now_ns`]), and the [`Event`]. Workers write their own file; the fault-injection harness writes
//! the faults it injects (a `kill -9` is recorded against the process it killed). Lines are appended
//! with one `write` each and never buffered, so a process killed with `SIGKILL` loses at most the
//! event it was about to write.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Nanoseconds on `CLOCK_MONOTONIC`: one clock for every process of this machine, never stepped by
/// NTP, so timestamps of different processes can be compared directly.
pub fn now_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(now.tv_sec).expect("the monotonic clock is positive");
    let nanos = u64::try_from(now.tv_nsec).expect("nanoseconds are positive");
    secs * 1_000_000_000 + nanos
}

/// One line of a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The process the event is about: a worker's name, or `redis` for faults of the server.
    pub process: String,
    /// When it happened, from [`now_ns`].
    pub at_ns: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// What a [`Record`] reports. Acquisition attempts are identified by `(process, task, seq)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A worker is up; its rlock client's node id prefixes the hash fields of its holds.
    Ready {
        /// The client's node id.
        node_id: String,
    },
    /// How the worker's lock writes return (logged after `Ready` in replicated topologies):
    /// `required` when only once a replica acknowledged them (`WAIT`, with
    /// `check_lock_synced_replicas` on, where the master has a replica connected: a failover
    /// scenario makes sure it has), so that a failover to that replica keeps them.
    ReplicaAcks {
        /// Whether an acquisition returns only once a replica has it.
        required: bool,
    },
    /// An acquisition attempt started on lock `name`.
    Started {
        /// The worker task.
        task: u32,
        /// The attempt's number within the task.
        seq: u64,
        /// The lock name.
        name: String,
        /// `None` for `lock()` (wait forever), else the `try_lock_for` wait in ms.
        wait_ms: Option<u64>,
        /// Shared (a read lock) or exclusive; exclusive in logs from before modes existed.
        #[serde(default, skip_serializing_if = "Mode::is_exclusive")]
        mode: Mode,
        /// How many of the lock's permits an exclusive hold takes (a semaphore's `acquire(n)`); 1 in
        /// logs from before permits existed. Read holds take none.
        #[serde(default = "one_permit", skip_serializing_if = "is_one_permit")]
        permits: u32,
        /// The hash field its owner holds the lock under (`<client id>:<owner id>`, Redisson's
        /// `<uuid>:<thread id>`), for an attempt on a lock: attempts of one owner re-enter each
        /// other's holds (nested re-entries, two futures of one owner), so their holds are one hold
        /// to the checker. `None` for synchronizers, which have no owner, and in logs from before
        /// owners were logged (every attempt then its own owner).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        /// The Redisson object it went through, for an attempt on a lock (`RLock`, `RSpinLock`,
        /// ...; `java RLock` for the emulated Java client's): where kinds mix on a name, which one
        /// held. `None` for synchronizers and in older logs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
    },
    /// The attempt's first try found the lock busy and left it in the lock's wait queue (a fair
    /// lock). `at_ns` is taken when that try returned, so the attempt was queued by then. A lock with
    /// such records is held to first-in, first-out.
    Queued {
        /// The worker task.
        task: u32,
        /// The attempt.
        seq: u64,
    },
    /// The attempt acquired the lock. `at_ns` is taken as soon as the acquire returned, before the
    /// fence, so it lies inside the hold as Redis saw it.
    Acquired {
        /// The worker task.
        task: u32,
        /// The attempt.
        seq: u64,
        /// The value of `INCR <name>:fence` taken first thing inside the critical section (`None` if
        /// Redis could not be reached).
        fence: Option<i64>,
        /// The hold's hash field.
        field: String,
    },
    /// The holder left the critical section and is about to send its unlock: written before it,
    /// with the `at_ns` and `fence_after` of the `Released` record that follows once the unlock
    /// returned. A holder killed during its unlock is known to have left by then, not at its
    /// death: its lock may well have passed on before it died (absent from older logs).
    Releasing {
        /// The worker task.
        task: u32,
        /// The attempt.
        seq: u64,
        /// As `Released`'s.
        fence_after: Option<i64>,
    },
    /// The holder left the critical section. `at_ns` is taken before the unlock is sent, so it also
    /// lies inside the hold.
    Released {
        /// The worker task.
        task: u32,
        /// The attempt.
        seq: u64,
        /// `GET <name>:fence` taken last thing inside the critical section: equal to `fence` unless
        /// someone else entered meanwhile.
        fence_after: Option<i64>,
        /// The holder was told its lease was lost (by `lease_lost()` or by the unlock).
        lease_lost: bool,
        /// The unlock's error, if it failed.
        unlock_error: Option<String>,
        /// Whether the hold's guard had said it was lost by the time its unlock returned (its
        /// `lease_lost()` fired, or its fixed lease ended): an unlock that finds the lease lost
        /// while this is `false` broke what an unfired `lease_lost()` promises (absent from older
        /// logs, and for holds with no such signal).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signalled: Option<bool>,
        /// How long the unlock took: from `at_ns` until it returned, in whole milliseconds rounded
        /// up, so that it surely returned by `at_ns + unlock_ms` (in older logs, the unlock call
        /// alone, rounded down).
        unlock_ms: u64,
        /// The guard was dropped rather than unlocked: its release runs in the background, and
        /// Redis may count the hold until that release is done, which nobody logs (absent from
        /// older logs, and `false` for an unlock).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dropped: bool,
    },
    /// The attempt was cancelled on purpose (its future dropped) before it acquired.
    Cancelled {
        /// The worker task.
        task: u32,
        /// The attempt.
        seq: u64,
    },
    /// A `try_lock_for` wait ran out.
    GaveUp {
        /// The worker task.
        task: u32,
        /// The attempt.
        seq: u64,
    },
    /// The attempt returned an error.
    Failed {
        /// The worker task.
        task: u32,
        /// The attempt.
        seq: u64,
        /// The error's kind (see [`error_kind`]).
        error: String,
        /// The error as displayed.
        message: String,
    },
    /// The hand-offs of the worker's client over its run (its `ClientStats`), logged once its
    /// tasks are over, just before `Finished`. A killed worker logs none.
    HandOffs {
        /// Locks passed between its tasks without a release, by script or free.
        local: u64,
        /// Of those, the free ones: no Redis command, the streak's first owner's field kept.
        free: u64,
        /// Streaks of free hand-offs begun.
        streaks: u64,
    },
    /// The worker stopped starting attempts; `unfinished` tasks were still busy when it gave up
    /// waiting for them.
    Finished {
        /// Tasks that did not finish in time.
        unfinished: u32,
    },
    /// Something in the worker panicked.
    Panicked {
        /// The panic message and location.
        message: String,
    },
    /// The harness injected a fault into `process` (for `kill -9`, the process is dead from `at_ns`).
    Fault {
        /// Which fault.
        kind: FaultKind,
    },
    /// Lock `name` has `permits` permits (a semaphore's `trySetPermits`); a lock without this record
    /// has one.
    Permits {
        /// The lock name.
        name: String,
        /// How many exclusive permits may be held at once.
        permits: u32,
    },
}

/// How a hold shares its lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A plain lock, a write lock or a semaphore's permits: excludes every read hold, and takes its
    /// permits from the lock's (one of one unless declared otherwise, so it also excludes every
    /// other exclusive hold).
    #[default]
    Exclusive,
    /// A read lock: shared with other read holds only.
    Read,
}

impl Mode {
    /// Whether this is the default mode (kept out of the log lines).
    pub fn is_exclusive(&self) -> bool {
        *self == Self::Exclusive
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Exclusive => "exclusive",
            Self::Read => "read",
        })
    }
}

fn one_permit() -> u32 {
    1
}

fn is_one_permit(permits: &u32) -> bool {
    *permits == 1
}

impl Event {
    /// The `(task, seq)` of an attempt event.
    pub fn attempt(&self) -> Option<(u32, u64)> {
        match *self {
            Self::Started { task, seq, .. }
            | Self::Queued { task, seq }
            | Self::Acquired { task, seq, .. }
            | Self::Releasing { task, seq, .. }
            | Self::Released { task, seq, .. }
            | Self::Cancelled { task, seq }
            | Self::GaveUp { task, seq }
            | Self::Failed { task, seq, .. } => Some((task, seq)),
            Self::Ready { .. }
            | Self::ReplicaAcks { .. }
            | Self::HandOffs { .. }
            | Self::Finished { .. }
            | Self::Panicked { .. }
            | Self::Fault { .. }
            | Self::Permits { .. } => None,
        }
    }
}

/// The faults the harness injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// `SIGKILL` of a worker process.
    KillHolder,
    /// `SIGSTOP` of a worker process past its lease, then `SIGCONT`.
    StopHolder,
    /// `CLIENT KILL TYPE pubsub`: every subscriber connection dropped.
    KillSubscribers,
    /// A subscriber too slow to read its messages, disconnected by Redis' output buffer limit.
    SlowSubscriber,
    /// `CLIENT PAUSE ... ALL`.
    ClientPause,
    /// `SIGSTOP` of redis-server, then `SIGCONT`.
    StopServer,
    /// redis-server stopped and started again on the same port, with AOF.
    RestartServer,
    /// redis-server killed with `SIGKILL`, then started again on the same port, with AOF.
    KillServer,
    /// Acquire futures dropped at random points (one record per storm; the dropped attempts are
    /// counted as `Cancelled` events).
    CancellationStorm,
    /// More concurrent operations than pooled connections, with a short command timeout.
    PoolExhaustion,
    /// A fault proxy forwarded a script and cut the connection before its reply.
    LostReply,
    /// The same, for the script of a local hand-off (which is never re-sent, but undone).
    LostHandOffReply,
    /// A fault proxy held every reply back for a while.
    DelayedReplies,
    /// A fault proxy reset every connection through it.
    ConnectionReset,
    /// The master of the locks was killed (`at_ns`: the instant it was dead) and a replica promoted
    /// in its place.
    Failover,
    /// Another client's `force_unlock` (Redisson's `forceUnlock`: the lock key deleted, an unlock
    /// message published), whoever held the lock.
    ForceUnlock,
    /// A worker's `force_unlock` on its own client (any kind sharing the lock's hash), whoever held
    /// the lock: one of its own tasks, mid-streak perhaps, or another client. Recorded by the worker.
    LocalForceUnlock,
    /// The lock key deleted with nothing published on the lock's channel: an operator's `DEL` or
    /// `UNLINK`, Java's `RSpinLock.forceUnlock` (a bare `DEL`) or `RFairLock.forceUnlock` (which
    /// wakes the head of its queue on the head's own channel only).
    SilentDelete,
    /// A fault proxy stopped forwarding one direction of one connection, a worker's subscriber
    /// connection: it hears no message while its client believes it listens.
    BlackHoledSubscriber,
    /// What a user does rather than a fault, recorded by the worker as what it tried: a hold
    /// released while the re-entry inside it, taken after it, still holds (outer-first; through
    /// another kind of the name with `mixed`).
    OuterFirstRelease,
    /// The same: a guard kept past its fixed lease, as in a slot, dropped only once its owner's
    /// next acquisition returned (`slot = Some(lock.lock().await?)`).
    ReplacedGuard,
}

impl FaultKind {
    /// A short human name.
    pub fn label(self) -> &'static str {
        match self {
            Self::KillHolder => "kill -9 of a holder process",
            Self::StopHolder => "SIGSTOP of a holder past its lease",
            Self::KillSubscribers => "CLIENT KILL TYPE pubsub",
            Self::SlowSubscriber => "slow subscriber dropped by Redis",
            Self::ClientPause => "CLIENT PAUSE",
            Self::StopServer => "SIGSTOP/SIGCONT of redis-server",
            Self::RestartServer => "redis-server restart (AOF)",
            Self::KillServer => "kill -9 of redis-server, restarted (AOF)",
            Self::CancellationStorm => "cancellation storm",
            Self::PoolExhaustion => "pool exhaustion",
            Self::LostReply => "lost reply (proxy)",
            Self::LostHandOffReply => "lost reply of a hand-off (proxy)",
            Self::DelayedReplies => "delayed replies (proxy)",
            Self::ConnectionReset => "connection reset (proxy)",
            Self::Failover => "failover (master killed)",
            Self::ForceUnlock => "force unlock by another client",
            Self::LocalForceUnlock => "force unlock by a worker's own client",
            Self::SilentDelete => "silent delete (DEL, UNLINK, Java's spin/fair forceUnlock)",
            Self::BlackHoledSubscriber => "black-holed subscriber connection (proxy)",
            Self::OuterFirstRelease => "hold released before the re-entry inside it (habit)",
            Self::ReplacedGuard => "guard kept past its lease, dropped after the next hold (habit)",
        }
    }
}

/// The kind of an rlock error, for counting: `timeout`, `backend`, `wrong_type`...
pub fn error_kind(error: &rlock_redisson::Error) -> &'static str {
    match error {
        rlock_redisson::Error::NotOwner { .. } => "not_owner",
        rlock_redisson::Error::Timeout { .. } => "timeout",
        rlock_redisson::Error::LeaseLost { .. } => "lease_lost",
        rlock_redisson::Error::InvalidArgument(_) => "invalid_argument",
        rlock_redisson::Error::WrongType { .. } => "wrong_type",
        rlock_redisson::Error::UnexpectedReply { .. } => "unexpected_reply",
        rlock_redisson::Error::Backend { .. } => "backend",
        rlock_redisson::Error::Closed => "closed",
        rlock_redisson::Error::OutcomeUnknown { .. } => "outcome_unknown",
        rlock_redisson::Error::PermitNotFound { .. } => "permit_not_found",
        rlock_redisson::Error::NoSyncedReplicas { .. } => "no_synced_replicas",
        rlock_redisson::Error::ReentryRefused { .. } => "reentry_refused",
        _ => "other",
    }
}

/// Appends records to a history file, one `write` per line. Shared by all tasks of a process.
#[derive(Debug)]
pub struct LogWriter {
    process: String,
    file: Mutex<File>,
}

impl LogWriter {
    /// Opens (creating or appending to) the history file at `path` for `process`.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened.
    pub fn open(path: &Path, process: &str) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            process: process.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// The process this writer writes for.
    pub fn process(&self) -> &str {
        &self.process
    }

    /// Writes `event` as having happened at `at_ns`.
    ///
    /// # Errors
    ///
    /// When the write fails.
    pub fn write(&self, at_ns: u64, event: Event) -> io::Result<()> {
        let record = Record {
            process: self.process.clone(),
            at_ns,
            event,
        };
        let mut line = serde_json::to_vec(&record).map_err(io::Error::other)?;
        line.push(b'\n');
        // A poisoned lock only means another task panicked mid-write; the file is still usable.
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.write_all(&line)
    }

    /// Writes `event` as happening now.
    ///
    /// # Errors
    ///
    /// When the write fails.
    pub fn write_now(&self, event: Event) -> io::Result<()> {
        self.write(now_ns(), event)
    }
}

/// Reads a history file. Every record is written as one line with its newline, so text after the
/// last newline is a record still being written (the reader raced its writer) or cut short (its
/// writer was killed mid-write): it is skipped. Any other unreadable line is an error.
///
/// The file is read once, to its end as it is at that moment: reading on after an end of file, as
/// a line iterator does, could pick up the rest of a record that was being written and make the
/// part read before it look like a torn line in the middle (seen in `scripts/soak.sh`).
///
/// # Errors
///
/// When the file cannot be read or holds a malformed line.
pub fn read_log(path: &Path) -> io::Result<Vec<Record>> {
    let text = std::fs::read(path)?;
    let Some(end) = text.iter().rposition(|&byte| byte == b'\n') else {
        return Ok(Vec::new());
    };
    let mut records = Vec::new();
    for (i, line) in text[..end].split(|&byte| byte == b'\n').enumerate() {
        let record = serde_json::from_slice(line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}:{}: {e}: {}",
                    path.display(),
                    i + 1,
                    String::from_utf8_lossy(line)
                ),
            )
        })?;
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_as_flat_json_lines() {
        let record = Record {
            process: "w1".into(),
            at_ns: 42,
            event: Event::Acquired {
                task: 2,
                seq: 7,
                fence: Some(3),
                field: "uuid:9".into(),
            },
        };
        let line = serde_json::to_string(&record).expect("serializes");
        assert_eq!(
            line,
            r#"{"process":"w1","at_ns":42,"event":"acquired","task":2,"seq":7,"fence":3,"field":"uuid:9"}"#
        );
        assert_eq!(
            serde_json::from_str::<Record>(&line).expect("parses"),
            record
        );
    }

    #[test]
    fn older_lines_read_as_exclusive_single_permit_attempts_and_new_fields_appear_only_when_set() {
        let old = r#"{"process":"w1","at_ns":1,"event":"started","task":0,"seq":1,"name":"a","wait_ms":null}"#;
        let record: Record = serde_json::from_str(old).expect("parses");
        let Event::Started {
            mode,
            permits,
            ref owner,
            ..
        } = record.event
        else {
            panic!("a start: {record:?}")
        };
        assert_eq!(
            (mode, permits, owner.as_deref()),
            (Mode::Exclusive, 1, None)
        );
        assert_eq!(serde_json::to_string(&record).expect("serializes"), old);

        for (event, line) in [
            (
                Event::Started {
                    task: 0,
                    seq: 1,
                    name: "rw".into(),
                    wait_ms: Some(5),
                    mode: Mode::Read,
                    permits: 1,
                    owner: None,
                    kind: None,
                },
                r#""event":"started","task":0,"seq":1,"name":"rw","wait_ms":5,"mode":"read"}"#,
            ),
            (
                Event::Started {
                    task: 0,
                    seq: 1,
                    name: "s".into(),
                    wait_ms: None,
                    mode: Mode::Exclusive,
                    permits: 2,
                    owner: None,
                    kind: None,
                },
                r#""event":"started","task":0,"seq":1,"name":"s","wait_ms":null,"permits":2}"#,
            ),
            (
                Event::Started {
                    task: 0,
                    seq: 2,
                    name: "l".into(),
                    wait_ms: None,
                    mode: Mode::Exclusive,
                    permits: 1,
                    owner: Some("c:7".into()),
                    kind: Some("RLock".into()),
                },
                r#""event":"started","task":0,"seq":2,"name":"l","wait_ms":null,"owner":"c:7","kind":"RLock"}"#,
            ),
            (
                Event::Queued { task: 0, seq: 1 },
                r#""event":"queued","task":0,"seq":1}"#,
            ),
            (
                Event::Permits {
                    name: "s".into(),
                    permits: 3,
                },
                r#""event":"permits","name":"s","permits":3}"#,
            ),
        ] {
            let record = Record {
                process: "w1".into(),
                at_ns: 1,
                event,
            };
            let json = serde_json::to_string(&record).expect("serializes");
            assert_eq!(json, format!(r#"{{"process":"w1","at_ns":1,{line}"#));
            assert_eq!(
                serde_json::from_str::<Record>(&json).expect("parses"),
                record
            );
        }
    }

    #[test]
    fn a_torn_last_line_is_skipped_but_a_torn_middle_line_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("w.jsonl");
        let log = LogWriter::open(&path, "w").expect("open");
        log.write(1, Event::Finished { unfinished: 0 })
            .expect("write");
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(b"{\"process\":\"w\",\"at_").expect("write");
        assert_eq!(read_log(&path).expect("readable").len(), 1);
        file.write_all(
            b"\n{\"process\":\"w\",\"at_ns\":2,\"event\":\"finished\",\"unfinished\":0}\n",
        )
        .expect("write");
        assert!(read_log(&path).is_err());
    }

    #[test]
    fn the_clock_is_monotonic() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
    }
}
