//! What a fault scenario watches in Redis itself, next to the histories: acquires applied twice,
//! and how many times locks were handed off locally (and the hand-off scripts, to lose their
//! replies on purpose).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use redis::Commands;

use super::checker::Report;
use super::record::now_ns;

/// A thread that reads lock hashes on their master every 2 ms and notes every owner field seen
/// with a hold count above 1. Where no worker re-enters (the torture workers do not unless told
/// to), such a count is an acquire applied twice: what a client that re-sends a script after a lost
/// reply does. A hand-off sets the next owner's count to 1, so a hand-off applied on top of an
/// acquire shows too. Where owners re-enter, [`DoubleApplies::stop_against`] holds each count to
/// the acquisitions its owner's attempts could have made.
///
/// Dropping it stops the thread.
#[derive(Debug)]
pub struct DoubleApplies {
    stop: Arc<AtomicBool>,
    watcher: Option<JoinHandle<Vec<Counted>>>,
}

/// A hold count above 1 read in a lock hash, and when: the read was sent at `from_ns` and its
/// reply came at `to_ns` (see [`now_ns`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counted {
    /// The lock.
    pub name: String,
    /// The owner's hash field.
    pub field: String,
    /// Its hold count.
    pub count: u64,
    /// When the read was sent.
    pub from_ns: u64,
    /// When its reply came.
    pub to_ns: u64,
}

impl DoubleApplies {
    /// Starts watching the hashes of `names` through `conn` (a connection to their master, which
    /// must hold them all).
    pub fn watch(mut conn: redis::Connection, names: &[&str]) -> Self {
        let names: Vec<String> = names.iter().map(|&name| name.to_owned()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let watcher = thread::spawn(move || {
            let mut seen = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                for name in &names {
                    let from_ns = now_ns();
                    let holds: Vec<(String, String)> = conn.hgetall(name).unwrap_or_default();
                    let to_ns = now_ns();
                    for (field, count) in holds {
                        if let Ok(count) = count.parse::<u64>()
                            && count > 1
                        {
                            seen.push(Counted {
                                name: name.clone(),
                                field,
                                count,
                                from_ns,
                                to_ns,
                            });
                        }
                    }
                }
                thread::sleep(Duration::from_millis(2));
            }
            seen
        });
        Self {
            stop,
            watcher: Some(watcher),
        }
    }

    /// Stops watching; returns `<name> <field>` of every hold seen counted twice or more.
    ///
    /// # Panics
    ///
    /// If the watching thread panicked.
    pub fn stop(self) -> BTreeSet<String> {
        self.counts()
            .into_iter()
            .map(|c| format!("{} {}", c.name, c.field))
            .collect()
    }

    /// Stops watching; returns, once per `<name> <field>`, every hold count read above what the
    /// attempts of its owner in `report` could have added up to at that moment: those that started
    /// before the read's reply came and whose unlock had not returned before it was sent (holds of
    /// one owner are told by `Started`'s `owner`). For fleets whose owners re-enter, and whose
    /// attempts that did not acquire changed nothing in Redis (no lost replies, no dropped
    /// acquires: those may be counted until undone).
    ///
    /// # Panics
    ///
    /// If the watching thread panicked.
    pub fn stop_against(self, report: &Report) -> BTreeSet<String> {
        let mut excess = BTreeMap::new();
        for counted in self.counts() {
            let possible = report.holds.get(&counted.name).map_or(0, |holds| {
                holds
                    .iter()
                    .filter(|h| h.owner.as_deref() == Some(counted.field.as_str()))
                    .filter(|h| h.started_ns <= counted.to_ns)
                    .filter(|h| h.unlocked_ns >= counted.from_ns)
                    .count()
            });
            if counted.count > possible as u64 {
                let _ = excess
                    .entry(format!("{} {}", counted.name, counted.field))
                    .or_insert_with(|| {
                        format!(
                            "{} {}: counted {} at {}..{} ns, where its owner's attempts could \
                             have made {possible}",
                            counted.name,
                            counted.field,
                            counted.count,
                            counted.from_ns,
                            counted.to_ns
                        )
                    });
            }
        }
        excess.into_values().collect()
    }

    /// Stops watching; every count above 1 read.
    fn counts(mut self) -> Vec<Counted> {
        self.stop.store(true, Ordering::Relaxed);
        let watcher = self.watcher.take().expect("watching until stopped");
        watcher.join().expect("the watcher did not panic")
    }
}

impl Drop for DoubleApplies {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How many local hand-offs of reentrant, non-reentrant or fenced locks the server at `conn` ran so
/// far: its `HDEL` calls (`INFO commandstats` counts the commands scripts run). Of those kinds'
/// scripts, only the hand-off deletes a field (an unlock counts the owner's holds down and deletes
/// the whole hash), so where no other kind runs, every `HDEL` is one hand-off.
///
/// # Panics
///
/// If `INFO` fails.
pub fn local_hand_offs(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_hdel:"))
        .and_then(|stats| stats.split(',').find_map(|kv| kv.strip_prefix("calls=")))
        .map_or(0, |calls| calls.parse().expect("a call count"))
}

/// The hand-off scripts of the exclusive kinds, as rlock embeds them: the shared prelude, then the
/// kind's file.
macro_rules! hand_off_script {
    ($file:literal) => {
        concat!(
            include_str!("../../../crates/core/lua/hand_off_prelude.lua"),
            include_str!(concat!("../../../crates/core/lua/", $file))
        )
    };
}

/// The reentrant lock's hand-off script.
pub const LOCK_HAND_OFF: &str = hand_off_script!("lock_hand_off.lua");
/// The fenced lock's.
pub const FENCED_HAND_OFF: &str = hand_off_script!("fenced_hand_off.lua");
/// The write lock's.
pub const WRITE_HAND_OFF: &str = hand_off_script!("rw_write_hand_off.lua");

/// The SHA1 that `EVALSHA` names `script` by, for a fault that must hit that script alone.
pub fn script_sha1(script: &str) -> String {
    redis::Script::new(script).get_hash().to_owned()
}
