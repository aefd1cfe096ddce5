//! Acquisition: the wait loop around a kind's acquire script, with the undo of unknown outcomes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::{RedisError, Value};
use tokio::time::Instant;

use super::admission::admit;
use super::guard::Guard;
use super::hand_off::{Acquired, answered_in_streak, gated_by_streak, listening};
use super::hold::books;
use super::lease::Lease;
use super::lock_wire::{Attempt, LockWire, RECHECK, Taken};
use super::patience::Patience;
use super::release::Releasing;
use super::synced::{Synced, until_synced};
use super::wait::{Listen, Nudge, WaitHooks, wait_on};
use crate::cohort::{Step, Ticket};
use crate::connection::{Commands, Connection, Written, outcome_unknown};
use crate::error::{Error, Operation, Result, Subject};
use crate::ledger::Expiry;
use crate::owner::Owner;
use crate::pubsub::{Listening, Subscription};
use crate::reconciling::{Reconciliation, Reconciling};
use crate::scripts::ScriptCall;
use crate::services::{Background, Services};
use crate::telemetry::{self, Acquisition, Reconciles};

pub(crate) mod plan;

/// Acquires `kind` for `owner`, waiting as `wait` says. `Ok(None)` means the wait ran out.
///
/// A kind that hands off (see [`crate::cohort`]) queues its waiters locally: a caller that holds
/// nothing yet and is prepared to wait joins the lock's local queue, waits there while others are
/// ahead of it, and as the head either tries in Redis or is passed the lock by a local holder.
///
/// A plain function returning the acquisition rather than an `async fn`, which would keep its
/// arguments twice in every waiter's future (as arguments, and as the locals they are moved to).
///
/// # Cancel safety
///
/// Cancel safe: dropping the future at any point leaves no hold behind (an acquire that may have
/// run is undone, see [`Undo`]; a lock passed to it locally is released), no wait-queue entry (the
/// kind's give-up runs; the local queue is left), and a waiter that was woken but dropped before it
/// could retry hands its turn to the next local waiter.
pub(crate) fn acquire<'a, K: LockWire>(
    services: &'a Arc<Services>,
    kind: &'a Arc<K>,
    owner: Owner,
    wait_for: Patience,
    lease: Lease,
) -> impl Future<Output = Result<Option<Guard<K::Token>>>> + 'a {
    // Kept once, in the future; the acquisition borrows them.
    let inputs = Inputs {
        services,
        kind,
        wait_for,
        lease,
    };
    async move {
        // Through `inputs` only: a parameter named here would be kept a second time.
        let Inputs {
            services,
            kind,
            wait_for,
            ..
        } = inputs;
        // In a block: a local that was borrowed keeps its room in the future until its scope ends.
        let field = {
            let base_field = services.field(owner);
            kind.refuse(services, &base_field)?;
            Arc::<str>::from(kind.field(base_field))
        };
        let acquisition = Acquisition::start(
            &services.telemetry,
            kind.label(),
            kind.name(),
            Some(&field),
            wait_for,
        );
        let acquiring = acquire_as(Acquiring {
            inputs: &inputs,
            field: &field,
            acquisition: &acquisition,
            queued: None,
            refused: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            in_streak: AtomicBool::new(false),
            give_up: None,
        });
        let acquired = acquisition.track(acquiring).await;
        acquired.map(|acquired| {
            acquired.map(|(token, expiry)| {
                let kind: Arc<dyn LockWire<Token = K::Token>> = inputs.kind.clone();
                Guard::new(kind, inputs.services.clone(), owner, field, token, expiry)
            })
        })
    }
}

/// What [`acquire`] was called with, kept once in its future.
struct Inputs<'a, K: LockWire> {
    services: &'a Arc<Services>,
    kind: &'a Arc<K>,
    wait_for: Patience,
    lease: Lease,
}

