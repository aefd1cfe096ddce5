//! Scenario 8: local hand-off (lock cohorting, issues 13 and 29), on against off, against the
//! critical section alone and against rslock.
//!
//! rlock worker processes ([`crate::hot`]), each with one client and `tasks_per_process` tasks, loop
//! on one hot name without think time: `lock()`, then `GET` and `SET` of a counter key (counter + 1)
//! through the process' own plain connection, then `guard.unlock()`; each task acquires a fixed
//! number of times. The workers differ only in `Config::local_handoff`, which each gets as an
//! argument. For every round the runner measures:
//!
//! - **acquisitions/s**: all acquisitions ÷ the time from the go (read just before it is sent) to the
//!   last `unlock()` returning, on the shared clock;
//! - **client-sent scripts per acquisition**: the `EVALSHA` (and `EVAL`) calls counted by `INFO
//!   commandstats` from after the workers warmed up until they all exited, ÷ acquisitions. Scripts
//!   cannot call scripts, so all of them were sent by clients, and the runner sends none;
//! - **wait** (`lock()` called → returned): p50 and p99 over all acquisitions, and p99 per process;
//! - **mutual exclusion**: the counter at the end must equal the acquisitions, and no acquisition may
//!   come before the previous holder called unlock (overlaps). A round that breaks it is reported on
//!   stderr at once, and in the table.
//!
//! Settings that are compared run in alternating rounds (the order rotates every round), so that
//! changes of load on the machine hit them alike, and are reported as the median and range of their
//! rounds:
//!
//! - **headline and scaling**: `N` processes all with local hand-off against all without, for each
//!   `N` of `scaling` and for `processes`. With `N` processes each task acquires
//!   `acquisitions_per_task · processes / N` times, so every run makes the same number of
//!   acquisitions (and 8 processes do not make the suite long).
//!   Beside them, at every `N`, the same `N` processes with rslock instead of rlock (the peer: the same
//!   workers, section and counts; its scripts per acquisition are its unlock's), so that rlock ÷ the
//!   peer is measured side by side.
//! - **no lock** (issue 29's ceiling): the same critical section, as many times as the headline makes
//!   acquisitions, back to back by one task of the runner on a plain connection with no lock at all;
//!   one round at the start of every round of the scaling, so that it sees the same load. Every
//!   setting's acquisitions/s is divided by its median ([`Setting::per_no_lock`]).
//! - **remote waiter**: `processes` with local hand-off and one "remote" process without it (standing
//!   in for a Redisson client, which never hands off), against the same processes all without. Its
//!   wait p99 shows whether the hand-off streaks of the others starve it.

use serde::Serialize;

use crate::Result;
use crate::clock::epoch_ns;
use crate::contenders::ContenderKind;
use crate::hot::{self, Record, Section, Until, WorkerTask, Workers};
use crate::probe::{CommandStats, Probe};
use crate::stats::{Spread, Summary, ratio};

/// The commands that run a script: what a client sends to run one.
const SCRIPT_COMMANDS: [&str; 2] = ["evalsha", "eval"];

#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Params {
    /// The headline's process count, and the processes with local hand-off beside the remote one.
    pub(crate) processes: usize,
    pub(crate) tasks_per_process: usize,
    /// Acquisitions per task with `processes` processes (see [`Params::per_task`]).
    pub(crate) acquisitions_per_task: usize,
    /// The process counts of the scaling.
    pub(crate) scaling: &'static [usize],
    /// Rounds of every setting.
    pub(crate) rounds: usize,
}

impl Params {
    /// Acquisitions per task with `processes` processes: every run makes as many acquisitions as the
    /// headline (as near as whole numbers allow, at least one per task).
    pub(crate) fn per_task(self, processes: usize) -> usize {
        (self.acquisitions_per_task * self.processes / processes.max(1)).max(1)
    }

    /// The headline's acquisitions in all: the no-lock loop runs as many sections.
    fn sections(self) -> usize {
        self.processes * self.tasks_per_process * self.acquisitions_per_task
    }

