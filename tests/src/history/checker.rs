//! The checker: exclusion, fairness and progress, proven from the histories of several processes.
//!
//! # The models
//!
//! Every hold is *exclusive* unless its attempt says it is a *read* hold (`mode` of `Started`), and
//! every lock has one permit unless a `Permits` record declares more. Then:
//!
//! * read holds share the lock with each other and with nothing else;
//! * an exclusive hold excludes every read hold and takes its permits (`permits` of `Started`, one
//!   unless said) from the lock's: at no instant may the exclusive holds of a lock hold more than it
//!   has. A plain lock or a write lock is the case of one permit, each hold taking one: no two
//!   exclusive holds at once. A semaphore is the case of many.
//!
//! A lock whose waiters log that they entered its queue (`Queued`) is a fair lock, and is also held
//! to first-in, first-out: see [`Overtake`].
//!
//! # What a history says
//!
//! Each acquisition attempt is a `Started` record followed by exactly one outcome: `Acquired`
//! (then `Released`), `Cancelled`, `GaveUp` or `Failed`. For a hold, the worker takes `acquired` as
//! soon as the acquire returned and `released` before it sends the unlock, so **the logged interval
//! lies inside the interval during which Redis considered the hold to exist** (as long as the lease
//! was not lost). Two logged intervals of one lock that overlap therefore prove that Redis let two
//! owners hold it at once.
//!
//! # Owners
//!
//! An attempt on a lock names its owner (`owner` of `Started`: the hash field it holds under). The
//! holds of one owner are one hold, as Redis counts them under one field: a nested re-entry, or two
//! futures of one owner that re-enter each other's hold. They never exclude each other, their
//! permits count once, a hold nested inside an earlier one of its owner is part of it for the order
//! of holds, and where the owner was told that one of them was lost, all that overlapped it were
//! (a re-entry whose release said nothing, inside a hold whose unlock then reports the loss, as a
//! Redisson thread learns it from its last unlock). Holds of different owners are checked as
//! always, so an owner that believed it re-entered a hold its client had given up still overlaps
//! whoever held the lock meanwhile.
//!
//! # Why the comparison is sound across processes
//!
//! All timestamps come from `CLOCK_MONOTONIC` of one machine, which every process reads alike and
//! which is never stepped. The checker does not trust that blindly: each critical section also takes
//! a *fence*, `INCR <name>:fence`, first thing after acquiring, and reads it back (`GET`) last thing
//! before releasing. Redis orders the `INCR`s, so the fences order the holds independently of any
//! clock, and:
//!
//! * if the read-back differs from the fence, some other holder's `INCR` ran inside this hold — an
//!   overlap proven without clocks (the holds whose fences lie in between are the intruders);
//! * for two holds that do not overlap in time, the earlier one must have the smaller fence;
//!   otherwise the clock and Redis disagree and the history is reported as inconsistent.
//!
//! Overlaps are found by a sweep over each lock's holds sorted by acquisition time, so every
//! overlapping pair is found, not just neighbours (a neighbour may be a lease-lost hold that hides a
//! real overlap behind it). Each hold entering the sweep is checked against the holds still open: it
//! overlaps each one it excludes on its own (a read and an exclusive hold, or two exclusive holds
//! whose permits add up to more than the lock's), and if none of those but the permits held are
//! still more than the lock's, it overfilled it ([`PermitExcess`]). Fences prove overlaps of the
//! same pairs only: read holds and a semaphore's holds take fences inside each other's legitimately.
//!
//! # Why the order of a queue is sound
//!
//! A waiter is surely queued from its `Queued` record on (taken after its first try returned), and
//! an acquirer cannot have reached the lock before its `Started` record, so a waiter queued before an
//! acquirer started was ahead of it. It stays ahead until it leaves the queue, which is never before
//! its own acquisition, nor, if it gave up, before its wait ran out. A waiter cancelled or failed may
//! have left at any time after it queued, and one whose process was killed or frozen may have been
//! dropped from the queue for not polling: neither is counted as overtaken once it may be gone.
//! The check assumes that a live waiter keeps its place: Redisson's fair lock also drops a waiter
//! whose turn comes more than `threadWaitTime` (5 s) later than the queue expected, so a fairness
//! test keeps its holds well short of that.
//!
//! # What is a violation and what is a known unsafe window
//!
//! A holder whose lease was lost (it was paused past its lease, or Redis was unreachable for a whole
//! lease) is told so by rlock (`lease_lost()`, or `LeaseLost` from the unlock). An overlap in which
//! one of the holds was told that is the documented limit of any lease-based lock: it is reported as
//! an *unsafe window*, not as a violation. Everything else is a violation:
//!
//! * an overlap of two holds that were both never told their lease was lost, or permits exceeded by
//!   holds never told so (a hold told so no longer counts: Redis took its permits back);
//! * an acquisition of a fair lock out of queue order;
//! * an attempt that never completed (no outcome) in a process that was not killed: a waiter that
//!   never acquired, or a call that hung;
//! * a hold that was never released in a process that was not killed;
//! * a panic in a worker; an inconsistent history (duplicate fences, fences going backwards or
//!   disagreeing with the clock, events of unknown attempts);
//! * a hold still in Redis after the run (filled in by the harness, see `Report::leaked`).
//!
//! # What a failover may lose
//!
//! A `Failover` fault records the instant the locks' master was dead (a replica is promoted in its
//! place). Redis replication is asynchronous, so the promoted replica may lack writes; README.md
//! ("What a failover can lose") says which: an acquisition that returned only once a replica had
//! it (`WAIT`, logged by its process as `ReplicaAcks { required: true }`) survives a failover to
//! that replica; one that may have reached the master alone may be lost, and its holder is then
//! told its lease was lost. So a hold acquired before a failover and still held after it, by a
//! process whose acquisitions a replica acknowledged, is *kept by the failover*
//! ([`Hold::kept_by_failover`]): its holder must never be told its lease was lost, and an overlap in
//! which it was the holder already is a violation even if it was (a failover scenario keeps the
//! outage well shorter than the lease, so the lease cannot run out meanwhile: only the failover
//! could have lost it). Other holds that span a failover may be lost ([`Report::failover_losable`]):
//! the usual rule applies to them. The rule assumes one replica, so that the one that acknowledged
//! is the one promoted; with more it would be too strong (README: the replica that acknowledged may
//! not be the one promoted).
//!
//! A process killed with `SIGKILL` stops executing at the kill: its open hold ends there (its key
//! lives on in Redis until its lease runs out, which only delays the others), and its open attempts
//! are counted as crashed, not starved. A hold whose holder was killed while it unlocked ends where
//! it left its critical section (its `Releasing` record): the unlock may have run, and the lock
//! passed on, before the process died.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::record::{Event, FaultKind, Mode, Record};

/// Nanoseconds in a millisecond.
const MS: u64 = 1_000_000;

/// One attempt: `(process, task, seq)`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId {
    /// The worker process.
    pub process: String,
    /// The task within it.
    pub task: u32,
    /// The attempt within the task.
    pub seq: u64,
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}#{}", self.process, self.task, self.seq)
    }
}

/// The records of any number of processes, in any order.
#[derive(Clone, Debug, Default)]
pub struct History {
    records: Vec<Record>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one record.
    pub fn push(&mut self, record: Record) {
        self.records.push(record);
    }

    /// All records so far.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Checks the history; see the module docs for what is proven.
    pub fn check(&self) -> Report {
        Checker::new(&self.records).run()
    }
}

impl Extend<Record> for History {
    fn extend<I: IntoIterator<Item = Record>>(&mut self, records: I) {
        self.records.extend(records);
    }
}

/// A confirmed hold, as reconstructed from the records.
#[derive(Clone, Debug)]
pub struct Hold {
    /// The attempt that acquired it.
    pub id: AttemptId,
    /// The lock name.
    pub name: String,
    /// When the attempt started.
    pub started_ns: u64,
    /// When the acquire returned.
    pub acquired_ns: u64,
    /// When the critical section ended: released, or the holder was killed.
    pub end_ns: u64,
    /// The holder was killed before its unlock returned: the lock may have been left to expire.
    pub crashed: bool,
    /// The fence taken on entry.
    pub fence: Option<i64>,
    /// The fence read back before leaving.
    pub fence_after: Option<i64>,
    /// The holder was told its lease was lost.
    pub lease_lost: bool,
    /// Shared or exclusive.
    pub mode: Mode,
    /// The permits an exclusive hold takes.
    pub permits: u32,
    /// Acquired before a failover and held past it, acknowledged by a replica: Redis must still
    /// have it afterwards (see the module docs).
    pub kept_by_failover: bool,
    /// The hash field of its owner (`Started`'s `owner`): holds of one owner are one hold.
    pub owner: Option<String>,
    /// When its unlock had returned at the latest (`Released`'s `unlock_ms` after it left;
    /// `u64::MAX` if it never did: its holder was killed, or its guard was dropped and released
    /// in the background): until then Redis may still count it.
    pub unlocked_ns: u64,
    /// Its owner was told that the hold it is part of was lost, through this hold or another of
    /// its holds that overlapped it (they are one hold: see the module docs, "Owners").
    pub owner_told: bool,
}

impl Hold {
    /// Whether this hold and `other` may not be held at once on a lock with `permits` permits: read
    /// holds share with each other only, exclusive ones share while their permits add up to at most
    /// the lock's. Holds of one owner never exclude each other: they are one hold, re-entered (a
    /// nested acquisition, or two futures of one owner), as Redis counts them under one field.
    pub fn excludes(&self, other: &Hold, permits: u32) -> bool {
        if self.is_same_owner(other) {
            return false;
        }
        match (self.mode, other.mode) {
            (Mode::Read, Mode::Read) => false,
            (Mode::Exclusive, Mode::Exclusive) => self.permits + other.permits > permits,
            (Mode::Read, Mode::Exclusive) | (Mode::Exclusive, Mode::Read) => true,
        }
    }

    /// Whether `other` is a hold of this hold's owner.
    pub fn is_same_owner(&self, other: &Hold) -> bool {
        self.owner.is_some() && self.owner == other.owner
    }

    /// Whether its holder was told its lease was lost: by this hold, or by the owner's hold it is
    /// part of.
    pub fn is_told(&self) -> bool {
        self.lease_lost || self.owner_told
    }

    /// The permits this hold counts against its lock's: an exclusive hold's own; none for a read
    /// hold, nor for a hold told its lease was lost (Redis took its permits back when the lease ran
    /// out: the known unsafe window).
    fn permits_held(&self) -> u32 {
        match self.mode {
            Mode::Exclusive if !self.is_told() => self.permits,
            Mode::Exclusive | Mode::Read => 0,
        }
    }
}

