//! The benchmark's own view of Redis: `INFO commandstats`, `CLIENT LIST`, round trips.
//!
//! The probe uses a connection of its own. Its own commands (`INFO`, `CLIENT LIST`) are left out of
//! command counts, and callers subtract the `PING`s they send while counting.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use serde::Serialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::Result;
use crate::stats::{self, Summary};

/// Commands the probe itself sends; never counted.
const PROBE_COMMANDS: [&str; 2] = ["info", "client|list"];

#[derive(Clone, Debug)]
pub(crate) struct Probe {
    conn: MultiplexedConnection,
}

impl Probe {
    pub(crate) async fn connect(url: &str) -> Result<Self> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self { conn })
    }

    /// Calls per command since the server started (`INFO commandstats`). Redis 7 counts the commands
    /// that scripts call as well, under their own names.
    pub(crate) async fn command_stats(&mut self) -> Result<CommandStats> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await?;
        let mut calls = BTreeMap::new();
        for line in info.lines() {
            // cmdstat_evalsha:calls=12,usec=...,rejected_calls=0,failed_calls=0
            let Some((name, fields)) = line
                .strip_prefix("cmdstat_")
                .and_then(|rest| rest.split_once(':'))
            else {
                continue;
            };
            let count = fields
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))
                .ok_or_else(|| format!("no calls= in {line:?}"))?
                .parse()?;
            let _ = calls.insert(name.to_owned(), count);
        }
        Ok(CommandStats(calls))
    }

    /// The connections in pub/sub mode that are subscribed to at least one channel, with their
    /// channel counts (`CLIENT LIST TYPE pubsub`).
    pub(crate) async fn subscribed_connections(&mut self) -> Result<Vec<u64>> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut self.conn)
            .await?;
        let mut subscribed = Vec::new();
        for line in list.lines() {
            let channels: u64 = line
                .split(' ')
                .find_map(|field| field.strip_prefix("sub="))
                .ok_or_else(|| format!("no sub= in {line:?}"))?
                .parse()?;
            if channels > 0 {
                subscribed.push(channels);
            }
        }
        Ok(subscribed)
    }

    /// Channels subscribed on the server, by all its clients: `pubsub_channels` plus
    /// `pubsub_shardchannels` of `INFO stats` (a field the server does not have counts 0).
    pub(crate) async fn pubsub_channels(&mut self) -> Result<u64> {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .query_async(&mut self.conn)
            .await?;
        let mut channels = 0;
        for line in info.lines() {
            let Some((name, value)) = line.trim().split_once(':') else {
                continue;
            };
            if matches!(name, "pubsub_channels" | "pubsub_shardchannels") {
                channels += value
                    .parse::<u64>()
                    .map_err(|e| format!("INFO stats {line:?}: {e}"))?;
            }
        }
        Ok(channels)
    }

    /// `samples` sequential `PING`s on this connection: the single-command round trip.
    pub(crate) async fn round_trip(&mut self, samples: usize) -> Result<Summary> {
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            times.push(stats::ns(self.ping().await?));
        }
        Ok(Summary::of_ns(&mut times))
    }

    /// One `PING`: how long it took.
    pub(crate) async fn ping(&mut self) -> Result<Duration> {
        let start = Instant::now();
        let () = redis::cmd("PING").query_async(&mut self.conn).await?;
        Ok(start.elapsed())
    }

    /// Runs `cmd` on the probe's connection.
    pub(crate) async fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T> {
        Ok(cmd.query_async(&mut self.conn).await?)
    }

    /// The `redis_version` of the server.
    pub(crate) async fn server_version(&mut self) -> Result<String> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.conn)
            .await?;
        Ok(info
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .unwrap_or("unknown")
            .trim()
            .to_owned())
    }
}

/// A background task that takes a sample every so often until it is stopped.
#[derive(Debug)]
pub(crate) struct Sampler<T> {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<Vec<T>>>,
}

impl<T: Send + 'static> Sampler<T> {
    /// Calls `sample` now and then every `every` (later if a sample takes longer).
    pub(crate) fn start<F, Fut>(every: Duration, mut sample: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send,
    {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = &mut stopped => return Ok(samples),
                    _ = ticks.tick() => samples.push(sample().await?),
                }
            }
        });
        Self { stop, task }
    }

    /// Stops sampling; returns the samples.
    pub(crate) async fn stop(self) -> Result<Vec<T>> {
        let _ = self.stop.send(());
        self.task.await?
    }
}

/// Calls per command name (`evalsha`, `hincrby`, `client|setinfo`...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct CommandStats(BTreeMap<String, u64>);

impl CommandStats {
    /// The calls made since `before`, without the probe's own commands and without names that were
    /// not called.
    pub(crate) fn since(&self, before: &Self) -> Self {
        Self(
            self.0
                .iter()
                .filter(|(name, _)| !PROBE_COMMANDS.contains(&name.as_str()))
                .map(|(name, &calls)| (name.clone(), calls - before.calls(name).min(calls)))
                .filter(|&(_, calls)| calls > 0)
                .collect(),
        )
    }

    /// Adds `other`'s calls to these.
    pub(crate) fn add(&mut self, other: &Self) {
        for (name, calls) in &other.0 {
            *self.0.entry(name.clone()).or_insert(0) += calls;
        }
    }

    /// Removes `calls` calls of `name` (commands the benchmark sent itself).
    pub(crate) fn subtract(&mut self, name: &str, calls: u64) {
        if let Some(count) = self.0.get_mut(name) {
            *count = count.saturating_sub(calls);
        }
        self.0.retain(|_, calls| *calls > 0);
    }

    #[cfg(test)]
    pub(crate) fn add_calls(&mut self, name: &str, calls: u64) {
        *self.0.entry(name.to_owned()).or_insert(0) += calls;
    }

    pub(crate) fn calls(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The sum of calls of `names`.
    pub(crate) fn sum_of(&self, names: &[&str]) -> u64 {
        names.iter().map(|name| self.calls(name)).sum()
    }

    /// Each command's calls divided by `per`, for reports.
    pub(crate) fn per(&self, per: u64) -> BTreeMap<String, f64> {
        self.0
            .iter()
            .map(|(name, &calls)| (name.clone(), stats::ratio(calls as f64, per as f64)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(pairs: &[(&str, u64)]) -> CommandStats {
        CommandStats(pairs.iter().map(|&(n, c)| (n.to_owned(), c)).collect())
    }

    #[test]
    fn deltas_skip_the_probe_and_idle_commands() {
        let before = stats(&[("evalsha", 10), ("info", 3), ("del", 4)]);
        let after = stats(&[("evalsha", 15), ("info", 9), ("del", 4), ("subscribe", 1)]);
        let delta = after.since(&before);
        assert_eq!(delta, stats(&[("evalsha", 5), ("subscribe", 1)]));
        assert_eq!(delta.total(), 6);
    }
}
