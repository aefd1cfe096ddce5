//! Release: the kind's unlock script, idempotent under an unlock latch, re-sent on lost replies.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use redis::Value;

use super::hand_off::{self, Handed, Lend, Releaser};
use super::hold::books;
use super::latched::{Released, unlock};
use super::lock_wire::LockWire;
use crate::cohort::{Next, Streak, StreakRelease};
use crate::connection::Written;
use crate::error::{Error, Operation, Result};
use crate::ledger::{Books, Expiry, Left};
use crate::reconciling::Reconciling;
use crate::services::{Background, Services};
use plan::{Plan, Way, Write};

pub(crate) mod plan;

/// Releases one hold of `kind` by `field`: `member`, a guard's hold (its record's member), or any
/// of the owner's (a release by owner; a hold passed to a waiter that is gone has no record).
/// A member of a record that ended (lost, or replaced by a hold created afresh) holds nothing in
/// Redis: [`Error::NotOwner`], with nothing sent. If holds remain, the key is given the longest
/// time one of them was promised: the watchdog timeout while one is renewed here, else the latest
/// end of the fixed leases left (docs/protocol.md §11.10, and see [`crate::ledger`]).
///
/// The last hold of a kind that hands off goes to the next local waiter if one waits (see
/// [`crate::cohort`] and [`super::hand_off`]), within the bound: freely where it may (Redis
/// untouched, renewal going on), else by script; otherwise the lock is unlocked. Renewal stops
/// before the hash changes. The unlock is re-sent after a timeout or a broken connection with the
/// same request id, so a re-send of an unlock that had run replays its result instead of releasing
/// twice.
///
/// While a streak of free hand-offs is open on the key, the release goes through it: the lent
/// holder's re-entries are released there only; its last release lends the hold on, or passes or
/// unlocks the streak root's field, which is what Redis holds; anyone else of this client holds
/// nothing there: [`Error::NotOwner`], with nothing sent (but an owner whose own field Redis gave
/// it as the streak ended releases it in Redis).
///
/// Before anything, the release waits for the owner's acquire attempts on the wire to be answered
/// and for the owner's undos (see [`crate::ledger::Ledger::answered`]).
///
/// # Cancel safety
///
/// Not cancel safe: run it through [`Releasing`], which finishes it in the background if dropped.
pub(crate) async fn release<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    field: &str,
    member: Option<&Expiry>,
) -> Result<Released> {
    let (scope, ledger) = (kind.scope(), &services.ledger);
    // An acquire of this owner's still on the wire (another of its futures re-entering) is
    // answered first, and an undo of its that may still run counts its holds: let it run first
    // (see `Ledger::answered`). A kind that refuses re-entry counts nothing for a second attempt,
    // whose script refuses it, and its attempts wait for the owner's background releases.
    if !kind.refuses_reentry() {
        while let Some(answered) = ledger.answered(scope, field) {
            answered.await;
        }
    }
    services.reconciling.settled(kind.key(), field).await;
    let books = books(services, &**kind);
    let last = match plan::way(
        services.cohorts.streak_on(scope),
        ledger,
        scope,
        field,
        member,
    ) {
        Way::Streak(streak) => {
            return release_in_streak(services, kind, books, (field, member), &streak).await;
        }
        Way::Stale => return Err(Error::not_owner(kind.subject(), field)),
        Way::Own { last } => last,
    };
    let hands_off = last && kind.hand_off().is_some() && services.config.local_handoff;
    let (queue, config) = (kind.label(), &services.config);
    let next = hands_off.then(|| {
        services.cohorts.releasing(
            scope,
            queue,
            field,
            config.local_handoff_limit,
            config.local_handoff_window,
        )
    });
    let next = match next {
        Some(Next::HandOff(claim)) => match hand_off::lend_first(services, kind, field, claim) {
            Lend::Lent(lent) => return finish(services, kind, field, Handed::lent(lent)).await,
            Lend::Declined(claim) => Some(Next::HandOff(claim)),
        },
        next => next,
    };
    // The hash changes from here on: the record's renewal stops first if no renewed member is left.
    let left = ledger.leave(&books, field, member);
    let streak_open = services.cohorts.streak_on(scope).is_some();
    let Plan { write, lease, conn } =
        plan::write(next, left, streak_open, services.watchdog.timeout());
    let from = Releaser {
        holder: field,
        root: field,
    };
    match write {
        Write::Nothing => Err(Error::not_owner(kind.subject(), field)),
        Write::Unlock {
            others,
            frees_queue,
        } => {
            let released = unlock(services, &**kind, field, lease, conn).await;
            if matches!(released, Err(Error::NotOwner { .. })) && others {
                // Redis no longer has the field that this owner's other holds count on (a delete
                // that nobody heard): they are lost, and are told now rather than at the next
                // renewal, so that none of them is lent on.
                ledger.lose(&books, field, None);
            }
            if frees_queue {
                services.cohorts.released(scope, field, None);
            }
            released
        }
        Write::Pass(claim) => {
            let handed = hand_off::pass(services, kind, from, lease, claim, conn, None).await;
            finish(services, kind, field, handed).await
        }
        Write::UnlockForReal { yielding } => {
            hand_off::unlock_for_real(services, &**kind, from, lease, conn, yielding, None).await
        }
    }
}

