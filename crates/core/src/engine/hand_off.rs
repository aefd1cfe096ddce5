//! Local hand-off, the engine's side: passing a last hold to the next local waiter by script, and
//! lending it freely along a streak ([`Streak`]), with everything that must go through an open
//! streak first (acquisitions of every kind on its key, releases, hold counts).
//!
//! [`crate::cohort`] keeps the local state (queues, claims, the streak object); this module runs
//! what touches Redis for it. Together they are the whole feature.
//!
//! # The streak's rules, as the engine keeps them
//!
//! - An acquisition of a key with an open streak, by any kind and any local owner, asks the streak
//!   first ([`answered_in_streak`], [`gated_by_streak`]): the holder's re-entry is counted here (a
//!   kind whose re-entry must write, the fenced lock, is refused, as is any re-entry of a
//!   non-reentrant kind); anyone else's one-shot try fails, and anyone else who waits, the root
//!   included, waits for the streak to be over before it sends anything.
//! - A release by the holder goes through [`Streak::release`] under the same lock as a re-entry;
//!   its last one lends the hold on ([`lend_on`]), passes the root's field by script, or unlocks it
//!   ([`release_streak`]); the streak is over only once that write has its reply.
//! - A release that lends the hold returns once Redis confirmed the root's field after the
//!   hand-off ([`Lent::confirmed`]): the watch reads it behind every free hand-off, one read at a
//!   time standing for every hand-off before it was sent, so a delete that publishes nothing is
//!   told to every holder it reaches and a successful release proves what an unlock does.
//! - The streak's watch ([`watch_streak`]) ends it when its registration is lost, or when a message
//!   on the lock's channel (or a read behind a hand-off) and Redis say the root's field is gone:
//!   every holder inside is told, and the root's field is unlocked in Redis (it may still be there
//!   after a loss declared early or a local force unlock) before anyone else of this client acts on
//!   the key.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::acquire::plan::{InStreak, in_streak};
use super::hold::count_in_redis;
use super::latched::{
    Latched, Released, latch_ttl, resend_until_seen, send_latched, settled_in_background, unlock,
};
use super::lock_wire::LockWire;
use super::patience::Patience;
use super::release::plan::{self, StreakWrite};
use crate::cohort::{Claim, Next, Streak, Yield};
use crate::error::{Error, Operation, Result, Subject};
use crate::ledger::Expiry;
use crate::names;
use crate::pubsub::Listening;
use crate::services::Services;
use crate::telemetry::Reconciles;

/// What an acquisition ends in: the hold's token and expiry, or `None` when its wait ran out.
pub(super) type Acquired<T> = Result<Option<(T, Expiry)>>;

/// How a last release that handed off (or tried to) ended.
pub(super) struct Handed {
    /// What the release returns.
    pub(super) released: Result<Released>,
    /// A hold passed or lent to a waiter that is gone: the caller releases it (to the next waiter,
    /// or for real).
    pub(super) orphan: Option<String>,
    /// A hand-off whose outcome is not known yet, settled in the background; it may leave an
    /// orphan too.
    pub(super) settling: Option<Settling>,
    /// A free hand-off: the release is over once Redis confirmed the streak's root after it
    /// ([`Lent::confirmed`]).
    pub(super) lent: Option<Lent>,
}

/// A hold lent freely: what the lending release still waits for.
pub(super) struct Lent {
    /// The streak it was lent along, and when.
    streak: Arc<Streak>,
    since: Instant,
    /// The claimed waiter's field if it is gone: the caller releases the hold lent to it.
    pub(super) orphan: Option<String>,
}

impl Lent {
    /// Whether Redis confirmed the streak's root after the hand-off (or the streak's last write
    /// did): a lending release returns `Ok` only then, so that its success proves what an unlock's
    /// does, that nobody had deleted the lock while it was held, not even silently. `false` when
    /// the streak's hold was lost first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(super) async fn confirmed(&self) -> bool {
        self.streak.confirmed_since(self.since).await
    }
}