/// How an overlap was seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evidence {
    /// The logged intervals overlap.
    pub clock: bool,
    /// The second holder's fence was taken inside the first one's hold.
    pub fence: bool,
}

/// Two holds of one lock at once. `second` is `None` when the fence moved inside `first` but no
/// logged hold owns the fences in between.
#[derive(Clone, Debug)]
pub struct Overlap {
    /// The lock.
    pub name: String,
    /// The hold that was entered second (by clock) or whose fence moved.
    pub first: AttemptId,
    /// The intruder.
    pub second: Option<AttemptId>,
    /// The modes that collided: `first`'s and `second`'s (unknown for an unlogged holder).
    pub modes: (Mode, Option<Mode>),
    /// How long both were inside, by the clock (0 when only the fence shows it).
    pub overlap_ns: u64,
    /// How it was seen.
    pub evidence: Evidence,
    /// `first` was kept by a failover (acknowledged by the promoted replica), yet was intruded on.
    pub failover_lost_acknowledged: bool,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let second = match (&self.second, self.modes.1) {
            (Some(id), Some(mode)) => format!("{id} ({mode})"),
            _ => "an unlogged holder".to_owned(),
        };
        write!(
            f,
            "lock {:?}: {} ({}) and {second} held it at once for {:?} (clock: {}, fence: {})",
            self.name,
            self.first,
            self.modes.0,
            Duration::from_nanos(self.overlap_ns),
            self.evidence.clock,
            self.evidence.fence
        )?;
        if self.failover_lost_acknowledged {
            write!(
                f,
                "; {} was acknowledged by a replica before the failover, which lost it",
                self.first
            )?;
        }
        Ok(())
    }
}

/// An instant at which the exclusive holds of a lock held more than its permits, without two of them
/// that could not coexist on their own (those are [`Overlap`]s): a semaphore overfilled.
#[derive(Clone, Debug)]
pub struct PermitExcess {
    /// The lock.
    pub name: String,
    /// The instant: the acquisition of the hold that took the permits over.
    pub at_ns: u64,
    /// The lock's permits.
    pub permits: u32,
    /// The permits held then.
    pub held: u32,
    /// The holds counted then, in acquisition order, the one that took the permits over last.
    pub holds: Vec<AttemptId>,
}

impl fmt::Display for PermitExcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lock {:?}: {} of its {} permits held at once (at {} ns) by {}",
            self.name,
            self.held,
            self.permits,
            self.at_ns,
            list(&self.holds)
        )
    }
}

/// An acquisition of a fair lock ahead of waiters that had queued before it started and were still
/// queued.
#[derive(Clone, Debug)]
pub struct Overtake {
    /// The lock.
    pub name: String,
    /// The attempt that acquired out of turn.
    pub acquirer: AttemptId,
    /// When it acquired.
    pub acquired_ns: u64,
    /// The waiters it overtook, in queue order.
    pub overtaken: Vec<AttemptId>,
}

impl fmt::Display for Overtake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fair lock {:?}: {} acquired it (at {} ns) ahead of {}, queued before it started and still waiting",
            self.name,
            self.acquirer,
            self.acquired_ns,
            list(&self.overtaken)
        )
    }
}

/// Attempts as a comma-separated list.
fn list(ids: &[AttemptId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A lock passing from one holder to a waiter that was already waiting when it was released.
#[derive(Clone, Debug)]
pub struct Handoff {
    /// The lock.
    pub name: String,
    /// The previous holder.
    pub from: AttemptId,
    /// The waiter that got it next.
    pub to: AttemptId,
    /// From the previous holder's release (or death) to the waiter's acquire.
    pub gap_ns: u64,
    /// The previous holder was killed while holding: the lock freed by lease expiry.
    pub after_crash: bool,
}

/// What the checker found. [`Report::violations`] lists what must not happen;
/// [`Report::summary`] gives the figures.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every confirmed hold, per lock name, in acquisition order.
    pub holds: BTreeMap<String, Vec<Hold>>,
    /// Attempts started.
    pub attempts: usize,
    /// Attempts cancelled on purpose.
    pub cancelled: usize,
    /// `try_lock_for` waits that ran out.
    pub gave_up: usize,
    /// Attempts that failed, by error kind.
    pub errors: BTreeMap<String, usize>,
    /// Unlocks that failed, by error kind.
    pub unlock_errors: BTreeMap<String, usize>,
    /// Unlocks that found their lease lost while the hold's guard had not said so (see
    /// `Event::Released`'s `signalled`): each one is a hold whose unfired `lease_lost()` was not
    /// the promise it should be, whether or not anyone took the lock meanwhile. Each is told with
    /// every record of its owner's attempts, in order.
    pub unsignalled_losses: Vec<String>,
    /// Attempts cut short by the death of their process.
    pub crashed: usize,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, usize>,
    /// Processes seen.
    pub processes: BTreeSet<String>,
    /// Overlaps of holds never told their lease was lost: violations.
    pub overlaps: Vec<Overlap>,
    /// Overlaps involving a hold that was told its lease was lost: the known unsafe window.
    pub unsafe_windows: Vec<Overlap>,
    /// Instants at which more permits were held than a lock has: violations.
    pub permit_excesses: Vec<PermitExcess>,
    /// Acquisitions of fair locks out of queue order: violations.
    pub overtakes: Vec<Overtake>,
    /// Attempts that never completed in a live process.
    pub starved: Vec<AttemptId>,
    /// Holds never released in a live process.
    pub unfinished: Vec<AttemptId>,
    /// Panics in workers.
    pub panics: Vec<String>,
    /// Contradictions in the history itself.
    pub inconsistencies: Vec<String>,
    /// Hand-offs to waiting attempts.
    pub handoffs: Vec<Handoff>,
    /// The longest time an acquired attempt waited.
    pub max_wait_ns: u64,
    /// The longest a bounded call (`try_lock_for`) took beyond its wait.
    pub max_overrun_ns: Option<u64>,
    /// The longest unlock.
    pub max_unlock_ms: u64,
    /// Holds that spanned a failover and may have been lost by it (their process's acquisitions
    /// did not wait for a replica): the usual rule (an overlap only with lease loss signalled)
    /// applies to them.
    pub failover_losable: usize,
    /// Holds kept by a failover whose holders were told their lease was lost: violations.
    pub failover_lost: Vec<AttemptId>,
    /// Lock keys still present after the run, with their fields (filled in by the harness).
    pub leaked: Vec<String>,
    /// The hand-offs the workers' clients reported at their normal end, summed (`HandOffs`
    /// records; a killed worker reports none).
    pub reported_hand_offs: ReportedHandOffs,
}

/// Hand-offs as the workers' clients count them (`ClientStats`), summed over the workers that
/// reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportedHandOffs {
    /// Every local hand-off, by script or free.
    pub local: u64,
    /// Free hand-offs: no Redis command, so no `HDEL` shows them.
    pub free: u64,
    /// Streaks of free hand-offs.
    pub streaks: u64,
}

impl Report {
    /// Confirmed holds checked.
    pub fn acquisitions(&self) -> usize {
        self.holds.values().map(Vec::len).sum()
    }

    /// Holds acquired while their owner held the lock already: nested re-entries, and the later
    /// of two futures of one owner. Each is checked as part of its owner's hold.
    pub fn reentered_holds(&self) -> usize {
        self.holds
            .values()
            .map(|holds| {
                // In acquisition order: until when each owner held so far.
                let mut held_until: HashMap<&str, u64> = HashMap::new();
                holds
                    .iter()
                    .filter(|hold| {
                        let Some(owner) = hold.owner.as_deref() else {
                            return false;
                        };
                        let until = held_until.entry(owner).or_insert(0);
                        let inside = hold.acquired_ns < *until;
                        *until = (*until).max(hold.end_ns);
                        inside
                    })
                    .count()
            })
            .sum()
    }

    /// Holds kept by a failover: checked to have stayed exclusive.
    pub fn failover_kept(&self) -> usize {
        self.holds
            .values()
            .flatten()
            .filter(|h| h.kept_by_failover)
            .count()
    }

    /// Holds whose holder was told the lease was lost.
    pub fn lease_losses(&self) -> usize {
        self.holds
            .values()
            .flatten()
            .filter(|h| h.lease_lost)
            .count()
    }

