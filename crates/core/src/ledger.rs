//! The hold ledger: what this client knows of its own holds, one record per owner's hold in Redis.
//!
//! # Implementation details
//!
//! Redis counts one owner's holds of a lock in one hash field: however many guards an owner has
//! (nested `lock()`s, two futures of one [`Owner::scope`](crate::Owner::scope), holds through two
//! kinds that share the lock's hash), they stand or fall together. The ledger keeps that as a
//! **record** per (scope, field), the scope as `LockWire::scope` names it (the lock's key; the
//! group lock's key and values). Every guard is a **member** of its owner's record, with its own
//! lease (the watchdog's, or fixed until an instant), and the record is the one place that owns:
//!
//! - **the watchdog registration**: registered (one per (renewal, scope, field): renewal is per
//!   owner) while some member's lease is the watchdog's, and deregistered when the last such member
//!   leaves, before the hash changes. A fixed-lease member never ends another member's renewal.
//! - **the lease-lost token** every member observes. It is cancelled when the watchdog finds the
//!   field gone (or cannot renew it for a whole lease), when a re-entry's script finds the field
//!   gone (the hold was deleted behind the members' back: a force unlock, a `DEL`, an expiry; the
//!   script writes nothing then, and the engine sends a fresh acquire), when a release finds the
//!   field gone while other members remain, and on this client's force unlock. A fixed-lease member
//!   is also lost at its own end.
//! - **a generation**: a record that ended (lost, replaced by a hold created afresh, released) is
//!   never revived. A member of an ended record is *stale*: its release sends nothing, so a guard
//!   dropped late cannot take a count from a later hold of the same owner.
//! - **the lease the key is given**: a re-entry's script, and a partial release, are sent the
//!   longest time any live member was promised ([`Sending::covering`], [`Left::Partially`]), never
//!   the latest member's lease (which would shorten the key under a longer member), and never a
//!   full lease for a member whose time is partly gone (which would stretch a fixed lease past its
//!   end).
//!
//! Holds lent along a streak of free hand-offs (`cohort::Streak`) are members of a *lent* record:
//! Redis holds the streak root's field meanwhile, renewed by the root's registration, which the
//! streak took over ([`Ledger::remove_last`]); a lent record registers nothing and observes the
//! streak's token.
//!
//! Lock order: the ledger calls the watchdog under its own lock; the watchdog never calls back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use smallvec::SmallVec;
use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::telemetry::{self, KindLabel, LostBecause};
use crate::watchdog::{Renewal, Renewed, Watchdog};

/// Every record of this client, by scope, then field.
///
/// Keyed by scope, then field, so that looking one up borrows the caller's strings: every lock and
/// unlock asks. Hashed with foldhash (randomly seeded, as is `std`'s SipHash), as are the other
/// maps every lock and unlock looks in: SipHash of a key and a field took more CPU per uncontended
/// cycle than any other step of rlock's own.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    records: Mutex<foldhash::HashMap<String, foldhash::HashMap<String, Record>>>,
    /// The generation the next record takes (the first is 1: 0 names no record).
    generations: AtomicU64,
    /// Whether lost-lease metrics carry the lock's name.
    lock_names: bool,
}

/// One owner's hold of one scope, as Redis counts it in the owner's field; *pending* while it has
/// no member but acquire attempts of the owner on the wire.
#[derive(Debug)]
struct Record {
    generation: u64,
    /// Cancelled when the hold is lost: every member observes it.
    lost: CancellationToken,
    /// Members whose lease is the watchdog's (a lent record's: the streak root's registration).
    renewed: u32,
    /// The ends of the fixed-lease members.
    fixed: SmallVec<[Instant; 1]>,
    /// The generation of the watchdog registration, while the record has one.
    registration: Option<u64>,
    /// Lent along a streak of free hand-offs: renewed by the root's registration, never registered.
    lent: bool,
    /// Acquire attempts of the owner on the wire (see [`Ledger::attempting`]).
    attempts: u32,
    /// Woken when the last of those attempts is answered, for a release of the owner that waits
    /// for them (see [`Ledger::answered`]); made by the first such release.
    answered: Option<Arc<Notify>>,
    /// The connection the latest hold was taken on, if it came from Redis (a pool checkout less per
    /// release).
    conn: Option<Connection>,
}