/// A hand-off being settled in the background: its orphan, if it leaves one.
pub(super) type Settling = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

impl Handed {
    /// A free hand-off: released once its confirmation comes (see [`Lent::confirmed`]).
    pub(super) fn lent(lent: Lent) -> Self {
        Self {
            released: Ok(Released::Fully),
            orphan: None,
            settling: None,
            lent: Some(lent),
        }
    }

    fn done(released: Result<Released>) -> Self {
        Self {
            released,
            orphan: None,
            settling: None,
            lent: None,
        }
    }
}

/// Who releases in a hand-off: the local holder, and the field Redis holds for it (its own, or
/// the root's of the streak it holds a lent hold of).
#[derive(Clone, Copy)]
pub(super) struct Releaser<'a> {
    pub(super) holder: &'a str,
    pub(super) root: &'a str,
}

/// How a free hand-off ended.
pub(super) enum Lend {
    /// The lock was lent: the release waits for the confirmation that follows.
    Lent(Lent),
    /// Not lent: the claim goes on to a script hand-off.
    Declined(Claim),
}

/// Whether the hold may pass to the claimed waiter without Redis, as far as the kind and the
/// waiter go: the kind changes nothing in Redis per acquisition, and the waiter has no undo in
/// flight (the queue has checked both holds' leases and the channel).
fn lendable<K: LockWire + ?Sized>(services: &Services, kind: &K, claim: &Claim) -> bool {
    claim.lendable()
        && kind
            .hand_off()
            .is_some_and(|hand_off| hand_off.passed_freely().is_some())
        && !services.reconciling.is_pending(kind.key(), claim.field())
}

/// Starts a streak: `holder`'s last hold, taken from Redis, goes to the claimed waiter without
/// Redis where it may ([`lendable`], and `holder`'s hash surely still there, its last confirmed
/// renewal recent enough on the clock now). The streak takes over `holder`'s watchdog
/// registration, so its field is renewed as before, and a watch of the lock's channel starts
/// ([`watch_streak`]).
pub(super) fn lend_first<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    holder: &str,
    claim: Claim,
) -> Lend {
    let key = kind.key();
    let registration = lendable(services, &**kind, &claim)
        .then(|| services.watchdog.surely_held(kind.renewal(), key, holder))
        .flatten();
    let Some(registration) = registration else {
        return Lend::Declined(claim);
    };
    // The streak is open before the holder's hold is taken: another release of the same owner
    // (a misuse, from another thread) that finds the hold gone then finds the streak, and sends
    // nothing.
    let Some(streak) = services.cohorts.open_streak(
        key,
        holder,
        registration.generation,
        &registration.lost,
        registration.renewed_at,
    ) else {
        return Lend::Declined(claim);
    };
    // Atomic with the holder's own attempts: a re-entry of its on the wire would be counted in
    // Redis after the hold was lent. Another release of it may have taken the hold first.
    if !services.ledger.remove_last(key, holder) || !streak.lend_to(claim.field()) {
        services.cohorts.close_streak(&streak);
        return Lend::Declined(claim);
    }
    services.cohorts.began_streak();
    count_lent(services, key, &streak, &claim);
    services.telemetry.lent(kind.label(), kind.name(), true);
    let listening = claim.listening();
    services.background.spawn_watch(watch_streak(
        services,
        kind.clone(),
        streak.clone(),
        listening,
    ));
    lent(streak.clone(), claim)
}

/// Hands the lent hold to the claimed waiter, the streak having been lent to it.
fn lent(streak: Arc<Streak>, claim: Claim) -> Lend {
    let since = streak.lent_at().unwrap_or_else(Instant::now);
    let to = claim.field().to_owned();
    let orphan = (!claim.lend(&streak)).then_some(to);
    Lend::Lent(Lent {
        streak,
        since,
        orphan,
    })
}

