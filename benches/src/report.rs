//! The results: JSON for machines, markdown tables for people, and the goals judged.

mod burst;

use std::fmt::Write as _;

use serde::Serialize;

use crate::contenders::ContenderKind;
use crate::scenarios::{Plan, Scenario, contended, cycle, handoff, throughput, waiters, watchdog};
use crate::stats::{Spread, Summary, ratio};

#[derive(Debug, Serialize)]
pub(crate) struct Results {
    /// The command line that produced these results.
    pub(crate) command: String,
    pub(crate) started_unix: u64,
    pub(crate) machine: Machine,
    pub(crate) plan: Plan,
    /// The scenarios that ran; the results of the others are empty.
    pub(crate) scenarios: Vec<Scenario>,
    /// The idle single-command round trip (`PING`), measured before scenario 3.
    pub(crate) round_trip: Summary,
    pub(crate) cycle: Vec<cycle::Measured>,
    pub(crate) throughput: Vec<throughput::Measured>,
    pub(crate) contended: Vec<contended::Measured>,
    pub(crate) watchdog: Option<watchdog::Measured>,
    pub(crate) waiters: Option<waiters::Measured>,
    pub(crate) handoff: Option<handoff::Measured>,
    pub(crate) burst: Option<crate::scenarios::burst::Measured>,
    pub(crate) goals: Vec<Goal>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Machine {
    pub(crate) cpus: usize,
    /// `/proc/loadavg` before and after the run.
    pub(crate) load_before: String,
    pub(crate) load_after: String,
    pub(crate) redis_version: String,
    /// Whether the benchmark started its own redis-server.
    pub(crate) private_redis: bool,
}

/// One goal of issue 5, 13, 29 or 38.
#[derive(Debug, Serialize)]
pub(crate) struct Goal {
    pub(crate) goal: &'static str,
    pub(crate) target: &'static str,
    /// The measurement, in words and numbers.
    pub(crate) measured: String,
    /// The ratio (or count) the goal is judged on.
    pub(crate) value: f64,
    pub(crate) met: bool,
}

impl Results {
    /// Judges the goals from the measurements.
    pub(crate) fn judge(&mut self) {
        let mut goals = Vec::new();
        if let Some(raw) = find(&self.cycle, ContenderKind::Raw, |m| m.kind) {
            for (kind, goal) in [
                (
                    ContenderKind::Rlock,
                    "uncontended cycle ≤ 1.15× the raw two-EVALSHA baseline (p50)",
                ),
                (
                    ContenderKind::RlockRecorded,
                    "uncontended cycle with a metrics recorder ≤ 1.15× the raw baseline (p50)",
                ),
            ] {
                let Some(rlock) = find(&self.cycle, kind, |m| m.kind) else {
                    continue;
                };
                let value = ratio(rlock.latency.p50_us, raw.latency.p50_us);
                goals.push(Goal {
                    goal,
                    target: "≤ 1.15",
                    measured: format!(
                        "{} µs vs {} µs",
                        num(rlock.latency.p50_us, 1),
                        num(raw.latency.p50_us, 1)
                    ),
                    value,
                    met: value <= 1.15,
                });
            }
        }
        let rlock = self.contended(ContenderKind::Rlock, false);
        let rslock = self.contended(ContenderKind::Rslock, false);
        if let Some(rlock) = rlock {
            let value = ratio(rlock.handoff.p50_us, self.round_trip.p50_us);
            goals.push(Goal {
                goal: "contended hand-off p50 ≤ 3× the single-command round trip",
                target: "≤ 3",
                measured: format!(
                    "{} µs vs idle PING p50 {} µs",
                    num(rlock.handoff.p50_us, 1),
                    num(self.round_trip.p50_us, 1)
                ),
                value,
                met: value <= 3.0,
            });
        }
        if let (Some(rlock), Some(rslock)) = (rlock, rslock) {
            let value = ratio(rlock.acquisitions_per_sec, rslock.acquisitions_per_sec);
            goals.push(Goal {
                goal: "acquisitions/s on one hot name ≥ 5× rslock's",
                target: "≥ 5",
                measured: format!(
                    "{} /s vs {} /s",
                    num(rlock.acquisitions_per_sec, 0),
                    num(rslock.acquisitions_per_sec, 0)
                ),
                value,
                met: value >= 5.0,
            });
        }
        if let Some(rlock) = rlock {
            let value = rlock.client_commands_per_acquisition;
            goals.push(Goal {
                goal: "≤ 3 Redis commands per contended acquisition (client-sent; no polling)",
                target: "≤ 3",
                measured: format!(
                    "{} client-sent ({} counting script-internal calls)",
                    num(value, 2),
                    num(rlock.all_commands_per_acquisition, 2)
                ),
                value,
                met: value <= 3.0,
            });
        }
        if let Some(w) = &self.watchdog {
            goals.push(Goal {
                goal: "watchdog: ≤ ceil(N/100) renewal scripts per period",
                target: "≤ 1 (÷ ceil(N/100))",
                measured: format!(
                    "{} scripts per period (most of {} whole periods) for {} locks, target {}",
                    w.max_scripts_per_period, w.rounds, w.locks, w.target_scripts_per_period
                ),
                value: ratio(
                    w.max_scripts_per_period as f64,
                    w.target_scripts_per_period as f64,
                ),
                met: w.rounds > 0 && w.max_scripts_per_period <= w.target_scripts_per_period as u64,
            });
        }
        if let Some(m) = &self.waiters {
            goals.push(Goal {
                goal: "10,000 waiters: one subscriber connection",
                target: "= 1",
                measured: format!(
                    "{} connection(s), {} channels, {} waiters",
                    m.subscriber_connections, m.subscribed_channels, m.waiters
                ),
                value: m.subscriber_connections as f64,
                met: m.subscriber_connections == 1,
            });
            goals.push(Goal {
                goal: "10,000 waiters: ≤ 64 MiB resident memory for the process",
                target: "≤ 1 (÷ 64 MiB)",
                measured: format!(
                    "peak {} MiB (VmHWM), {} MiB while waiting (VmRSS)",
                    num(m.after.peak_rss_mib, 1),
                    num(m.waiting.rss_mib, 1)
                ),
                value: m.after.peak_rss_mib / 64.0,
                met: m.after.peak_rss_mib <= 64.0,
            });
        }
        if let Some(h) = &self.handoff {
            goals.extend(handoff_goals(h));
        }
        if let Some(b) = &self.burst {
            goals.extend(burst::goals(b));
        }
        self.goals = goals;
    }