/// A release while a streak of free hand-offs is open on the key (see [`release`]): the lent
/// holder's re-entries are released in the streak only; its last release lends the hold on, or
/// ends the streak in Redis; anyone else of this client holds nothing there.
async fn release_in_streak<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    books: Books<'_>,
    (field, member): (&str, Option<&Expiry>),
    streak: &Arc<Streak>,
) -> Result<Released> {
    let (scope, ledger) = (kind.scope(), &services.ledger);
    let released = streak.release(field, || {
        !matches!(ledger.leave(&books, field, member), Left::Partially { .. })
    });
    match released {
        StreakRelease::Partially => Ok(Released::Partially),
        StreakRelease::Last => {
            let handed = hand_off::release_streak(services, kind, field, streak).await;
            finish(services, kind, field, handed).await
        }
        StreakRelease::NotHolder => {
            // Nothing of this owner's is in Redis while the streak lasts: a holder the streak no
            // longer counts (its hold was lost) or any other owner.
            ledger.lose(&books, field, None);
            services.cohorts.released(scope, field, None);
            Err(Error::not_owner(kind.subject(), field))
        }
    }
}

/// What a release by `field` that handed off returns, once a hold passed to a waiter that is gone
/// is released in turn (to the next waiter, or for real), and, for a free hand-off, once Redis
/// confirmed the streak's root after it: a lending release that cannot be confirmed (the lock was
/// deleted meanwhile, even silently) fails as a lost lease would. A hand-off being settled in the
/// background releases its orphan when it is done.
async fn finish<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    field: &str,
    handed: Handed,
) -> Result<Released> {
    if let Some(settling) = handed.settling {
        let (services, kind) = (services.clone(), kind.clone());
        drop(services.clone().background.spawn(async move {
            if let Some(orphan) = settling.await {
                release_orphan(&services, &kind, &orphan).await;
            }
        }));
    }
    let orphan = handed
        .orphan
        .or_else(|| handed.lent.as_ref().and_then(|lent| lent.orphan.clone()));
    if let Some(orphan) = &orphan {
        release_orphan(services, kind, orphan).await;
    }
    if let Some(lent) = &handed.lent
        && !lent.confirmed().await
    {
        return Err(Error::not_owner(kind.subject(), field));
    }
    handed.released
}

/// Releases the hold passed or lent to a waiter that is gone.
async fn release_orphan<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    field: &str,
) {
    if let Err(e) = release_again(services, kind, field, None).await {
        tracing::warn!(lock = kind.name(), error = %e, "releasing a hold passed to a dropped waiter failed");
    }
}

/// [`release`] from inside a release, boxed as a `Send` future: the type breaks the cycle the
/// compiler would otherwise follow to prove the recursive future `Send`.
fn release_again<'a, K: LockWire + ?Sized>(
    services: &'a Arc<Services>,
    kind: &'a Arc<K>,
    field: &'a str,
    member: Option<&'a Expiry>,
) -> Pin<Box<dyn Future<Output = Result<Released>> + Send + 'a>> {
    Box::pin(release(services, kind, field, member))
}

/// Deletes the lock `kind` whoever holds it (the kind's force-unlock script, which also wakes a
/// waiter). Returns whether a lock was deleted. This client's guards of the lock see their lease
/// lost.
///
/// # Cancel safety
///
/// Not cancel safe: if dropped, the lock may or may not have been deleted.
pub(crate) async fn force_unlock<K: LockWire + ?Sized>(
    services: &Services,
    kind: &K,
) -> Result<bool> {
    let subject = kind.subject();
    // A streak of free hand-offs on the key ends here, before the key changes: its holder is told
    // now, and its watch does not unlock the root's field behind the force unlock's back.
    let streak = services
        .cohorts
        .streak_on(kind.scope())
        .filter(|streak| streak.ending());
    if let Some(streak) = &streak {
        streak.lose();
    }
    services.ledger.lose_scope(&services.watchdog, kind.scope());
    let deleted = delete(services, kind, subject).await;
    if let Some(streak) = &streak {
        services.cohorts.close_streak(streak);
    }
    deleted
}

/// The kind's force-unlock script: whether it deleted a lock.
async fn delete<K: LockWire + ?Sized>(
    services: &Services,
    kind: &K,
    subject: crate::error::Subject<'_>,
) -> Result<bool> {
    let call = kind.force_unlock_call();
    let mut conn = services
        .commands
        .get(Operation::ForceUnlock, subject)
        .await?;
    match services.commands.write(&mut conn, &call).await {
        Written::Ran(Value::Int(deleted)) => Ok(deleted == 1),
        Written::Ran(other) => Err(Error::unexpected(Operation::ForceUnlock, subject, other)),
        Written::Unsynced { replicas, .. } => Err(Error::no_synced_replicas(
            Operation::ForceUnlock,
            subject,
            replicas,
        )),
        Written::Refused(e) => Err(Error::from_redis(Operation::ForceUnlock, subject, e)),
        Written::Unknown(unknown) => Err(unknown.into_error(Operation::ForceUnlock, subject)),
        Written::Unsent(after) => Err(Error::timeout(Operation::ForceUnlock, subject, after)),
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
    /// A release of one hold of `field` on `kind`: `member`, a guard's, or any of the owner's
    /// (see [`release`]).
    pub(crate) fn new<K: LockWire + ?Sized>(
        services: &Arc<Services>,
        kind: Arc<K>,
        field: Arc<str>,
        member: Option<Expiry>,
    ) -> Self {
        let name = kind.name().to_owned();
        let registers = kind.refuses_reentry().then(|| {
            (
                services.releasing.clone(),
                kind.key().to_owned(),
                field.to_string(),
            )
        });
        let services_for_release = services.clone();
        Self {
            pending: Some(Box::pin(async move {
                release(&services_for_release, &kind, &field, member.as_ref()).await
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