/// Counts the hold lent to the claimed waiter as it is lent, before the waiter takes it up: a
/// re-entry and release by another future of the same owner in between must not find it holding
/// nothing and end the streak under it. It is a member of the waiter's lent record, which observes
/// the streak's token.
fn count_lent(services: &Services, key: &str, streak: &Streak, claim: &Claim) {
    let _ = services
        .ledger
        .lend(key, claim.field(), streak.expiry().token());
}

/// The lent holder `holder` released its last hold of `streak` (now between holders): the hold is
/// lent on to the next local waiter where it may, else the streak ends in Redis: the root's field
/// is passed to the waiter by script, or unlocked.
///
/// # Cancel safety
///
/// Not cancel safe: it runs inside a release, which [`super::Releasing`] finishes if dropped.
pub(super) async fn release_streak<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    holder: &str,
    streak: &Arc<Streak>,
) -> Handed {
    let (key, queue, config) = (kind.key(), kind.label(), &services.config);
    let next = services.cohorts.releasing(
        key,
        queue,
        holder,
        config.local_handoff_limit,
        config.local_handoff_window,
    );
    let next = match next {
        Next::HandOff(claim) => match lend_on(services, &**kind, streak, claim) {
            Lend::Lent(lent) => return Handed::lent(lent),
            Lend::Declined(claim) => plan::declined(claim, &streak.root),
        },
        next => next,
    };
    // The streak ends here, unless its loss ended it first: its registration is given up before
    // the hash changes.
    let Some(write) = plan::streak_write(next, streak.ending()) else {
        // Its hold was lost meanwhile, and its watch unlocks the root's field.
        services.cohorts.released(key, holder, None);
        return Handed::done(Err(Error::not_owner(kind.subject(), holder)));
    };
    services
        .watchdog
        .deregister(kind.renewal(), key, &streak.root);
    let lease = services.watchdog.timeout();
    let from = Releaser {
        holder,
        root: &streak.root,
    };
    match write {
        StreakWrite::Pass(claim) => {
            pass(services, kind, from, lease, claim, None, Some(streak)).await
        }
        StreakWrite::UnlockForReal { yielding } => Handed::done(
            unlock_for_real(services, &**kind, from, lease, None, yielding, Some(streak)).await,
        ),
    }
}

/// Lends the hold of `streak` on to the claimed waiter, where it may (see [`lend_first`]): the
/// root's registration must be surely held still.
fn lend_on<K: LockWire + ?Sized>(
    services: &Services,
    kind: &K,
    streak: &Arc<Streak>,
    claim: Claim,
) -> Lend {
    let registration = services
        .watchdog
        .surely_held(kind.renewal(), kind.key(), &streak.root)
        .filter(|registration| registration.generation == streak.generation);
    if let Some(registration) = &registration {
        streak.heard(registration.renewed_at);
    }
    if !(registration.is_some()
        && lendable(services, kind, &claim)
        && streak.lend_to(claim.field()))
    {
        return Lend::Declined(claim);
    }
    services.telemetry.lent(kind.label(), kind.name(), false);
    count_lent(services, kind.key(), streak, &claim);
    lent(streak.clone(), claim)
}

/// Unlocks `from.root`'s field for real (after a streak or a declined hand-off): when `yielding`,
/// the queue holds its head back so that other clients' waiters get their turn. A streak ending
/// this way is over once the unlock has its reply, before the local queue moves on.
///
/// # Cancel safety
///
/// Not cancel safe: it runs inside a release, which [`super::Releasing`] finishes if dropped.
pub(super) async fn unlock_for_real<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &K,
    from: Releaser<'_>,
    lease: Duration,
    conn: Option<crate::connection::Connection>,
    yielding: bool,
    streak: Option<&Arc<Streak>>,
) -> Result<Released> {
    let messages = match kind.channel(from.holder) {
        Some((channel, _)) if yielding => services.subscriber.registry().messages(&channel),
        _ => 0,
    };
    let sent_at = Instant::now();
    let released = unlock(services, kind, from.root, lease, conn).await;
    if let Some(streak) = streak {
        // The unlock found the root's field: it confirms the streak up to when it was sent.
        if released.is_ok() {
            streak.heard(sent_at);
        }
        services.cohorts.close_streak(streak);
    }
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
    if kind.hand_off().is_some() {
        services.cohorts.released(kind.key(), from.holder, yielding);
    }
    released
}