/// One acquisition's inputs, its place in the local queue, its give-up and what its attempts
/// found: what the wait loop's closures borrow, each of them one pointer in a waiter's future
/// rather than a copy of every input. It reads the inputs through [`Inputs`] (its `Deref`), which
/// the acquisition's future keeps once. Dropping it leaves the local queue, then sends an armed
/// give-up (see its `Drop`).
struct Acquiring<'a, K: LockWire> {
    inputs: &'a Inputs<'a, K>,
    /// The owner's field, shared with its local queue entry and its guard.
    field: &'a Arc<str>,
    /// Told of each attempt: the acquisition's span and metrics.
    acquisition: &'a Acquisition<'a>,
    /// Its place in the lock's local queue, once it joined one.
    queued: Option<Queued<K>>,
    /// Set when the kind's script refuses the acquisition (`LockWire::acquire_refused`).
    refused: AtomicBool,
    /// Set when an attempt found the lock busy (a fair waiter is then queued in Redis).
    busy: AtomicBool,
    /// Set when an attempt was answered in the streak open on the key: nothing was written, and
    /// a place the acquisition took in the kind's queue in Redis is still there.
    in_streak: AtomicBool,
    /// The kind's give-up (docs/protocol.md §6.6), armed while the acquisition may be queued in
    /// Redis: run when the wait ran out, sent in the background when the acquisition is dropped or
    /// failed. Boxed: most kinds have none, and every waiter's future would keep room for one.
    give_up: Option<Box<ScriptCall>>,
}