    /// The results as markdown: the main table, the goals, and the command breakdown of scenario 4.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Command: `{}`  \nMachine: {} CPUs, load average before {} / after {}, Redis {}{}\n",
            self.command,
            self.machine.cpus,
            self.machine.load_before,
            self.machine.load_after,
            self.machine.redis_version,
            if self.plan.quick {
                "  \n**Quick smoke run: too short to judge the goals on.**"
            } else {
                ""
            }
        );
        out.push_str(&self.main_table());
        if let Some(h) = &self.handoff {
            out.push('\n');
            out.push_str(&handoff_tables(h));
        }
        if let Some(b) = &self.burst {
            out.push('\n');
            out.push_str(&burst::tables(b));
        }
        out.push('\n');
        out.push_str(&self.goals_table());
        if !self.contended.is_empty() {
            out.push('\n');
            out.push_str(&self.commands_table());
        }
        out
    }

    fn main_table(&self) -> String {
        let mut table = Table::new(&["#", "measure", "rlock", "raw 2×EVALSHA", "rslock", "ratio"]);
        if !self.cycle.is_empty() {
            self.cycle_rows(&mut table);
        }
        let tput = |kind| find(&self.throughput, kind, |m| m.kind);
        if let (Some(r), Some(raw)) = (tput(ContenderKind::Rlock), tput(ContenderKind::Raw)) {
            table.row([
                "2".into(),
                format!(
                    "uncontended throughput, {} tasks, {} connections (cycles/s)",
                    r.concurrency, r.connections
                ),
                num(r.cycles_per_sec, 0),
                num(raw.cycles_per_sec, 0),
                "—".into(),
                format!(
                    "{} rlock/raw",
                    num(ratio(r.cycles_per_sec, raw.cycles_per_sec), 2)
                ),
            ]);
        }

        table.row([
            "3".into(),
            "single-command round trip (PING) p50, idle (µs)".into(),
            num(self.round_trip.p50_us, 1),
            String::new(),
            String::new(),
            String::new(),
        ]);
        if !self.contended.is_empty() {
            self.contended_rows(&mut table);
        }
        if let Some(w) = &self.watchdog {
            watchdog_rows(&mut table, w);
        }
        if let Some(m) = &self.waiters {
            waiters_rows(&mut table, m);
        }
        table.to_string()
    }

    fn cycle_rows(&self, table: &mut Table) {
        let cycle = |kind| find(&self.cycle, kind, |m| m.kind);
        let (c_rlock, c_raw, c_rslock) = (
            cycle(ContenderKind::Rlock),
            cycle(ContenderKind::Raw),
            cycle(ContenderKind::Rslock),
        );
        let c_recorded = cycle(ContenderKind::RlockRecorded);
        let latency = |m: Option<&cycle::Measured>, f: fn(&Summary) -> f64| {
            m.map_or(f64::NAN, |m| f(&m.latency))
        };
        for (label, f) in [
            ("p50", (|s: &Summary| s.p50_us) as fn(&Summary) -> f64),
            ("p99", |s: &Summary| s.p99_us),
        ] {
            let (r, raw, rs) = (latency(c_rlock, f), latency(c_raw, f), latency(c_rslock, f));
            table.row([
                "1, 7".into(),
                format!("uncontended lock+unlock cycle, {label} (µs)"),
                num(r, 1),
                num(raw, 1),
                num(rs, 1),
                format!("{} rlock/raw", num(ratio(r, raw), 2)),
            ]);
            if let Some(recorded) = c_recorded {
                let r = f(&recorded.latency);
                table.row([
                    "1".into(),
                    format!("the same, with a metrics recorder installed, {label} (µs)"),
                    num(r, 1),
                    num(raw, 1),
                    "—".into(),
                    format!("{} rlock/raw", num(ratio(r, raw), 2)),
                ]);
            }
        }
        let commands = |m: Option<&cycle::Measured>| {
            m.map_or("—".into(), |m| {
                format!(
                    "{} / {}",
                    num(m.client_commands_per_cycle, 2),
                    num(m.all_commands_per_cycle, 2)
                )
            })
        };
        table.row([
            "1".into(),
            "commands per cycle, client-sent / all".into(),
            commands(c_rlock),
            commands(c_raw),
            commands(c_rslock),
            String::new(),
        ]);
    }

    fn contended_rows(&self, table: &mut Table) {
        let rlock = self.contended(ContenderKind::Rlock, false);
        let rslock = self.contended(ContenderKind::Rslock, false);
        let contended_row = |table: &mut Table,
                             measure: String,
                             f: &dyn Fn(&contended::Measured) -> f64,
                             digits,
                             ratio_label: &str| {
            let (r, rs) = (rlock.map_or(f64::NAN, f), rslock.map_or(f64::NAN, f));
            table.row([
                "3, 7".into(),
                measure,
                num(r, digits),
                "—".into(),
                num(rs, digits),
                if ratio_label.is_empty() {
                    String::new()
                } else {
                    format!("{} {ratio_label}", num(ratio(r, rs), 2))
                },
            ]);
        };
        if let Some(m) = rlock.or(rslock) {
            contended_row(
                table,
                format!(
                    "contended acquisitions/s, one name, {} processes × {} tasks, {} µs critical section, {} µs think time",
                    m.processes, m.tasks_per_process, m.hold_us, m.think_us
                ),
                &|m| m.acquisitions_per_sec,
                0,
                "rlock/rslock",
            );
        }
        let fairness = |m: Option<&contended::Measured>| {
            m.map_or("—".into(), |m| {
                format!("{} / {}", m.per_task_min, m.per_task_max)
            })
        };
        table.row([
            "3, 7".into(),
            "acquisitions per task, fewest / most".into(),
            fairness(rlock),
            "—".into(),
            fairness(rslock),
            String::new(),
        ]);
        contended_row(
            table,
            "wait p50 (ms)".into(),
            &|m| m.wait.p50_us / 1e3,
            2,
            "",
        );
        contended_row(
            table,
            "wait p99 (ms)".into(),
            &|m| m.wait.p99_us / 1e3,
            2,
            "",
        );
        contended_row(
            table,
            "hand-off p50, next acquire returned − unlock returned (µs)".into(),
            &|m| m.handoff.p50_us,
            1,
            "rlock/rslock",
        );
        contended_row(
            table,
            "hand-off p99 (µs)".into(),
            &|m| m.handoff.p99_us,
            1,
            "",
        );
        contended_row(
            table,
            "hand-offs < 0: acquired before the unlock call returned (%)".into(),
            &|m| ratio(m.handoff.negative as f64, m.handoff.count as f64) * 100.0,
            1,
            "",
        );
        contended_row(
            table,
            "hand-off p50 from the unlock call (µs)".into(),
            &|m| m.handoff_from_unlock_call.p50_us,
            1,
            "",
        );
        contended_row(
            table,
            "mutual-exclusion overlaps (must be 0)".into(),
            &|m| m.overlaps as f64,
            0,
            "",
        );
        contended_row(
            table,
            "round trip (PING) p50 under this load (µs)".into(),
            &|m| m.loaded_round_trip.p50_us,
            1,
            "",
        );
        for (label, f) in [
            (
                "commands per contended acquisition, client-sent",
                (|m: &contended::Measured| m.client_commands_per_acquisition)
                    as fn(&contended::Measured) -> f64,
            ),
            (
                "commands per contended acquisition, all (script-internal too)",
                |m: &contended::Measured| m.all_commands_per_acquisition,
            ),
        ] {
            let (r, rs) = (rlock.map_or(f64::NAN, f), rslock.map_or(f64::NAN, f));
            table.row([
                "4, 7".into(),
                label.into(),
                num(r, 2),
                "—".into(),
                num(rs, 2),
                format!("{} rlock/rslock", num(ratio(r, rs), 2)),
            ]);
        }

        let (barging_rlock, barging_rslock) = (
            self.contended(ContenderKind::Rlock, true),
            self.contended(ContenderKind::Rslock, true),
        );
        if let (Some(r), Some(rs)) = (barging_rlock, barging_rslock) {
            table.row([
                "3, 7".into(),
                "without think time (a releasing task may take the lock straight back): acquisitions/s; per task fewest / most".into(),
                format!("{}; {}", num(r.acquisitions_per_sec, 0), fairness(Some(r))),
                "—".into(),
                format!("{}; {}", num(rs.acquisitions_per_sec, 0), fairness(Some(rs))),
                format!(
                    "{} rlock/rslock",
                    num(ratio(r.acquisitions_per_sec, rs.acquisitions_per_sec), 2)
                ),
            ]);
            table.row([
                "4, 7".into(),
                "without think time: commands per acquisition, client-sent / all".into(),
                format!(
                    "{} / {}",
                    num(r.client_commands_per_acquisition, 2),
                    num(r.all_commands_per_acquisition, 2)
                ),
                "—".into(),
                format!(
                    "{} / {}",
                    num(rs.client_commands_per_acquisition, 2),
                    num(rs.all_commands_per_acquisition, 2)
                ),
                String::new(),
            ]);
        }
    }

    fn goals_table(&self) -> String {
        let mut table = Table::new(&["goal", "target", "measured", "value", "met"]);
        for goal in &self.goals {
            table.row([
                goal.goal.into(),
                goal.target.into(),
                goal.measured.clone(),
                num(goal.value, 2),
                if goal.met { "met" } else { "**not met**" }.into(),
            ]);
        }
        table.to_string()
    }

    /// Scenario 4 by command: what one contended acquisition costs.
    fn commands_table(&self) -> String {
        let mut names: Vec<&String> = self
            .contended
            .iter()
            .flat_map(|m| m.commands_per_acquisition.keys())
            .collect();
        names.sort();
        names.dedup();
        let labels: Vec<String> = self
            .contended
            .iter()
            .map(|m| format!("{}, {} µs think", m.kind.label(), m.think_us))
            .collect();
        let mut headers = vec!["calls per contended acquisition"];
        headers.extend(labels.iter().map(String::as_str));
        let mut table = Table::new(&headers);
        for name in names {
            let mut row = vec![format!("`{name}`")];
            row.extend(self.contended.iter().map(|m| {
                m.commands_per_acquisition
                    .get(name)
                    .map_or("—".into(), |v| num(*v, 3))
            }));
            table.row(row);
        }
        table.to_string()
    }
}