/// Watches a streak until it is over: it ends the streak when the registration it holds is lost,
/// or when a message on the lock's channel (which this client does not publish on while the
/// streak lasts: a force unlock elsewhere, Java's included) or a channel that was interrupted
/// (messages may have been missed) leads to a look at Redis that does not find the root's field.
/// It keeps the client's services only while it acts: a client dropped while a hold is lent stops
/// it.
fn watch_streak<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: Arc<K>,
    streak: Arc<Streak>,
    listening: Option<Listening>,
) -> impl Future<Output = ()> + Send + 'static {
    let services = Arc::downgrade(services);
    async move {
        let mut listening = listening;
        // Looks at Redis that failed in a row, the last one to be made again.
        let mut retry: u32 = 0;
        loop {
            // After a hand-off, the root's field is confirmed (one read at a time, each standing
            // for every hand-off before it was sent): the lending release waits for it, and a
            // holder lent a hold that was deleted silently hears of it within a round trip.
            let again = retry > 0;
            let confirm = async {
                if !again && !streak.confirmation_due() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = streak.over() => return,
                () = streak.lost() => break,
                () = streak.lent() => continue,
                () = changed(listening.as_ref()) => {}
                () = confirm => {}
            }
            // What comes from here on is heard again: mark before looking at Redis.
            if let Some(listening) = listening.as_mut() {
                tokio::select! {
                    () = streak.over() => return,
                    () = listening.mark_now() => {}
                }
            }
            let Some(services) = services.upgrade() else {
                return;
            };
            if streak.is_ending() {
                return;
            }
            let (key, root) = (kind.key(), &streak.root);
            let sent_at = Instant::now();
            match count_in_redis(&services, kind.subject(), key, root).await {
                // Still held: go on watching.
                Ok(held) if held > 0 => {
                    retry = 0;
                    services.cohorts.confirmed(&streak, sent_at);
                    continue;
                }
                Ok(_) => tracing::warn!(
                    lock = kind.name(),
                    "a streak's hold was deleted by someone else"
                ),
                // Redis out of reach for now (a restart, a failover): look again soon. The
                // registration's loss ends the streak if Redis stays away for a whole lease.
                Err(e) if e.is_transient() => {
                    tracing::debug!(lock = kind.name(), error = %e, "a streak's look at Redis failed; again");
                    retry = retry.saturating_add(1);
                    tokio::select! {
                        () = streak.over() => return,
                        () = tokio::time::sleep(services.config.retry_backoff(retry)) => {}
                    }
                    continue;
                }
                Err(e) => tracing::warn!(
                    lock = kind.name(),
                    error = %e,
                    "Redis refused to say whether a streak's hold is still there; ending the streak"
                ),
            }
            break;
        }
        let Some(services) = services.upgrade() else {
            return;
        };
        end_lost(&services, &*kind, &streak).await;
    }
}

/// Completes when `listening`'s channel carried a message or was interrupted; pends forever for a
/// streak whose holder was not listening (its hand-offs go by script).
async fn changed(listening: Option<&Listening>) {
    match listening {
        Some(listening) => listening.changed().await,
        None => std::future::pending().await,
    }
}