/// [`acquire`] as `acquiring` says: what the guard is made of. A plain function returning the
/// acquisition, as [`acquire`].
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn keeps its arguments twice in every waiter's future"
)]
fn acquire_as<'a, K: LockWire>(
    mut acquiring: Acquiring<'a, K>,
) -> impl Future<Output = Acquired<K::Token>> + 'a {
    async move {
        // Copies of the inputs, used before the wait only: the wait's closures read them through
        // `this`, so that a parked waiter's future does not keep them twice.
        let Inputs {
            services,
            kind,
            wait_for,
            lease,
        } = *acquiring.inputs;
        let Acquiring {
            field, acquisition, ..
        } = acquiring;
        if let Some(answered) = answered_in_streak(services, &**kind, field, wait_for) {
            return answered;
        }
        acquiring.give_up = kind.give_up_call(field, wait_for).map(Box::new);
        // In a block, so that the deadline keeps no room of its own in a parked waiter's future.
        let patience = {
            let deadline = wait_for.deadline();
            acquiring.queued = Queued::join(services, kind, field, wait_for, lease);
            if let Some(queued) = &acquiring.queued {
                if queued.ticket.joined_behind() {
                    acquisition.waiting();
                }
                // Boxed: most acquisitions never wait behind others, and every acquire future
                // would carry it.
                if !Box::pin(queued.ticket.until_head(deadline)).await {
                    return Ok(None);
                }
            }
            deadline.map_or(Patience::Forever, |deadline| {
                Patience::For(deadline.saturating_duration_since(Instant::now()))
            })
        };
        // A bounded wait waits for an undo of its owner's still in flight no longer than its own
        // bound, or than one command timeout for a shorter bound (as long as its own write could
        // take: a one-shot try still waits for an undo about to land): that undo may go on for as
        // long as the lease it undoes.
        let settle_by = patience
            .deadline()
            .map(|deadline| deadline.max(Instant::now() + services.config.command_timeout));
        let this = &acquiring;
        let listen = Listen {
            channel: this.kind.channel(this.field),
            hooks: this,
            acquisition: this.acquisition,
        };
        // In a block of its own, so that the outcome does not stay in the future while a give-up is
        // awaited below (a local that was borrowed keeps its room until its scope ends).
        {
            // What the queue decides and this owner's own writes still in flight are waited out
            // before the client admits the attempt's write (see `engine::admission`): a hold passed
            // locally is taken up at once (its lease is running), and an admitted write holds its
            // admission only while it is built, sent and answered. The write's state (connection
            // checkout, undo, script call, reply futures) lives on the heap, and only while it
            // runs, so a waiting task's future stays small; its type is erased, so that proving a
            // caller's future `Send` does not walk down into the connection's.
            let acquired = wait_on(this.services, listen, patience, move || async move {
                if let Some(queued) = &this.queued
                    && let Some(local) = queued.local_step(this.lease, this.acquisition).await
                {
                    return Ok(local);
                }
                if !settled_by(this.services, &**this.kind, this.field, settle_by).await {
                    // The wait ran out behind the owner's own undo, before anything was sent.
                    return Ok(Attempt::Busy(Duration::ZERO));
                }
                let _admitted = admit(this.services, this.wait_for).await;
                let write: AttemptFuture<'_, K> = Box::pin(this.write());
                write.await
            })
            .await;
            drop(acquiring.queued.take());
            match acquired {
                // An acquisition leaves the queue in its own script, a re-entry of a waiter queued
                // in Redis included (docs/protocol.md §6.4 step 3): telling a re-entry here by the
                // owner's local hold count raced with the release of the owner's other hold.
                Ok(Some(acquired)) => {
                    // A re-entry answered in the streak wrote nothing: a place in the kind's queue
                    // in Redis (a fair lock's) that an earlier attempt took is given up, in the
                    // background, as the acquisition ends.
                    if !acquiring.in_streak.load(Ordering::Relaxed) {
                        acquiring.disarm_give_up();
                    }
                    return Ok(Some(acquired));
                }
                Ok(None) => {}
                // The kind's script refused its first answer: it never waited in Redis, so there
                // is nothing to give up.
                Err(e)
                    if acquiring.refused.load(Ordering::Relaxed)
                        && !acquiring.busy.load(Ordering::Relaxed) =>
                {
                    acquiring.disarm_give_up();
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        // On the caller's task; boxed, as a write's future is kilobytes.
        if let Some(call) = acquiring.give_up.take() {
            Box::pin(give_up(acquiring.services.commands.clone(), *call)).await;
        }
        Ok(None)
    }
}

impl<K: LockWire> Acquiring<'_, K> {
    /// Nothing to give up: the acquisition succeeded, or never waited in Redis.
    fn disarm_give_up(&mut self) {
        self.give_up = None;
    }

    /// One admitted attempt's write, told to the local queue.
    async fn write(&self) -> Result<Attempt<(K::Token, Expiry)>> {
        let (services, kind, field) = (self.services, &**self.kind, self.field);
        // An attempt on the wire (it may re-enter the owner's field in Redis) keeps the owner's last
        // hold from passing without Redis meanwhile; marked before the streak is looked at, so
        // that a hold lent from now on waits for this attempt, and an attempt from now on sees a
        // streak opened before.
        let _attempting = services.ledger.attempting(kind.scope(), field);
        // While a streak of free hand-offs holds the key, only its holder acts on it, and not in
        // Redis, which holds the streak root's field: an acquisition of the holder's that began
        // before the hold was lent to it (another of its futures, through a kind that does not
        // queue locally) re-enters the lent hold here. Sent to Redis, it would find its field gone
        // and take the lent hold for lost.
        match answered_in_streak(services, kind, field, self.wait_for) {
            Some(Ok(Some(taken))) => {
                self.in_streak.store(true, Ordering::Relaxed);
                return Ok(Attempt::Acquired(taken));
            }
            Some(Err(refused)) => return Err(refused),
            Some(Ok(None)) => return Ok(Attempt::Busy(RECHECK)),
            None => {}
        }
        if gated_by_streak(services, kind.scope(), field) {
            return Ok(Attempt::Busy(RECHECK));
        }
        let listening = listening(services, kind, field);
        let attempt = attempt(
            services,
            kind,
            field,
            self.lease,
            self.wait_for,
            &self.refused,
        )
        .await;
        if matches!(attempt, Ok(Attempt::Busy(_))) {
            self.busy.store(true, Ordering::Relaxed);
        }
        let acquired = match &attempt {
            Ok(Attempt::Acquired((_, expiry))) => Some(expiry.clone()),
            _ => None,
        };
        match (&self.queued, acquired) {
            (Some(queued), acquired) => queued.ticket.tried(acquired, listening),
            (None, Some(expiry)) => {
                held_outside_the_queue(services, kind, field, expiry, listening);
            }
            (None, None) => {}
        }
        attempt
    }
}

/// Waits until no write of this owner's on the lock is in flight: an undo of an earlier attempt that
/// may still run, and for the kinds whose attempt counts nothing when refused, a release still
/// running in the background (which the script would take for a hold). Waited before the client
/// admits the attempt's write, so that an admitted write rarely holds its admission through it,
/// and again in [`attempt`], for one begun meanwhile.
async fn settled<K: LockWire>(services: &Services, kind: &K, field: &str) {
    let (key, refuses_reentry) = (kind.key(), kind.refuses_reentry());
    if in_flight(services, kind, field) {
        // Boxed: there is rarely anything to wait for, and every attempt would keep room for it.
        Box::pin(async {
            if refuses_reentry {
                services.releasing.settled(key, field).await;
            }
            services.reconciling.settled(key, field).await;
        })
        .await;
    }
}

/// Whether a write of this owner's on the lock is in flight (see [`settled`]).
fn in_flight<K: LockWire>(services: &Services, kind: &K, field: &str) -> bool {
    let key = kind.key();
    kind.refuses_reentry() && services.releasing.is_pending(key, field)
        || services.reconciling.is_pending(key, field)
}

/// [`settled`], until `until` at the latest (`None`: for as long as it takes): whether nothing of
/// the owner's is in flight any more. An undo keeps trying for as long as the hold it undoes could
/// live (its lease: the watchdog timeout, 30 s by default), so a bounded acquisition that waited
/// for it without a bound would outlast its own bound by as much, and a multi-lock's round would
/// keep its other members held meanwhile.
async fn settled_by<K: LockWire>(
    services: &Services,
    kind: &K,
    field: &str,
    until: Option<Instant>,
) -> bool {
    match until {
        // Nothing in flight, the common case: no timer is made.
        _ if !in_flight(services, kind, field) => true,
        None => {
            settled(services, kind, field).await;
            true
        }
        Some(until) => tokio::time::timeout_at(until, settled(services, kind, field))
            .await
            .is_ok(),
    }
}

/// One attempt's write in flight.
type AttemptFuture<'a, K> =
    Pin<Box<dyn Future<Output = Result<Attempt<(<K as LockWire>::Token, Expiry)>>> + Send + 'a>>;

/// A first hold taken without queueing (a one-shot try) makes its owner the local holder, so that
/// local waiters wait for it rather than try.
fn held_outside_the_queue<K: LockWire>(
    services: &Services,
    kind: &K,
    field: &str,
    expiry: Expiry,
    listening: Option<Listening>,
) {
    if kind.hand_off().is_some()
        && services.config.local_handoff
        && services.ledger.count(kind.scope(), field) == 1
    {
        services
            .cohorts
            .held(kind.scope(), field, expiry, listening);
    }
}

/// A caller's place in the local queue of a kind that hands off, with the channel subscription it
/// keeps while it waits behind others (so the channel is live when it becomes the head). Dropping
/// it leaves the queue and releases a lock passed to it that it did not take up.
struct Queued<K: LockWire> {
    ticket: Ticket,
    services: Arc<Services>,
    kind: Arc<K>,
    _listening: Option<Subscription>,
}

impl<K: LockWire> Queued<K> {
    /// Joins the local queue, unless the kind does not hand off, hand-off is off, the owner already
    /// holds the lock (a re-entry never waits for others) or the caller makes one try only.
    fn join(
        services: &Arc<Services>,
        kind: &Arc<K>,
        field: &Arc<str>,
        patience: Patience,
        lease: Lease,
    ) -> Option<Self> {
        let one_try = patience.one_try();
        if kind.hand_off().is_none()
            || !services.config.local_handoff
            || one_try
            || services.ledger.count(kind.scope(), field) > 0
        {
            return None;
        }
        let renewed = matches!(lease, Lease::Watchdog);
        let ticket = services.cohorts.join(
            kind.scope(),
            kind.label(),
            field.clone(),
            lease_time(services, lease),
            renewed,
        );
        let listening = ticket
            .joined_behind()
            .then(|| kind.channel(field))
            .flatten()
            .map(|(channel, rule)| {
                services
                    .subscriber
                    .registry()
                    .subscribe(channel.into_owned(), rule)
            });
        Some(Self {
            ticket,
            services: services.clone(),
            kind: kind.clone(),
            _listening: listening,
        })
    }

    /// What the queue decides before the head tries in Redis: `None` to try; else the lock was
    /// passed to it, or it waits (for a local holder, or after a real release for the unlock
    /// message) without a try.
    async fn local_step(
        &self,
        lease: Lease,
        acquisition: &Acquisition<'_>,
    ) -> Option<Attempt<(K::Token, Expiry)>> {
        let (services, kind, field) = (&*self.services, &*self.kind, self.ticket.field());
        let hand_off = kind.hand_off()?;
        loop {
            let messages = || {
                kind.channel(field).map_or(0, |(channel, _)| {
                    services.subscriber.registry().messages(&channel)
                })
            };
            match self.ticket.step(messages) {
                Step::Try => return None,
                // Boxed: a claim is rarely unsettled, and every attempt would keep room for it.
                Step::Claimed => Box::pin(self.ticket.settled()).await,
                Step::Held(until) => {
                    let bound = until.map_or(RECHECK, |until| {
                        until.saturating_duration_since(Instant::now())
                    });
                    return Some(Attempt::Busy(bound));
                }
                Step::Yield(bound) => return Some(Attempt::Busy(bound)),
                Step::Passed { reply, sent_at } => {
                    acquisition.handed_off();
                    self.ticket.take();
                    let expiry = take_hold(services, kind, field, lease, sent_at, None);
                    services
                        .cohorts
                        .took_over(kind.scope(), field, expiry.clone());
                    return Some(Attempt::Acquired((hand_off.handed_off(reply), expiry)));
                }
                Step::Lent => {
                    acquisition.handed_off();
                    let token = hand_off.passed_freely()?;
                    // The lend counted the hold already (see `hand_off::count_lent`).
                    let Some(expiry) = self.ticket.take_lent() else {
                        // The streak ended before this waiter took the hold up: it holds nothing.
                        let _ = services.ledger.leave(&books(services, kind), field, None);
                        return None;
                    };
                    let record = services.ledger.generation(kind.scope(), field);
                    return Some(Attempt::Acquired((token, expiry.in_record(record))));
                }
            }
        }
    }
}

impl<K: LockWire> Drop for Queued<K> {
    fn drop(&mut self) {
        if self.ticket.abandon() {
            // Passed the lock but gone before taking it up: release it (to the next local waiter,
            // or for real).
            drop(Releasing::new(
                &self.services,
                self.kind.clone(),
                self.ticket.field().clone(),
                None,
            ));
        }
    }
}

/// The lease a hold is taken with: the watchdog timeout, or the fixed lease.
fn lease_time(services: &Services, lease: Lease) -> Duration {
    match lease {
        Lease::Watchdog => services.watchdog.timeout(),
        Lease::Fixed(lease) => lease,
    }
}

/// Records a hold of `field` that Redis confirmed (its script sent at `sent_at`, on `conn` unless
/// it was passed locally) as a member of the owner's record, renewed by the watchdog unless its
/// lease is fixed.
fn take_hold<K: LockWire>(
    services: &Services,
    kind: &K,
    field: &str,
    lease: Lease,
    sent_at: Instant,
    conn: Option<&Connection>,
) -> Expiry {
    let until = match lease {
        Lease::Watchdog => None,
        Lease::Fixed(lease) => Some(sent_at + lease),
    };
    services
        .ledger
        .join(&books(services, kind), field, until, sent_at, conn)
}

/// One acquire attempt. In replicated topologies an acquire that no replica acknowledged is undone
/// and tried again, as Redisson does (docs/protocol.md §5.3), before it fails with
/// `NoSyncedReplicas`. A refusal by the kind's script sets `refused`.
async fn attempt<K: LockWire>(
    services: &Services,
    kind: &K,
    field: &str,
    lease: Lease,
    patience: Patience,
    refused: &AtomicBool,
) -> Result<Attempt<(K::Token, Expiry)>> {
    until_synced(services, Operation::Acquire, kind.subject(), || async {
        // An undo of this owner's earlier attempt that may still run could take this one's hold
        // (`settled`, again: one may have begun since the wait before admission). Where a refused
        // attempt counts nothing, the owner's attempts also wait for each other.
        settled(services, kind, field).await;
        let _alone = if kind.refuses_reentry() {
            Some(services.reconciling.alone(kind.key(), field).await)
        } else {
            None
        };
        loop {
            let conn = services
                .commands
                .get(Operation::Acquire, kind.subject())
                .await?
                .queueing(patience.queueing());
            return match attempt_on(services, kind, field, lease, patience, conn, refused).await? {
                // A re-entry whose field was gone wrote nothing and ended the owner's record: the
                // next attempt is a fresh acquisition (or the re-entry of a record another future
                // of the owner started meanwhile).
                Synced::Done(Tried::Gone) => continue,
                Synced::Done(Tried::Done(attempt)) => Ok(Synced::Done(attempt)),
                Synced::Unsynced { replicas } => Ok(Synced::Unsynced { replicas }),
            };
        }
    })
    .await
}

/// What one acquire script ended in.
enum Tried<T> {
    Done(Attempt<(T, Expiry)>),
    /// Sent as a re-entry, it found the owner's field gone and wrote nothing (`Taken::Gone`).
    Gone,
}

/// One acquire script, with its undo armed until the reply is seen.
async fn attempt_on<K: LockWire>(
    services: &Services,
    kind: &K,
    field: &str,
    lease: Lease,
    patience: Patience,
    conn: Connection,
    refused: &AtomicBool,
) -> Result<Synced<Tried<K::Token>>> {
    let (scope, ledger, timeout) = (kind.scope(), &services.ledger, services.watchdog.timeout());
    let sending = ledger.sending(scope, field, lease_time(services, lease), timeout);
    let (held_before, record_before) = (sending.held_before, sending.generation);
    // An acquisition never shortens the key under the owner's other holds, those its other
    // attempts on the wire may have made included (see `crate::ledger`).
    let lease_time = if kind.reentry_keeps_ttl() {
        lease_time(services, lease)
    } else {
        sending.covering
    };
    let mut undo = Undo::arm(
        services,
        conn,
        || kind.undo_acquire_call(field, held_before, lease_time, patience),
        lease_time,
        Reconciles::Acquire,
    )
    .settling(&services.reconciling, kind.key(), field);
    let call = kind.acquire_call(field, held_before, lease_time, patience);
    let sent_at = Instant::now();
    let written = write_armed(
        services,
        &mut undo,
        &call,
        kind.subject(),
        |reply| kind.decode_acquire(reply),
        |e| {
            if let Some(refusal) = kind.acquire_refused(&e) {
                refused.store(true, Ordering::Relaxed);
                return refusal;
            }
            Error::from_redis(Operation::Acquire, kind.subject(), e)
        },
    )
    .await?;
    Ok(written.map(|attempt| match attempt {
        Attempt::Acquired(Taken::Held { token, .. }) => {
            let expiry = take_hold(services, kind, field, lease, sent_at, Some(&undo.conn));
            Tried::Done(Attempt::Acquired((token, expiry)))
        }
        Attempt::Acquired(Taken::Gone) => {
            // The hold the owner's record counted on was deleted (or expired): its members are
            // told now, not at the next renewal.
            ledger.lose(&books(services, kind), field, Some(record_before));
            Tried::Gone
        }
        Attempt::Busy(bound) => Tried::Done(Attempt::Busy(bound)),
    }))
}

/// Sends `call`, an acquisition of `subject` (a lock's, a permit's), on `undo`'s connection and
/// reads its reply with `decode`: the one acquire-with-undo path of every kind that takes
/// something. The undo stays armed (and is sent when `undo` is dropped, right behind the call)
/// unless the reply says the call took nothing or took it for good: on a lost reply, on a reply
/// `decode` rejects, and on an acquisition no replica acknowledged (`Synced::Unsynced`: Redisson's
/// `handleNoSync`). An error reply is the script's refusal, made an error by `refused`; it took
/// nothing.
///
/// # Cancel safety
///
/// Cancel safe as long as `undo` is dropped with the future: the armed undo reconciles whatever the
/// call may have done.
pub(crate) async fn write_armed<T, C: FnOnce() -> ScriptCall>(
    services: &Services,
    undo: &mut Undo<'_, C>,
    call: &ScriptCall,
    subject: Subject<'_>,
    decode: impl FnOnce(&Value) -> Option<Attempt<T>>,
    refused: impl FnOnce(RedisError) -> Error,
) -> Result<Synced<Attempt<T>>> {
    let (reply, synced) = match services.commands.write(&mut undo.conn, call).await {
        Written::Ran(reply) => (reply, None),
        Written::Unsynced { reply, replicas } => (reply, Some(replicas)),
        // Redis (WRONGTYPE) or the script refused it: it changed nothing.
        Written::Refused(e) => {
            undo.disarm();
            return Err(refused(e));
        }
        // The armed undo reconciles whatever the script may have done.
        Written::Unknown(unknown) => return Err(unknown.into_error(Operation::Acquire, subject)),
        Written::Unsent(after) => {
            undo.disarm();
            return Err(Error::timeout(Operation::Acquire, subject, after));
        }
    };
    match (decode(&reply), synced) {
        // Dropping the armed undo sends it, on this connection, right after the acquire.
        (Some(Attempt::Acquired(_)), Some(replicas)) => Ok(Synced::Unsynced { replicas }),
        (Some(attempt), _) => {
            undo.disarm();
            Ok(Synced::Done(attempt))
        }
        // The script ran but replied nonsense: whatever it did is undone.
        (None, _) => Err(Error::unexpected(Operation::Acquire, subject, reply)),
    }
}

/// Undoes an acquire unless disarmed: on drop, sends the undo script on the acquire's own
/// connection from a background task (so it runs after the acquire, if the acquire runs at all).
///
/// The undo call is built (by `C`) only when it is sent: almost every write is answered, and
/// building a call that is thrown away was a measurable part of an uncontended cycle.
pub(crate) struct Undo<'a, C: FnOnce() -> ScriptCall> {
    pub(crate) conn: Connection,
    call: Option<C>,
    commands: Commands,
    background: Background,
    /// After this long the hold has expired by itself and the undo can stop trying.
    lease: Duration,
    /// What the undo reconciles, for logs and metrics.
    reconciles: Reconciles,
    /// The owner whose holds the undo counts, registered while the undo is in flight (see
    /// [`crate::reconciling`]); `None` for an undo that names exactly what it removes (a permit
    /// id).
    settles: Option<Settles<'a>>,
}

