//! Release: the kind's unlock script, idempotent under an unlock latch, re-sent on lost replies.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::hold::{count_in_redis, listening};
use super::kind::Kind;
use crate::cohort::{Claim, Next, Yield};
use crate::connection::{Connection, Written};
use crate::error::{Error, Operation, Result, Subject};
use crate::names;
use crate::pubsub::Listening;
use crate::reconciling::Reconciling;
use crate::scripts::ScriptCall;
use crate::services::{Background, Services};
use crate::telemetry::{self, Reconciles};

/// What an unlock did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// The last hold was released and waiters were woken.
    Fully,
    /// The owner still holds the lock re-entrantly.
    Partially,
}

/// Releases one hold of `kind` by `field`. If holds remain, their lease is re-applied: the watchdog
/// timeout while some are renewed here, else the lease of the owner's latest hold (docs/protocol.md
/// §11.10).
///
/// The last hold of a kind that hands off goes to the next local waiter if one waits (see
/// [`crate::cohort`]), within the bound: freely where it may (Redis untouched, renewal going on),
/// else by script; otherwise the lock is unlocked. Renewal stops before the hash changes. The unlock
/// is re-sent after a timeout or a broken connection with the same request id, so a re-send of an
/// unlock that had run replays its result instead of releasing twice.
///
/// A hold lent along a streak counts its re-entries here only; its last release lends it on, or
/// passes or unlocks the streak root's field, which is what Redis holds. While a hold is lent,
/// nobody else of this client releases the lock: [`Error::NotOwner`], with nothing sent.
///
/// # Cancel safety
///
/// Not cancel safe: run it through [`Releasing`], which finishes it in the background if dropped.
pub(crate) async fn release<K: Kind + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    field: &str,
) -> Result<Released> {
    let kind_ref = &**kind;
    let (key, renewal) = (kind.key(), kind.renewal());
    // An undo of this owner's that may still run counts its holds: let it run first.
    services.reconciling.settled(key, field).await;
    // The field Redis holds for this owner: its own, or the root's of the streak it holds a lent
    // hold of.
    let root = match services.cohorts.streak_on(key) {
        Some(streak) if streak.holder == field => streak.root,
        Some(_) => {
            return Err(Error::not_owner(kind.subject(), field));
        }
        None => field.to_owned(),
    };
    let lent = root != field;
    let last = services.holds.count(key, field) <= 1;
    let hands_off = last && kind.hand_off().is_some() && services.config.local_handoff;
    let (queue, config) = (kind.label(), &services.config);
    let next = hands_off.then(|| {
        services.cohorts.releasing(
            key,
            queue,
            field,
            config.local_handoff_limit,
            config.local_handoff_window,
        )
    });
    let next = match next {
        Some(Next::HandOff(claim)) => match lend(services, kind, field, &root, claim).await {
            Lend::Done(released) => return released,
            // The streak's root waits again (for a fixed lease, say): a script cannot pass its own
            // field to it. The streak ends with a real release, and it tries as usual.
            Lend::Declined(claim) if claim.field() == root => {
                claim.failed();
                Some(Next::Release { yielding: false })
            }
            Lend::Declined(claim) => Some(Next::HandOff(claim)),
        },
        next => next,
    };
    // The hash changes from here on: renewal of what Redis holds stops first.
    let (lease, conn) = if lent {
        let _ = services.holds.remove(key, field);
        if !last {
            return Ok(Released::Partially);
        }
        let _ = services.watchdog.deregister(renewal, key, &root);
        services.cohorts.unlending(key, queue);
        (services.watchdog.timeout(), None)
    } else {
        let renewing = services.watchdog.deregister(renewal, key, field);
        match services.holds.remove(key, field) {
            Some((lease, conn)) if !renewing => (lease, conn),
            Some((_, conn)) => (services.watchdog.timeout(), conn),
            None => (services.watchdog.timeout(), None),
        }
    };
    let yielding = match next {
        None => return unlock(services, kind_ref, &root, lease, conn).await,
        Some(Next::HandOff(claim)) => {
            let from = Releaser {
                holder: field,
                root: &root,
            };
            match pass(services, kind, from, lease, claim).await {
                Passing::Done(released) => return released,
                Passing::Unlock => false,
            }
        }
        Some(Next::Release { yielding }) => yielding,
    };
    let messages = match kind.channel(field) {
        Some((channel, _)) if yielding => services.subscriber.registry().messages(&channel),
        _ => 0,
    };
    let sent_at = Instant::now();
    let released = unlock(services, kind_ref, &root, lease, conn).await;
    // Waiters elsewhere hear the unlock about when its reply comes back, and need half a round
    // trip more to reach Redis: the local head holds back a round trip, and until the message is
    // back (a second round trip at most).
    let now = Instant::now();
    let round_trip = now - sent_at;
    let yielding = (yielding && released.is_ok()).then(|| Yield {
        messages,
        not_before: now + round_trip,
        at_latest: now + round_trip * 2,
    });
    services.cohorts.released(key, queue, field, yielding);
    released
}

