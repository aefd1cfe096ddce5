//! Scenario 1 (and rslock's part of scenario 7): the uncontended cycle.
//!
//! One task locks and unlocks distinct names, one cycle after the other, and times each whole cycle
//! (lock returned + unlock returned). rlock, the raw two-`EVALSHA` floor and rslock run in rounds,
//! in a rotating order, so that load changes on the machine hit all of them alike. The first round
//! warms up (connections, script cache) and is not counted. Redis' command counts are taken around
//! every block, so the table also shows what one cycle sends.
//!
//! rlock runs twice: as an application without a metrics recorder (its metric handles are no-ops),
//! and with one ([`MemoryRecorder`], metrics-util's atomic registry, installed process-wide): what
//! recording its metrics costs. No tracing subscriber is installed: the acquire span stays disabled,
//! as in a service that logs at `info`. A client registers its metric handles with the recorder in
//! place when it first uses them, so the plain client makes one cycle before the recorder goes in;
//! the recorder then stays for the rest of the process (later scenarios record too).

use std::collections::BTreeMap;
use std::time::Instant;

use rlock_tests::recorder::MemoryRecorder;
use serde::Serialize;

use crate::Result;
use crate::contenders::{ContenderKind, Cycle, RawScripts, Rlock, Rslock};
use crate::probe::{CommandStats, Probe};
use crate::stats::{self, Summary};

#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Params {
    pub(crate) rounds: usize,
    pub(crate) cycles_per_round: usize,
}

/// One implementation's cycles.
#[derive(Debug, Serialize)]
pub(crate) struct Measured {
    pub(crate) kind: ContenderKind,
    pub(crate) latency: Summary,
    /// Commands Redis executed per cycle, script-internal ones included.
    pub(crate) all_commands_per_cycle: f64,
    /// Commands clients sent per cycle (see [`ContenderKind::script_calls`]).
    pub(crate) client_commands_per_cycle: f64,
    pub(crate) commands_per_cycle: BTreeMap<String, f64>,
}

pub(crate) async fn run(url: &str, probe: &mut Probe, params: Params) -> Result<Vec<Measured>> {
    let plain = Rlock::connect(url).await?;
    plain.cycle("bench:cycle:before-the-recorder").await?;
    if !MemoryRecorder::default().install_global() {
        return Err("another metrics recorder is installed already".into());
    }
    let contenders: Vec<(ContenderKind, Box<dyn Cycle>)> = vec![
        (ContenderKind::Rlock, Box::new(plain)),
        (
            ContenderKind::RlockRecorded,
            Box::new(Rlock::connect(url).await?),
        ),
        (
            ContenderKind::Raw,
            Box::new(RawScripts::connect(url, 1).await?),
        ),
        (ContenderKind::Rslock, Box::new(Rslock::new(url))),
    ];
    let mut latencies = vec![Vec::new(); contenders.len()];
    let mut calls = vec![CommandStats::default(); contenders.len()];
    for round in 0..=params.rounds {
        for k in 0..contenders.len() {
            let i = (round + k) % contenders.len();
            let (kind, contender) = &contenders[i];
            let before = probe.command_stats().await?;
            for cycle in 0..params.cycles_per_round {
                let name = format!("bench:cycle:{kind:?}:{round}:{cycle}");
                let start = Instant::now();
                contender.cycle(&name).await?;
                let elapsed = start.elapsed();
                // Round 0 warms up.
                if round > 0 {
                    latencies[i].push(stats::ns(elapsed));
                }
            }
            if round > 0 {
                calls[i].add(&probe.command_stats().await?.since(&before));
            }
        }
    }
    let cycles = (params.rounds * params.cycles_per_round) as u64;
    Ok(contenders
        .iter()
        .zip(latencies.iter_mut().zip(&calls))
        .map(|((kind, _), (latency, calls))| Measured {
            kind: *kind,
            latency: Summary::of_ns(latency),
            all_commands_per_cycle: stats::ratio(calls.total() as f64, cycles as f64),
            client_commands_per_cycle: stats::ratio(
                (calls.total() - kind.script_calls(calls)) as f64,
                cycles as f64,
            ),
            commands_per_cycle: calls.per(cycles),
        })
        .collect())
}