/// The registry, the lock key and the owner field of an undo that counts an owner's holds.
type Settles<'a> = (&'a Arc<Reconciling>, &'a str, &'a str);

impl<'a, C: FnOnce() -> ScriptCall> Undo<'a, C> {
    /// Arms the call `call` builds as the undo of what is about to be sent on `conn` (a write of
    /// the sort `reconciles` says); it keeps trying for as long as what it undoes could live
    /// (`lease`).
    pub(crate) fn arm(
        services: &Services,
        conn: Connection,
        call: C,
        lease: Duration,
        reconciles: Reconciles,
    ) -> Self {
        Self {
            conn,
            call: Some(call),
            commands: services.commands.clone(),
            background: services.background.clone(),
            lease,
            reconciles,
            settles: None,
        }
    }

    /// The undo counts `field`'s holds of `key`: while it is in flight, that owner waits before it
    /// acts on the lock again (see [`crate::reconciling`]).
    pub(crate) fn settling(
        mut self,
        registry: &'a Arc<Reconciling>,
        key: &'a str,
        field: &'a str,
    ) -> Self {
        self.settles = Some((registry, key, field));
        self
    }

    /// The reply was seen: nothing to undo.
    pub(crate) fn disarm(&mut self) {
        self.call = None;
    }

    /// The registration of this undo, about to be sent, as in flight.
    fn in_flight(&self) -> Option<Reconciliation> {
        self.settles
            .map(|(registry, key, field)| registry.begin(key, field))
    }
}