impl Record {
    fn new(generation: u64, lost: CancellationToken, lent: bool, attempts: u32) -> Self {
        Self {
            generation,
            lost,
            renewed: 0,
            fixed: SmallVec::new(),
            registration: None,
            lent,
            attempts,
            answered: None,
            conn: None,
        }
    }

    /// Tells the members that the hold is lost. A lent record's token is its streak's, which the
    /// streak cancels itself when its hold is lost: ending one lent holder's record must not tell
    /// every holder of the streak.
    fn end(&self) {
        if !self.lent {
            self.lost.cancel();
        }
    }

    fn members(&self) -> u32 {
        self.renewed + u32::try_from(self.fixed.len()).unwrap_or(u32::MAX)
    }

    /// The longest time a member was promised, from `now`, in whole milliseconds rounded up (the
    /// scripts take milliseconds: rounded down, the key would expire before the member's end): the
    /// watchdog timeout while one is renewed, else the latest fixed end; `None` without members.
    fn covering(&self, now: Instant, timeout: Duration) -> Option<Duration> {
        let fixed = self
            .fixed
            .iter()
            .map(|end| whole_millis_up(end.saturating_duration_since(now)))
            .max();
        match (self.renewed > 0, fixed) {
            (true, fixed) => Some(fixed.map_or(timeout, |fixed| fixed.max(timeout))),
            (false, fixed) => fixed,
        }
    }

    /// Takes one member out: the one whose lease `member` says (a watchdog member, or the fixed one
    /// ending then), else any (a release by owner rather than by guard).
    fn remove(&mut self, member: Option<&Expiry>) {
        let fixed_at = |end: Instant| self.fixed.iter().position(|e| *e == end);
        let position = match member.map(|member| member.until) {
            Some(None) if self.renewed > 0 => None,
            Some(Some(end)) => fixed_at(end).or_else(|| self.fixed.len().checked_sub(1)),
            _ if self.renewed > 0 => None,
            _ => self.fixed.len().checked_sub(1),
        };
        match position {
            Some(i) => drop(self.fixed.remove(i)),
            None => self.renewed = self.renewed.saturating_sub(1),
        }
    }
}

/// What the ledger needs of a lock to register its records with the watchdog.
#[derive(Clone, Copy)]
pub(crate) struct Books<'a> {
    pub(crate) watchdog: &'a Watchdog,
    pub(crate) renewal: &'static Renewal,
    pub(crate) kind: KindLabel,
    pub(crate) held: Renewed<'a>,
}

impl Books<'_> {
    fn deregister(&self, field: &str, record: &mut Record) {
        if record.registration.take().is_some() {
            self.watchdog
                .deregister(self.renewal, self.held.scope, field);
        }
    }
}

/// What a release of one member left.
#[derive(Debug)]
pub(crate) enum Left {
    /// The member's record ended before (lost, or replaced by a hold created afresh): nothing of
    /// this member is in Redis.
    Stale,
    /// No record: a hold passed to a waiter that is gone before it took it up, or one this client
    /// never counted.
    Unknown,
    /// Other members remain: the key is given `lease`, the longest time one of them was promised
    /// (at least the watchdog timeout while an acquire attempt of the owner is on the wire).
    Partially {
        lease: Duration,
        conn: Option<Connection>,
    },
    /// The record's last member: `lease` is what it had left, or the watchdog timeout while an
    /// acquire attempt of the owner is on the wire (which may re-enter before this release runs);
    /// it is re-applied only should Redis count more holds than this client did.
    Last {
        lease: Duration,
        conn: Option<Connection>,
    },
}