impl Results {
    /// Scenario 3's measurement of `kind`, with think time or without (`barging`).
    fn contended(&self, kind: ContenderKind, barging: bool) -> Option<&contended::Measured> {
        self.contended
            .iter()
            .find(|m| m.kind == kind && (m.think_us == 0) == barging)
    }
}

fn watchdog_rows(table: &mut Table, w: &watchdog::Measured) {
    rlock_only(
        table,
        "5",
        format!(
            "watchdog, {} locks, {} ms timeout: renewal scripts per period, most / mean (target {})",
            w.locks, w.watchdog_timeout_ms, w.target_scripts_per_period
        ),
        format!(
            "{} / {}",
            w.max_scripts_per_period,
            num(w.mean_scripts_per_period, 1)
        ),
    );
    rlock_only(
        table,
        "5",
        "watchdog: keys renewed per period".into(),
        num(w.keys_renewed_per_period, 0),
    );
    rlock_only(
        table,
        "5",
        format!(
            "watchdog: client CPU per {} ms period (ms) / share of one core",
            num(w.period_ms, 0)
        ),
        format!(
            "{} / {} %",
            num(w.cpu_ms_per_period, 2),
            num(w.cpu_percent_of_core, 2)
        ),
    );
    rlock_only(
        table,
        "5",
        "watchdog: least PTTL left at the end (ms) / locks still renewed after release".into(),
        format!("{} / {}", w.min_pttl_ms, w.renewing_after_release),
    );
}