impl<C: FnOnce() -> ScriptCall> Drop for Undo<'_, C> {
    fn drop(&mut self) {
        // A write that never got its in-flight slot was never sent: there is nothing to undo.
        if !self.conn.sent() {
            return;
        }
        if let Some(call) = self.call.take().map(|call| call()) {
            let in_flight = self.in_flight();
            // A handle on the same multiplexed connection: the undo queues up behind the acquire.
            let conn = self.conn.clone();
            let commands = self.commands.clone();
            let undo = undo(commands, conn, call, self.lease, self.reconciles);
            drop(self.background.spawn(async move {
                undo.await;
                drop(in_flight);
            }));
        }
    }
}

/// Sends `call`, the undo of what was sent before it on `conn`, until its reply is seen or what it
/// undoes has expired by itself.
async fn undo(
    commands: Commands,
    mut conn: Connection,
    call: ScriptCall,
    lease: Duration,
    reconciles: Reconciles,
) {
    let give_up_at = Instant::now() + lease;
    let lock = call.keys().first().cloned().unwrap_or_default();
    // On the acquire's connection, wait as long as the hold could live: a paused server answers
    // late.
    let mut reply = tokio::time::timeout(lease, call.invoke(&mut conn.conn))
        .await
        .ok();
    drop(conn);
    let mut attempt = 0;
    loop {
        match reply {
            Some(Ok(value)) => {
                let undone = matches!(value, Value::Int(1));
                tracing::debug!(%lock, undone, "undo of an unconfirmed write ran");
                telemetry::reconciled(reconciles, &lock, true);
                return;
            }
            Some(Err(e)) if !outcome_unknown(&e) => {
                tracing::warn!(%lock, error = %e, "undo of an unconfirmed write refused");
                telemetry::reconciled(reconciles, &lock, false);
                return;
            }
            _ if Instant::now() >= give_up_at => {
                tracing::warn!(%lock, "undo of an unconfirmed write gave up; it expires with its lease");
                telemetry::reconciled(reconciles, &lock, false);
                return;
            }
            _ => {}
        }
        // The connection broke, so the acquire either ran before that or never will: any connection
        // will do now.
        tokio::time::sleep(Duration::from_millis(50 << attempt.min(5))).await;
        attempt += 1;
        reply = match commands
            .get(Operation::Acquire, Subject::named(&lock))
            .await
        {
            Ok(mut conn) => commands.invoke(&mut conn, &call).await.ok(),
            Err(_) => None,
        };
    }
}