/// The record of `field` in `fields`, ended (told, deregistered) and replaced by a pending record of
/// a new generation that keeps its attempts on the wire, or removed if it has none. The caller
/// tells telemetry.
fn end_record(
    fields: &mut foldhash::HashMap<String, Record>,
    field: &str,
    books: Option<&Books<'_>>,
    generations: &AtomicU64,
) {
    let Some(record) = fields.get_mut(field) else {
        return;
    };
    if let Some(books) = books {
        books.deregister(field, record);
    }
    record.end();
    if record.attempts == 0 {
        let _ = fields.remove(field);
    } else {
        let answered = record.answered.take();
        *record = Record::new(
            next(generations),
            CancellationToken::new(),
            false,
            record.attempts,
        );
        // The attempts on the wire are the pending record's now, and so are their waiters.
        record.answered = answered;
    }
}

/// `duration` in whole milliseconds, rounded up.
fn whole_millis_up(duration: Duration) -> Duration {
    let millis = duration.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// The next record generation.
fn next(generations: &AtomicU64) -> u64 {
    generations.fetch_add(1, Ordering::Relaxed) + 1
}

impl Ledger {
    pub(crate) fn new(lock_names: bool) -> Self {
        Self {
            lock_names,
            ..Self::default()
        }
    }

    /// How many members `field`'s record of `scope` has (0 without a record).
    pub(crate) fn count(&self, scope: &str, field: &str) -> u32 {
        self.with(scope, field, |record| record.members())
            .unwrap_or(0)
    }

    /// The generation of `field`'s record of `scope`, 0 without one.
    pub(crate) fn generation(&self, scope: &str, field: &str) -> u64 {
        self.with(scope, field, |record| record.generation)
            .unwrap_or(0)
    }

    /// Whether `field` holds `scope` through its own field in Redis: its record has members and was
    /// not lent along a streak.
    pub(crate) fn holds_in_redis(&self, scope: &str, field: &str) -> bool {
        self.with(scope, field, |record| !record.lent && record.members() > 0)
            .unwrap_or(false)
    }

    /// Whether `member` belongs to a record that ended: nothing of it is in Redis any more.
    pub(crate) fn is_stale(&self, scope: &str, field: &str, member: Option<&Expiry>) -> bool {
        member.is_some_and(|member| self.generation(scope, field) != member.record)
    }

    /// What an acquire attempt of `field` that asks for `lease` is sent with, read at once: the
    /// owner's hold count (the count its undo compares with), its record's generation (0 without
    /// one), and the lease (see [`Sending`]).
    pub(crate) fn sending(
        &self,
        scope: &str,
        field: &str,
        lease: Duration,
        timeout: Duration,
    ) -> Sending {
        self.sending_at(scope, field, lease, timeout, Instant::now())
    }

    /// [`Ledger::sending`] at the instant `now` (the model's clock is its own).
    pub(crate) fn sending_at(
        &self,
        scope: &str,
        field: &str,
        lease: Duration,
        timeout: Duration,
        now: Instant,
    ) -> Sending {
        self.with(scope, field, |record| {
            let lease = if record.lost.is_cancelled() {
                lease
            } else {
                let covered = record
                    .covering(now, timeout)
                    .map_or(lease, |covered| covered.max(lease));
                if record.attempts > 1 {
                    covered.max(timeout)
                } else {
                    covered
                }
            };
            Sending {
                held_before: record.members(),
                generation: record.generation,
                covering: lease,
            }
        })
        .unwrap_or(Sending {
            held_before: 0,
            generation: 0,
            covering: lease,
        })
    }

    /// An acquire attempt of `field` on `scope` is about to go on the wire: until the returned mark
    /// is dropped, the owner's last hold does not pass without Redis (see [`Ledger::remove_last`]:
    /// the attempt may re-enter the field in Redis), and the owner's other acquisitions and last
    /// release do not shorten the key (see [`Sending::covering`], [`Left::Last`]).
    pub(crate) fn attempting<'a>(&'a self, scope: &'a str, field: &'a str) -> Attempting<'a> {
        let mut records = self.records.lock();
        let fields = match records.get_mut(scope) {
            Some(fields) => fields,
            None => records.entry(scope.to_owned()).or_default(),
        };
        match fields.get_mut(field) {
            Some(record) => record.attempts += 1,
            None => {
                let pending =
                    Record::new(next(&self.generations), CancellationToken::new(), false, 1);
                let _ = fields.insert(field.to_owned(), pending);
            }
        }
        Attempting {
            ledger: self,
            scope,
            field,
        }
    }

    /// Records a hold of `field` that Redis confirmed (its script sent at `sent_at`, on `conn`
    /// unless it was passed locally), of the lease `until` says (`None`: the watchdog's): a member
    /// of the owner's record, or of a new one when the record was lost (a lost record is never
    /// revived). Returns the hold's expiry.
    pub(crate) fn join(
        &self,
        books: &Books<'_>,
        field: &str,
        until: Option<Instant>,
        sent_at: Instant,
        conn: Option<&Connection>,
    ) -> Expiry {
        let scope = books.held.scope;
        let mut records = self.records.lock();
        let fields = match records.get_mut(scope) {
            Some(fields) => fields,
            None => records.entry(scope.to_owned()).or_default(),
        };
        if fields
            .get(field)
            .is_some_and(|record| record.lost.is_cancelled() || record.lent)
        {
            end_record(fields, field, Some(books), &self.generations);
        }
        let record = match fields.get_mut(field) {
            Some(record) => record,
            None => fields.entry(field.to_owned()).or_insert_with(|| {
                Record::new(next(&self.generations), CancellationToken::new(), false, 0)
            }),
        };
        match until {
            None => {
                record.renewed += 1;
                record.registration = Some(books.watchdog.register(
                    books.renewal,
                    books.kind,
                    books.held,
                    field,
                    sent_at,
                    &record.lost,
                ));
            }
            Some(end) => record.fixed.push(end),
        }
        record.conn = conn.cloned();
        Expiry {
            lost: record.lost.clone(),
            until,
            record: record.generation,
        }
    }

    /// Counts a hold lent to `field` along a streak whose hold's token is `lost` (a lend, or the
    /// lent holder's re-entry): a member of `field`'s lent record, which registers nothing and
    /// observes the streak's token. Returns the record's generation.
    pub(crate) fn lend(&self, scope: &str, field: &str, lost: &CancellationToken) -> u64 {
        let mut records = self.records.lock();
        let fields = match records.get_mut(scope) {
            Some(fields) => fields,
            None => records.entry(scope.to_owned()).or_default(),
        };
        let record = fields
            .entry(field.to_owned())
            .or_insert_with(|| Record::new(next(&self.generations), lost.clone(), true, 0));
        if !record.lent && record.members() == 0 {
            // A pending record (an attempt of the waiter still on the wire) becomes the lent one.
            record.lent = true;
            record.lost = lost.clone();
        }
        record.renewed += 1;
        record.generation
    }

    /// Takes one member out of `field`'s record (`member`, or any for a release by owner); the
    /// record's renewal stops with its last watchdog member, before the caller changes the hash.
    pub(crate) fn leave(&self, books: &Books<'_>, field: &str, member: Option<&Expiry>) -> Left {
        self.leave_at(books, field, member, Instant::now())
    }

    /// [`Ledger::leave`] at the instant `now` (the model's clock is its own).
    pub(crate) fn leave_at(
        &self,
        books: &Books<'_>,
        field: &str,
        member: Option<&Expiry>,
        now: Instant,
    ) -> Left {
        let scope = books.held.scope;
        let timeout = books.watchdog.timeout();
        let mut records = self.records.lock();
        let record = records
            .get_mut(scope)
            .and_then(|fields| fields.get_mut(field))
            .filter(|record| record.members() > 0);
        let Some(record) = record else {
            return if member.is_some() {
                Left::Stale
            } else {
                Left::Unknown
            };
        };
        if member.is_some_and(|member| member.record != record.generation) {
            return Left::Stale;
        }
        let leaving = member.map_or(timeout, |member| member.left(now, timeout));
        record.remove(member);
        if record.renewed == 0 {
            books.deregister(field, record);
        }
        // An attempt of the owner on the wire may have re-entered in Redis already, its reply still
        // on its way: the key keeps at least a watchdog lease for it.
        let in_flight = if record.attempts > 0 {
            timeout
        } else {
            Duration::from_millis(1)
        };
        if let Some(lease) = record.covering(now, timeout) {
            return Left::Partially {
                lease: lease.max(in_flight),
                conn: record.conn.clone(),
            };
        }
        let left = Left::Last {
            lease: if record.attempts > 0 {
                timeout
            } else {
                leaving
            },
            conn: record.conn.take(),
        };
        if record.attempts == 0 {
            self.remove(&mut records, scope, field);
        }
        left
    }

    /// Forgets the last hold of `field`, if it has exactly one and no acquire attempt of the owner
    /// is on the wire (which Redis could count after a hold passed without Redis): whether it did.
    /// Its watchdog registration stays: a streak of free hand-offs takes it over.
    pub(crate) fn remove_last(&self, scope: &str, field: &str) -> bool {
        let mut records = self.records.lock();
        let last = records
            .get(scope)
            .and_then(|fields| fields.get(field))
            .is_some_and(|record| record.members() == 1 && record.attempts == 0);
        if last {
            self.remove(&mut records, scope, field);
        }
        last
    }

    /// `field`'s hold of the scope is gone from Redis (a re-entry or a release found no field while
    /// the record had members, or a streak no longer counts its lent holder): its record (of
    /// `generation`, if given) ends, its members are told, and its renewal stops.
    pub(crate) fn lose(&self, books: &Books<'_>, field: &str, generation: Option<u64>) {
        let scope = books.held.scope;
        let mut records = self.records.lock();
        let Some(fields) = records.get_mut(scope) else {
            return;
        };
        let Some(record) = fields.get(field) else {
            return;
        };
        if generation.is_some_and(|generation| record.generation != generation) {
            return;
        }
        if !record.lost.is_cancelled() && !record.lent && record.members() > 0 {
            telemetry::lease_lost(
                books.kind,
                books.held.key,
                LostBecause::Gone,
                self.lock_names,
            );
        }
        end_record(fields, field, Some(books), &self.generations);
        if fields.is_empty() {
            let _ = records.remove(scope);
        }
    }

    /// This client force-unlocked `scope`: every record of it ends and its members are told.
    pub(crate) fn lose_scope(&self, watchdog: &Watchdog, scope: &str) {
        watchdog.forget(scope);
        let mut records = self.records.lock();
        let Some(fields) = records.get_mut(scope) else {
            return;
        };
        let ended: Vec<String> = fields.keys().cloned().collect();
        for field in ended {
            // The watchdog forgot their registrations already.
            if let Some(record) = fields.get_mut(&field) {
                record.registration = None;
                record.lost.cancel();
            }
            end_record(fields, &field, None, &self.generations);
        }
        if fields.is_empty() {
            let _ = records.remove(scope);
        }
    }

    /// Makes `member` a fixed-lease member ending at `until` (a multi-lock gives its members their
    /// final lease): renewal stops with the record's last watchdog member. Returns the member's new
    /// expiry and the lease the key must be given: at least what the other members were promised.
    /// `None` when `member` is stale.
    pub(crate) fn relet(
        &self,
        books: &Books<'_>,
        field: &str,
        member: &Expiry,
        until: Instant,
    ) -> Option<(Expiry, Duration)> {
        let now = Instant::now();
        let mut records = self.records.lock();
        let record = records.get_mut(books.held.scope)?.get_mut(field)?;
        if record.generation != member.record {
            return None;
        }
        record.remove(Some(member));
        if record.renewed == 0 {
            books.deregister(field, record);
        }
        let others = record.covering(now, books.watchdog.timeout());
        record.fixed.push(until);
        let lease = whole_millis_up(until.saturating_duration_since(now));
        let expiry = Expiry {
            lost: record.lost.clone(),
            until: Some(until),
            record: record.generation,
        };
        Some((expiry, others.map_or(lease, |others| others.max(lease))))
    }

    /// Marks an acquire attempt of `field` on the wire until [`Ledger::attempted`]: what
    /// [`Ledger::attempting`] does, for the model, whose marks outlive a borrow.
    #[cfg(test)]
    pub(crate) fn attempt_sent(&self, scope: &str, field: &str) {
        std::mem::forget(self.attempting(scope, field));
    }

    /// The end of an attempt's mark (see [`Ledger::attempting`]): on whatever record the owner has
    /// by then.
    fn attempted(&self, scope: &str, field: &str) {
        let mut records = self.records.lock();
        let Some(record) = records
            .get_mut(scope)
            .and_then(|fields| fields.get_mut(field))
        else {
            return;
        };
        record.attempts = record.attempts.saturating_sub(1);
        if record.attempts > 0 {
            return;
        }
        if let Some(answered) = record.answered.take() {
            answered.notify_waiters();
        }
        if record.members() == 0 {
            self.remove(&mut records, scope, field);
        }
    }

    /// While an acquire attempt of `field` on `scope` is on the wire (another future of the owner,
    /// re-entering): a future that completes once the last of them was answered (its reply seen,
    /// or its undo registered with [`crate::reconciling`]). A release of the owner waits for it
    /// before it sends anything: an attempt whose reply is lost is undone by comparing the owner's
    /// count with the count it was sent with, which a release that ran in between would have taken
    /// one off, leaving the attempt's hold in Redis, counted by nobody (docs/protocol.md §2.9).
    pub(crate) fn answered(&self, scope: &str, field: &str) -> Option<OwnedNotified> {
        let mut records = self.records.lock();
        let record = records.get_mut(scope)?.get_mut(field)?;
        (record.attempts > 0).then(|| {
            let answered = record.answered.get_or_insert_with(Arc::default);
            // Made under the lock, before the last attempt can end: `notify_waiters` wakes a
            // future made before it, polled or not.
            answered.clone().notified_owned()
        })
    }

    /// [`Ledger::attempted`], for the model (see [`Ledger::attempt_sent`]).
    #[cfg(test)]
    pub(crate) fn attempt_ended(&self, scope: &str, field: &str) {
        self.attempted(scope, field);
    }

    /// Every record of `scope`, by field: its members, attempts on the wire, whether it is lent and
    /// whether it is lost, for the model's snapshot.
    #[cfg(test)]
    pub(crate) fn records(&self, scope: &str) -> Vec<(String, u32, u32, bool, bool)> {
        let records = self.records.lock();
        let mut of_scope: Vec<_> = records
            .get(scope)
            .into_iter()
            .flatten()
            .map(|(field, record)| {
                let lost = record.lost.is_cancelled();
                (
                    field.clone(),
                    record.members(),
                    record.attempts,
                    record.lent,
                    lost,
                )
            })
            .collect();
        of_scope.sort();
        of_scope
    }

    fn with<T>(&self, scope: &str, field: &str, f: impl FnOnce(&mut Record) -> T) -> Option<T> {
        self.records
            .lock()
            .get_mut(scope)
            .and_then(|fields| fields.get_mut(field))
            .map(f)
    }

    /// Removes `field`'s record of `scope`, and the scope once it has none.
    fn remove(
        &self,
        records: &mut foldhash::HashMap<String, foldhash::HashMap<String, Record>>,
        scope: &str,
        field: &str,
    ) {
        if let Some(fields) = records.get_mut(scope) {
            let _ = fields.remove(field);
            if fields.is_empty() {
                let _ = records.remove(scope);
            }
        }
    }
}

