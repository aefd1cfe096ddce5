//! What a fault scenario watches in Redis itself, next to the histories: acquires applied twice,
//! and how many times locks were handed off locally (and the hand-off scripts, to lose their
//! replies on purpose).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use redis::Commands;

/// A thread that reads lock hashes on their master every 2 ms and notes every owner field seen
/// with a hold count above 1. Where no worker re-enters (the torture workers never do), such a count
/// is an acquire applied twice: what a client that re-sends a script after a lost reply does. A
/// hand-off sets the next owner's count to 1, so a hand-off applied on top of an acquire shows too.
///
/// Dropping it stops the thread.
#[derive(Debug)]
pub struct DoubleApplies {
    stop: Arc<AtomicBool>,
    watcher: Option<JoinHandle<BTreeSet<String>>>,
}

impl DoubleApplies {
    /// Starts watching the hashes of `names` through `conn` (a connection to their master, which
    /// must hold them all).
    pub fn watch(mut conn: redis::Connection, names: &[&str]) -> Self {
        let names: Vec<String> = names.iter().map(|&name| name.to_owned()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let watcher = thread::spawn(move || {
            let mut seen = BTreeSet::new();
            while !stopped.load(Ordering::Relaxed) {
                for name in &names {
                    let holds: Vec<(String, String)> = conn.hgetall(name).unwrap_or_default();
                    for (field, count) in holds {
                        if count.parse::<u64>().is_ok_and(|count| count > 1) {
                            let _ = seen.insert(format!("{name} {field}"));
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
    pub fn stop(mut self) -> BTreeSet<String> {
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
