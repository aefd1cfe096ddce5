//! Scenario 9's tables and issue 38's goals.

use std::collections::BTreeMap;

use super::{Goal, Table, num};
use crate::scenarios::burst::{Figures, Holder, Measured};
use crate::stats::ratio;

/// The N of issue 38's acceptance, and the N it is compared with for linearity.
const ACCEPTANCE: usize = 100_000;
const LINEARITY_BASE: usize = 10_000;

/// The runs, the ratios between consecutive N, the floors, and the `lock()` errors.
pub(super) fn tables(m: &Measured) -> String {
    let mut out = format!(
        "Scenario 9, a burst of waiters: N tasks each `lock()` their own name, held by another \
         client, and {}; arm = first spawn → every waiter parked; release → all acquired = first \
         unlock call → last acquisition; wake = a waiter's acquisition − its own name's unlock \
         call; lone wake = the same for the names released one at a time before, each while every \
         other waiter waits; RSS per waiter = the waiters' process, (armed − before spawning) / N; \
         floors: see below.\n\n",
        if m.unlock_at_once {
            "unlock as soon as they acquired (`--burst-unlock-at-once`: scripts per waiter \
             include their unlocks)"
        } else {
            "hold what they acquired until the end of the run"
        }
    );
    let mut table = Table::new(&[
        "#",
        "holder",
        "waiters = names",
        "armed in (ms)",
        "÷ arm floor",
        "release (ms)",
        "release → all acquired (ms)",
        "÷ floor",
        "wake p50 / p99 / max (ms)",
        "lone wake p50 / max (ms)",
        "acquired",
        "failed before / after release",
        "stuck",
        "RSS per waiter (KiB)",
        "scripts / SUBSCRIBEs per waiter",
    ]);
    for run in &m.runs {
        let mut row = vec![
            "9".into(),
            run.holder.label().into(),
            thousands(run.waiters),
        ];
        match (&run.figures, &run.error) {
            (Some(f), _) => row.extend(figures_cells(run.waiters, f)),
            (None, error) => {
                row.push(format!(
                    "**run failed**: {}",
                    error.as_deref().unwrap_or("no figures")
                ));
                row.extend(std::iter::repeat_n(String::new(), 11));
            }
        }
        table.row(row);
    }
    for holder in [Holder::SameProcess, Holder::OtherProcess] {
        for pair in m.floors.windows(2) {
            let (small, large) = (pair[0].names, pair[1].names);
            let (Some(a), Some(b)) = (m.run(small, holder), m.run(large, holder)) else {
                continue;
            };
            let times = |f: fn(&Figures) -> Option<f64>| match (f(a), f(b)) {
                (Some(a), Some(b)) => format!("×{}", num(ratio(b, a), 2)),
                _ => "n/a".into(),
            };
            let per_waiter = |f: fn(&Figures) -> f64| format!("×{}", num(ratio(f(b), f(a)), 2));
            table.row([
                "9".into(),
                holder.label().into(),
                format!("ratio {} ÷ {}", thousands(large), thousands(small)),
                times(|f| f.arm_ms),
                String::new(),
                times(|f| Some(f.release_ms)),
                times(|f| f.all_acquired_ms),
                String::new(),
                times(|f| Some(f.wake.p99_us)),
                times(|f| (f.lone_wake.count > 0).then_some(f.lone_wake.p50_us)),
                String::new(),
                String::new(),
                String::new(),
                per_waiter(|f| f.rss_per_waiter_kib),
                per_waiter(|f| f.scripts_per_waiter),
            ]);
        }
    }
    out.push_str(&table.to_string());
    out.push_str(
        "\nA ratio row divides the larger N's figure by the smaller's: times grow linearly in N \
         at ×10 (wake: its p99), per-waiter figures and a lone release's wake (its p50) at ×1.\n\n",
    );

    let mut floors = Table::new(&[
        "#",
        "names",
        "acquire EVALSHA/s",
        "unlock EVALSHA/s (its PUBLISH delivered)",
        "PUBLISH/s",
        "channels subscribed/s",
        "arm floor: 2 N acquires + N channels (ms)",
        "release floor: N unlocks + N acquires (ms)",
    ]);
    for f in &m.floors {
        floors.row([
            "9".into(),
            thousands(f.names),
            num(f.acquire_per_sec, 0),
            num(f.unlock_per_sec, 0),
            num(f.publish_per_sec, 0),
            num(f.subscribe_channels_per_sec, 0),
            num(f.arm_floor_ms, 1),
            num(f.release_floor_ms, 1),
        ]);
    }
    out.push_str(&floors.to_string());

    let errors: Vec<(&str, usize, &BTreeMap<String, usize>)> = m
        .runs
        .iter()
        .filter_map(|run| {
            let f = run.figures.as_ref()?;
            (!f.errors.is_empty()).then_some((run.holder.label(), run.waiters, &f.errors))
        })
        .collect();
    if !errors.is_empty() {
        let mut table = Table::new(&["#", "holder", "waiters", "`lock()` error", "calls"]);
        for (holder, waiters, texts) in errors {
            for (text, count) in texts {
                table.row([
                    "9".into(),
                    holder.into(),
                    thousands(waiters),
                    text.replace('|', "\\|"),
                    count.to_string(),
                ]);
            }
        }
        out.push('\n');
        out.push_str(&table.to_string());
    }
    out
}