/// What an acquire attempt is sent with (see [`Ledger::sending`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sending {
    /// The owner's hold count as this client knows it: its record's members.
    pub(crate) held_before: u32,
    /// The generation of the owner's record, 0 without one.
    pub(crate) generation: u64,
    /// The lease asked for, or longer: at least the longest time a live member of the owner's
    /// record was promised, and the watchdog timeout while another attempt of the owner is on the
    /// wire (it may have made a hold whose reply is still on its way), so that an acquisition never
    /// shortens the key under another hold of its owner (the RLock family's scripts set the key's
    /// TTL to the lease they are sent, on re-entry too).
    pub(crate) covering: Duration,
}

/// An acquire attempt on the wire (see [`Ledger::attempting`]).
#[derive(Debug)]
pub(crate) struct Attempting<'a> {
    ledger: &'a Ledger,
    scope: &'a str,
    field: &'a str,
}

impl Drop for Attempting<'_> {
    fn drop(&mut self) {
        self.ledger.attempted(self.scope, self.field);
    }
}

/// How one hold can end without being released: its record's token (the watchdog found the lock
/// gone, the field was created afresh, a force unlock), and for a fixed lease its end.
#[derive(Clone, Debug)]
pub(crate) struct Expiry {
    lost: CancellationToken,
    /// A fixed lease's end (measured from when the acquire was sent); `None` for a hold the
    /// watchdog (or a streak's root registration) renews.
    until: Option<Instant>,
    /// The generation of the record the hold is a member of; 0 for none.
    record: u64,
}

