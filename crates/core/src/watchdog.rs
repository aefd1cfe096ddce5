//! The watchdog: one task per client that keeps the leases of watchdog-held locks alive.
//!
//! # Implementation details
//!
//! Locks acquired without a lease are registered here with their key, owner and hold count. Every
//! [`Config::renewal_interval`] (a third of the watchdog timeout) the task renews all registered locks,
//! [`Config::watchdog_batch_size`] keys per script (PROTOCOL.md §4.2): each key is renewed only if the
//! registered owner's field is still in the hash.
//!
//! Unlike Redisson, a loss is never silent. A lock is declared lost, and its holders' lease-lost
//! token cancelled, when a renewal finds the field gone, or when no renewal has been confirmed for a
//! whole watchdog timeout (Redis unreachable: by then the key has expired). Failed renewals are
//! retried after [`Config::retry_delay`] rather than a whole interval later.
//!
//! Unlock deregisters *before* it sends the unlock script, so no renewal is scheduled after an
//! unlock; a renewal already in flight checks the field and is harmless. Each registration carries a
//! generation number, so the reply to an old renewal never cancels a newer registration of the key.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::Value;
use redis::cluster_routing::Slot;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::config::Topology;
use crate::connection::{Commands, Elapsed, Synced};
use crate::error::Operation;
use crate::owner::Owner;
use crate::scripts::{LOCK_RENEW, ScriptCall};

#[derive(Debug)]
struct Entry {
    generation: u64,
    /// Local owners holding this key, with their hold counts; the first one's field is renewed.
    holders: Vec<(Owner, String, u32)>,
    /// Cancelled when the lock is lost.
    lost: CancellationToken,
    /// When the last confirmed renewal (or the acquire) was sent.
    renewed_at: Instant,
}

#[derive(Debug, Default)]
struct Registry {
    entries: Mutex<HashMap<String, Entry>>,
    next_generation: Mutex<u64>,
    /// Wakes the idle task when the first lock is registered.
    registered: Notify,
}

/// The client's watchdog.
#[derive(Debug)]
pub(crate) struct Watchdog {
    registry: Arc<Registry>,
    timeout: Duration,
}

impl Watchdog {
    /// Starts the renewal task on `runtime`; it stops when `shutdown` is cancelled.
    pub(crate) fn start(
        config: &Config,
        commands: Commands,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> Self {
        let registry = Arc::new(Registry::default());
        let task = Renewer {
            registry: registry.clone(),
            commands,
            timeout: config.watchdog_timeout,
            interval: config.renewal_interval(),
            retry_delay: config.retry_delay.min(config.renewal_interval()),
            batch_size: config.watchdog_batch_size,
            per_slot: config.topology == Topology::Cluster,
        };
        drop(runtime.spawn(task.run(shutdown)));
        Self {
            registry,
            timeout: config.watchdog_timeout,
        }
    }

    /// Registers one hold of `key` by `owner`, acquired by a script sent at `sent_at`. Returns the
    /// token cancelled if the lock is lost.
    pub(crate) fn register(
        &self,
        key: &str,
        owner: Owner,
        field: &str,
        sent_at: Instant,
    ) -> CancellationToken {
        let mut entries = self.registry.entries.lock();
        let first = entries.is_empty();
        let entry = entries.entry(key.to_owned()).or_insert_with(|| {
            let mut next = self.registry.next_generation.lock();
            *next += 1;
            Entry {
                generation: *next,
                holders: Vec::new(),
                lost: CancellationToken::new(),
                renewed_at: sent_at,
            }
        });
        match entry.holders.iter_mut().find(|(o, _, _)| *o == owner) {
            Some((_, _, count)) => *count += 1,
            None => entry.holders.push((owner, field.to_owned(), 1)),
        }
        let lost = entry.lost.clone();
        drop(entries);
        if first {
            self.registry.registered.notify_one();
        }
        lost
    }

    /// Removes one hold of `key` by `owner`; renewal of `key` stops with its last hold.
    pub(crate) fn deregister(&self, key: &str, owner: Owner) {
        let mut entries = self.registry.entries.lock();
        let Some(entry) = entries.get_mut(key) else {
            return;
        };
        if let Some(i) = entry.holders.iter().position(|(o, _, _)| *o == owner) {
            entry.holders[i].2 -= 1;
            if entry.holders[i].2 == 0 {
                let _ = entry.holders.remove(i);
            }
        }
        if entry.holders.is_empty() {
            let _ = entries.remove(key);
        }
    }

    /// Stops renewing `key` and tells its holders the lock is gone (after a force unlock).
    pub(crate) fn forget(&self, key: &str) {
        if let Some(entry) = self.registry.entries.lock().remove(key) {
            entry.lost.cancel();
        }
    }

    /// Whether `key` has watchdog holds here, i.e. its lease should stay the watchdog timeout.
    pub(crate) fn is_renewing(&self, key: &str) -> bool {
        self.registry.entries.lock().contains_key(key)
    }

    /// The lease watchdog locks are acquired and renewed with.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How many locks are being renewed.
    pub(crate) fn lock_count(&self) -> usize {
        self.registry.entries.lock().len()
    }
}

struct Renewer {
    registry: Arc<Registry>,
    commands: Commands,
    timeout: Duration,
    interval: Duration,
    retry_delay: Duration,
    batch_size: usize,
    per_slot: bool,
}

impl Renewer {
    async fn run(self, shutdown: CancellationToken) {
        let mut delay = self.interval;
        loop {
            if self.registry.entries.lock().is_empty() {
                let registered = self.registry.registered.notified();
                tokio::pin!(registered);
                let _ = registered.as_mut().enable();
                if self.registry.entries.lock().is_empty() {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = registered => {}
                    }
                }
                delay = self.interval;
            }
            let renewed = async {
                self.watching_leases(tokio::time::sleep(delay)).await;
                self.watching_leases(self.renew_all()).await
            };
            delay = tokio::select! {
                () = shutdown.cancelled() => return,
                renewed = renewed => if renewed { self.interval } else { self.retry_delay },
            };
        }
    }