    /// Lease-lost holds that overlapped another hold: the unsafe windows themselves (each may overlap
    /// many holds, listed pairwise in [`Report::unsafe_windows`]).
    pub fn unsafe_window_holds(&self) -> usize {
        let lost: BTreeSet<&AttemptId> = self
            .holds
            .values()
            .flatten()
            .filter(|h| h.is_told())
            .map(|h| &h.id)
            .collect();
        self.unsafe_windows
            .iter()
            .flat_map(|o| [Some(&o.first), o.second.as_ref()])
            .flatten()
            .filter(|id| lost.contains(id))
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Whether `process` acquired something after `since_ns`.
    pub fn acquired_after(&self, process: &str, since_ns: u64) -> bool {
        self.holds
            .values()
            .flatten()
            .any(|h| h.id.process == process && h.acquired_ns > since_ns)
    }

    /// The longest hand-off, optionally only those after a killed holder.
    pub fn max_handoff(&self, after_crash: bool) -> Option<Duration> {
        self.handoffs
            .iter()
            .filter(|h| !after_crash || h.after_crash)
            .map(|h| Duration::from_nanos(h.gap_ns))
            .max()
    }

    /// Everything that must not happen, described; empty for a sound history.
    pub fn violations(&self) -> Vec<String> {
        let mut found: Vec<String> = self
            .overlaps
            .iter()
            .map(|o| format!("overlap: {o}"))
            .collect();
        found.extend(
            self.permit_excesses
                .iter()
                .map(|e| format!("permits exceeded: {e}")),
        );
        found.extend(self.overtakes.iter().map(|o| format!("out of turn: {o}")));
        found.extend(
            self.starved
                .iter()
                .map(|a| format!("attempt {a} never completed")),
        );
        found.extend(
            self.unfinished
                .iter()
                .map(|a| format!("hold {a} was never released")),
        );
        found.extend(self.failover_lost.iter().map(|a| {
            format!(
                "hold {a} was acknowledged by a replica before the failover, yet its holder was told its lease was lost"
            )
        }));
        found.extend(self.panics.iter().map(|p| format!("panic: {p}")));
        found.extend(
            self.inconsistencies
                .iter()
                .map(|i| format!("inconsistent history: {i}")),
        );
        found.extend(self.leaked.iter().map(|l| format!("leaked hold: {l}")));
        found
    }

    /// Panics with every violation and the figures, unless there are none.
    ///
    /// # Panics
    ///
    /// When [`Report::violations`] is not empty.
    pub fn assert_sound(&self) {
        let violations = self.violations();
        assert!(
            violations.is_empty(),
            "{} violation(s):\n  {}\nfigures: {}",
            violations.len(),
            violations.join("\n  "),
            self.summary("")
        );
    }

    /// The figures, for printing and for adding up over runs.
    pub fn summary(&self, scenario: &str) -> Summary {
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut faults: BTreeMap<String, usize> = self
            .faults
            .iter()
            .map(|(kind, n)| (kind.label().to_owned(), *n))
            .collect();
        if self.cancelled > 0 {
            *faults
                .entry("acquires cancelled (dropped futures)".into())
                .or_default() += self.cancelled;
        }
        Summary {
            scenario: scenario.to_owned(),
            runs: 1,
            processes: self.processes.len(),
            attempts: self.attempts,
            acquisitions: self.acquisitions(),
            reentered_holds: self.reentered_holds(),
            gave_up: self.gave_up,
            errors: self.errors.clone(),
            faults,
            lease_losses: self.lease_losses(),
            unsafe_windows: self.unsafe_window_holds(),
            holds_in_unsafe_windows: self.unsafe_windows.len(),
            overlaps: self.overlaps.len() + self.permit_excesses.len(),
            overtakes: self.overtakes.len(),
            starved: self.starved.len() + self.unfinished.len(),
            panics: self.panics.len(),
            inconsistencies: self.inconsistencies.len(),
            leaked_holds: self.leaked.len(),
            double_applies: 0,
            hand_offs: 0,
            free_hand_offs: usize::try_from(self.reported_hand_offs.free).unwrap_or(usize::MAX),
            hand_off_streaks: usize::try_from(self.reported_hand_offs.streaks)
                .unwrap_or(usize::MAX),
            failover_kept: self.failover_kept(),
            failover_losable: self.failover_losable,
            failover_lost: self.failover_lost.len(),
            permits_lost_to_killed_holders: 0,
            figures: [
                ("max wait for a lock", Some(self.max_wait_ns)),
                (
                    "max hand-off to a waiter",
                    self.max_handoff(false).map(|d| d.as_nanos() as u64),
                ),
                (
                    "max time to free a killed holder's lock",
                    self.max_handoff(true).map(|d| d.as_nanos() as u64),
                ),
                ("max overrun of a bounded wait", self.max_overrun_ns),
                ("max unlock", Some(self.max_unlock_ms * 1_000_000)),
            ]
            .into_iter()
            .filter_map(|(name, ns)| Some((format!("{name} (ms)"), ms(ns?))))
            .collect(),
        }
    }
}

/// The figures of one or more runs: counts add up, `figures` (maxima, in ms) take the maximum.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Which scenario (empty when mixed).
    pub scenario: String,
    /// Runs added up.
    pub runs: usize,
    /// Worker processes.
    pub processes: usize,
    /// Acquisition attempts.
    pub attempts: usize,
    /// Confirmed holds checked.
    pub acquisitions: usize,
    /// Of those, holds acquired while their owner held the lock already (nested re-entries, the
    /// later of two futures of one owner), checked as part of its hold (absent from older
    /// summaries).
    #[serde(default)]
    pub reentered_holds: usize,
    /// Bounded waits that ran out.
    pub gave_up: usize,
    /// Failed attempts by error kind.
    pub errors: BTreeMap<String, usize>,
    /// Faults injected by kind.
    pub faults: BTreeMap<String, usize>,
    /// Holders told their lease was lost.
    pub lease_losses: usize,
    /// Lease-lost holds that overlapped other holds (known, signalled).
    pub unsafe_windows: usize,
    /// Pairs of holds overlapping inside those windows.
    pub holds_in_unsafe_windows: usize,
    /// Overlaps and exceeded permits outside signalled lease loss: must be 0.
    pub overlaps: usize,
    /// Acquisitions of fair locks out of queue order: must be 0 (absent from older summaries).
    #[serde(default)]
    pub overtakes: usize,
    /// Attempts or holds that never completed: must be 0.
    pub starved: usize,
    /// Panics: must be 0.
    pub panics: usize,
    /// Contradictions in the history: must be 0.
    pub inconsistencies: usize,
    /// Holds left in Redis after the run: must be 0.
    pub leaked_holds: usize,
    /// Acquires seen applied twice (a hold count of 2 where nobody re-enters): must be 0 (absent
    /// from older summaries).
    #[serde(default)]
    pub double_applies: usize,
    /// Local hand-offs between the tasks of one process, where the scenario counted them (see
    /// [`Summary::count_hand_offs`]; absent from older summaries).
    #[serde(default)]
    pub hand_offs: usize,
    /// Free hand-offs (no Redis command), as the workers that finished their run reported them
    /// (absent from older summaries).
    #[serde(default)]
    pub free_hand_offs: usize,
    /// Streaks of free hand-offs, as the workers that finished their run reported them (absent
    /// from older summaries).
    #[serde(default)]
    pub hand_off_streaks: usize,
    /// Holds acquired before a failover, held past it and acknowledged by a replica: kept, so
    /// checked to have stayed exclusive (absent from older summaries).
    #[serde(default)]
    pub failover_kept: usize,
    /// Holds that spanned a failover without a replica's acknowledgement: allowed to be lost,
    /// with lease loss signalled (absent from older summaries).
    #[serde(default)]
    pub failover_losable: usize,
    /// Holds kept by a failover whose holders were told their lease was lost: must be 0 (absent
    /// from older summaries).
    #[serde(default)]
    pub failover_lost: usize,
    /// Semaphore permits that holders killed with `SIGKILL` left taken: a semaphore's permits come
    /// back only by `release`, as Redisson's do (not leaked holds: the scenario gave them back; absent
    /// from older summaries).
    #[serde(default)]
    pub permits_lost_to_killed_holders: usize,
    /// Named maxima in milliseconds.
    pub figures: BTreeMap<String, f64>,
}

impl Summary {
    /// Counts the local hand-offs in: `script_hand_offs`, the hand-off scripts Redis ran (`HDEL`s,
    /// see [`local_hand_offs`](super::local_hand_offs)), plus the free hand-offs, which send no
    /// command and which only the workers can count. A worker killed with `SIGKILL` reports none,
    /// so its free hand-offs are missing from the count (its script hand-offs are in).
    pub fn count_hand_offs(&mut self, script_hand_offs: u64) {
        let script = usize::try_from(script_hand_offs).expect("a count that fits");
        self.hand_offs = script + self.free_hand_offs;
    }

    /// Adds `other` to this summary.
    pub fn merge(&mut self, other: &Summary) {
        if self.scenario != other.scenario {
            self.scenario.clear();
        }
        self.runs += other.runs;
        self.processes += other.processes;
        self.attempts += other.attempts;
        self.acquisitions += other.acquisitions;
        self.reentered_holds += other.reentered_holds;
        self.gave_up += other.gave_up;
        for (kind, n) in &other.errors {
            *self.errors.entry(kind.clone()).or_default() += n;
        }
        for (kind, n) in &other.faults {
            *self.faults.entry(kind.clone()).or_default() += n;
        }
        self.lease_losses += other.lease_losses;
        self.unsafe_windows += other.unsafe_windows;
        self.holds_in_unsafe_windows += other.holds_in_unsafe_windows;
        self.overlaps += other.overlaps;
        self.overtakes += other.overtakes;
        self.starved += other.starved;
        self.panics += other.panics;
        self.inconsistencies += other.inconsistencies;
        self.leaked_holds += other.leaked_holds;
        self.double_applies += other.double_applies;
        self.hand_offs += other.hand_offs;
        self.free_hand_offs += other.free_hand_offs;
        self.hand_off_streaks += other.hand_off_streaks;
        self.failover_kept += other.failover_kept;
        self.failover_losable += other.failover_losable;
        self.failover_lost += other.failover_lost;
        self.permits_lost_to_killed_holders += other.permits_lost_to_killed_holders;
        for (name, value) in &other.figures {
            let max = self.figures.entry(name.clone()).or_insert(*value);
            *max = max.max(*value);
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        serde_json::to_string(self)
            .map_err(|_| fmt::Error)
            .and_then(|json| f.write_str(&json))
    }
}

/// One attempt being reassembled.
#[derive(Debug, Default)]
struct Attempt {
    name: Option<String>,
    started: Option<u64>,
    wait_ms: Option<u64>,
    mode: Mode,
    permits: u32,
    owner: Option<String>,
    queued: Option<u64>,
    acquired: Option<(u64, Option<i64>)>,
    releasing: Option<(u64, Option<i64>)>,
    released: Option<(u64, Option<i64>, bool)>,
    ended: Option<u64>,
    gave_up: bool,
}

/// An attempt that entered a fair lock's queue.
#[derive(Debug)]
struct Waiter {
    id: AttemptId,
    /// When it was queued at the latest.
    queued_ns: u64,
    /// Until when it was still queued at least: any acquisition before this that started after it
    /// queued overtook it.
    left_ns: u64,
}

struct Checker<'a> {
    records: &'a [Record],
    report: Report,
    killed: HashMap<String, u64>,
    /// When each process stopped running: killed, or frozen with `SIGSTOP`.
    halted: HashMap<String, Vec<u64>>,
    /// The declared permits of each lock; one if not declared.
    permits: HashMap<String, u32>,
    /// When the locks' master was dead, at each failover.
    failovers: Vec<u64>,
    /// Processes whose acquisitions return only once a replica acknowledged them.
    replica_acks: BTreeSet<String>,
}

impl<'a> Checker<'a> {
    fn new(records: &'a [Record]) -> Self {
        Self {
            records,
            report: Report::default(),
            killed: HashMap::new(),
            halted: HashMap::new(),
            permits: HashMap::new(),
            failovers: Vec::new(),
            replica_acks: BTreeSet::new(),
        }
    }

    fn run(mut self) -> Report {
        let attempts = self.assemble();
        let mut queues = self.queues(&attempts);
        for (name, mut holds) in self.holds(&attempts) {
            holds.sort_by_key(|h| (h.acquired_ns, h.end_ns));
            tell_owners(&mut holds);
            let permits = self.permits.get(&name).copied().unwrap_or(1);
            self.check_fences_unique(&name, &holds);
            self.sweep(&name, &holds, permits);
            self.check_fences_moved(&name, &holds, permits);
            self.check_order_and_handoffs(&name, &holds);
            if let Some(waiters) = queues.remove(&name) {
                self.check_fifo(&name, &holds, &waiters);
            }
            let _ = self.report.holds.insert(name, holds);
        }
        self.report
    }