impl Expiry {
    /// A renewed hold's expiry outside any record: told when `lost` is cancelled.
    pub(crate) fn watchdog(lost: CancellationToken) -> Self {
        Self {
            lost,
            until: None,
            record: 0,
        }
    }

    /// A fixed lease's expiry outside any record: told at `until`.
    #[cfg(test)]
    pub(crate) fn until(until: Instant) -> Self {
        Self {
            lost: CancellationToken::new(),
            until: Some(until),
            record: 0,
        }
    }

    /// The same expiry, as a member of the record of generation `record`.
    pub(crate) fn in_record(mut self, record: u64) -> Self {
        self.record = record;
        self
    }

    /// The token whose cancellation tells the hold it is lost.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.lost
    }

    /// A fixed lease's end; `None` for a renewed hold.
    pub(crate) fn fixed_end(&self) -> Option<Instant> {
        self.until
    }

    /// How long the hold has left from `now`, in whole milliseconds rounded up (at least one): a
    /// renewed one the watchdog timeout.
    fn left(&self, now: Instant, timeout: Duration) -> Duration {
        self.until.map_or(timeout, |end| {
            whole_millis_up(end.saturating_duration_since(now)).max(Duration::from_millis(1))
        })
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.is_cancelled() || self.until.is_some_and(|end| Instant::now() >= end)
    }

    /// Completes when the hold is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn lost(&self) {
        match self.until {
            None => self.lost.cancelled().await,
            Some(end) => {
                tokio::select! {
                    () = self.lost.cancelled() => {}
                    () = tokio::time::sleep_until(end) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_sent_round_up_to_whole_milliseconds() {
        // A script told 3 ms for 3.85 ms left would let the key expire 0.85 ms before the member's
        // end: the soak's mixed leases found that.
        assert_eq!(
            whole_millis_up(Duration::from_micros(3_850)),
            Duration::from_millis(4)
        );
        assert_eq!(
            whole_millis_up(Duration::from_millis(3)),
            Duration::from_millis(3)
        );
        assert_eq!(
            whole_millis_up(Duration::from_nanos(1)),
            Duration::from_millis(1)
        );
        assert_eq!(whole_millis_up(Duration::ZERO), Duration::ZERO);
    }
}