/// The kind's unlock script, re-sent with the same request id while its reply is lost. It goes out
/// first on `conn` (the connection the hold was taken on) while the pool would still hand that out.
///
/// An unlock whose outcome is still unknown after every re-send fails, and goes on being re-sent in
/// the background until a reply is seen (or the hold has expired by itself); until then the owner
/// does not act on the lock (see [`crate::reconciling`]): a copy that runs late would otherwise
/// release a hold the owner took since.
async fn unlock<K: Kind + ?Sized>(
    services: &Arc<Services>,
    kind: &K,
    field: &str,
    lease: Duration,
    conn: Option<Connection>,
) -> Result<Released> {
    let latch = names::unlock_latch(kind.key(), names::new_request_id());
    let call = kind.unlock_call(field, lease, &latch, services.config.unlock_latch_ttl());
    let reused = conn.and_then(|conn| services.commands.still_fresh(conn));
    let name = kind.name();
    let sent_at = Instant::now();
    let latched = send_latched(
        services,
        kind,
        &call,
        latch.clone(),
        reused,
        Reconciles::Unlock,
    );
    let reply = match latched.await {
        Latched::Seen(reply) => reply,
        Latched::Failed(e) => return Err(e),
        Latched::Unknown(e) => {
            let in_flight = services.reconciling.begin(kind.key(), field);
            let (services, name, what) = (services.clone(), name.to_owned(), kind.what());
            drop(services.clone().background.spawn(async move {
                let subject = Subject::new(what, &name);
                let seen = resend_until_seen(&services, subject, &call, sent_at + lease).await;
                settled_in_background(&services, Reconciles::Unlock, &name, latch, seen.as_ref());
                drop(in_flight);
            }));
            return Err(e);
        }
    };
    match reply {
        Value::Int(1) => Ok(Released::Fully),
        Value::Int(0) => Ok(Released::Partially),
        Value::Nil => Err(Error::not_owner(kind.subject(), field)),
        other => Err(Error::unexpected(Operation::Unlock, kind.subject(), other)),
    }
}

/// How a write under a latch ended.
enum Latched {
    /// A reply was seen: the first outcome (a re-send's reply replays it).
    Seen(Value),
    /// It did not run: Redis refused it, or it could not be sent.
    Failed(Error),
    /// No reply after every re-send: it may still run, once.
    Unknown(Error),
}

/// Sends `call`, a write of `kind` made idempotent by the latch `latch` in it (an unlock, a
/// hand-off), and re-sends it while its reply is lost, up to the configured retries: a re-send of
/// a call that had run replays its stored outcome, so it applies once. It goes out first on `conn`
/// if given.
async fn send_latched<K: Kind + ?Sized>(
    services: &Services,
    kind: &K,
    call: &ScriptCall,
    latch: String,
    mut conn: Option<Connection>,
    reconciles: Reconciles,
) -> Latched {
    let (name, subject) = (kind.name(), kind.subject());
    let mut retry = 0;
    // Whether a send's outcome is not known: the re-sends reconcile it.
    let mut unknown = false;
    loop {
        let checkout = match conn.take() {
            Some(conn) => Ok(conn),
            None => services.commands.get(Operation::Unlock, subject).await,
        };
        let failure = match checkout {
            Ok(mut conn) => match services.commands.write(&mut conn.conn, call).await {
                Written::Ran(reply) => {
                    if unknown {
                        telemetry::reconciled(reconciles, name, true);
                    }
                    services.forget_latch(latch);
                    return Latched::Seen(reply);
                }
                // Applied on the master only: re-sending replays the latch and waits again.
                Written::Unsynced { replicas, .. } => {
                    unknown = true;
                    Error::no_synced_replicas(Operation::Unlock, subject, replicas)
                }
                Written::Refused(e) => {
                    return Latched::Failed(Error::from_redis(Operation::Unlock, subject, e));
                }
                Written::Unknown(lost) => {
                    unknown = true;
                    lost.into_error(Operation::Unlock, subject)
                }
            },
            Err(e) if e.is_transient() => e,
            Err(e) if unknown => return Latched::Unknown(e),
            Err(e) => return Latched::Failed(e),
        };
        if retry >= services.config.retry_attempts {
            // An unknown outcome is reconciled in the background, which tells telemetry.
            return if unknown {
                Latched::Unknown(failure)
            } else {
                Latched::Failed(failure)
            };
        }
        tracing::debug!(lock = name, error = %failure, retry, "re-sending with the same request id");
        tokio::time::sleep(services.config.retry_backoff(retry)).await;
        retry += 1;
    }
}