    /// Groups attempt events by attempt; collects process-level events.
    fn assemble(&mut self) -> BTreeMap<AttemptId, Attempt> {
        let mut attempts: BTreeMap<AttemptId, Attempt> = BTreeMap::new();
        let mut unsignalled = Vec::new();
        let report = &mut self.report;
        for record in self.records {
            if record.process != "redis" {
                let _ = report.processes.insert(record.process.clone());
            }
            let Some((task, seq)) = record.event.attempt() else {
                match &record.event {
                    Event::Fault { kind } => {
                        *report.faults.entry(*kind).or_default() += 1;
                        if *kind == FaultKind::KillHolder {
                            let _ = self.killed.insert(record.process.clone(), record.at_ns);
                        }
                        if *kind == FaultKind::Failover {
                            self.failovers.push(record.at_ns);
                        }
                        if matches!(kind, FaultKind::KillHolder | FaultKind::StopHolder) {
                            self.halted
                                .entry(record.process.clone())
                                .or_default()
                                .push(record.at_ns);
                        }
                    }
                    Event::ReplicaAcks { required } => {
                        if *required {
                            let _ = self.replica_acks.insert(record.process.clone());
                        } else {
                            let _ = self.replica_acks.remove(&record.process);
                        }
                    }
                    Event::Panicked { message } => {
                        report.panics.push(format!("{}: {message}", record.process));
                    }
                    Event::HandOffs {
                        local,
                        free,
                        streaks,
                    } => {
                        let reported = &mut report.reported_hand_offs;
                        reported.local += local;
                        reported.free += free;
                        reported.streaks += streaks;
                    }
                    Event::Permits { name, permits } => {
                        if let Some(other) = self.permits.insert(name.clone(), *permits)
                            && other != *permits
                        {
                            report.inconsistencies.push(format!(
                                "lock {name:?}: declared with {other} and with {permits} permits"
                            ));
                        }
                    }
                    _ => {}
                }
                continue;
            };
            let id = AttemptId {
                process: record.process.clone(),
                task,
                seq,
            };
            let attempt = attempts.entry(id.clone()).or_default();
            let outcome_seen = attempt.acquired.is_some() || attempt.ended.is_some();
            let fine = match &record.event {
                Event::Started {
                    name,
                    wait_ms,
                    mode,
                    permits,
                    owner,
                    ..
                } => {
                    let fresh = attempt.started.is_none();
                    attempt.name = Some(name.clone());
                    attempt.started = Some(record.at_ns);
                    attempt.wait_ms = *wait_ms;
                    attempt.mode = *mode;
                    attempt.permits = *permits;
                    attempt.owner.clone_from(owner);
                    report.attempts += 1;
                    fresh
                }
                Event::Queued { .. } => {
                    let fresh = attempt.queued.is_none();
                    attempt.queued = Some(record.at_ns);
                    attempt.started.is_some() && !outcome_seen && fresh
                }
                Event::Acquired { fence, .. } => {
                    attempt.acquired = Some((record.at_ns, *fence));
                    attempt.started.is_some() && !outcome_seen
                }
                Event::Releasing { fence_after, .. } => {
                    let fresh = attempt.releasing.is_none() && attempt.released.is_none();
                    attempt.releasing = Some((record.at_ns, *fence_after));
                    attempt.acquired.is_some() && fresh
                }
                Event::Released {
                    fence_after,
                    lease_lost,
                    unlock_error,
                    unlock_ms,
                    signalled,
                    dropped,
                    ..
                } => {
                    let fresh = attempt.released.is_none();
                    if unlock_error.as_deref() == Some("lease_lost") && *signalled == Some(false) {
                        unsignalled.push(id.clone());
                    }
                    attempt.released = Some((record.at_ns, *fence_after, *lease_lost));
                    // A dropped guard's release is done in the background, when nobody logs:
                    // Redis may count the hold until the run ends.
                    attempt.ended = Some(if *dropped {
                        u64::MAX
                    } else {
                        record.at_ns + unlock_ms * MS
                    });
                    if let Some(error) = unlock_error {
                        *report.unlock_errors.entry(error.clone()).or_default() += 1;
                    }
                    report.max_unlock_ms = report.max_unlock_ms.max(*unlock_ms);
                    attempt.acquired.is_some() && fresh
                }
                Event::Cancelled { .. } | Event::GaveUp { .. } | Event::Failed { .. } => {
                    match &record.event {
                        Event::Cancelled { .. } => report.cancelled += 1,
                        Event::GaveUp { .. } => {
                            report.gave_up += 1;
                            attempt.gave_up = true;
                        }
                        Event::Failed { error, .. } => {
                            *report.errors.entry(error.clone()).or_default() += 1;
                        }
                        _ => {}
                    }
                    attempt.ended = Some(record.at_ns);
                    attempt.started.is_some() && !outcome_seen
                }
                _ => true,
            };
            if !fine {
                report.inconsistencies.push(format!(
                    "attempt {id}: {:?} out of order or repeated",
                    record.event
                ));
            }
        }
        for id in unsignalled {
            let owner = attempts.get(&id).and_then(|attempt| attempt.owner.clone());
            let mut told = format!("attempt {id} (owner {owner:?}):");
            for record in self.records {
                let of_owner = record.event.attempt().is_some_and(|(task, seq)| {
                    let other = AttemptId {
                        process: record.process.clone(),
                        task,
                        seq,
                    };
                    owner.is_some()
                        && attempts.get(&other).and_then(|a| a.owner.as_ref()) == owner.as_ref()
                });
                if of_owner {
                    let _ = write!(
                        told,
                        "\n  {} {}: {:?}",
                        record.at_ns, record.process, record.event
                    );
                }
            }
            report.unsignalled_losses.push(told);
        }
        attempts
    }

    /// Turns acquired attempts into holds; counts crashed, starved and unfinished attempts and the
    /// overruns of bounded waits.
    fn holds(&mut self, attempts: &BTreeMap<AttemptId, Attempt>) -> BTreeMap<String, Vec<Hold>> {
        let mut holds: BTreeMap<String, Vec<Hold>> = BTreeMap::new();
        for (id, attempt) in attempts {
            let (Some(name), Some(started)) = (&attempt.name, attempt.started) else {
                continue; // already reported as out of order
            };
            let killed_at = self.killed.get(&id.process).copied();
            let Some((acquired, fence)) = attempt.acquired else {
                match (attempt.ended, killed_at) {
                    (Some(ended), _) => self.overrun(attempt.wait_ms, ended - started),
                    (None, Some(_)) => self.report.crashed += 1,
                    (None, None) => self.report.starved.push(id.clone()),
                }
                continue;
            };
            self.overrun(attempt.wait_ms, acquired.saturating_sub(started));
            self.report.max_wait_ns = self.report.max_wait_ns.max(acquired - started);
            let (end_ns, fence_after, lease_lost, crashed) = match (attempt.released, killed_at) {
                (Some((released, fence_after, lost)), _) => (released, fence_after, lost, false),
                (None, Some(killed)) => {
                    self.report.crashed += 1;
                    match attempt.releasing {
                        Some((left, fence_after)) => (left, fence_after, false, true),
                        None => (killed.max(acquired), None, false, true),
                    }
                }
                (None, None) => {
                    self.report.unfinished.push(id.clone());
                    continue;
                }
            };
            let spans_failover = self
                .failovers
                .iter()
                .any(|&at| acquired < at && at < end_ns);
            let kept_by_failover = spans_failover && self.replica_acks.contains(&id.process);
            if spans_failover && !kept_by_failover {
                self.report.failover_losable += 1;
            }
            if kept_by_failover && lease_lost {
                self.report.failover_lost.push(id.clone());
            }
            holds.entry(name.clone()).or_default().push(Hold {
                kept_by_failover,
                id: id.clone(),
                name: name.clone(),
                started_ns: started,
                acquired_ns: acquired,
                end_ns,
                crashed,
                fence,
                fence_after,
                lease_lost,
                mode: attempt.mode,
                permits: attempt.permits,
                owner: attempt.owner.clone(),
                unlocked_ns: if crashed {
                    u64::MAX
                } else {
                    attempt.ended.unwrap_or(u64::MAX)
                },
                owner_told: false,
            });
        }
        holds
    }

    /// The attempts that entered a fair lock's queue, per lock name, in queue order.
    fn queues(&self, attempts: &BTreeMap<AttemptId, Attempt>) -> BTreeMap<String, Vec<Waiter>> {
        let mut queues: BTreeMap<String, Vec<Waiter>> = BTreeMap::new();
        for (id, attempt) in attempts {
            let (Some(name), Some(started), Some(queued)) =
                (&attempt.name, attempt.started, attempt.queued)
            else {
                continue;
            };
            // It surely stayed until something it did itself: its own acquisition (holds of one lock
            // are ordered), or the end of its wait if it gave up. Cancelled or failed, it may have
            // left any time after it queued: its record comes too late to tell.
            let left_ns = match attempt.acquired {
                Some((acquired, _)) => acquired,
                None if attempt.gave_up => queued.max(started + attempt.wait_ms.unwrap_or(0) * MS),
                None if attempt.ended.is_some() => queued,
                None => u64::MAX,
            };
            // A killed or frozen waiter stops polling, and a fair lock drops a waiter that stopped
            // polling (Redisson's `threadWaitTime`): from then on, others may pass it.
            let halted = self.halted.get(&id.process).into_iter().flatten();
            let left_ns = halted
                .copied()
                .filter(|&at| at >= queued)
                .fold(left_ns, u64::min);
            queues.entry(name.clone()).or_default().push(Waiter {
                id: id.clone(),
                queued_ns: queued,
                left_ns,
            });
        }
        for waiters in queues.values_mut() {
            waiters.sort_by_key(|w| w.queued_ns);
        }
        queues
    }

    fn overrun(&mut self, wait_ms: Option<u64>, took_ns: u64) {
        if let Some(wait_ms) = wait_ms {
            let over = took_ns.saturating_sub(wait_ms * MS);
            let max = self.report.max_overrun_ns.get_or_insert(0);
            *max = (*max).max(over);
        }
    }

    fn check_fences_unique(&mut self, name: &str, holds: &[Hold]) {
        let mut seen: HashMap<i64, &AttemptId> = HashMap::new();
        for hold in holds {
            if let Some(fence) = hold.fence
                && let Some(other) = seen.insert(fence, &hold.id)
            {
                self.report.inconsistencies.push(format!(
                    "lock {name:?}: fence {fence} taken by both {other} and {}",
                    hold.id
                ));
            }
        }
    }