/// A run's cells after its holder and N.
fn figures_cells(waiters: usize, f: &Figures) -> Vec<String> {
    let arm = f.arm_ms.map_or_else(
        || {
            format!(
                "not settled ({} of {} channels, {} failed)",
                f.server_channels, waiters, f.failed_while_arming
            )
        },
        |arm| num(arm, 1),
    );
    let all = f.all_acquired_ms.map_or_else(
        || {
            f.last_acquired_ms.map_or("none acquired".into(), |last| {
                format!("not all (last after {})", num(last, 1))
            })
        },
        |all| num(all, 1),
    );
    let wake = in_ms(
        f.wake.count,
        &[f.wake.p50_us, f.wake.p99_us, f.wake.max_us],
        1,
    );
    let lone_wake = format!(
        "{} ({})",
        in_ms(
            f.lone_wake.count,
            &[f.lone_wake.p50_us, f.lone_wake.max_us],
            2
        ),
        f.lone_released
    );
    let release_errors = if f.release_errors > 0 {
        format!(" ({} unlocks failed)", f.release_errors)
    } else {
        String::new()
    };
    vec![
        arm,
        num(f.per_arm_floor, 2),
        format!("{}{release_errors}", num(f.release_ms, 1)),
        all,
        num(f.per_release_floor, 2),
        wake,
        lone_wake,
        thousands(f.acquired),
        format!(
            "{} / {}",
            thousands(f.failed_before_release),
            thousands(f.failed_after_release)
        ),
        thousands(f.stuck),
        num(f.rss_per_waiter_kib, 2),
        format!(
            "{} / {}",
            num(f.scripts_per_waiter, 2),
            num(f.subscribes_per_waiter, 3)
        ),
    ]
}

/// A summary's values (µs) in ms, joined by " / "; "n/a" when it has no sample.
fn in_ms(samples: usize, values_us: &[f64], digits: usize) -> String {
    if samples == 0 {
        return "n/a".into();
    }
    let values: Vec<String> = values_us.iter().map(|us| num(us / 1e3, digits)).collect();
    values.join(" / ")
}

/// Issue 38's "done means", on the 100,000-waiter run with the holder in the same process, when it
/// ran.
pub(super) fn goals(m: &Measured) -> Vec<Goal> {
    let Some(f) = m.run(ACCEPTANCE, Holder::SameProcess) else {
        return Vec::new();
    };
    let all_ms = f.all_acquired_ms.unwrap_or(f64::NAN);
    let mut goals = vec![
        Goal {
            goal: "100,000 waiters on 100,000 names (holder: same process): every one acquires, none fails",
            target: "= 100000",
            measured: format!(
                "{} acquired, {} failed, {} stuck",
                f.acquired,
                f.failed_before_release + f.failed_after_release,
                f.stuck
            ),
            value: f.acquired as f64,
            met: f.acquired == ACCEPTANCE,
        },
        Goal {
            goal: "100,000 waiters: release → all acquired within 5 s",
            target: "≤ 5000 ms",
            measured: format!("{} ms", num(all_ms, 1)),
            value: all_ms,
            met: all_ms <= 5_000.0,
        },
        Goal {
            goal: "100,000 waiters: release → all acquired within 2× the floor",
            target: "≤ 2",
            measured: format!(
                "{} ms vs a floor of {} ms",
                num(all_ms, 1),
                num(f.release_floor_ms, 1)
            ),
            value: f.per_release_floor,
            met: f.per_release_floor <= 2.0,
        },
        Goal {
            goal: "100,000 waiters: ≤ 2 KiB resident memory per waiter",
            target: "≤ 2 KiB",
            measured: format!(
                "({} − {}) MiB / {}",
                num(f.rss_armed.rss_mib, 1),
                num(f.rss_before.rss_mib, 1),
                ACCEPTANCE
            ),
            value: f.rss_per_waiter_kib,
            met: f.rss_per_waiter_kib <= 2.0,
        },
    ];
    if let Some(base) = m.run(LINEARITY_BASE, Holder::SameProcess) {
        let growth = |f: &Figures| f.rss_armed.rss_mib - f.rss_before.rss_mib;
        let ratios = [
            (
                "arm",
                ratio(
                    f.arm_ms.unwrap_or(f64::NAN),
                    base.arm_ms.unwrap_or(f64::NAN),
                ),
            ),
            (
                "release → all acquired",
                ratio(all_ms, base.all_acquired_ms.unwrap_or(f64::NAN)),
            ),
            ("resident memory", ratio(growth(f), growth(base))),
        ];
        let value = ratios
            .iter()
            .map(|&(_, r)| if r.is_nan() { f64::INFINITY } else { r })
            .fold(f64::NEG_INFINITY, f64::max);
        goals.push(Goal {
            goal: "100,000 ÷ 10,000 waiters: arm time, release → all acquired and memory grow at most 12×",
            target: "≤ 12",
            measured: ratios
                .iter()
                .map(|(what, r)| format!("{what} ×{}", num(*r, 2)))
                .collect::<Vec<_>>()
                .join(", "),
            value,
            met: value <= 12.0,
        });
    }
    goals
}

/// `n` with thousands separators: 100,000.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