/// Who releases in a hand-off: the local holder, and the field Redis holds for it (its own, or
/// the root's of the streak it holds a lent hold of).
#[derive(Clone, Copy)]
struct Releaser<'a> {
    holder: &'a str,
    root: &'a str,
}

/// How a free hand-off ended.
enum Lend {
    /// The lock was lent: the release is over.
    Done(Result<Released>),
    /// Not lent: the claim goes on to a script hand-off.
    Declined(Claim),
}

/// Passes the last hold of `holder` to the claimed waiter without Redis (a free hand-off, see
/// [`crate::cohort`]) where it may: the kind changes nothing in Redis per acquisition, both holds
/// are live watchdog holds, the waiter has no undo in flight, and the hash of `root` (the field
/// Redis holds) is surely still there, its last confirmed renewal recent enough on the clock now.
/// Redis is left as it is, renewal of `root` goes on, and the streak's first free hand-off starts a
/// watch of the lock's channel ([`watch_streak`]).
async fn lend<K: Kind + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    holder: &str,
    root: &str,
    claim: Claim,
) -> Lend {
    let key = kind.key();
    let free = claim.lendable()
        && kind
            .hand_off()
            .is_some_and(|hand_off| hand_off.passed_freely().is_some())
        && !services.reconciling.is_pending(key, claim.field());
    let Some(generation) = free
        .then(|| services.watchdog.surely_held(kind.renewal(), key, root))
        .flatten()
    else {
        return Lend::Declined(claim);
    };
    let _ = services.holds.remove(key, holder);
    let to = claim.field().to_owned();
    let lending = claim.lend(root);
    services
        .telemetry
        .lent(kind.label(), kind.name(), lending.started.is_some());
    if let Some(ended) = lending.started {
        let watch = watch_streak(services, kind.clone(), root.to_owned(), generation, ended);
        services.background.spawn_watch(watch);
    }
    if !lending.taken {
        // The waiter is gone: release the hold lent to it (to the next waiter, or for real).
        if let Err(e) = release_again(services, kind, &to).await {
            tracing::warn!(lock = kind.name(), error = %e, "releasing a hold lent to a dropped waiter failed");
        }
    }
    Lend::Done(Ok(Released::Fully))
}

/// Watches the lock's channel while a streak lends `root`'s hold, until `ended`. This client sends
/// no unlock message on it while the streak lasts, so a message means the lock may have been
/// deleted by someone else (a force unlock, Java's included). The message alone already ends the
/// streak's free hand-offs (the holder's [`Listening`] is no longer unchanged); the watch tells the
/// holder: if `root`'s field is gone from Redis, its watchdog registration (`generation`) is
/// declared lost, which every holder of the streak hears at once rather than at the next renewal.
/// It keeps the client's services only while it acts: a client dropped while a hold is lent stops
/// it.
fn watch_streak<K: Kind + ?Sized>(
    services: &Arc<Services>,
    kind: Arc<K>,
    root: String,
    generation: u64,
    ended: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    // Subscribed, and the messages counted, now: the task may start later.
    let subscription = kind.channel(&root).map(|(channel, rule)| {
        let subscription = services.subscriber.registry().subscribe(&channel, rule);
        let seen = subscription.messages();
        (subscription, seen)
    });
    let services = Arc::downgrade(services);
    async move {
        let Some((subscription, seen)) = subscription else {
            return;
        };
        tokio::select! {
            () = ended.cancelled() => return,
            () = subscription.heard_after(seen) => {}
        }
        drop(subscription);
        let Some(services) = services.upgrade() else {
            return;
        };
        let (name, key) = (kind.name(), kind.key());
        let held = count_in_redis(&services, kind.subject(), key, &root).await;
        if matches!(held, Ok(0)) && !ended.is_cancelled() {
            tracing::warn!(lock = name, "a streak's hold was deleted by someone else");
            services.watchdog.lost(kind.renewal(), key, generation);
        }
    }
}

