//! The checker: mutual exclusion and progress, proven from the histories of several processes.
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
//! real overlap behind it).
//!
//! # What is a violation and what is a known unsafe window
//!
//! A holder whose lease was lost (it was paused past its lease, or Redis was unreachable for a whole
//! lease) is told so by rlock (`lease_lost()`, or `LeaseLost` from the unlock). An overlap in which
//! one of the holds was told that is the documented limit of any lease-based lock: it is reported as
//! an *unsafe window*, not as a violation. Everything else is a violation:
//!
//! * an overlap of two holds that were both never told their lease was lost;
//! * an attempt that never completed (no outcome) in a process that was not killed: a waiter that
//!   never acquired, or a call that hung;
//! * a hold that was never released in a process that was not killed;
//! * a panic in a worker; an inconsistent history (duplicate fences, fences going backwards or
//!   disagreeing with the clock, events of unknown attempts);
//! * a hold still in Redis after the run (filled in by the harness, see `Report::leaked`).
//!
//! A process killed with `SIGKILL` stops executing at the kill: its open hold ends there (its key
//! lives on in Redis until its lease runs out, which only delays the others), and its open attempts
//! are counted as crashed, not starved.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::record::{Event, FaultKind, Record};

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
    /// The holder was killed while holding.
    pub crashed: bool,
    /// The fence taken on entry.
    pub fence: Option<i64>,
    /// The fence read back before leaving.
    pub fence_after: Option<i64>,
    /// The holder was told its lease was lost.
    pub lease_lost: bool,
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
    /// How long both were inside, by the clock (0 when only the fence shows it).
    pub overlap_ns: u64,
    /// How it was seen.
    pub evidence: Evidence,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let second = self
            .second
            .as_ref()
            .map_or_else(|| "an unlogged holder".to_owned(), ToString::to_string);
        write!(
            f,
            "lock {:?}: {} and {second} held it at once for {:?} (clock: {}, fence: {})",
            self.name,
            self.first,
            Duration::from_nanos(self.overlap_ns),
            self.evidence.clock,
            self.evidence.fence
        )
    }
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
    /// Lock keys still present after the run, with their fields (filled in by the harness).
    pub leaked: Vec<String>,
}

impl Report {
    /// Confirmed holds checked.
    pub fn acquisitions(&self) -> usize {
        self.holds.values().map(Vec::len).sum()
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
            .filter(|h| h.lease_lost)
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
            self.starved
                .iter()
                .map(|a| format!("attempt {a} never completed")),
        );
        found.extend(
            self.unfinished
                .iter()
                .map(|a| format!("hold {a} was never released")),
        );
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
            gave_up: self.gave_up,
            errors: self.errors.clone(),
            faults,
            lease_losses: self.lease_losses(),
            unsafe_windows: self.unsafe_window_holds(),
            holds_in_unsafe_windows: self.unsafe_windows.len(),
            overlaps: self.overlaps.len(),
            starved: self.starved.len() + self.unfinished.len(),
            panics: self.panics.len(),
            inconsistencies: self.inconsistencies.len(),
            leaked_holds: self.leaked.len(),
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
    /// Overlaps outside signalled lease loss: must be 0.
    pub overlaps: usize,
    /// Attempts or holds that never completed: must be 0.
    pub starved: usize,
    /// Panics: must be 0.
    pub panics: usize,
    /// Contradictions in the history: must be 0.
    pub inconsistencies: usize,
    /// Holds left in Redis after the run: must be 0.
    pub leaked_holds: usize,
    /// Named maxima in milliseconds.
    pub figures: BTreeMap<String, f64>,
}

impl Summary {
    /// Adds `other` to this summary.
    pub fn merge(&mut self, other: &Summary) {
        if self.scenario != other.scenario {
            self.scenario.clear();
        }
        self.runs += other.runs;
        self.processes += other.processes;
        self.attempts += other.attempts;
        self.acquisitions += other.acquisitions;
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
        self.starved += other.starved;
        self.panics += other.panics;
        self.inconsistencies += other.inconsistencies;
        self.leaked_holds += other.leaked_holds;
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
    acquired: Option<(u64, Option<i64>)>,
    released: Option<(u64, Option<i64>, bool)>,
    ended: Option<u64>,
}

struct Checker<'a> {
    records: &'a [Record],
    report: Report,
    killed: HashMap<String, u64>,
}

impl<'a> Checker<'a> {
    fn new(records: &'a [Record]) -> Self {
        Self {
            records,
            report: Report::default(),
            killed: HashMap::new(),
        }
    }

    fn run(mut self) -> Report {
        let attempts = self.assemble();
        let holds = self.holds(&attempts);
        for (name, mut holds) in holds {
            holds.sort_by_key(|h| (h.acquired_ns, h.end_ns));
            self.check_fences_unique(&name, &holds);
            self.sweep(&name, &holds);
            self.check_fences_moved(&name, &holds);
            self.check_order_and_handoffs(&name, &holds);
            let _ = self.report.holds.insert(name, holds);
        }
        self.report
    }

