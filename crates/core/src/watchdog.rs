//! The watchdog: one task per client that keeps the leases of watchdog-held locks alive.
//!
//! # Implementation details
//!
//! Each owner's hold is registered here once, by its scope (its key, or for a hold of part of a key
//! the key and that part: see `LockWire::scope`) and hash field, under the [`Renewal`] of its kind
//! (the script that renews it and how one lock is encoded into a batch call), by the hold's record
//! in the [`Ledger`](crate::ledger::Ledger), which registers it while one of its members is renewed
//! and owns the lease-lost token the registration cancels. Every
//! [`Config::renewal_interval`] (a third of the watchdog timeout) the task renews all registered
//! locks, batched per renewal script (and per slot where a script may not cross slots: a cluster,
//! reached as one or behind a proxy, docs/protocol.md §9.2), [`Config::watchdog_batch_size`] keys
//! per script (docs/protocol.md §4.2): each registration's key is renewed only if its field is
//! still in it, and each reply flag is one owner's, so that an owner whose field is gone is told
//! even while another owner of this client holds the key, and no owner is told for another's loss.
//!
//! Unlike Redisson, a loss is never silent. A lock is declared lost, and its holders' lease-lost
//! token cancelled, when a renewal finds the field gone, or when no renewal has been confirmed for
//! a whole watchdog timeout (Redis unreachable: by then the key has expired; the signal comes a few
//! milliseconds early, so that it reaches the holder before anyone else can take the lock). Failed
//! renewals are retried after [`Config::retry_delay`] rather than a whole interval later.
//!
//! Unlock deregisters *before* it sends the unlock script, so no renewal is scheduled after an
//! unlock; a renewal already in flight checks the field and is harmless. Each registration carries
//! a generation number, so the reply to an old renewal never cancels a newer registration of the
//! key.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use parking_lot::Mutex;
use redis::{Script, Value};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::connection::{Commands, Slot, Written};
use crate::error::{Operation, Subject};
use crate::scripts::ScriptCall;
use crate::telemetry::{self, KindLabel, LostBecause, Renewals};

/// How one kind's holds are renewed: a script that takes `ARGV[1]` = the lease in ms and, for each
/// lock of the batch, what [`Renewal::add`] appends; it replies with one flag per lock, 1 when the
/// lock (or the part of it the holds are of) is still held by one of the given fields (and was
/// renewed), else 0.
#[derive(Debug)]
pub struct Renewal {
    /// Tells batches apart (locks renewed by different scripts never share a batch) and names them
    /// in logs.
    pub(crate) name: &'static str,
    pub(crate) script: &'static LazyLock<Script>,
    /// Appends one lock to a batch call: its key, this client's fields that hold it and the part of
    /// the key they hold (empty for the whole key: see [`Renewed`]).
    pub(crate) add: fn(ScriptCall, &str, &[String], &[String]) -> ScriptCall,
}

/// What one registration renews: the lock's key, the scope it is registered under (the key, or the
/// key and a part of it) and that part (empty for the whole key; a group lock's values).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Renewed<'a> {
    pub(crate) key: &'a str,
    pub(crate) scope: &'a str,
    pub(crate) part: &'a [String],
}

/// How much before its lease ends a lock without a confirmed renewal is declared lost: the timer
/// that tells the holder fires on a millisecond tick and behind other tasks, while Redis expires
/// the key (and a waiter elsewhere may take it) right at the end of the lease.
const LOSS_MARGIN: Duration = Duration::from_millis(5);