/// How a hand-off ended.
enum Passing {
    /// Passed, or the release is over otherwise (the lease was lost, the outcome reconciled).
    Done(Result<Released>),
    /// Not passed and nothing changed: unlock as usual.
    Unlock,
}

/// Passes the last hold of `from` (its renewal stopped, `lease` its lease) to the claimed local
/// waiter, in one script, idempotent under a latch as an unlock is: a reply that is lost is re-sent
/// with the same request id, so whichever send runs first decides and the others replay its
/// outcome. The waiter takes the lock only as a seen outcome says, so no reconciliation ever touches
/// a field its owner may since have acquired by itself.
///
/// When no reply comes after the unlock's re-sends, the release fails (it is bounded as an unlock
/// is) and the hand-off is settled in the background ([`settle_hand_off`]).
async fn pass<K: Kind + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    from: Releaser<'_>,
    lease: Duration,
    claim: Claim,
) -> Passing {
    let Some(hand_off) = kind.hand_off() else {
        claim.failed();
        return Passing::Unlock;
    };
    let key = kind.key();
    // A waiter with an undo in flight gets the lock in Redis, after the undo (see `reconciling`).
    if services.reconciling.is_pending(key, claim.field()) {
        claim.failed();
        return Passing::Unlock;
    }
    let Ok(conn) = services
        .commands
        .get(Operation::Unlock, kind.subject())
        .await
    else {
        claim.failed();
        return Passing::Unlock;
    };
    let latch = names::unlock_latch(key, names::new_request_id());
    let call = hand_off.hand_off_call(
        from.root,
        claim.field(),
        claim.lease(),
        &latch,
        services.config.unlock_latch_ttl(),
    );
    // The lease runs from the first send at the earliest, whichever send applied it; the next
    // owner listens on the channel from before it too.
    let sent = Sent {
        listening: listening(services, &**kind, claim.field()),
        at: Instant::now(),
    };
    let latched = send_latched(
        services,
        &**kind,
        &call,
        latch.clone(),
        Some(conn),
        Reconciles::HandOff,
    );
    match latched.await {
        Latched::Seen(reply) => Box::pin(passed(services, kind, from, claim, sent, reply)).await,
        Latched::Failed(failure) => {
            claim.failed();
            services
                .cohorts
                .released(key, kind.label(), from.holder, None);
            Passing::Done(Err(failure))
        }
        Latched::Unknown(failure) => {
            let hand_off = HandOffInFlight {
                services: services.clone(),
                kind: kind.clone(),
                holder: from.holder.to_owned(),
                root: from.root.to_owned(),
                lease,
                call,
                latch,
                sent,
            };
            drop(services.background.spawn(settle_hand_off(hand_off, claim)));
            Passing::Done(Err(failure))
        }
    }
}

/// When a hand-off script was first sent, and the next owner listening on the lock's channel from
/// just before.
struct Sent {
    at: Instant,
    listening: Option<Listening>,
}

/// What a hand-off's seen reply means: passed (the waiter holds the lock), not passed (the holder
/// unlocks as usual), or the holder's lease was lost.
async fn passed<K: Kind + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    from: Releaser<'_>,
    claim: Claim,
    sent: Sent,
    reply: Value,
) -> Passing {
    let (name, key) = (kind.name(), kind.key());
    let failure = match reply {
        Value::Int(passed) if passed > 0 => {
            services.telemetry.handed_off(kind.label(), name);
            let to = claim.field().to_owned();
            if !claim.passed(passed.unsigned_abs(), sent.at, sent.listening) {
                // The waiter is gone: release its hold (to the next waiter, or for real).
                if let Err(e) = release_again(services, kind, &to).await {
                    tracing::warn!(lock = name, error = %e, "releasing a hold passed to a dropped waiter failed");
                }
            }
            return Passing::Done(Ok(Released::Fully));
        }
        // Held more than once (a local count behind Redis'), or a writer that also reads.
        Value::Int(0) => {
            claim.failed();
            return Passing::Unlock;
        }
        Value::Nil => Error::not_owner(kind.subject(), from.root),
        other => Error::unexpected(Operation::Unlock, kind.subject(), other),
    };
    claim.failed();
    if kind.hand_off().is_some() {
        services
            .cohorts
            .released(key, kind.label(), from.holder, None);
    }
    Passing::Done(Err(failure))
}