fn waiters_rows(table: &mut Table, m: &waiters::Measured) {
    rlock_only(
        table,
        "6",
        format!(
            "{} waiters on {} names: subscriber connections (channels)",
            m.waiters, m.names
        ),
        format!("{} ({})", m.subscriber_connections, m.subscribed_channels),
    );
    rlock_only(
        table,
        "6",
        "resident memory while waiting / peak (MiB)".into(),
        format!(
            "{} / {}",
            num(m.waiting.rss_mib, 1),
            num(m.after.peak_rss_mib, 1)
        ),
    );
    rlock_only(
        table,
        "6",
        "acquire attempts per waiter until all waited".into(),
        num(m.attempts_per_waiter, 2),
    );
    rlock_only(
        table,
        "6",
        "bytes of one `Lock::lock()` future / of one whole waiter task's future".into(),
        format!("{} / {}", m.lock_future_bytes, m.task_future_bytes),
    );
    rlock_only(
        table,
        "6",
        "time from release until all acquired once (ms)".into(),
        format!("{} ({} acquired)", num(m.all_acquired_ms, 1), m.acquired),
    );
}

/// A row of the main table with a value for rlock alone.
fn rlock_only(table: &mut Table, id: &str, measure: String, value: String) {
    table.row([
        id.into(),
        measure,
        value,
        "—".into(),
        "—".into(),
        String::new(),
    ]);
}