    /// Groups attempt events by attempt; collects process-level events.
    fn assemble(&mut self) -> BTreeMap<AttemptId, Attempt> {
        let mut attempts: BTreeMap<AttemptId, Attempt> = BTreeMap::new();
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
                    }
                    Event::Panicked { message } => {
                        report.panics.push(format!("{}: {message}", record.process));
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
                Event::Started { name, wait_ms, .. } => {
                    let fresh = attempt.started.is_none();
                    attempt.name = Some(name.clone());
                    attempt.started = Some(record.at_ns);
                    attempt.wait_ms = *wait_ms;
                    report.attempts += 1;
                    fresh
                }
                Event::Acquired { fence, .. } => {
                    attempt.acquired = Some((record.at_ns, *fence));
                    attempt.started.is_some() && !outcome_seen
                }
                Event::Released {
                    fence_after,
                    lease_lost,
                    unlock_error,
                    unlock_ms,
                    ..
                } => {
                    let fresh = attempt.released.is_none();
                    attempt.released = Some((record.at_ns, *fence_after, *lease_lost));
                    attempt.ended = Some(record.at_ns + unlock_ms * 1_000_000);
                    if let Some(error) = unlock_error {
                        *report.unlock_errors.entry(error.clone()).or_default() += 1;
                    }
                    report.max_unlock_ms = report.max_unlock_ms.max(*unlock_ms);
                    attempt.acquired.is_some() && fresh
                }
                Event::Cancelled { .. } | Event::GaveUp { .. } | Event::Failed { .. } => {
                    match &record.event {
                        Event::Cancelled { .. } => report.cancelled += 1,
                        Event::GaveUp { .. } => report.gave_up += 1,
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
                    (killed.max(acquired), None, false, true)
                }
                (None, None) => {
                    self.report.unfinished.push(id.clone());
                    continue;
                }
            };
            holds.entry(name.clone()).or_default().push(Hold {
                id: id.clone(),
                name: name.clone(),
                started_ns: started,
                acquired_ns: acquired,
                end_ns,
                crashed,
                fence,
                fence_after,
                lease_lost,
            });
        }
        holds
    }

    fn overrun(&mut self, wait_ms: Option<u64>, took_ns: u64) {
        if let Some(wait_ms) = wait_ms {
            let over = took_ns.saturating_sub(wait_ms * 1_000_000);
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

    /// Finds every pair of holds whose intervals overlap: a sweep in acquisition order keeping the
    /// holds still open.
    fn sweep(&mut self, name: &str, holds: &[Hold]) {
        let mut open: Vec<&Hold> = Vec::new();
        for hold in holds {
            open.retain(|o| o.end_ns > hold.acquired_ns);
            for earlier in &open {
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
            open.push(hold);
        }
    }

    /// Finds holds inside which the fence moved: someone else's `INCR` ran while they held the lock.
    fn check_fences_moved(&mut self, name: &str, holds: &[Hold]) {
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
            if intruders.len() as i64 != after - fence {
                self.overlap(name, hold, None, 0, fence_only);
            }
            for intruder in intruders {
                self.overlap(name, hold, Some(intruder), 0, fence_only);
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
        let known = first.lease_lost || second.is_some_and(|s| s.lease_lost);
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
            overlap_ns,
            evidence,
        });
    }

    /// For consecutive holds that do not overlap: the fences must grow with the clock, and a waiter
    /// that was already waiting when the lock was released counts as a hand-off.
    fn check_order_and_handoffs(&mut self, name: &str, holds: &[Hold]) {
        for pair in holds.windows(2) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

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
            self.seq += 1;
            let seq = self.seq;
            self.record(
                process,
                at_ms,
                Event::Started {
                    task: 0,
                    seq,
                    name: name.into(),
                    wait_ms: None,
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
                },
            );
        }

        /// A whole hold: started, acquired with `fence`, released with `fence_after`.
        fn hold(
            &mut self,
            process: &str,
            name: &str,
            [started, acquired, released]: [u64; 3],
            fence: i64,
            fence_after: i64,
            lost: bool,
        ) -> u64 {
            let seq = self.start(process, name, started);
            self.acquire(process, seq, acquired, fence);
            self.release(process, seq, released, fence_after, lost);
            seq
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
        assert!(report.unsafe_windows.is_empty());
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
        s.record(
            "w2",
            110,
            Event::Fault {
                kind: FaultKind::KillHolder,
            },
        );
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.crashed, 1);
    }

    #[test]
    fn a_killed_holder_ends_at_its_death_and_the_next_waiter_counts_the_lease_expiry() {
        let mut s = clean();
        let victim = s.start("w3", "a", 100);
        s.acquire("w3", victim, 101, 4);
        s.record(
            "w3",
            150,
            Event::Fault {
                kind: FaultKind::KillHolder,
            },
        );
        s.hold("w1", "a", [120, 1_150, 1_160], 5, 5, false);
        let report = s.check();
        report.assert_sound();
        assert_eq!(report.max_handoff(true), Some(Duration::from_millis(1_000)));
        assert_eq!(report.faults.get(&FaultKind::KillHolder), Some(&1));
        assert_eq!(report.crashed, 1);
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
        s.record(
            "w1",
            0,
            Event::Started {
                task: 0,
                seq: 1,
                name: "a".into(),
                wait_ms: Some(100),
            },
        );
        s.record("w1", 130, Event::GaveUp { task: 0, seq: 1 });
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
}