/// Ends a streak whose hold is lost or gone: every holder inside is told, renewal stops, and the
/// root's field, which Redis may still have, is unlocked before anyone else of this client acts
/// on the key (the root's next acquisition must not be taken for a re-entry of it).
async fn end_lost<K: LockWire + ?Sized>(services: &Arc<Services>, kind: &K, streak: &Arc<Streak>) {
    if !streak.ending() {
        return;
    }
    let key = kind.key();
    streak.lose();
    services
        .watchdog
        .lost(kind.renewal(), key, &streak.root, streak.generation);
    let lease = services.watchdog.timeout();
    if let Err(e) = unlock(services, kind, &streak.root, lease, None).await {
        tracing::debug!(lock = kind.name(), error = %e, "nothing of a lost streak was left to unlock");
    }
    services.cohorts.close_streak(streak);
}

/// Answers an acquisition of a key with an open streak where Redis would answer wrongly (its hash
/// holds the streak's root, not the local holder): the holder's re-entry is counted here (refused
/// by a kind that refuses re-entry, or whose re-entry must write); its lease stays the streak's, a
/// fixed one included. Anyone else's one-shot try fails; anyone else prepared to wait goes on
/// (`None`), and waits in [`gated_by_streak`] until the streak is over. See
/// [`super::acquire::plan::in_streak`].
pub(super) fn answered_in_streak<K: LockWire>(
    services: &Services,
    kind: &K,
    field: &str,
    wait_for: Patience,
) -> Option<Acquired<K::Token>> {
    let reentry = || kind.local_reentry().filter(|_| !kind.refuses_reentry());
    let (cohorts, ledger) = (&services.cohorts, &services.ledger);
    match in_streak(
        cohorts,
        ledger,
        kind.scope(),
        field,
        reentry,
        wait_for.one_try(),
    ) {
        InStreak::GoesOn => None,
        InStreak::Reentered(token, expiry) => Some(Ok(Some((token, expiry)))),
        InStreak::Refused => Some(Err(Error::reentry_refused(kind.subject()))),
        InStreak::Busy => Some(Ok(None)),
    }
}

/// Whether an attempt by `field` on `scope` must wait instead of going to Redis (see
/// [`super::acquire::plan::gated`]).
pub(super) fn gated_by_streak(services: &Services, scope: &str, field: &str) -> bool {
    super::acquire::plan::gated(&services.cohorts, scope, field)
}

/// How many holds `field` has of `key` while a streak of free hand-offs is open on it: the lent
/// holder's count is this client's, anyone else holds nothing (the root's field in Redis is not
/// the root's own any more). `None` when no streak is open on `key`: Redis knows.
pub(crate) fn held_in_streak(services: &Services, key: &str, field: &str) -> Option<u32> {
    let streak = services.cohorts.streak_on(key)?;
    Some(if streak.is_held_by(field) {
        services.ledger.count(key, field)
    } else {
        0
    })
}

/// How many holds `field` has in the lock hash `key` (`HGET`, unless [`held_in_streak`] knows);
/// 0 when none.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub(crate) async fn hold_count(
    services: &Services,
    subject: Subject<'_>,
    key: &str,
    field: &str,
) -> Result<u32> {
    match held_in_streak(services, key, field) {
        Some(count) => Ok(count),
        None => count_in_redis(services, subject, key, field).await,
    }
}

/// Listening on the lock's channel, for a kind that hands off locally, from before a write that may
/// give Redis a hold: what lets that hold pass freely later (see [`crate::cohort`]). `None` for
/// other kinds, and while nobody of this client listens on the channel (joining it then would take
/// a round trip, and the hold passes by script instead).
pub(crate) fn listening<K: LockWire + ?Sized>(
    services: &Services,
    kind: &K,
    field: &str,
) -> Option<Listening> {
    if kind.hand_off().is_none() || !services.config.local_handoff {
        return None;
    }
    let (channel, _) = kind.channel(field)?;
    services.subscriber.registry().listen(&channel)
}