/// Scenario 8's goals (issue 13).
fn handoff_goals(h: &handoff::Measured) -> Vec<Goal> {
    let mut goals = Vec::new();
    if let (Some(on), Some(off)) = (h.headline(true), h.headline(false)) {
        let value = on.acquisitions_per_sec.median;
        goals.push(Goal {
            goal: "≥ 3,000 acquisitions/s with hand-off on (2 × 4 × 300, GET+SET)",
            target: "≥ 3000",
            measured: format!(
                "{} × {} × {}: {} /s (median of {}; hand-off off: {} /s){}",
                on.processes,
                on.tasks_per_process,
                on.acquisitions_per_task,
                num(value, 0),
                on.rounds.len(),
                num(off.acquisitions_per_sec.median, 0),
                broken_note(on),
            ),
            value,
            met: value >= 3_000.0 && on.broken_rounds == 0,
        });
    }
    if let Some(on) = h.headline(true) {
        goals.extend(hot_lock_goals(h, on));
    }
    let on: Vec<&handoff::Setting> = h.scaling.iter().filter(|s| s.all_rlock(true)).collect();
    if !on.is_empty() {
        let value = on
            .iter()
            .map(|s| s.scripts_per_acquisition.median)
            .fold(f64::NEG_INFINITY, f64::max);
        let each: Vec<String> = on
            .iter()
            .map(|s| {
                format!(
                    "N={}: {}",
                    s.processes,
                    num(s.scripts_per_acquisition.median, 2)
                )
            })
            .collect();
        goals.push(Goal {
            goal: "≤ 1.5 client-sent scripts per contended acquisition, at every N",
            target: "≤ 1.5",
            measured: format!("most {} ({}; medians)", num(value, 2), each.join(", ")),
            value,
            met: value <= 1.5,
        });
    }
    let (mixed, off) = (
        remote_p99_ms(&h.remote_mixed),
        remote_p99_ms(&h.remote_all_off),
    );
    let value = ratio(mixed, off);
    goals.push(Goal {
        goal: "remote waiter wait p99 ≤ 2× its p99 when nobody hands off",
        target: "≤ 2",
        measured: format!(
            "{} ms beside {} processes with hand-off vs {} ms with none (medians)",
            num(mixed, 2),
            h.remote_mixed.processes - 1,
            num(off, 2)
        ),
        value,
        met: value <= 2.0,
    });
    goals
}