    /// Finds every pair of holds that exclude each other but whose intervals overlap, and every
    /// hold that took the lock's permits over without such a pair: a sweep in acquisition order
    /// keeping the holds still open (intervals that only touch do not overlap).
    fn sweep(&mut self, name: &str, holds: &[Hold], permits: u32) {
        let mut open: Vec<&Hold> = Vec::new();
        for hold in holds {
            open.retain(|o| o.end_ns > hold.acquired_ns);
            for earlier in open.iter().filter(|o| o.excludes(hold, permits)) {
                self.overlap(
                    name,
                    earlier,
                    Some(hold),
                    earlier.end_ns.min(hold.end_ns) - hold.acquired_ns,
                    Evidence {
                        clock: true,
                        fence: false,
                    },
                );
            }
            // Two counted holds that exclude each other are an overlap reported just above; an excess
            // is what only three or more holds (or one too greedy) make.
            let paired = open
                .iter()
                .any(|o| o.permits_held() > 0 && o.excludes(hold, permits));
            open.push(hold);
            let held = permits_taken(&open);
            if held > permits && hold.permits_held() > 0 && !paired {
                self.report.permit_excesses.push(PermitExcess {
                    name: name.to_owned(),
                    at_ns: hold.acquired_ns,
                    permits,
                    held,
                    holds: open
                        .iter()
                        .filter(|h| h.permits_held() > 0)
                        .map(|h| h.id.clone())
                        .collect(),
                });
            }
        }
    }

    /// Finds holds inside which the fence moved: someone else's `INCR` ran while they held the lock,
    /// an overlap if that someone's hold excludes theirs.
    fn check_fences_moved(&mut self, name: &str, holds: &[Hold], permits: u32) {
        for hold in holds {
            let (Some(fence), Some(after)) = (hold.fence, hold.fence_after) else {
                continue;
            };
            if after < fence {
                self.report.inconsistencies.push(format!(
                    "lock {name:?}: the fence went back from {fence} to {after} inside {}",
                    hold.id
                ));
                continue;
            }
            if after == fence {
                continue;
            }
            let intruders: Vec<&Hold> = holds
                .iter()
                .filter(|h| h.fence.is_some_and(|f| f > fence && f <= after))
                .collect();
            let fence_only = Evidence {
                clock: false,
                fence: true,
            };
            // Who moved it unlogged is unknown: proof only for a hold that excludes every other.
            let alone = hold.mode == Mode::Exclusive && hold.permits >= permits;
            if alone && intruders.len() as i64 != after - fence {
                self.overlap(name, hold, None, 0, fence_only);
            }
            for intruder in intruders {
                if hold.excludes(intruder, permits) {
                    self.overlap(name, hold, Some(intruder), 0, fence_only);
                }
            }
        }
    }

    /// Records an overlap of `first` and `second`, merging the evidence of one pair seen twice.
    fn overlap(
        &mut self,
        name: &str,
        first: &Hold,
        second: Option<&Hold>,
        overlap_ns: u64,
        evidence: Evidence,
    ) {
        // `first` held the lock already (it was acquired first, or its fence was taken first): one
        // kept by a failover must still have been held in Redis, whatever its holder was told.
        let lost_acknowledged = first.kept_by_failover;
        let known = !lost_acknowledged && (first.is_told() || second.is_some_and(Hold::is_told));
        let list = if known {
            &mut self.report.unsafe_windows
        } else {
            &mut self.report.overlaps
        };
        let pair = |o: &Overlap| {
            let ids = [Some(&o.first), o.second.as_ref()];
            ids.contains(&Some(&first.id)) && ids.contains(&second.map(|s| &s.id))
        };
        if let Some(seen) = list.iter_mut().find(|o| pair(o)) {
            seen.evidence.clock |= evidence.clock;
            seen.evidence.fence |= evidence.fence;
            seen.overlap_ns = seen.overlap_ns.max(overlap_ns);
            return;
        }
        list.push(Overlap {
            name: name.to_owned(),
            first: first.id.clone(),
            second: second.map(|s| s.id.clone()),
            modes: (first.mode, second.map(|s| s.mode)),
            overlap_ns,
            evidence,
            failover_lost_acknowledged: lost_acknowledged,
        });
    }

    /// For consecutive holds that do not overlap: the fences must grow with the clock, and a waiter
    /// that was already waiting when the lock was released counts as a hand-off. A hold nested
    /// inside an earlier hold of its owner is part of that one: the next hold follows the outer.
    fn check_order_and_handoffs(&mut self, name: &str, holds: &[Hold]) {
        let mut outer_end: HashMap<&str, u64> = HashMap::new();
        let outermost: Vec<&Hold> = holds
            .iter()
            .filter(|hold| {
                let Some(owner) = hold.owner.as_deref() else {
                    return true;
                };
                // Sorted by acquisition: every earlier hold of the owner was acquired no later.
                let end = outer_end.get(owner).copied();
                let _ = outer_end.insert(owner, end.unwrap_or(0).max(hold.end_ns));
                end.is_none_or(|end| end < hold.end_ns)
            })
            .collect();
        for pair in outermost.windows(2) {
            let (previous, next) = (&pair[0], &pair[1]);
            if previous.end_ns > next.acquired_ns {
                continue; // an overlap, reported already
            }
            if let (Some(a), Some(b)) = (previous.fence, next.fence)
                && a >= b
            {
                self.report.inconsistencies.push(format!(
                    "lock {name:?}: {} (fence {a}) ended before {} (fence {b}) began",
                    previous.id, next.id
                ));
            }
            if next.started_ns < previous.end_ns {
                self.report.handoffs.push(Handoff {
                    name: name.to_owned(),
                    from: previous.id.clone(),
                    to: next.id.clone(),
                    gap_ns: next.acquired_ns - previous.end_ns,
                    after_crash: previous.crashed,
                });
            }
        }
    }

    /// Finds acquisitions of a fair lock that overtook waiters queued before they started and still
    /// queued when they acquired. Both bounds are safe: a waiter was queued by its `Queued` record,
    /// an acquirer had not reached the queue before it started, and [`Waiter::left_ns`] is no later
    /// than the waiter really left.
    fn check_fifo(&mut self, name: &str, holds: &[Hold], waiters: &[Waiter]) {
        for hold in holds {
            // A waiter queues after it starts, so this never counts the acquirer itself.
            let overtaken: Vec<AttemptId> = waiters
                .iter()
                .take_while(|w| w.queued_ns < hold.started_ns)
                .filter(|w| hold.acquired_ns < w.left_ns)
                .map(|w| w.id.clone())
                .collect();
            if !overtaken.is_empty() {
                self.report.overtakes.push(Overtake {
                    name: name.to_owned(),
                    acquirer: hold.id.clone(),
                    acquired_ns: hold.acquired_ns,
                    overtaken,
                });
            }
        }
    }
}

/// Marks [`Hold::owner_told`] in `holds` (of one lock, in acquisition order): the holds of one owner
/// that overlap one another, directly or through others of its holds, are one hold, told lost if
/// any of them was (a re-entry released without a word inside a hold whose unlock then reports the
/// loss, say).
fn tell_owners(holds: &mut [Hold]) {
    // Per owner: its hold of the moment, as the indices of its parts and its end so far.
    let mut current: HashMap<String, (Vec<usize>, u64)> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, hold) in holds.iter().enumerate() {
        let Some(owner) = hold.owner.clone() else {
            continue;
        };
        match current.get_mut(&owner) {
            Some((parts, end)) if hold.acquired_ns < *end => {
                parts.push(i);
                *end = (*end).max(hold.end_ns);
            }
            _ => {
                if let Some((parts, _)) = current.insert(owner, (vec![i], hold.end_ns)) {
                    groups.push(parts);
                }
            }
        }
    }
    groups.extend(current.into_values().map(|(parts, _)| parts));
    for parts in groups {
        if parts.len() > 1 && parts.iter().any(|&i| holds[i].lease_lost) {
            for i in parts {
                holds[i].owner_told = true;
            }
        }
    }
}