/// What an acquisition adds to its wait: its kind's polls, and its local queue's nudges.
impl<K: LockWire> WaitHooks for Acquiring<'_, K> {
    fn poll_delay(&self, previous: Option<Duration>, polls: u32) -> Duration {
        self.kind.poll_delay(previous, polls)
    }

    /// A local event sends the waiter back to its attempt: its queue changed, or the streak of
    /// free hand-offs that held it back is over. Boxed by what can happen now: a park with no
    /// streak on the key (nearly every one) waits for the queue's nudge inline, or for nothing.
    fn nudge(&self) -> Nudge<'_> {
        let this = self;
        let queued = this.queued.as_ref();
        match (queued, this.services.cohorts.streak_on(this.kind.scope())) {
            (Some(queued), None) => match queued.ticket.holder_lease() {
                None => Nudge::Queue(queued.ticket.nudged()),
                Some(lease) => Nudge::Boxed(Box::pin(async move {
                    tokio::select! {
                        () = queued.ticket.nudged() => {}
                        () = lease.lost() => {}
                    }
                })),
            },
            (None, None) => Nudge::Never,
            (queued, Some(streak)) => Nudge::Boxed(Box::pin(async move {
                let queue_changed = async {
                    match queued {
                        Some(queued) => queued.ticket.nudged().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = queue_changed => {}
                    () = streak.over() => {}
                }
            })),
        }
    }
}