/// Issue 29's goals for the headline with local hand-off `on`: near the critical section alone, few
/// scripts, far ahead of the peer. (The acceptance figure divides by `redis-benchmark`'s
/// ceiling instead: `scripts/hot-lock.sh`.)
fn hot_lock_goals(h: &handoff::Measured, on: &handoff::Setting) -> Vec<Goal> {
    let shape = format!(
        "{} × {} × {}",
        on.processes, on.tasks_per_process, on.acquisitions_per_task
    );
    let rate = on.acquisitions_per_sec.median;
    let no_lock = h.no_lock.sections_per_sec.median;
    let scripts = on.scripts_per_acquisition.median;
    let mut goals = vec![
        Goal {
            goal: "hot lock with hand-off on ≥ 0.8× this bench's no-lock loop (one Rust task; stricter than the acceptance's redis-benchmark ceiling, scripts/hot-lock.sh)",
            target: "≥ 0.8",
            measured: format!(
                "{shape}: {} /s vs {} sections/s with no lock (medians){}",
                num(rate, 0),
                num(no_lock, 0),
                broken_note(on)
            ),
            value: on.per_no_lock,
            met: on.per_no_lock >= 0.8 && on.broken_rounds == 0,
        },
        Goal {
            goal: "hot lock with hand-off on: ≤ 0.25 client-sent scripts per acquisition",
            target: "≤ 0.25",
            measured: format!("{shape}: {} (median)", num(scripts, 2)),
            value: scripts,
            met: scripts <= 0.25,
        },
    ];
    if let (Some(per_peer), Some(peer)) = (on.per_peer, h.peer(on.processes)) {
        goals.push(Goal {
            goal: "hot lock with hand-off on ≥ 4× rslock's acquisitions/s",
            target: "≥ 4",
            measured: format!(
                "{shape}: {} /s vs {} /s (medians){}",
                num(rate, 0),
                num(peer.acquisitions_per_sec.median, 0),
                broken_note(on)
            ),
            value: per_peer,
            met: per_peer >= 4.0 && on.broken_rounds == 0,
        });
    }
    goals
}