    /// The process counts to run with local hand-off on and off: the scaling's and the headline's.
    fn process_counts(self) -> Vec<usize> {
        let mut counts: Vec<usize> = self
            .scaling
            .iter()
            .copied()
            .chain([self.processes])
            .collect();
        counts.sort_unstable();
        counts.dedup();
        counts
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Measured {
    /// The headline's process count.
    pub(crate) processes: usize,
    /// The critical section alone: one task, no lock.
    pub(crate) no_lock: NoLock,
    /// For every process count: rlock all with local hand-off, all without, then rslock.
    pub(crate) scaling: Vec<Setting>,
    /// `processes` with local hand-off and the remote process (the last) without.
    pub(crate) remote_mixed: Setting,
    /// The same processes, all without local hand-off.
    pub(crate) remote_all_off: Setting,
}

impl Measured {
    /// The rlock setting of `processes` processes all with local hand-off `on`, or all without.
    pub(crate) fn uniform(&self, processes: usize, on: bool) -> Option<&Setting> {
        self.scaling
            .iter()
            .find(|s| s.processes == processes && s.all_rlock(on))
    }

    /// The headline with local hand-off `on` or off.
    pub(crate) fn headline(&self, on: bool) -> Option<&Setting> {
        self.uniform(self.processes, on)
    }

    /// rslock with `processes` processes.
    pub(crate) fn peer(&self, processes: usize) -> Option<&Setting> {
        self.scaling
            .iter()
            .find(|s| s.processes == processes && s.kind == ContenderKind::Rslock)
    }

    /// Divides every setting's acquisitions/s (medians) by the no-lock loop's, and every rlock
    /// setting's by rslock's with as many processes.
    fn relate(&mut self) {
        let no_lock = self.no_lock.sections_per_sec.median;
        let peers: Vec<(usize, f64)> = self
            .scaling
            .iter()
            .filter(|s| s.kind == ContenderKind::Rslock)
            .map(|s| (s.processes, s.acquisitions_per_sec.median))
            .collect();
        let settings = self
            .scaling
            .iter_mut()
            .chain([&mut self.remote_mixed, &mut self.remote_all_off]);
        for setting in settings {
            let rate = setting.acquisitions_per_sec.median;
            setting.per_no_lock = ratio(rate, no_lock);
            setting.per_peer = peers
                .iter()
                .find(|&&(n, _)| setting.kind == ContenderKind::Rlock && n == setting.processes)
                .map(|&(_, peer)| ratio(rate, peer));
        }
    }
}

/// The critical section alone, run back to back by one task with no lock: what a hot lock around it
/// can reach at best.
#[derive(Debug, Serialize)]
pub(crate) struct NoLock {
    /// Sections per round: the headline's acquisitions in all.
    pub(crate) sections: usize,
    pub(crate) sections_per_sec: Spread,
    pub(crate) rounds: Vec<NoLockRound>,
}

impl NoLock {
    fn of(params: Params, rounds: Vec<NoLockRound>) -> Self {
        Self {
            sections: params.sections(),
            sections_per_sec: Spread::of(rounds.iter().map(|r| r.sections_per_sec)),
            rounds,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct NoLockRound {
    /// From the first section's `GET` sent to the last section's `SET` answered.
    pub(crate) seconds: f64,
    pub(crate) sections_per_sec: f64,
}

/// What a setting runs: which lock, and whether each of its processes hands off locally.
#[derive(Clone, Debug)]
struct Shape {
    kind: ContenderKind,
    /// `Config::local_handoff` of each process; all false for rslock, which has nothing like it.
    local_handoff: Vec<bool>,
}

impl Shape {
    fn rlock(local_handoff: Vec<bool>) -> Self {
        Self {
            kind: ContenderKind::Rlock,
            local_handoff,
        }
    }

    fn rslock(processes: usize) -> Self {
        Self {
            kind: ContenderKind::Rslock,
            local_handoff: vec![false; processes],
        }
    }
}

/// One setting: its rounds, and their medians and ranges.
#[derive(Debug, Serialize)]
pub(crate) struct Setting {
    /// rlock, or the peer (rslock).
    pub(crate) kind: ContenderKind,
    pub(crate) processes: usize,
    pub(crate) tasks_per_process: usize,
    pub(crate) acquisitions_per_task: usize,
    /// `Config::local_handoff` of each process (all false for rslock).
    pub(crate) local_handoff: Vec<bool>,
    pub(crate) acquisitions_per_sec: Spread,
    /// The median acquisitions/s ÷ the median of the no-lock loop's sections/s.
    pub(crate) per_no_lock: f64,
    /// rlock's median acquisitions/s ÷ rslock's with as many processes; none for rslock itself, or
    /// without such an rslock setting.
    pub(crate) per_peer: Option<f64>,
    pub(crate) scripts_per_acquisition: Spread,
    pub(crate) wait_p50_us: Spread,
    pub(crate) wait_p99_us: Spread,
    /// Each process's wait p99.
    pub(crate) process_wait_p99_us: Vec<Spread>,
    /// Rounds whose counter missed acquisitions or that had overlaps (must be 0).
    pub(crate) broken_rounds: usize,
    pub(crate) rounds: Vec<Round>,
}

impl Setting {
    /// The setting of `shape`'s rounds; [`Measured::relate`] sets the ratios.
    fn of(params: Params, shape: Shape, rounds: Vec<Round>) -> Self {
        let Shape {
            kind,
            local_handoff,
        } = shape;
        let processes = local_handoff.len();
        let spread = |f: fn(&Round) -> f64| Spread::of(rounds.iter().map(f));
        Self {
            kind,
            processes,
            tasks_per_process: params.tasks_per_process,
            acquisitions_per_task: params.per_task(processes),
            acquisitions_per_sec: spread(|r| r.acquisitions_per_sec),
            per_no_lock: f64::NAN,
            per_peer: None,
            scripts_per_acquisition: spread(|r| r.scripts_per_acquisition),
            wait_p50_us: spread(|r| r.wait.p50_us),
            wait_p99_us: spread(|r| r.wait.p99_us),
            process_wait_p99_us: (0..processes)
                .map(|p| Spread::of(rounds.iter().map(|r| r.process_wait[p].p99_us)))
                .collect(),
            broken_rounds: rounds.iter().filter(|r| !r.exclusive()).count(),
            local_handoff,
            rounds,
        }
    }

    /// Whether this is rlock with local hand-off `on` in every process (or off in every one).
    pub(crate) fn all_rlock(&self, on: bool) -> bool {
        self.kind == ContenderKind::Rlock && self.local_handoff.iter().all(|&h| h == on)
    }
}

/// One run of one setting.
#[derive(Debug, Serialize)]
pub(crate) struct Round {
    pub(crate) acquisitions: usize,
    /// From the go to the last unlock returning.
    pub(crate) seconds: f64,
    pub(crate) acquisitions_per_sec: f64,
    pub(crate) scripts_per_acquisition: f64,
    /// Every command Redis counted, per acquisition (the counter's `GET` and `SET` among them).
    pub(crate) commands_per_acquisition: std::collections::BTreeMap<String, f64>,
    pub(crate) wait: Summary,
    /// The wait of each process's acquisitions.
    pub(crate) process_wait: Vec<Summary>,
    /// Acquisitions that came before the previous holder called unlock.
    pub(crate) overlaps: usize,
    /// The counter at the end.
    pub(crate) counter: u64,
}

impl Round {
    fn of(
        processes: usize,
        go_ns: i64,
        mut records: Vec<Record>,
        calls: &CommandStats,
        counter: u64,
    ) -> Self {
        records.sort_by_key(|r| r.acquired_ns);
        let acquisitions = records.len();
        let last_unlock_ns = records
            .iter()
            .map(|r| r.unlock_returned_ns)
            .max()
            .unwrap_or(go_ns);
        let seconds = (last_unlock_ns - go_ns) as f64 / 1e9;
        let mut process_waits = vec![Vec::new(); processes];
        for record in &records {
            process_waits[record.process].push(record.wait_ns);
        }
        let mut waits: Vec<i64> = records.iter().map(|r| r.wait_ns).collect();
        Self {
            acquisitions,
            seconds,
            acquisitions_per_sec: ratio(acquisitions as f64, seconds),
            scripts_per_acquisition: ratio(
                calls.sum_of(&SCRIPT_COMMANDS) as f64,
                acquisitions as f64,
            ),
            commands_per_acquisition: calls.per(acquisitions as u64),
            wait: Summary::of_ns(&mut waits),
            process_wait: process_waits
                .iter_mut()
                .map(|waits| Summary::of_ns(waits))
                .collect(),
            overlaps: records
                .windows(2)
                .filter(|pair| pair[1].overlaps(&pair[0]))
                .count(),
            counter,
        }
    }

    /// Whether mutual exclusion held: every increment counted, no overlap.
    pub(crate) fn exclusive(&self) -> bool {
        self.overlaps == 0 && self.counter == self.acquisitions as u64
    }
}

/// Runs the scenario: the headline and the scaling (with the no-lock loop and the peer), then the
/// remote waiter.
pub(crate) async fn run(url: &str, probe: &mut Probe, params: Params) -> Result<Measured> {
    let mut no_lock = Vec::new();
    let mut scaling = Vec::new();
    for n in params.process_counts() {
        crate::progress(&format!(
            "scenario 8: local hand-off on / off, rslock, no lock; {n} × {} × {} (processes × \
             tasks × acquisitions)",
            params.tasks_per_process,
            params.per_task(n)
        ));
        let shapes = [
            Shape::rlock(vec![true; n]),
            Shape::rlock(vec![false; n]),
            Shape::rslock(n),
        ];
        scaling.extend(compare(url, probe, params, shapes, Some(&mut no_lock)).await?);
    }
    let n = params.processes;
    crate::progress(&format!(
        "scenario 8: remote waiter, {n} processes with local hand-off + 1 without / all {} without",
        n + 1
    ));
    let mixed = Shape::rlock([vec![true; n], vec![false]].concat());
    let all_off = Shape::rlock(vec![false; n + 1]);
    let [remote_mixed, remote_all_off] =
        compare(url, probe, params, [mixed, all_off], None).await?;
    let mut measured = Measured {
        processes: params.processes,
        no_lock: NoLock::of(params, no_lock),
        scaling,
        remote_mixed,
        remote_all_off,
    };
    measured.relate();
    Ok(measured)
}

/// Runs each setting `params.rounds` times, in alternating order; each round starts with a round of
/// the no-lock loop when `no_lock` collects them.
async fn compare<const K: usize>(
    url: &str,
    probe: &mut Probe,
    params: Params,
    shapes: [Shape; K],
    mut no_lock: Option<&mut Vec<NoLockRound>>,
) -> Result<[Setting; K]> {
    let mut rounds: [Vec<Round>; K] = std::array::from_fn(|_| Vec::new());
    for round in 0..params.rounds {
        if let Some(no_lock) = no_lock.as_deref_mut() {
            no_lock.push(run_no_lock(url, probe, params).await?);
        }
        for k in 0..K {
            let i = (round + k) % K;
            rounds[i].push(run_round(url, probe, params, &shapes[i]).await?);
        }
    }
    let settings: Vec<Setting> = shapes
        .into_iter()
        .zip(rounds)
        .map(|(shape, rounds)| Setting::of(params, shape, rounds))
        .collect();
    settings
        .try_into()
        .map_err(|_| "as many settings as shapes".into())
}

/// One round of the no-lock loop, on a fresh counter.
async fn run_no_lock(url: &str, probe: &mut Probe, params: Params) -> Result<NoLockRound> {
    let key = format!("bench:handoff:no-lock:{}", uuid::Uuid::new_v4().simple());
    let sections = params.sections();
    let took = hot::back_to_back(url, &Section::Counter { key: key.clone() }, sections).await?;
    let counter: Option<u64> = probe.query(redis::cmd("GET").arg(&key)).await?;
    let _: u64 = probe.query(redis::cmd("DEL").arg(&key)).await?;
    if counter != Some(sections as u64) {
        return Err(
            format!("the no-lock loop left its counter at {counter:?}, not {sections}").into(),
        );
    }
    let seconds = took.as_secs_f64();
    Ok(NoLockRound {
        seconds,
        sections_per_sec: ratio(sections as f64, seconds),
    })
}

/// One round: a process for each entry of `shape.local_handoff`, on a fresh name and counter.
async fn run_round(url: &str, probe: &mut Probe, params: Params, shape: &Shape) -> Result<Round> {
    let local_handoff = &shape.local_handoff;
    let name = format!("bench:handoff:{}", uuid::Uuid::new_v4().simple());
    let counter = format!("{name}:counter");
    let workers = Workers::start(local_handoff.iter().map(|&on| WorkerTask {
        kind: shape.kind,
        url: url.to_owned(),
        name: name.clone(),
        tasks: params.tasks_per_process,
        local_handoff: (shape.kind == ContenderKind::Rlock).then_some(on),
        section: Section::Counter {
            key: counter.clone(),
        },
        think_us: 0,
    }))
    .await?;
    let before = probe.command_stats().await?;
    let go_ns = epoch_ns();
    let per_task = params.per_task(local_handoff.len());
    let records = workers.run(Until::Count { per_task }).await?;
    let calls = probe.command_stats().await?.since(&before);
    // After the count, so that these are not counted.
    let final_count: Option<u64> = probe.query(redis::cmd("GET").arg(&counter)).await?;
    let _: u64 = probe.query(redis::cmd("DEL").arg(&counter)).await?;
    let round = Round::of(
        local_handoff.len(),
        go_ns,
        records,
        &calls,
        final_count.unwrap_or(0),
    );
    if !round.exclusive() {
        eprintln!(
            "!!! MUTUAL EXCLUSION BROKEN ({}, local hand-off {local_handoff:?}): counter {} after \
             {} acquisitions, {} overlaps",
            shape.kind.label(),
            round.counter,
            round.acquisitions,
            round.overlaps
        );
    }
    Ok(round)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: Params = Params {
        processes: 2,
        tasks_per_process: 4,
        acquisitions_per_task: 300,
        scaling: &[1, 2, 4, 8],
        rounds: 3,
    };

    #[test]
    fn every_process_count_makes_the_same_acquisitions() {
        assert_eq!(PARAMS.per_task(1), 600);
        assert_eq!(PARAMS.per_task(2), 300);
        assert_eq!(PARAMS.per_task(3), 200);
        assert_eq!(PARAMS.per_task(8), 75);
        assert_eq!(PARAMS.per_task(10_000), 1);
        assert_eq!(PARAMS.process_counts(), [1, 2, 4, 8]);
        let odd = Params {
            processes: 3,
            scaling: &[4, 1],
            ..PARAMS
        };
        assert_eq!(odd.process_counts(), [1, 3, 4]);
        assert_eq!(PARAMS.sections(), 2_400);
    }

    fn record(process: usize, acquired_ns: i64, wait_ns: i64) -> Record {
        Record {
            process,
            task: 0,
            wait_ns,
            acquired_ns,
            unlock_called_ns: acquired_ns + 10,
            unlock_returned_ns: acquired_ns + 20,
        }
    }

    fn calls(evalsha: u64) -> CommandStats {
        let mut calls = CommandStats::default();
        calls.add_calls("evalsha", evalsha);
        calls.add_calls("get", 4);
        calls
    }

    #[test]
    fn a_round_is_timed_to_the_last_unlock_and_split_by_process() {
        // Out of order, as the processes report them.
        let records = vec![
            record(1, 1_030, 3_000),
            record(0, 1_000, 1_000),
            record(0, 1_060, 2_000),
            record(1, 1_090, 4_000),
        ];
        // 1 ms from the go to the last unlock returned (1_090 + 20).
        let go_ns = 1_110 - 1_000_000;
        let round = Round::of(2, go_ns, records, &calls(10), 4);
        assert!((round.seconds - 1e-3).abs() < 1e-12);
        assert!((round.acquisitions_per_sec - 4_000.0).abs() < 1e-6);
        assert!((round.scripts_per_acquisition - 2.5).abs() < 1e-12);
        assert!((round.commands_per_acquisition["get"] - 1.0).abs() < 1e-12);
        assert_eq!(round.wait.count, 4);
        assert!((round.process_wait[0].p99_us - 2.0).abs() < 1e-12);
        assert!((round.process_wait[1].p99_us - 4.0).abs() < 1e-12);
        assert_eq!(round.overlaps, 0);
        assert!(round.exclusive());
    }

    #[test]
    fn a_lost_increment_or_an_overlap_breaks_exclusion() {
        let records = || vec![record(0, 0, 1), record(1, 100, 1)];
        assert!(!Round::of(2, 0, records(), &calls(4), 1).exclusive());
        // The second acquisition before the first holder called unlock.
        let overlapping = vec![record(0, 0, 1), record(1, 5, 1)];
        let round = Round::of(2, 0, overlapping, &calls(4), 2);
        assert_eq!(round.overlaps, 1);
        assert!(!round.exclusive());
    }

    #[test]
    fn a_setting_takes_the_median_of_its_rounds() {
        // Two acquisitions a round; the last round lost an increment.
        let rounds: Vec<Round> = [(1_000, 2), (3_000, 2), (2_000, 1)]
            .into_iter()
            .map(|(wait_ns, counter)| {
                let records = vec![record(0, 0, wait_ns), record(1, 100, 2 * wait_ns)];
                Round::of(2, 0, records, &calls(6), counter)
            })
            .collect();
        let setting = Setting::of(PARAMS, Shape::rlock(vec![true, false]), rounds);
        assert_eq!(setting.processes, 2);
        assert_eq!(setting.acquisitions_per_task, 300);
        assert!((setting.scripts_per_acquisition.median - 3.0).abs() < 1e-12);
        assert!((setting.wait_p99_us.median - 4.0).abs() < 1e-12);
        assert!((setting.process_wait_p99_us[0].median - 2.0).abs() < 1e-12);
        assert!((setting.process_wait_p99_us[1].median - 4.0).abs() < 1e-12);
        assert!((setting.process_wait_p99_us[1].max - 6.0).abs() < 1e-12);
        assert_eq!(setting.broken_rounds, 1);
    }

    /// A setting of `shape` whose one round made two acquisitions in `seconds`.
    fn setting(shape: Shape, seconds: f64) -> Setting {
        let end_ns = (seconds * 1e9) as i64 - 20;
        let records = vec![record(0, 0, 1), record(0, end_ns, 1)];
        let processes = shape.local_handoff.len();
        Setting::of(
            PARAMS,
            shape,
            vec![Round::of(processes, 0, records, &calls(2), 2)],
        )
    }

    #[test]
    fn settings_are_divided_by_the_no_lock_loop_and_by_the_peer_of_their_process_count() {
        let no_lock = [(1.0, 4_000.0), (1.0, 2_000.0), (1.0, 3_000.0)]
            .map(|(seconds, sections_per_sec)| NoLockRound {
                seconds,
                sections_per_sec,
            })
            .into();
        // 2 acquisitions in 1 ms: 2,000/s; in 4 ms: 500/s.
        let mut measured = Measured {
            processes: 2,
            no_lock: NoLock::of(PARAMS, no_lock),
            scaling: vec![
                setting(Shape::rlock(vec![true; 2]), 1e-3),
                setting(Shape::rlock(vec![false; 2]), 2e-3),
                setting(Shape::rslock(2), 4e-3),
                setting(Shape::rlock(vec![true]), 1e-3),
            ],
            remote_mixed: setting(Shape::rlock(vec![true, true, false]), 1e-3),
            remote_all_off: setting(Shape::rlock(vec![false; 3]), 1e-3),
        };
        measured.relate();
        assert_eq!(measured.no_lock.sections, 2_400);
        assert!((measured.no_lock.sections_per_sec.median - 3_000.0).abs() < 1e-9);
        let on = measured.headline(true).expect("the headline, on");
        assert!((on.per_no_lock - 2.0 / 3.0).abs() < 1e-9);
        assert!((on.per_peer.expect("rslock at 2") - 4.0).abs() < 1e-9);
        let off = measured.headline(false).expect("the headline, off");
        assert!((off.per_peer.expect("rslock at 2") - 2.0).abs() < 1e-9);
        let peer = measured.peer(2).expect("rslock at 2");
        assert!((peer.per_no_lock - 1.0 / 6.0).abs() < 1e-9);
        assert_eq!(peer.per_peer, None);
        // No rslock with 1 or 3 processes to divide by.
        assert_eq!(measured.uniform(1, true).and_then(|s| s.per_peer), None);
        assert_eq!(measured.remote_mixed.per_peer, None);
        assert!((measured.remote_all_off.per_no_lock - 2.0 / 3.0).abs() < 1e-9);
    }
}