/// The permits `holds` take from their lock ([`Hold::permits_held`]), each owner's once: the holds
/// of one owner are one hold.
fn permits_taken(holds: &[&Hold]) -> u32 {
    let mut owners: HashMap<&str, u32> = HashMap::new();
    let mut taken = 0;
    for hold in holds {
        match hold.owner.as_deref() {
            Some(owner) => {
                let most = owners.entry(owner).or_default();
                *most = (*most).max(hold.permits_held());
            }
            None => taken += hold.permits_held(),
        }
    }
    taken + owners.values().sum::<u32>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How an attempt asks for its lock.
    #[derive(Clone, Copy)]
    struct Ask {
        mode: Mode,
        permits: u32,
        wait_ms: Option<u64>,
        owner: Option<&'static str>,
    }

    /// A plain lock, waiting for ever.
    const LOCK: Ask = Ask {
        mode: Mode::Exclusive,
        permits: 1,
        wait_ms: None,
        owner: None,
    };

    /// A plain lock, by the owner whose hash field is `owner`.
    const fn owned(owner: &'static str) -> Ask {
        Ask {
            owner: Some(owner),
            ..LOCK
        }
    }

    const READ: Ask = Ask {
        mode: Mode::Read,
        ..LOCK
    };

    const fn take(permits: u32) -> Ask {
        Ask { permits, ..LOCK }
    }

    /// Builds hand-made histories in milliseconds.
    #[derive(Default)]
    struct Script {
        history: History,
        seq: u64,
    }

    impl Script {
        fn record(&mut self, process: &str, at_ms: u64, event: Event) {
            self.history.push(Record {
                process: process.into(),
                at_ns: at_ms * MS,
                event,
            });
        }

        fn start(&mut self, process: &str, name: &str, at_ms: u64) -> u64 {
            self.start_as(process, name, at_ms, LOCK)
        }

        fn start_as(&mut self, process: &str, name: &str, at_ms: u64, ask: Ask) -> u64 {
            self.seq += 1;
            let seq = self.seq;
            self.record(
                process,
                at_ms,
                Event::Started {
                    task: 0,
                    seq,
                    name: name.into(),
                    wait_ms: ask.wait_ms,
                    mode: ask.mode,
                    permits: ask.permits,
                    owner: ask.owner.map(str::to_owned),
                    kind: None,
                },
            );
            seq
        }

        fn acquire(&mut self, process: &str, seq: u64, at_ms: u64, fence: i64) {
            self.record(
                process,
                at_ms,
                Event::Acquired {
                    task: 0,
                    seq,
                    fence: Some(fence),
                    field: format!("{process}:{seq}"),
                },
            );
        }

        fn release(&mut self, process: &str, seq: u64, at_ms: u64, fence_after: i64, lost: bool) {
            self.record(
                process,
                at_ms,
                Event::Released {
                    task: 0,
                    seq,
                    fence_after: Some(fence_after),
                    lease_lost: lost,
                    unlock_error: lost.then(|| "lease_lost".to_owned()),
                    unlock_ms: 1,
                    signalled: None,
                    dropped: false,
                },
            );
        }

        fn releasing(&mut self, process: &str, seq: u64, at_ms: u64, fence_after: i64) {
            self.record(
                process,
                at_ms,
                Event::Releasing {
                    task: 0,
                    seq,
                    fence_after: Some(fence_after),
                },
            );
        }

        /// A whole hold of a plain lock: started, acquired with `fence`, released with
        /// `fence_after`.
        fn hold(
            &mut self,
            process: &str,
            name: &str,
            times: [u64; 3],
            fence: i64,
            fence_after: i64,
            lost: bool,
        ) -> u64 {
            self.hold_as(process, name, times, LOCK, [fence, fence_after], lost)
        }

        /// A whole hold asked for as `ask`.
        fn hold_as(
            &mut self,
            process: &str,
            name: &str,
            [started, acquired, released]: [u64; 3],
            ask: Ask,
            [fence, fence_after]: [i64; 2],
            lost: bool,
        ) -> u64 {
            let seq = self.start_as(process, name, started, ask);
            self.acquire(process, seq, acquired, fence);
            self.release(process, seq, released, fence_after, lost);
            seq
        }

        /// Attempt `seq` (started already) holds from `acquired` to `released`, its fence unmoved.
        fn serve(&mut self, process: &str, seq: u64, [acquired, released]: [u64; 2], fence: i64) {
            self.acquire(process, seq, acquired, fence);
            self.release(process, seq, released, fence, false);
        }

        fn kill(&mut self, process: &str, at_ms: u64) {
            self.fault(process, at_ms, FaultKind::KillHolder);
        }

        fn fault(&mut self, process: &str, at_ms: u64, kind: FaultKind) {
            self.record(process, at_ms, Event::Fault { kind });
        }

        fn declare(&mut self, name: &str, permits: u32) {
            self.record(
                "harness",
                0,
                Event::Permits {
                    name: name.into(),
                    permits,
                },
            );
        }

        fn check(&self) -> Report {
            self.history.check()
        }
    }

    /// Two processes taking turns on two locks, one waiting for the other each time.
    fn clean() -> Script {
        let mut s = Script::default();
        s.hold("w1", "a", [0, 1, 10], 1, 1, false);
        s.hold("w2", "a", [5, 12, 20], 2, 2, false);
        s.hold("w1", "a", [15, 21, 30], 3, 3, false);
        s.hold("w2", "b", [0, 2, 8], 1, 1, false);
        let seq = s.start("w1", "b", 40);
        s.record("w1", 41, Event::Cancelled { task: 0, seq });
        s
    }

    #[test]
    fn a_clean_history_passes_with_its_figures() {
        let report = clean().check();
        report.assert_sound();
        assert_eq!(report.acquisitions(), 4);
        assert_eq!(report.attempts, 5);
        assert_eq!(report.cancelled, 1);
        assert_eq!(report.handoffs.len(), 2, "w2 waited for w1, then w1 for w2");
        assert_eq!(report.max_handoff(false), Some(Duration::from_millis(2)));
        assert_eq!(report.max_handoff(true), None);
        assert_eq!(report.max_wait_ns, 7 * MS);
    }

    #[test]
    fn overlapping_holds_are_a_violation_seen_by_clock_and_fence() {
        let mut s = clean();
        // w3 gets "a" while w1 holds it (fences 3..) and w1's read-back sees w3's fence.
        s.hold("w1", "a", [50, 51, 60], 4, 5, false);
        s.hold("w3", "a", [50, 55, 58], 5, 5, false);
        let report = s.check();
        assert_eq!(report.overlaps.len(), 1, "{:?}", report.overlaps);
        let overlap = &report.overlaps[0];
        assert_eq!(overlap.overlap_ns, 3 * MS);
        assert_eq!(
            overlap.evidence,
            Evidence {
                clock: true,
                fence: true
            }
        );
        assert_eq!(overlap.modes, (Mode::Exclusive, Some(Mode::Exclusive)));
        assert!(report.unsafe_windows.is_empty());
        assert!(
            report.permit_excesses.is_empty(),
            "a mutex's excess is the pair"
        );
        assert_eq!(report.violations().len(), 1);
    }

    #[test]
    fn a_moved_fence_proves_an_overlap_even_when_the_clock_does_not() {
        let mut s = clean();
        // The clock intervals touch but do not overlap; the fence shows w3 entered inside w1's hold.
        s.hold("w1", "a", [50, 51, 60], 4, 5, false);
        s.hold("w3", "a", [50, 60, 70], 5, 5, false);
        let report = s.check();
        assert_eq!(report.overlaps.len(), 1);
        assert!(report.overlaps[0].evidence.fence && !report.overlaps[0].evidence.clock);
        // A fence moved by nobody in the log (a holder killed before it logged) is still an overlap.
        let mut s = clean();
        s.hold("w1", "a", [50, 51, 60], 4, 5, false);
        s.hold("w3", "a", [50, 61, 70], 6, 6, false);
        let report = s.check();
        assert_eq!(report.overlaps.len(), 1, "{:?}", report.overlaps);
        assert_eq!(report.overlaps[0].second, None);
    }

    #[test]
    fn an_overlap_with_a_lease_lost_holder_is_a_known_unsafe_window() {
        let mut s = clean();
        // w1 is told its lease was lost; w3 and then w2 held the lock meanwhile.
        s.hold("w1", "a", [50, 51, 200], 4, 6, true);
        s.hold("w3", "a", [50, 120, 130], 5, 5, false);
        s.hold("w2", "a", [50, 140, 150], 6, 6, false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.lease_losses(), 1);
        assert_eq!(
            report.unsafe_windows.len(),
            2,
            "two holds overlapped the lost one"
        );
        assert!(
            report
                .unsafe_windows
                .iter()
                .all(|o| o.evidence.clock && o.evidence.fence)
        );
        assert_eq!(report.unsafe_window_holds(), 1);
        let summary = report.summary("t");
        assert_eq!(
            (summary.unsafe_windows, summary.holds_in_unsafe_windows),
            (1, 2)
        );
    }

    #[test]
    fn a_lease_lost_hold_does_not_hide_an_overlap_of_two_sound_holds() {
        let mut s = clean();
        // x (sound) is still inside when y (sound) enters; a lease-lost hold sits between them.
        s.hold("w1", "a", [50, 51, 100], 4, 4, false);
        s.hold("w2", "a", [50, 60, 65], 5, 5, true);
        s.hold("w3", "a", [50, 70, 80], 6, 6, false);
        let report = s.check();
        assert_eq!(
            report.unsafe_windows.len(),
            1,
            "{:?}",
            report.unsafe_windows
        );
        assert_eq!(report.overlaps.len(), 1, "{:?}", report.overlaps);
        assert_eq!(report.overlaps[0].first.process, "w1");
        assert_eq!(
            report.overlaps[0]
                .second
                .as_ref()
                .map(|a| a.process.as_str()),
            Some("w3")
        );
    }

    #[test]
    fn a_waiter_that_never_acquires_is_starved_unless_its_process_was_killed() {
        let mut s = clean();
        let _ = s.start("w2", "a", 100);
        assert_eq!(s.check().starved.len(), 1);

        let mut s = clean();
        let _ = s.start("w2", "a", 100);
        s.kill("w2", 110);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.crashed, 1);
    }

    #[test]
    fn a_killed_holder_ends_at_its_death_and_the_next_waiter_counts_the_lease_expiry() {
        let mut s = clean();
        let victim = s.start("w3", "a", 100);
        s.acquire("w3", victim, 101, 4);
        s.kill("w3", 150);
        s.hold("w1", "a", [120, 1_150, 1_160], 5, 5, false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.max_handoff(true), Some(Duration::from_millis(1_000)));
        assert_eq!(report.faults.get(&FaultKind::KillHolder), Some(&1));
        assert_eq!(report.crashed, 1);
    }

    #[test]
    fn a_holder_killed_during_its_unlock_ends_where_it_left_its_critical_section() {
        let mut s = clean();
        let victim = s.start("w3", "a", 100);
        s.acquire("w3", victim, 101, 4);
        s.releasing("w3", victim, 110, 4);
        // Its unlock ran and the next holder took the lock before the victim could log it.
        s.hold("w1", "a", [105, 111, 120], 5, 5, false);
        s.kill("w3", 112);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.crashed, 1);
        assert_eq!(report.max_handoff(true), Some(Duration::from_millis(1)));

        // Without the record, the victim would have held until its death.
        let mut s = clean();
        let victim = s.start("w3", "a", 100);
        s.acquire("w3", victim, 101, 4);
        s.hold("w1", "a", [105, 111, 120], 5, 5, false);
        s.kill("w3", 112);
        assert_eq!(s.check().overlaps.len(), 1);
    }

    #[test]
    fn a_releasing_record_alone_is_not_a_release() {
        let mut s = clean();
        let seq = s.start("w1", "b", 100);
        s.acquire("w1", seq, 101, 2);
        s.releasing("w1", seq, 110, 2);
        let report = s.check();
        assert_eq!(report.unfinished.len(), 1, "the unlock never returned");
    }

    #[test]
    fn a_hold_never_released_by_a_live_process_is_unfinished() {
        let mut s = clean();
        let seq = s.start("w1", "b", 100);
        s.acquire("w1", seq, 101, 2);
        let report = s.check();
        assert_eq!(report.unfinished.len(), 1);
        assert!(!report.violations().is_empty());
    }

    #[test]
    fn fences_that_disagree_with_the_clock_or_repeat_are_inconsistent() {
        let mut s = clean();
        s.hold("w1", "a", [50, 51, 60], 2, 2, false);
        let report = s.check();
        assert!(
            report
                .inconsistencies
                .iter()
                .any(|i| i.contains("taken by both")),
            "{:?}",
            report.inconsistencies
        );
        assert!(
            report
                .inconsistencies
                .iter()
                .any(|i| i.contains("ended before")),
            "{:?}",
            report.inconsistencies
        );
    }

    #[test]
    fn events_out_of_order_and_panics_are_violations() {
        let mut s = clean();
        s.acquire("w9", 77, 10, 9);
        s.record(
            "w2",
            10,
            Event::Panicked {
                message: "boom".into(),
            },
        );
        let report = s.check();
        assert_eq!(
            report.inconsistencies.len(),
            1,
            "{:?}",
            report.inconsistencies
        );
        assert_eq!(report.panics.len(), 1);
    }

    #[test]
    fn bounded_waits_report_their_overrun() {
        let mut s = Script::default();
        let ask = Ask {
            wait_ms: Some(100),
            ..LOCK
        };
        let seq = s.start_as("w1", "a", 0, ask);
        s.record("w1", 130, Event::GaveUp { task: 0, seq });
        let report = s.check();
        assert_eq!(report.max_overrun_ns, Some(30 * MS));
        assert_eq!(report.gave_up, 1);
    }

    #[test]
    fn summaries_add_up_counts_and_keep_maxima() {
        let mut total = clean().check().summary("x");
        let mut other = clean().check().summary("x");
        let _ = other
            .figures
            .insert("max wait for a lock (ms)".into(), 99.0);
        total.merge(&other);
        assert_eq!(total.runs, 2);
        assert_eq!(total.acquisitions, 8);
        assert_eq!(total.figures["max wait for a lock (ms)"], 99.0);
        assert_eq!(total.scenario, "x");
    }

    /// The attempts in `overlaps` by process, pairwise, with the modes that collided.
    fn collisions(overlaps: &[Overlap]) -> Vec<(&str, Mode, Option<&str>, Option<Mode>)> {
        overlaps
            .iter()
            .map(|o| {
                let second = o.second.as_ref().map(|a| a.process.as_str());
                (o.first.process.as_str(), o.modes.0, second, o.modes.1)
            })
            .collect()
    }

    /// The processes of some attempts.
    fn processes(ids: &[AttemptId]) -> Vec<&str> {
        ids.iter().map(|a| a.process.as_str()).collect()
    }

    #[test]
    fn holds_of_one_owner_are_one_hold() {
        let mut s = Script::default();
        // Owner c:1 holds from 1 to 30 ms and re-enters from 5 to 10; its second future holds from
        // 2 to 35. Their fences move each other's: one hold.
        let _ = s.hold_as("w1", "a", [0, 1, 30], owned("c:1"), [1, 3], false);
        let _ = s.hold_as("w1", "a", [0, 2, 35], owned("c:1"), [2, 3], false);
        let _ = s.hold_as("w1", "a", [4, 5, 10], owned("c:1"), [3, 3], false);
        // c:2 waited from 3 ms for the whole of it.
        let _ = s.hold_as("w2", "a", [3, 36, 40], owned("c:2"), [4, 4], false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.acquisitions(), 4);
        assert_eq!(
            report.reentered_holds(),
            2,
            "the second future and the re-entry"
        );
        assert_eq!(report.summary("").reentered_holds, 2);
        let [handoff] = &report.handoffs[..] else {
            panic!("one hand-off: {:?}", report.handoffs)
        };
        assert_eq!(
            (handoff.from.seq, handoff.gap_ns),
            (2, MS),
            "from the last of c:1's holds to leave"
        );

        // Another owner inside it overlaps every hold of c:1 it met, nested or not.
        let mut s = Script::default();
        let _ = s.hold_as("w1", "a", [0, 1, 30], owned("c:1"), [1, 3], false);
        let _ = s.hold_as("w1", "a", [4, 5, 10], owned("c:1"), [2, 3], false);
        let _ = s.hold_as("w3", "a", [0, 6, 8], owned("c:3"), [3, 3], false);
        let report = s.check();
        assert_eq!(
            collisions(&report.overlaps),
            [
                ("w1", Mode::Exclusive, Some("w3"), Some(Mode::Exclusive)),
                ("w1", Mode::Exclusive, Some("w3"), Some(Mode::Exclusive)),
            ]
        );
        assert!(
            report
                .overlaps
                .iter()
                .all(|o| o.evidence.clock && o.evidence.fence)
        );
        assert!(report.permit_excesses.is_empty());

        // Told through its outer hold, c:1's re-entry was told too: a known window, not an overlap.
        let mut s = Script::default();
        let _ = s.hold_as("w1", "a", [0, 1, 30], owned("c:1"), [1, 3], true);
        let _ = s.hold_as("w1", "a", [4, 5, 10], owned("c:1"), [2, 3], false);
        let _ = s.hold_as("w3", "a", [0, 6, 8], owned("c:3"), [3, 3], false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.unsafe_windows.len(), 2);
        assert_eq!(
            (report.lease_losses(), report.unsafe_window_holds()),
            (1, 2)
        );
        // ...but not a later hold of c:1's, once the told one was over.
        let _ = s.hold_as("w1", "a", [31, 32, 40], owned("c:1"), [4, 5], false);
        let _ = s.hold_as("w3", "a", [33, 34, 35], owned("c:3"), [5, 5], false);
        assert_eq!(s.check().overlaps.len(), 1);

        // Without owners (older logs), holds of one process are as foreign as any.
        let mut s = Script::default();
        let _ = s.hold("w1", "a", [0, 1, 30], 1, 2, false);
        let _ = s.hold("w1", "a", [4, 5, 10], 2, 2, false);
        assert_eq!(s.check().overlaps.len(), 1);
    }

    #[test]
    fn one_owner_takes_its_permits_once() {
        let mut s = Script::default();
        s.declare("s", 2);
        // c:1 holds one permit twice over (re-entered), c:2 the other: full, not overfull.
        let _ = s.hold_as("w1", "s", [0, 1, 30], owned("c:1"), [1, 3], false);
        let _ = s.hold_as("w1", "s", [0, 2, 20], owned("c:1"), [2, 3], false);
        let _ = s.hold_as("w2", "s", [0, 3, 25], owned("c:2"), [3, 3], false);
        s.check().assert_sound();
        // A third owner overfills it.
        let _ = s.hold_as("w3", "s", [0, 4, 5], owned("c:3"), [4, 4], false);
        let [excess] = &s.check().permit_excesses[..] else {
            panic!("one excess")
        };
        assert_eq!((excess.held, excess.holds.len()), (3, 4));
    }

    #[test]
    fn read_holds_share_the_lock_and_a_write_that_only_touches_them_is_fine() {
        let mut s = Script::default();
        // r1 and r2 read at once and each sees the other's fence; w writes from the instant r1 left.
        let _ = s.hold_as("r1", "rw", [0, 1, 10], READ, [1, 2], false);
        let _ = s.hold_as("r2", "rw", [0, 2, 8], READ, [2, 2], false);
        let _ = s.hold_as("w", "rw", [3, 10, 20], LOCK, [3, 3], false);
        // ...and a reader enters the instant w leaves.
        let _ = s.hold_as("r3", "rw", [12, 20, 25], READ, [4, 4], false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.acquisitions(), 4);
        assert_eq!(report.holds["rw"][0].mode, Mode::Read);
    }

    #[test]
    fn a_write_overlapping_a_read_or_a_write_is_an_overlap_that_names_the_modes() {
        let mut s = Script::default();
        // w enters while r reads (r's read-back sees w's fence), then w2 while w writes.
        let _ = s.hold_as("r", "rw", [0, 1, 10], READ, [1, 2], false);
        let _ = s.hold_as("w", "rw", [0, 5, 20], LOCK, [2, 2], false);
        let _ = s.hold_as("w2", "rw", [0, 15, 25], LOCK, [3, 3], false);
        let report = s.check();
        assert_eq!(
            collisions(&report.overlaps),
            [
                ("r", Mode::Read, Some("w"), Some(Mode::Exclusive)),
                ("w", Mode::Exclusive, Some("w2"), Some(Mode::Exclusive)),
            ],
        );
        assert!(report.overlaps[0].evidence.clock && report.overlaps[0].evidence.fence);
        assert!(report.overlaps[1].evidence.clock && !report.overlaps[1].evidence.fence);
        let violation = &report.violations()[0];
        assert!(
            violation.contains("r/0#1 (read) and w/0#2 (exclusive)"),
            "{violation}"
        );
    }

    #[test]
    fn a_fence_moved_by_an_unknown_holder_proves_nothing_inside_a_read() {
        let mut s = Script::default();
        // The unlogged intruder may have been a reader.
        let _ = s.hold_as("r", "rw", [0, 1, 10], READ, [1, 2], false);
        s.check().assert_sound();
        // Inside a write it cannot have been anyone allowed.
        let mut s = Script::default();
        let _ = s.hold_as("w", "rw", [0, 1, 10], LOCK, [1, 2], false);
        assert_eq!(
            collisions(&s.check().overlaps),
            [("w", Mode::Exclusive, None, None)]
        );
    }

    #[test]
    fn a_killed_writer_excludes_readers_until_its_death() {
        let mut s = Script::default();
        let writer = s.start("w", "rw", 0);
        s.acquire("w", writer, 1, 1);
        s.kill("w", 50);
        let _ = s.hold_as("early", "rw", [0, 40, 60], READ, [2, 3], false);
        let _ = s.hold_as("late", "rw", [0, 55, 70], READ, [3, 3], false);
        let report = s.check();
        assert_eq!(
            collisions(&report.overlaps),
            [("w", Mode::Exclusive, Some("early"), Some(Mode::Read))]
        );
        assert_eq!(report.overlaps[0].overlap_ns, 10 * MS);
        assert_eq!(report.crashed, 1);
    }

    #[test]
    fn a_semaphore_may_be_full_but_not_overfull() {
        let mut s = Script::default();
        s.declare("s", 3);
        // 1 + 2 permits: exactly full; c takes a's permit the instant a gives it back.
        let _ = s.hold_as("a", "s", [0, 1, 10], take(1), [1, 2], false);
        let _ = s.hold_as("b", "s", [0, 2, 20], take(2), [2, 3], false);
        let _ = s.hold_as("c", "s", [0, 10, 30], take(1), [3, 3], false);
        let report = s.check();
        report.assert_sound();

        // d then takes a fourth permit while b and c hold three.
        let _ = s.hold_as("d", "s", [0, 15, 16], take(1), [4, 4], false);
        let report = s.check();
        assert!(report.overlaps.is_empty(), "{:?}", report.overlaps);
        let [excess] = &report.permit_excesses[..] else {
            panic!("one excess: {:?}", report.permit_excesses)
        };
        assert_eq!((excess.at_ns, excess.held, excess.permits), (15 * MS, 4, 3));
        assert_eq!(processes(&excess.holds), ["b", "c", "d"]);
        assert_eq!(report.summary("").overlaps, 1);
        assert!(report.violations()[0].starts_with("permits exceeded: lock \"s\": 4 of its 3"));
    }

    #[test]
    fn holds_that_exceed_the_permits_on_their_own_are_overlaps() {
        let mut s = Script::default();
        s.declare("s", 3);
        let _ = s.hold_as("a", "s", [0, 1, 10], take(2), [1, 1], false);
        let _ = s.hold_as("b", "s", [0, 5, 15], take(2), [2, 2], false);
        // One hold alone can overfill it too.
        let _ = s.hold_as("c", "s", [0, 20, 30], take(4), [3, 3], false);
        let report = s.check();
        assert_eq!(
            collisions(&report.overlaps),
            [("a", Mode::Exclusive, Some("b"), Some(Mode::Exclusive))]
        );
        let [excess] = &report.permit_excesses[..] else {
            panic!("one excess: {:?}", report.permit_excesses)
        };
        assert_eq!((excess.held, processes(&excess.holds)), (4, vec!["c"]));
    }

    #[test]
    fn lease_lost_holds_do_not_count_and_killed_ones_count_until_their_death() {
        let mut s = Script::default();
        s.declare("s", 2);
        let _ = s.hold_as("lost", "s", [0, 1, 50], take(1), [1, 1], true);
        let _ = s.hold_as("a", "s", [0, 2, 40], take(1), [2, 2], false);
        let victim = s.start_as("k", "s", 0, take(1));
        s.acquire("k", victim, 3, 3);
        s.kill("k", 30);
        s.check().assert_sound();

        // b joins a and k before k's death, then c joins a and b after it.
        let _ = s.hold_as("b", "s", [0, 20, 45], take(1), [4, 4], false);
        let _ = s.hold_as("c", "s", [0, 35, 38], take(1), [5, 5], false);
        let report = s.check();
        let at: Vec<(u64, Vec<&str>)> = report
            .permit_excesses
            .iter()
            .map(|e| (e.at_ns / MS, processes(&e.holds)))
            .collect();
        assert_eq!(at, [(20, vec!["a", "k", "b"]), (35, vec!["a", "b", "c"])]);
    }

    #[test]
    fn conflicting_permit_declarations_are_inconsistent() {
        let mut s = Script::default();
        s.declare("s", 3);
        s.declare("s", 3);
        s.check().assert_sound();
        s.declare("s", 2);
        assert_eq!(s.check().inconsistencies.len(), 1);
    }

    impl Script {
        /// An attempt on fair lock `name` that queued at `queued`.
        fn queue(
            &mut self,
            process: &str,
            name: &str,
            [started, queued]: [u64; 2],
            ask: Ask,
        ) -> u64 {
            let seq = self.start_as(process, name, started, ask);
            self.record(process, queued, Event::Queued { task: 0, seq });
            seq
        }

        /// `a` holds fair lock `f` from 1 to 10 ms; `first` queues behind it at 3 ms (waiting as
        /// `ask`), `second` starts at 5 and holds it from 12 to 20 ms (fence 10): ahead of `first`
        /// unless `first` left the queue first. Returns `first`'s attempt.
        fn fair(ask: Ask) -> (Self, u64) {
            let mut s = Self::default();
            let _ = s.hold("a", "f", [0, 1, 10], 1, 1, false);
            let first = s.queue("first", "f", [2, 3], ask);
            let second = s.queue("second", "f", [5, 6], LOCK);
            s.serve("second", second, [12, 20], 10);
            (s, first)
        }
    }

    #[test]
    fn a_fair_lock_served_in_queue_order_passes() {
        let (mut s, first) = Script::fair(LOCK);
        // first is served before second, up to the instant second acquires.
        s.serve("first", first, [11, 12], 2);
        // l started the instant w queued, so it is not provably behind w.
        let w = s.queue("w", "f", [13, 14], LOCK);
        let _ = s.hold("l", "f", [14, 20, 21], 11, 11, false);
        s.serve("w", w, [21, 22], 12);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.handoffs.len(), 4);
    }

    #[test]
    fn an_acquisition_ahead_of_an_earlier_waiter_still_queued_is_out_of_turn() {
        let (mut s, first) = Script::fair(LOCK);
        s.serve("first", first, [21, 22], 11);
        let report = s.check();
        let [overtake] = &report.overtakes[..] else {
            panic!("one overtake: {:?}", report.overtakes)
        };
        assert_eq!(overtake.acquirer.process, "second");
        assert_eq!(overtake.acquired_ns, 12 * MS);
        assert_eq!(processes(&overtake.overtaken), ["first"]);
        assert_eq!(report.summary("").overtakes, 1);
        assert_eq!(report.violations().len(), 1);
        assert!(report.violations()[0].starts_with("out of turn: fair lock \"f\""));

        // A waiter that never gets it at all (starved) is overtaken too.
        let (s, _) = Script::fair(LOCK);
        let report = s.check();
        assert_eq!((report.overtakes.len(), report.starved.len()), (1, 1));
    }

    #[test]
    fn a_waiter_that_gave_up_is_passed_only_once_its_wait_ran_out() {
        let wait = |wait_ms| Ask {
            wait_ms: Some(wait_ms),
            ..LOCK
        };
        // Its 20 ms wait ran out at 22 ms, after second acquired at 12.
        let (mut s, first) = Script::fair(wait(20));
        s.record(
            "first",
            23,
            Event::GaveUp {
                task: 0,
                seq: first,
            },
        );
        assert_eq!(s.check().overtakes.len(), 1);
        // Its 5 ms wait ran out at 7 ms.
        let (mut s, first) = Script::fair(wait(5));
        s.record(
            "first",
            23,
            Event::GaveUp {
                task: 0,
                seq: first,
            },
        );
        s.check().assert_sound();
    }

    #[test]
    fn a_cancelled_or_failed_waiter_may_be_passed_as_it_may_have_left_any_time() {
        let outcomes: [fn(u64) -> Event; 2] = [
            |seq| Event::Cancelled { task: 0, seq },
            |seq| Event::Failed {
                task: 0,
                seq,
                error: "timeout".into(),
                message: "timed out".into(),
            },
        ];
        for outcome in outcomes {
            let (mut s, first) = Script::fair(LOCK);
            s.record("first", 30, outcome(first));
            s.check().assert_sound();
        }
    }

    #[test]
    fn a_killed_or_frozen_waiter_may_be_passed_from_then_on() {
        let (mut s, _) = Script::fair(LOCK);
        s.kill("first", 11);
        s.check().assert_sound();

        let (mut s, first) = Script::fair(LOCK);
        s.fault("first", 11, FaultKind::StopHolder);
        s.serve("first", first, [21, 22], 11);
        s.check().assert_sound();

        // Killed only after second acquired: second had overtaken it while it was alive.
        let (mut s, _) = Script::fair(LOCK);
        s.kill("first", 13);
        assert_eq!(s.check().overtakes.len(), 1);
    }

    /// `w1` holds "a" across a failover at 20 ms (from 10 to 40 ms, told at the end that its lease
    /// was lost) while `w2` takes it at 30 ms on the promoted replica; `acks` says whether `w1`'s
    /// acquisitions waited for a replica.
    fn failover(acks: bool) -> Script {
        let mut s = Script::default();
        s.record("w1", 0, Event::ReplicaAcks { required: acks });
        s.record("w2", 0, Event::ReplicaAcks { required: true });
        s.fault("redis", 20, FaultKind::Failover);
        s.hold("w1", "a", [5, 10, 40], 1, 2, true);
        s.hold("w2", "a", [25, 30, 35], 2, 2, false);
        s
    }

    #[test]
    fn a_failover_may_lose_only_holds_no_replica_acknowledged() {
        // Acknowledged by the replica that was promoted: losing it is a violation, told or not.
        let report = failover(true).check();
        let [overlap] = &report.overlaps[..] else {
            panic!("one overlap: {:?}", report.overlaps)
        };
        assert!(overlap.failover_lost_acknowledged);
        assert_eq!(
            (overlap.first.process.as_str(), report.failover_kept()),
            ("w1", 1)
        );
        assert!(report.violations()[0].contains("acknowledged by a replica before the failover"));
        assert_eq!(report.failover_losable, 0);
        // Its holder was told it was lost, which is a violation of its own.
        assert_eq!(report.failover_lost.len(), 1);
        assert_eq!(report.violations().len(), 2);
        assert_eq!(report.summary("").failover_lost, 1);

        // Not acknowledged: the documented loss, a known unsafe window since its holder was told.
        let report = failover(false).check();
        report.assert_sound();
        assert_eq!(report.unsafe_windows.len(), 1);
        assert_eq!((report.failover_kept(), report.failover_losable), (0, 1));
        let summary = report.summary("");
        assert_eq!((summary.failover_kept, summary.failover_losable), (0, 1));

        // ...but never silently: untold, it is an overlap like any other.
        let mut s = Script::default();
        s.fault("redis", 20, FaultKind::Failover);
        s.hold("w1", "a", [5, 10, 40], 1, 2, false);
        s.hold("w2", "a", [25, 30, 35], 2, 2, false);
        let report = s.check();
        assert_eq!(report.overlaps.len(), 1);
        assert!(!report.overlaps[0].failover_lost_acknowledged);
    }

    #[test]
    fn only_holds_across_the_failover_are_kept_by_it() {
        let mut s = Script::default();
        s.record("w1", 0, Event::ReplicaAcks { required: true });
        s.record("w2", 0, Event::ReplicaAcks { required: true });
        s.fault("redis", 20, FaultKind::Failover);
        // Released before the failover; then acquired after it and lease lost, overlapped by w2.
        s.hold("w1", "a", [0, 1, 10], 1, 1, false);
        s.hold("w1", "a", [21, 22, 40], 2, 3, true);
        s.hold("w2", "a", [25, 30, 35], 3, 3, false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.failover_kept(), 0);
        assert_eq!(report.unsafe_windows.len(), 1);

        // A kept hold that enters after a lease-lost one is the intruder, not the one lost.
        let mut s = Script::default();
        s.record("w2", 0, Event::ReplicaAcks { required: true });
        s.fault("redis", 20, FaultKind::Failover);
        s.hold("w1", "a", [0, 1, 30], 1, 2, true);
        s.hold("w2", "a", [5, 10, 40], 2, 2, false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(
            (report.failover_kept(), report.unsafe_windows.len()),
            (1, 1)
        );
    }

    #[test]
    fn hand_offs_reported_by_workers_add_up_and_count_in_with_the_scripts() {
        let mut s = Script::default();
        for (process, free) in [("w1", 5), ("w2", 2)] {
            s.record(
                process,
                10,
                Event::HandOffs {
                    local: free + 1,
                    free,
                    streaks: 1,
                },
            );
        }
        let report = s.check();
        report.assert_sound();
        assert_eq!(
            report.reported_hand_offs,
            ReportedHandOffs {
                local: 9,
                free: 7,
                streaks: 2
            }
        );
        let mut summary = report.summary("hand-offs");
        assert_eq!((summary.free_hand_offs, summary.hand_off_streaks), (7, 2));
        summary.count_hand_offs(2);
        assert_eq!(summary.hand_offs, 9);
        let mut total = summary.clone();
        total.merge(&summary);
        assert_eq!(
            (
                total.hand_offs,
                total.free_hand_offs,
                total.hand_off_streaks
            ),
            (18, 14, 4)
        );
    }

    #[test]
    fn locks_without_a_queue_are_not_held_to_its_order() {
        let mut s = Script::default();
        let _ = s.hold("a", "plain", [0, 1, 10], 1, 1, false);
        let _ = s.hold("first", "plain", [2, 21, 22], 3, 3, false);
        let _ = s.hold("second", "plain", [5, 12, 20], 2, 2, false);
        s.check().assert_sound();
    }
}