/// Passes the last hold of `from` (its renewal stopped, `lease` its lease) to the claimed local
/// waiter, in one script, idempotent under a latch as an unlock is: a reply that is lost is re-sent
/// with the same request id, so whichever send runs first decides and the others replay its
/// outcome. The waiter takes the lock only as a seen outcome says, so no reconciliation ever
/// touches a field its owner may since have acquired by itself. Where it does not pass (nothing
/// changed in Redis), `from.root` is unlocked as usual, first on `conn` if given. `streak`, when
/// the hold passed is a streak's, is over once the outcome is known.
///
/// When no reply comes after the unlock's re-sends, the release fails (it is bounded as an unlock
/// is) and the hand-off is settled in the background ([`Handed::settling`]).
///
/// # Cancel safety
///
/// Not cancel safe: it runs inside a release, which [`super::Releasing`] finishes if dropped.
pub(super) async fn pass<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    from: Releaser<'_>,
    lease: Duration,
    claim: Claim,
    conn: Option<crate::connection::Connection>,
    streak: Option<&Arc<Streak>>,
) -> Handed {
    let key = kind.key();
    let unlock_instead = |claim: Claim, conn| {
        claim.failed();
        unlock_for_real(services, &**kind, from, lease, conn, false, streak)
    };
    let Some(hand_off) = kind.hand_off() else {
        return Handed::done(unlock_instead(claim, conn).await);
    };
    // A waiter with an undo in flight gets the lock in Redis, after the undo (see `reconciling`).
    if services.reconciling.is_pending(key, claim.field()) {
        return Handed::done(unlock_instead(claim, conn).await);
    }
    let Ok(pass_conn) = services
        .commands
        .get(Operation::Unlock, kind.subject())
        .await
    else {
        return Handed::done(unlock_instead(claim, conn).await);
    };
    let latch = names::unlock_latch(key, names::new_request_id());
    let call = hand_off.hand_off_call(
        from.root,
        claim.field(),
        claim.lease(),
        &latch,
        latch_ttl(services, lease),
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
        Some(pass_conn),
        Reconciles::HandOff,
    );
    let sent_at = sent.at;
    match latched.await {
        Latched::Seen(reply) => match passed(services, &**kind, from, claim, sent, reply) {
            Reply::Passed(orphan) => {
                if let Some(streak) = streak {
                    // The hand-off found the root's field: it confirms the streak up to then.
                    streak.heard(sent_at);
                    services.cohorts.close_streak(streak);
                }
                Handed {
                    released: Ok(Released::Fully),
                    orphan,
                    settling: None,
                    lent: None,
                }
            }
            Reply::NotPassed(claim) => Handed::done(unlock_instead(claim, conn).await),
            Reply::Lost(failure) => {
                if let Some(streak) = streak {
                    services.cohorts.close_streak(streak);
                }
                Handed::done(Err(failure))
            }
        },
        Latched::Failed(failure) => {
            claim.failed();
            if let Some(streak) = streak {
                services.cohorts.close_streak(streak);
            }
            services.cohorts.released(key, from.holder, None);
            Handed::done(Err(failure))
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
                streak: streak.cloned(),
            };
            Handed {
                released: Err(failure),
                orphan: None,
                settling: Some(Box::pin(settle_hand_off(hand_off, claim))),
                lent: None,
            }
        }
    }
}

/// When a hand-off script was first sent, and the next owner listening on the lock's channel from
/// just before.
struct Sent {
    at: Instant,
    listening: Option<Listening>,
}

/// What a hand-off script's seen reply means.
enum Reply {
    /// Passed: the waiter holds the lock (the field of a waiter that is gone, to release).
    Passed(Option<String>),
    /// Not passed and nothing changed: the holder unlocks as usual.
    NotPassed(Claim),
    /// The holder's lease was lost (or the reply made no sense).
    Lost(Error),
}

