//! Scenario 2: uncontended throughput.
//!
//! `concurrency` tasks each lock and unlock a name of their own as fast as they can, for a fixed time;
//! rlock (default configuration: a pool of 8 multiplexed connections) and the raw two-`EVALSHA`
//! floor (the same number of multiplexed connections, used in turn) alternate in segments.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::Result;
use crate::contenders::{ContenderKind, Cycle, RawScripts, Rlock};

#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Params {
    pub(crate) concurrency: usize,
    pub(crate) segments: usize,
    pub(crate) segment_ms: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct Measured {
    pub(crate) kind: ContenderKind,
    pub(crate) concurrency: usize,
    pub(crate) connections: usize,
    pub(crate) cycles: u64,
    pub(crate) seconds: f64,
    pub(crate) cycles_per_sec: f64,
}

pub(crate) async fn run(url: &str, params: Params) -> Result<Vec<Measured>> {
    let connections = rlock_redisson::Config::new(url).pool_size;
    let contenders: Vec<(ContenderKind, Arc<dyn Cycle>)> = vec![
        (ContenderKind::Rlock, Arc::new(Rlock::connect(url).await?)),
        (
            ContenderKind::Raw,
            Arc::new(RawScripts::connect(url, connections).await?),
        ),
    ];
    let segment = Duration::from_millis(params.segment_ms);
    // A short first segment of each warms up and is not counted.
    for (_, contender) in &contenders {
        let _ = segment_of(contender, params.concurrency, segment / 10).await?;
    }
    let mut totals = vec![(0_u64, Duration::ZERO); contenders.len()];
    for round in 0..params.segments {
        for k in 0..contenders.len() {
            let i = (round + k) % contenders.len();
            let (cycles, took) = segment_of(&contenders[i].1, params.concurrency, segment).await?;
            totals[i].0 += cycles;
            totals[i].1 += took;
        }
    }
    Ok(contenders
        .iter()
        .zip(totals)
        .map(|((kind, _), (cycles, took))| Measured {
            kind: *kind,
            concurrency: params.concurrency,
            connections,
            cycles,
            seconds: took.as_secs_f64(),
            cycles_per_sec: cycles as f64 / took.as_secs_f64(),
        })
        .collect())
}

/// Runs `concurrency` cycling tasks for `length`; returns the cycles done and the time they took
/// (until the last task finished its last cycle).
async fn segment_of(
    contender: &Arc<dyn Cycle>,
    concurrency: usize,
    length: Duration,
) -> Result<(u64, Duration)> {
    let start = Instant::now();
    let stop = start + length;
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let contender = contender.clone();
            tokio::spawn(async move {
                let name = format!("bench:throughput:{task}");
                let mut cycles = 0_u64;
                while Instant::now() < stop {
                    contender.cycle(&name).await?;
                    cycles += 1;
                }
                Ok::<_, crate::Error>(cycles)
            })
        })
        .collect();
    let mut cycles = 0;
    for task in tasks {
        cycles += task.await??;
    }
    Ok((cycles, start.elapsed()))
}