/// [`release`] from inside a release, boxed as a `Send` future: the type breaks the cycle the
/// compiler would otherwise follow to prove the recursive future `Send`.
fn release_again<'a, K: Kind + ?Sized>(
    services: &'a Arc<Services>,
    kind: &'a Arc<K>,
    field: &'a str,
) -> Pin<Box<dyn Future<Output = Result<Released>> + Send + 'a>> {
    Box::pin(release(services, kind, field))
}

/// Re-sends `call` (a write under a latch, so it applies once) until a reply is seen, backing off
/// between tries, until `give_up_at`: `Some` with the reply or Redis' refusal, `None` if it gave up.
async fn resend_until_seen(
    services: &Services,
    subject: Subject<'_>,
    call: &ScriptCall,
    give_up_at: Instant,
) -> Option<redis::RedisResult<Value>> {
    let mut retry = 0;
    loop {
        tokio::time::sleep(services.config.retry_backoff(retry)).await;
        retry = retry.saturating_add(1);
        if Instant::now() >= give_up_at {
            return None;
        }
        let Ok(mut conn) = services.commands.get(Operation::Unlock, subject).await else {
            continue;
        };
        match services.commands.write(&mut conn.conn, call).await {
            Written::Ran(reply) => return Some(Ok(reply)),
            Written::Refused(e) => return Some(Err(e)),
            Written::Unsynced { .. } | Written::Unknown(_) => {}
        }
    }
}

/// Tells telemetry and the logs how a write reconciled in the background ended, and lets its latch
/// go once its reply was seen.
fn settled_in_background(
    services: &Services,
    reconciles: Reconciles,
    name: &str,
    latch: String,
    seen: Option<&redis::RedisResult<Value>>,
) {
    telemetry::reconciled(reconciles, name, matches!(seen, Some(Ok(_))));
    match seen {
        Some(Ok(_)) => services.forget_latch(latch),
        Some(Err(e)) => tracing::warn!(lock = name, error = %e, "a write in flight was refused"),
        None => tracing::warn!(
            lock = name,
            "a write in flight gave up; what it holds expires with its lease"
        ),
    }
}

/// A hand-off whose outcome is not known after every re-send of its release.
struct HandOffInFlight<K: Kind + ?Sized> {
    services: Arc<Services>,
    kind: Arc<K>,
    /// The releasing local holder, the field Redis holds for it, and that hold's lease.
    holder: String,
    root: String,
    lease: Duration,
    /// The hand-off under its latch, and when it was first sent.
    call: ScriptCall,
    latch: String,
    sent: Sent,
}

/// Re-sends a hand-off in flight (under its latch, so it applies once) until a reply tells its
/// outcome, then settles the claimed waiter as [`passed`] says; a hand-off that did not pass unlocks
/// the releasing owner's hold as usual. Until then neither owner acquires or releases this lock
/// (see [`crate::reconciling`]): a copy still in flight could otherwise pass a hold the releasing
/// owner took since, or hand the waiter a hold it does not know of. Gives up once the releasing
/// owner's hold has expired by itself (after its lease), when no copy can pass anything.
async fn settle_hand_off<K: Kind + ?Sized>(hand_off: HandOffInFlight<K>, claim: Claim) {
    let HandOffInFlight {
        services,
        kind,
        holder,
        root,
        lease,
        call,
        latch,
        sent,
    } = hand_off;
    let (name, key) = (kind.name(), kind.key());
    let in_flight =
        [root.as_str(), claim.field()].map(|field| services.reconciling.begin(key, field));
    let seen = resend_until_seen(&services, kind.subject(), &call, sent.at + lease).await;
    settled_in_background(&services, Reconciles::HandOff, name, latch, seen.as_ref());
    // A hand-off that did not say it passed is taken as not passed: the hold it would have passed
    // expires with its lease.
    let reply = match seen {
        Some(Ok(reply)) => reply,
        Some(Err(_)) | None => Value::Nil,
    };
    // Settled: a release of the hold passed to a waiter that is gone must not wait for it.
    drop(in_flight);
    let from = Releaser {
        holder: &holder,
        root: &root,
    };
    if let Passing::Unlock = passed(&services, &kind, from, claim, sent, reply).await {
        if let Err(e) = unlock(&services, &*kind, &root, lease, None).await {
            tracing::warn!(lock = name, error = %e, "unlocking after a hand-off in flight failed");
        }
        if kind.hand_off().is_some() {
            services.cohorts.released(key, kind.label(), &holder, None);
        }
    }
    tracing::debug!(lock = name, "settled a hand-off whose outcome was unknown");
}