/// Reads a hand-off's seen reply and settles the claim accordingly.
fn passed<K: LockWire + ?Sized>(
    services: &Services,
    kind: &K,
    from: Releaser<'_>,
    claim: Claim,
    sent: Sent,
    reply: Value,
) -> Reply {
    let failure = match reply {
        Value::Int(passed) if passed > 0 => {
            services.telemetry.handed_off(kind.label(), kind.name());
            let to = claim.field().to_owned();
            let taken = claim.passed(passed.unsigned_abs(), sent.at, sent.listening);
            return Reply::Passed((!taken).then_some(to));
        }
        // Held more than once (a local count behind Redis'), or a writer that also reads.
        Value::Int(0) => return Reply::NotPassed(claim),
        Value::Nil => Error::not_owner(kind.subject(), from.root),
        other => Error::unexpected(Operation::Unlock, kind.subject(), other),
    };
    claim.failed();
    if kind.hand_off().is_some() {
        services.cohorts.released(kind.key(), from.holder, None);
    }
    Reply::Lost(failure)
}

/// A hand-off whose outcome is not known after every re-send of its release.
struct HandOffInFlight<K: LockWire + ?Sized> {
    services: Arc<Services>,
    kind: Arc<K>,
    /// The releasing local holder, the field Redis holds for it, and that hold's lease.
    holder: String,
    root: String,
    lease: Duration,
    /// The hand-off under its latch, and when it was first sent.
    call: crate::scripts::ScriptCall,
    latch: String,
    sent: Sent,
    /// The streak whose hold it passes, over once the outcome is known.
    streak: Option<Arc<Streak>>,
}

/// Re-sends a hand-off in flight (under its latch, so it applies once) until a reply tells its
/// outcome, then settles the claimed waiter as [`passed`] says; a hand-off that did not pass
/// unlocks the releasing owner's hold as usual. Until then neither owner acquires or releases this
/// lock (see [`crate::reconciling`]): a copy still in flight could otherwise pass a hold the
/// releasing owner took since, or hand the waiter a hold it does not know of. Gives up once the
/// releasing owner's hold has expired by itself (after its lease), when no copy can pass anything.
/// Returns the field of a waiter that was passed the lock but is gone: the caller releases it.
async fn settle_hand_off<K: LockWire + ?Sized>(
    hand_off: HandOffInFlight<K>,
    claim: Claim,
) -> Option<String> {
    let HandOffInFlight {
        services,
        kind,
        holder,
        root,
        lease,
        call,
        latch,
        sent,
        streak,
    } = hand_off;
    let (name, key) = (kind.name(), kind.key());
    let in_flight =
        [root.as_str(), claim.field()].map(|field| services.reconciling.begin(key, field));
    let seen = resend_until_seen(&services, kind.subject(), &call, sent.at + lease).await;
    settled_in_background(&services, Reconciles::HandOff, name, latch, seen.as_ref());
    // A hand-off that did not say it passed is taken as not passed: the hold it would have passed
    // expires with its lease.
    let reply = seen.unwrap_or(Value::Nil);
    // Settled: a release of the hold passed to a waiter that is gone must not wait for it.
    drop(in_flight);
    let from = Releaser {
        holder: &holder,
        root: &root,
    };
    let orphan = match passed(&services, &*kind, from, claim, sent, reply) {
        Reply::Passed(orphan) => orphan,
        Reply::NotPassed(claim) => {
            claim.failed();
            if let Err(e) = unlock(&services, &*kind, &root, lease, None).await {
                tracing::warn!(lock = name, error = %e, "unlocking after a hand-off in flight failed");
            }
            if kind.hand_off().is_some() {
                services.cohorts.released(key, &holder, None);
            }
            None
        }
        Reply::Lost(_) => None,
    };
    if let Some(streak) = &streak {
        services.cohorts.close_streak(streak);
    }
    tracing::debug!(lock = name, "settled a hand-off whose outcome was unknown");
    orphan
}