/// The wait p99 of a remote-waiter setting's last process, the remote one (median, ms).
fn remote_p99_ms(setting: &handoff::Setting) -> f64 {
    setting
        .process_wait_p99_us
        .last()
        .map_or(f64::NAN, |p99| p99.median / 1e3)
}

/// Scenario 8's tables: the no-lock loop, hand-off on and off and rslock for every process count, and
/// the remote waiter.
fn handoff_tables(h: &handoff::Measured) -> String {
    let rounds = h.scaling.first().map_or(0, |s| s.rounds.len());
    let mut out = format!(
        "Scenario 8, local hand-off: one name, `lock()` + counter `GET` + `SET` + `unlock()`, no think \
         time; median (min–max) of {rounds} round(s). With N processes each task acquires \
         {} · {} / N times. No lock: the same `GET` + `SET`, {} times back to back by one task, one \
         round before every round of the others ({} in all). rslock: the same workers with the \
         `rslock` crate instead of rlock.\n\n",
        h.headline(true).map_or(0, |s| s.acquisitions_per_task),
        h.processes,
        h.no_lock.sections,
        h.no_lock.rounds.len()
    );
    let mut table = Table::new(&[
        "#",
        "processes × tasks × acquisitions each",
        "lock",
        "acquisitions/s",
        "on ÷ off",
        "÷ no lock",
        "÷ rslock",
        "client-sent scripts per acquisition",
        "wait p50 (ms)",
        "wait p99 (ms)",
        "wait p99 per process (ms)",
        "mutual exclusion: counter = acquisitions, no overlap",
    ]);
    table.row([
        "8".into(),
        format!("1 × 1 × {} (no lock)", h.no_lock.sections),
        "none: `GET` + `SET` back to back (the ceiling)".into(),
        spread(&h.no_lock.sections_per_sec, 1.0, 0),
        String::new(),
        "1.00".into(),
        String::new(),
        "0".into(),
        String::new(),
        String::new(),
        String::new(),
        "—".into(),
    ]);
    for setting in &h.scaling {
        let on = setting.all_rlock(true);
        let on_off = if on {
            h.uniform(setting.processes, false)
                .map_or(String::new(), |off| {
                    num(
                        ratio(
                            setting.acquisitions_per_sec.median,
                            off.acquisitions_per_sec.median,
                        ),
                        2,
                    )
                })
        } else {
            String::new()
        };
        let lock = match setting.kind {
            ContenderKind::Rslock => "rslock",
            _ if on => "rlock, hand-off on",
            _ => "rlock, hand-off off",
        };
        table.row([
            "8".into(),
            format!(
                "{} × {} × {}{}",
                setting.processes,
                setting.tasks_per_process,
                setting.acquisitions_per_task,
                if setting.processes == h.processes {
                    " (headline)"
                } else {
                    ""
                }
            ),
            lock.into(),
            spread(&setting.acquisitions_per_sec, 1.0, 0),
            on_off,
            num(setting.per_no_lock, 2),
            setting.per_peer.map_or(String::new(), |r| num(r, 2)),
            spread(&setting.scripts_per_acquisition, 1.0, 2),
            spread(&setting.wait_p50_us, 1e3, 2),
            spread(&setting.wait_p99_us, 1e3, 2),
            process_p99s(setting.process_wait_p99_us.iter()),
            exclusion(setting),
        ]);
    }
    out.push_str(&table.to_string());
    out.push('\n');

    let m = &h.remote_mixed;
    let mut table = Table::new(&[
        "#",
        &format!(
            "remote waiter: {} processes × {} × {}, one name",
            m.processes, m.tasks_per_process, m.acquisitions_per_task
        ),
        "remote process's wait p99 (ms)",
        "other processes' wait p99 (ms)",
        "acquisitions/s",
        "client-sent scripts per acquisition",
        "mutual exclusion: counter = acquisitions, no overlap",
    ]);
    for (label, setting) in [
        (
            format!("{} with local hand-off + 1 remote without", m.processes - 1),
            m,
        ),
        (
            format!("all {} without", h.remote_all_off.processes),
            &h.remote_all_off,
        ),
    ] {
        let (others, remote) = setting
            .process_wait_p99_us
            .split_at(setting.processes.saturating_sub(1));
        table.row([
            "8".into(),
            label,
            remote
                .first()
                .map_or("n/a".into(), |p99| spread(p99, 1e3, 2)),
            process_p99s(others.iter()),
            spread(&setting.acquisitions_per_sec, 1.0, 0),
            spread(&setting.scripts_per_acquisition, 1.0, 2),
            exclusion(setting),
        ]);
    }
    out.push_str(&table.to_string());
    out
}