/// Registrations are per (renewal, scope, field): one per owner's hold.
type EntryKey = (&'static str, String, String);

#[derive(Debug)]
struct Entry {
    generation: u64,
    renewal: &'static Renewal,
    /// The key renewed, and the part of it the holds are of (see [`Renewed`]).
    key: String,
    part: Arc<[String]>,
    /// The kind of the first hold registered (for metrics: kinds that share a key and a renewal,
    /// a lock and a fenced lock of one name, share the entry).
    kind: KindLabel,
    /// The hold's record's token, cancelled when the lock is lost.
    lost: CancellationToken,
    /// When the last confirmed renewal (or the acquire) was sent.
    renewed_at: Instant,
}

impl Entry {
    /// The lock is lost `because`: told to telemetry (with its key if `lock_names`) and to its
    /// holders.
    fn lose(&self, because: LostBecause, lock_names: bool) {
        telemetry::lease_lost(self.kind, &self.key, because, lock_names);
        self.lost.cancel();
    }
}

/// Every hold the watchdog renews, by lock key and field, and the generation the next
/// registration takes.
#[derive(Debug, Default)]
struct Watched {
    /// Hashed with foldhash, as every map a lock and unlock looks in (see [`Ledger`]).
    ///
    /// [`Ledger`]: crate::ledger::Ledger
    entries: Mutex<foldhash::HashMap<EntryKey, Entry>>,
    next_generation: Mutex<u64>,
    /// Wakes the idle task when the first lock is registered.
    registered: Notify,
}

/// A watchdog registration that is surely held (see [`Watchdog::surely_held`]).
#[derive(Debug)]
pub(crate) struct Registration {
    /// Its generation (see [`Watchdog::lost`]).
    pub(crate) generation: u64,
    /// The token its loss cancels.
    pub(crate) lost: CancellationToken,
    /// When the last renewal (or acquire) that Redis confirmed was sent.
    pub(crate) renewed_at: Instant,
}

/// The client's watchdog.
#[derive(Debug)]
pub(crate) struct Watchdog {
    watched: Arc<Watched>,
    timeout: Duration,
    /// How long after its last confirmed renewal was sent a hold counts as surely held (see
    /// [`Watchdog::surely_held`]).
    sure_for: Duration,
    /// Whether lost-lease metrics carry the lock's name.
    lock_names: bool,
}

impl Watchdog {
    /// Starts the renewal task on `runtime`; it stops when `shutdown` is cancelled.
    pub(crate) fn start(
        config: &Config,
        commands: Commands,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> Self {
        let watched = Arc::new(Watched::default());
        let task = Renewer {
            watched: watched.clone(),
            commands,
            timeout: config.watchdog_timeout,
            interval: config.renewal_interval(),
            retry_delay: config.retry_delay.min(config.renewal_interval()),
            batch_size: config.watchdog_batch_size,
            renewals: Renewals::register(),
            lock_names: config.metrics_lock_names,
        };
        drop(runtime.spawn(task.run(shutdown)));
        Self {
            watched,
            timeout: config.watchdog_timeout,
            sure_for: config
                .watchdog_timeout
                .saturating_sub(config.renewal_interval()),
            lock_names: config.metrics_lock_names,
        }
    }

    /// A watchdog with no renewal task, for the model, which runs the renewals' decisions itself
    /// ([`Watchdog::renewal_replied`]).
    #[cfg(test)]
    pub(crate) fn idle(timeout: Duration) -> Self {
        Self {
            watched: Arc::default(),
            timeout,
            sure_for: timeout,
            lock_names: false,
        }
    }

    /// What a renewal's reply flag for registration `generation` of `field`'s hold of `scope` does,
    /// as the renewal task applies it (`held`: the flag was 1), for the model.
    #[cfg(test)]
    pub(crate) fn renewal_replied(
        &self,
        renewal: &'static Renewal,
        (scope, field, generation): (&str, &str, u64),
        held: bool,
    ) {
        let id = (renewal.name, scope.to_owned(), field.to_owned());
        let mut entries = self.watched.entries.lock();
        replied(
            &mut entries,
            &id,
            generation,
            held,
            Instant::now(),
            self.lock_names,
        );
    }

    /// Every registration of `scope` and its generation, by field, for the model.
    #[cfg(test)]
    pub(crate) fn registrations(&self, scope: &str) -> Vec<(String, u64)> {
        let entries = self.watched.entries.lock();
        let mut registered: Vec<_> = entries
            .iter()
            .filter(|((_, s, _), _)| s == scope)
            .map(|((_, _, field), entry)| (field.clone(), entry.generation))
            .collect();
        registered.sort();
        registered
    }

    /// Whether `field`'s watchdog hold of `scope` is surely still in Redis: registered, not lost, and
    /// its last confirmed renewal (or its acquire) sent less than the timeout minus one renewal
    /// interval ago, on the clock now, so the key has at least that interval left whatever the
    /// renewal task is doing. Returns the registration (see [`Registration`]).
    pub(crate) fn surely_held(
        &self,
        renewal: &'static Renewal,
        scope: &str,
        field: &str,
    ) -> Option<Registration> {
        let entries = self.watched.entries.lock();
        let entry = entries.get(&(renewal.name, scope.to_owned(), field.to_owned()))?;
        let sure = !entry.lost.is_cancelled() && entry.renewed_at.elapsed() < self.sure_for;
        sure.then(|| Registration {
            generation: entry.generation,
            lost: entry.lost.clone(),
            renewed_at: entry.renewed_at,
        })
    }

    /// Declares the registration `generation` of `field`'s hold of `scope` lost (the engine learnt
    /// that its field is gone): its holders' lease-lost token is cancelled and renewal stops. A
    /// newer registration is left alone.
    pub(crate) fn lost(
        &self,
        renewal: &'static Renewal,
        scope: &str,
        field: &str,
        generation: u64,
    ) {
        let mut entries = self.watched.entries.lock();
        let id = (renewal.name, scope.to_owned(), field.to_owned());
        if entries
            .get(&id)
            .is_some_and(|entry| entry.generation == generation)
            && let Some(entry) = entries.remove(&id)
        {
            entry.lose(LostBecause::Gone, self.lock_names);
        }
    }

    /// Registers `field`'s hold of `held` (a lock of `kind`), acquired by a script sent at
    /// `sent_at`, to be renewed by `renewal`; `lost` is cancelled if it is lost. Registering a hold
    /// already registered only takes `sent_at` into account. Returns the registration's generation.
    pub(crate) fn register(
        &self,
        renewal: &'static Renewal,
        kind: KindLabel,
        held: Renewed<'_>,
        field: &str,
        sent_at: Instant,
        lost: &CancellationToken,
    ) -> u64 {
        let mut entries = self.watched.entries.lock();
        let first = entries.is_empty();
        let entry = entries
            .entry((renewal.name, held.scope.to_owned(), field.to_owned()))
            .or_insert_with(|| {
                let mut next = self.watched.next_generation.lock();
                *next += 1;
                Entry {
                    generation: *next,
                    renewal,
                    key: held.key.to_owned(),
                    part: held.part.into(),
                    kind,
                    lost: lost.clone(),
                    renewed_at: sent_at,
                }
            });
        if entry.lost.is_cancelled() {
            // What was registered was lost (every record deregisters as it ends, so this is a
            // late loss): the registration is the new record's, with a generation of its own.
            let mut next = self.watched.next_generation.lock();
            *next += 1;
            entry.generation = *next;
            entry.lost = lost.clone();
            entry.renewed_at = sent_at;
        }
        // The acquire applied the lease from `sent_at` at the earliest: the key is known held as
        // long as after a renewal sent then.
        entry.renewed_at = entry.renewed_at.max(sent_at);
        let generation = entry.generation;
        drop(entries);
        if first {
            self.watched.registered.notify_one();
        }
        generation
    }

    /// Stops renewing `field`'s hold of `scope` (before the hash changes).
    pub(crate) fn deregister(&self, renewal: &'static Renewal, scope: &str, field: &str) {
        let id = (renewal.name, scope.to_owned(), field.to_owned());
        let _ = self.watched.entries.lock().remove(&id);
    }

    /// Stops renewing `scope` under every renewal and tells its holders the lock is gone (after a
    /// force unlock).
    pub(crate) fn forget(&self, scope: &str) {
        self.watched.entries.lock().retain(|(_, s, _), entry| {
            let keep = s != scope;
            if !keep {
                entry.lost.cancel();
            }
            keep
        });
    }

    /// The lease watchdog locks are acquired and renewed with.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How many locks are being renewed (one renewed by several owners counts once).
    pub(crate) fn lock_count(&self) -> usize {
        let entries = self.watched.entries.lock();
        let mut locks: Vec<_> = entries
            .keys()
            .map(|(renewal, scope, _)| (*renewal, scope))
            .collect();
        locks.sort_unstable();
        locks.dedup();
        locks.len()
    }
}

struct Renewer {
    watched: Arc<Watched>,
    commands: Commands,
    timeout: Duration,
    interval: Duration,
    retry_delay: Duration,
    batch_size: usize,
    renewals: Renewals,
    /// Whether lost-lease metrics carry the lock's name.
    lock_names: bool,
}

impl Renewer {
    async fn run(self, shutdown: CancellationToken) {
        let mut delay = self.interval;
        loop {
            if self.watched.entries.lock().is_empty() {
                let registered = self.watched.registered.notified();
                tokio::pin!(registered);
                let _ = registered.as_mut().enable();
                if self.watched.entries.lock().is_empty() {
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
    /// renewal: waiting for a slow renewal round (or sleeping until the next one) must not delay
    /// the signal past the point where another client can take the lock.
    async fn watching_leases<T>(&self, work: impl Future<Output = T>) -> T {
        tokio::pin!(work);
        loop {
            let lease_end = self
                .watched
                .entries
                .lock()
                .values()
                .map(|entry| entry.renewed_at + self.lease_known())
                .min();
            tokio::select! {
                output = &mut work => return output,
                () = tokio::time::sleep_until(lease_end.unwrap_or_else(|| Instant::now() + self.interval)) => {
                    self.expire_overdue();
                }
            }
        }
    }

    /// Renews every registered lock; returns false if some batch failed and needs a quick retry. A
    /// batch holds locks of one renewal script and, where a script may not cross slots (a cluster,
    /// reached as one or behind a proxy), of one slot.
    async fn renew_all(&self) -> bool {
        let started = Instant::now();
        let mut locks = 0;
        let mut batches: HashMap<(&'static str, Option<Slot>), Vec<Renewing>> = HashMap::new();
        for ((name, scope, field), entry) in self.watched.entries.lock().iter() {
            let slot = self.commands.batch_slot(&entry.key);
            batches.entry((name, slot)).or_default().push(Renewing {
                renewal: entry.renewal,
                scope: scope.clone(),
                key: entry.key.clone(),
                part: entry.part.clone(),
                generation: entry.generation,
                field: [field.clone()],
            });
        }
        let mut all_ok = true;
        for batched in batches.values() {
            locks += batched.len();
            for batch in batched.chunks(self.batch_size) {
                all_ok &= self.renew_batch(batch).await;
            }
        }
        self.renewals.round(locks, all_ok, started.elapsed());
        all_ok
    }

    async fn renew_batch(&self, batch: &[Renewing]) -> bool {
        let Some(renewal) = batch.first().map(|lock| lock.renewal) else {
            return true;
        };
        let mut call = ScriptCall::new(renewal.script).arg(self.timeout.as_millis());
        for lock in batch {
            call = (renewal.add)(call, &lock.key, &lock.field, &lock.part);
        }
        let sent_at = Instant::now();
        let written = match self.commands.get(Operation::Renew, Subject::CLIENT).await {
            Ok(mut conn) => self.commands.write(&mut conn, &call).await,
            Err(e) => {
                tracing::warn!(error = %e, locks = batch.len(), "watchdog cannot get a connection");
                return false;
            }
        };
        let flags = match written {
            Written::Ran(Value::Array(flags)) if flags.len() == batch.len() => flags,
            Written::Unsynced {
                reply: Value::Array(flags),
                replicas,
            } if flags.len() == batch.len() => {
                tracing::warn!(replicas, "no replica acknowledged a renewal");
                flags
            }
            Written::Ran(other) | Written::Unsynced { reply: other, .. } => {
                tracing::warn!(reply = ?other, "watchdog got an unexpected renewal reply");
                return false;
            }
            Written::Refused(e) | Written::Unknown(crate::connection::Unknown::Broken(e)) => {
                tracing::warn!(error = %e, locks = batch.len(), "watchdog renewal failed");
                return false;
            }
            Written::Unknown(crate::connection::Unknown::TimedOut(_)) => {
                tracing::warn!(locks = batch.len(), "watchdog renewal timed out");
                return false;
            }
            Written::Unsent(after) => {
                tracing::warn!(
                    locks = batch.len(),
                    ?after,
                    "watchdog renewal found no free connection slot"
                );
                return false;
            }
        };
        let mut entries = self.watched.entries.lock();
        for (lock, flag) in batch.iter().zip(flags) {
            let [field] = &lock.field;
            let id = (renewal.name, lock.scope.clone(), field.clone());
            let held = flag == Value::Int(1);
            replied(
                &mut entries,
                &id,
                lock.generation,
                held,
                sent_at,
                self.lock_names,
            );
        }
        true
    }

    /// How long after a confirmed renewal was sent the lock is still known to be held.
    fn lease_known(&self) -> Duration {
        self.timeout
            .saturating_sub(LOSS_MARGIN.min(self.timeout / 10))
    }

    /// Declares lost every lock whose last confirmed renewal was sent a whole lease ago. The
    /// renewal ran after it was sent, so Redis expires the key no earlier than this: the holder
    /// hears of the loss before anyone else can acquire.
    fn expire_overdue(&self) {
        let now = Instant::now();
        self.watched.entries.lock().retain(|_, entry| {
            let alive = now.duration_since(entry.renewed_at) < self.lease_known();
            if !alive {
                entry.lose(LostBecause::NotRenewed, self.lock_names);
            }
            alive
        });
    }
}

/// What one flag of a renewal's reply does to registration `generation` of `id` (a newer one is
/// left alone): renewed from `sent_at` if the field `held` the lock, else lost and removed.
fn replied(
    entries: &mut foldhash::HashMap<EntryKey, Entry>,
    id: &EntryKey,
    generation: u64,
    held: bool,
    sent_at: Instant,
    lock_names: bool,
) {
    let Some(entry) = entries.get_mut(id).filter(|e| e.generation == generation) else {
        return;
    };
    if held {
        entry.renewed_at = sent_at;
    } else if let Some(entry) = entries.remove(id) {
        entry.lose(LostBecause::Gone, lock_names);
    }
}

/// One lock of a renewal batch, as registered when the batch was put together.
struct Renewing {
    renewal: &'static Renewal,
    scope: String,
    key: String,
    part: Arc<[String]>,
    generation: u64,
    /// The one field whose hold it renews (a slice of one, as `Renewal::add` takes it).
    field: [String; 1],
}