impl<'a, K: LockWire> std::ops::Deref for Acquiring<'a, K> {
    type Target = Inputs<'a, K>;

    fn deref(&self) -> &Inputs<'a, K> {
        self.inputs
    }
}

impl<K: LockWire> Drop for Acquiring<'_, K> {
    /// Leaves the local queue, then sends an armed give-up in the background. One sent in the
    /// background holds its owner back from this lock until it ran (it removes the owner's queue
    /// entry, which would be the owner's next one if it queued again meanwhile).
    fn drop(&mut self) {
        drop(self.queued.take());
        if let Some(call) = self.give_up.take() {
            let services = self.services;
            let in_flight = services.reconciling.begin(self.kind.key(), self.field);
            let commands = services.commands.clone();
            drop(services.background.spawn(async move {
                give_up(commands, *call).await;
                drop(in_flight);
            }));
        }
    }
}

/// Best effort: a give-up that fails leaves an entry that Redis-side stale purging removes.
async fn give_up(commands: Commands, call: ScriptCall) {
    let lock = call.keys().first().cloned().unwrap_or_default();
    let outcome = match commands
        .get(Operation::Acquire, Subject::named(&lock))
        .await
    {
        Ok(mut conn) => commands.write(&mut conn, &call).await,
        Err(e) => {
            tracing::warn!(%lock, error = %e, "could not give up a wait");
            return;
        }
    };
    if !matches!(outcome, Written::Ran(_)) {
        tracing::warn!(%lock, ?outcome, "giving up a wait failed; the entry goes stale");
    }
}