/// A median and its range, in `unit`s (1e3 turns µs into ms); the median alone for one round.
fn spread(s: &Spread, unit: f64, digits: usize) -> String {
    let median = num(s.median / unit, digits);
    if s.count > 1 {
        format!(
            "{median} ({}–{})",
            num(s.min / unit, digits),
            num(s.max / unit, digits)
        )
    } else {
        median
    }
}

/// Processes' wait p99 medians in ms, in process order.
fn process_p99s<'a>(p99s: impl Iterator<Item = &'a Spread>) -> String {
    p99s.map(|p99| num(p99.median / 1e3, 2))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether mutual exclusion held in every round; loud when it did not.
fn exclusion(setting: &handoff::Setting) -> String {
    if setting.broken_rounds == 0 {
        let counters: Vec<String> = setting
            .rounds
            .iter()
            .map(|r| r.counter.to_string())
            .collect();
        format!("yes ({})", counters.join(", "))
    } else {
        let rounds: Vec<String> = setting
            .rounds
            .iter()
            .map(|r| {
                format!(
                    "counter {} of {}, {} overlaps",
                    r.counter, r.acquisitions, r.overlaps
                )
            })
            .collect();
        format!("**NO, BROKEN**: {}", rounds.join("; "))
    }
}

/// " — MUTUAL EXCLUSION BROKEN" when a round of `setting` broke it.
fn broken_note(setting: &handoff::Setting) -> &'static str {
    if setting.broken_rounds == 0 {
        ""
    } else {
        " — MUTUAL EXCLUSION BROKEN"
    }
}

fn find<T>(items: &[T], kind: ContenderKind, kind_of: fn(&T) -> ContenderKind) -> Option<&T> {
    items.iter().find(|item| kind_of(item) == kind)
}

/// A number with `digits` decimals; "n/a" when it is not one.
pub(crate) fn num(value: f64, digits: usize) -> String {
    if value.is_finite() {
        format!("{value:.digits$}")
    } else {
        "n/a".into()
    }
}

/// A markdown table.
#[derive(Debug)]
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(headers: &[&str]) -> Self {
        Self {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        self.rows.push(cells.into_iter().collect());
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, row) in self.rows.iter().enumerate() {
            writeln!(f, "| {} |", row.join(" | "))?;
            if i == 0 {
                writeln!(f, "|{}", "---|".repeat(row.len()))?;
            }
        }
        Ok(())
    }
}