/// Deletes the lock `kind` whoever holds it (the kind's force-unlock script, which also wakes a
/// waiter). Returns whether a lock was deleted. This client's guards of the lock see their lease lost.
///
/// # Cancel safety
///
/// Not cancel safe: if dropped, the lock may or may not have been deleted.
pub(crate) async fn force_unlock<K: Kind + ?Sized>(services: &Services, kind: &K) -> Result<bool> {
    let subject = kind.subject();
    services.watchdog.forget(kind.key());
    let call = kind.force_unlock_call();
    let mut conn = services
        .commands
        .get(Operation::ForceUnlock, subject)
        .await?;
    match services.commands.write(&mut conn.conn, &call).await {
        Written::Ran(Value::Int(deleted)) => Ok(deleted == 1),
        Written::Ran(other) => Err(Error::unexpected(Operation::ForceUnlock, subject, other)),
        Written::Unsynced { replicas, .. } => Err(Error::no_synced_replicas(
            Operation::ForceUnlock,
            subject,
            replicas,
        )),
        Written::Refused(e) => Err(Error::from_redis(Operation::ForceUnlock, subject, e)),
        Written::Unknown(unknown) => Err(unknown.into_error(Operation::ForceUnlock, subject)),
    }
}

/// A release in progress: awaited, it runs on the caller's task; dropped before it completed (or
/// never awaited), it finishes in the background. Either way it is the same release, with the same
/// request id, so it applies once.
pub(crate) struct Releasing {
    pending: Option<Pin<Box<dyn Future<Output = Result<Released>> + Send>>>,
    background: Background,
    name: String,
    /// For a kind that refuses re-entry: where a release finishing in the background is registered
    /// until it ends, with its key and field (see `Services::releasing`).
    registers: Option<(Arc<Reconciling>, String, String)>,
}

impl Releasing {
    /// A release of one hold of `field` on `kind`.
    pub(crate) fn new<K: Kind + ?Sized>(
        services: &Arc<Services>,
        kind: Arc<K>,
        field: String,
    ) -> Self {
        let name = kind.name().to_owned();
        let registers = kind.refuses_reentry().then(|| {
            (
                services.releasing.clone(),
                kind.key().to_owned(),
                field.clone(),
            )
        });
        let services_for_release = services.clone();
        Self {
            pending: Some(Box::pin(async move {
                release(&services_for_release, &kind, &field).await
            })),
            background: services.background.clone(),
            name,
            registers,
        }
    }

    /// Runs the release to its end on the caller's task.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if dropped, the release finishes in the background.
    pub(crate) async fn finish(mut self) -> Result<Released> {
        let outcome = match self.pending.as_mut() {
            Some(pending) => pending.await,
            None => Err(Error::Closed),
        };
        self.pending = None;
        outcome
    }
}

impl Drop for Releasing {
    fn drop(&mut self) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        let name = std::mem::take(&mut self.name);
        // Registered now, before the caller goes on: its owner's next acquisition waits for it.
        let in_flight = self
            .registers
            .take()
            .map(|(registry, key, field)| registry.begin(&key, &field));
        drop(self.background.spawn(async move {
            let _in_flight = in_flight;
            match pending.await {
                Ok(_) => {}
                Err(Error::NotOwner { .. }) => {
                    tracing::debug!(lock = %name, "released after the lease was already lost");
                }
                Err(e) => tracing::warn!(lock = %name, error = %e, "a background release failed"),
            }
        }));
    }
}