    /// Runs `work` while declaring each lock lost the moment its lease ends without a confirmed
    /// renewal: waiting for a slow renewal round (or sleeping until the next one) must not delay the
    /// signal past the point where another client can take the lock.
    async fn watching_leases<T>(&self, work: impl Future<Output = T>) -> T {
        tokio::pin!(work);
        loop {
            let lease_end = self
                .registry
                .entries
                .lock()
                .values()
                .map(|entry| entry.renewed_at + self.timeout)
                .min();
            tokio::select! {
                output = &mut work => return output,
                () = tokio::time::sleep_until(lease_end.unwrap_or_else(|| Instant::now() + self.interval)) => {
                    self.expire_overdue();
                }
            }
        }
    }

    /// Renews every registered lock; returns false if some batch failed and needs a quick retry.
    /// In cluster mode a batch only holds keys of one slot, as a script may not cross slots.
    async fn renew_all(&self) -> bool {
        let mut by_slot: HashMap<Option<Slot>, Vec<(String, u64, String)>> = HashMap::new();
        for (key, entry) in self.registry.entries.lock().iter() {
            if let Some((_, field, _)) = entry.holders.first() {
                let slot = self.per_slot.then(|| Slot::for_key(key));
                by_slot.entry(slot).or_default().push((
                    key.clone(),
                    entry.generation,
                    field.clone(),
                ));
            }
        }
        let mut all_ok = true;
        for locks in by_slot.values() {
            for batch in locks.chunks(self.batch_size) {
                all_ok &= self.renew_batch(batch).await;
            }
        }
        all_ok
    }

    async fn renew_batch(&self, batch: &[(String, u64, String)]) -> bool {
        let mut call = ScriptCall::new(&LOCK_RENEW).arg(self.timeout.as_millis());
        for (key, _, field) in batch {
            call = call.key(key.as_str()).arg(field);
        }
        let sent_at = Instant::now();
        let reply = match self.commands.get(Operation::Renew, "").await {
            Ok(mut conn) => {
                self.commands
                    .run(self.commands.write(&mut conn.conn, &call))
                    .await
            }
            Err(e) => {
                tracing::warn!(error = %e, locks = batch.len(), "watchdog cannot get a connection");
                return false;
            }
        };
        let flags = match reply {
            Ok(Ok(Synced {
                reply: Value::Array(flags),
                unsynced,
            })) if flags.len() == batch.len() => {
                if let Some(replicas) = unsynced {
                    tracing::warn!(replicas, "no replica acknowledged a renewal");
                }
                flags
            }
            Ok(Ok(Synced { reply: other, .. })) => {
                tracing::warn!(reply = ?other, "watchdog got an unexpected renewal reply");
                return false;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, locks = batch.len(), "watchdog renewal failed");
                return false;
            }
            Err(Elapsed) => {
                tracing::warn!(locks = batch.len(), "watchdog renewal timed out");
                return false;
            }
        };
        let mut entries = self.registry.entries.lock();
        for ((key, generation, _), flag) in batch.iter().zip(flags) {
            let Some(entry) = entries.get_mut(key).filter(|e| e.generation == *generation) else {
                continue;
            };
            if flag == Value::Int(1) {
                entry.renewed_at = sent_at;
            } else if let Some(entry) = entries.remove(key) {
                tracing::warn!(lock = %key, "watchdog found the lock gone: lease lost");
                entry.lost.cancel();
            }
        }
        true
    }

    /// Declares lost every lock whose last confirmed renewal was sent a whole lease ago. The renewal
    /// ran after it was sent, so Redis expires the key no earlier than this: the holder hears of the
    /// loss before anyone else can acquire.
    fn expire_overdue(&self) {
        let now = Instant::now();
        self.registry.entries.lock().retain(|key, entry| {
            let alive = now.duration_since(entry.renewed_at) < self.timeout;
            if !alive {
                tracing::warn!(lock = %key, "no renewal confirmed for a whole lease: lease lost");
                entry.lost.cancel();
            }
            alive
        });
    }
}
