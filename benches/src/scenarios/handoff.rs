//! Scenario 8: local hand-off (lock cohorting, issue 13), on against off.
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
//! - **remote waiter**: `processes` with local hand-off and one "remote" process without it (standing
//!   in for a Redisson client, which never hands off), against the same processes all without. Its
//!   wait p99 shows whether the hand-off streaks of the others starve it.

use serde::Serialize;

use crate::Result;
use crate::clock::epoch_ns;
use crate::contenders::Kind;
use crate::hot::{Record, Section, Until, WorkerTask, Workers};
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
    /// For every process count, all with local hand-off, then all without.
    pub(crate) scaling: Vec<Setting>,
    /// `processes` with local hand-off and the remote process (the last) without.
    pub(crate) remote_mixed: Setting,
    /// The same processes, all without local hand-off.
    pub(crate) remote_all_off: Setting,
}

impl Measured {
    /// The setting of `processes` processes all with local hand-off `on`, or all without.
    pub(crate) fn uniform(&self, processes: usize, on: bool) -> Option<&Setting> {
        self.scaling
            .iter()
            .find(|s| s.processes == processes && s.local_handoff.iter().all(|&h| h == on))
    }

    /// The headline with local hand-off `on` or off.
    pub(crate) fn headline(&self, on: bool) -> Option<&Setting> {
        self.uniform(self.processes, on)
    }
}

/// One setting: its rounds, and their medians and ranges.
#[derive(Debug, Serialize)]
pub(crate) struct Setting {
    pub(crate) processes: usize,
    pub(crate) tasks_per_process: usize,
    pub(crate) acquisitions_per_task: usize,
    /// `Config::local_handoff` of each process.
    pub(crate) local_handoff: Vec<bool>,
    pub(crate) acquisitions_per_sec: Spread,
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
    fn of(params: Params, local_handoff: Vec<bool>, rounds: Vec<Round>) -> Self {
        let processes = local_handoff.len();
        let spread = |f: fn(&Round) -> f64| Spread::of(rounds.iter().map(f));
        Self {
            processes,
            tasks_per_process: params.tasks_per_process,
            acquisitions_per_task: params.per_task(processes),
            acquisitions_per_sec: spread(|r| r.acquisitions_per_sec),
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

/// Runs the scenario: the headline and the scaling, then the remote waiter.
pub(crate) async fn run(url: &str, probe: &mut Probe, params: Params) -> Result<Measured> {
    let mut scaling = Vec::new();
    for n in params.process_counts() {
        crate::progress(&format!(
            "scenario 8: local hand-off on / off, {n} × {} × {} (processes × tasks × acquisitions)",
            params.tasks_per_process,
            params.per_task(n)
        ));
        scaling.extend(compare(url, probe, params, [vec![true; n], vec![false; n]]).await?);
    }
    let n = params.processes;
    crate::progress(&format!(
        "scenario 8: remote waiter, {n} processes with local hand-off + 1 without / all {} without",
        n + 1
    ));
    let mixed = [vec![true; n], vec![false]].concat();
    let [remote_mixed, remote_all_off] =
        compare(url, probe, params, [mixed, vec![false; n + 1]]).await?;
    Ok(Measured {
        processes: params.processes,
        scaling,
        remote_mixed,
        remote_all_off,
    })
}

/// Runs each setting (`Config::local_handoff` of each process) `params.rounds` times, in alternating
/// order.
async fn compare<const K: usize>(
    url: &str,
    probe: &mut Probe,
    params: Params,
    settings: [Vec<bool>; K],
) -> Result<[Setting; K]> {
    let mut rounds: [Vec<Round>; K] = std::array::from_fn(|_| Vec::new());
    for round in 0..params.rounds {
        for k in 0..K {
            let i = (round + k) % K;
            rounds[i].push(run_round(url, probe, params, &settings[i]).await?);
        }
    }
    let mut settings = settings.into_iter();
    let mut rounds = rounds.into_iter();
    Ok(std::array::from_fn(|_| {
        Setting::of(
            params,
            settings.next().unwrap_or_default(),
            rounds.next().unwrap_or_default(),
        )
    }))
}

/// One round: a process for each entry of `local_handoff`, on a fresh name and counter.
async fn run_round(
    url: &str,
    probe: &mut Probe,
    params: Params,
    local_handoff: &[bool],
) -> Result<Round> {
    let name = format!("bench:handoff:{}", uuid::Uuid::new_v4().simple());
    let counter = format!("{name}:counter");
    let workers = Workers::start(local_handoff.iter().map(|&on| WorkerTask {
        kind: Kind::Rlock,
        url: url.to_owned(),
        name: name.clone(),
        tasks: params.tasks_per_process,
        local_handoff: Some(on),
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
            "!!! MUTUAL EXCLUSION BROKEN (local hand-off {local_handoff:?}): counter {} after {} \
             acquisitions, {} overlaps",
            round.counter, round.acquisitions, round.overlaps
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
        let setting = Setting::of(PARAMS, vec![true, false], rounds);
        assert_eq!(setting.processes, 2);
        assert_eq!(setting.acquisitions_per_task, 300);
        assert!((setting.scripts_per_acquisition.median - 3.0).abs() < 1e-12);
        assert!((setting.wait_p99_us.median - 4.0).abs() < 1e-12);
        assert!((setting.process_wait_p99_us[0].median - 2.0).abs() < 1e-12);
        assert!((setting.process_wait_p99_us[1].median - 4.0).abs() < 1e-12);
        assert!((setting.process_wait_p99_us[1].max - 6.0).abs() < 1e-12);
        assert_eq!(setting.broken_rounds, 1);
    }
}
