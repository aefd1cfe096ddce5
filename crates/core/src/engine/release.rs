//! Release: the kind's unlock script, idempotent under an unlock latch, re-sent on lost replies.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::Wait;
use super::acquire::Undo;
use super::kind::{HandOff, Kind};
use crate::cohort::{Claim, Next, Yield};
use crate::connection::{Connection, Written};
use crate::error::{Error, Operation, Result};
use crate::names;
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
/// timeout while some are renewed here, else the lease of the owner's latest hold (PROTOCOL.md
/// §11.10).
///
/// Renewal stops first. The last hold of a kind that hands off goes to the next local waiter if one
/// waits (see [`crate::cohort`]), within the bound; otherwise the lock is unlocked. The unlock is
/// re-sent after a timeout or a broken connection with the same request id, so a re-send of an
/// unlock that had run replays its result instead of releasing twice.
///
/// # Cancel safety
///
/// Not cancel safe: run it through [`Releasing`], which finishes it in the background if dropped.
pub(crate) async fn release<K: Kind + ?Sized>(
    services: &Services,
    kind: &K,
    field: &str,
) -> Result<Released> {
    let (key, renewal) = (kind.key(), kind.renewal());
    let renewing = services.watchdog.deregister(renewal, key, field);
    let (lease, conn) = match services.holds.remove(key, field) {
        Some((lease, conn)) if !renewing => (lease, conn),
        Some((_, conn)) => (services.watchdog.timeout(), conn),
        None => (services.watchdog.timeout(), None),
    };
    let Some(hand_off) = kind
        .hand_off()
        .filter(|_| services.config.local_handoff && services.holds.count(key, field) == 0)
    else {
        return unlock(services, kind, field, lease, conn).await;
    };
    let (queue, config) = (hand_off.queue(), &services.config);
    let yielding = match services.cohorts.releasing(
        key,
        queue,
        field,
        config.local_handoff_limit,
        config.local_handoff_window,
    ) {
        Next::HandOff(claim) => match pass(services, kind, hand_off, field, lease, claim).await {
            Passing::Done(released) => return released,
            Passing::Unlock => false,
        },
        Next::Release { yielding } => yielding,
    };
    let messages = match kind.channel(field) {
        Some((channel, _)) if yielding => services.subscriber.registry().messages(&channel),
        _ => 0,
    };
    let sent_at = Instant::now();
    let released = unlock(services, kind, field, lease, conn).await;
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
async fn unlock<K: Kind + ?Sized>(
    services: &Services,
    kind: &K,
    field: &str,
    lease: Duration,
    conn: Option<Connection>,
) -> Result<Released> {
    let key = kind.key();
    let latch = names::unlock_latch(key, names::new_request_id());
    let call = kind.unlock_call(field, lease, &latch, services.config.unlock_latch_ttl());
    let name = kind.name();
    let mut retry = 0;
    // Whether an unlock was sent whose outcome is not known: the re-sends reconcile it.
    let mut unknown = false;
    let mut reused = conn.and_then(|conn| services.commands.still_fresh(conn));
    loop {
        let checkout = match reused.take() {
            Some(conn) => Ok(conn),
            None => services.commands.get(Operation::Unlock, name).await,
        };
        let failure = match checkout {
            Ok(mut conn) => match services.commands.write(&mut conn.conn, &call).await {
                Written::Ran(reply) => {
                    if unknown {
                        telemetry::reconciled(Reconciles::Unlock, name, true);
                    }
                    let released = match reply {
                        Value::Int(1) => Ok(Released::Fully),
                        Value::Int(0) => Ok(Released::Partially),
                        Value::Nil => {
                            return Err(Error::NotOwner {
                                name: name.to_owned(),
                                field: field.to_owned(),
                            });
                        }
                        other => Err(Error::unexpected(Operation::Unlock, name, other)),
                    };
                    services.forget_latch(latch);
                    return released;
                }
                // Applied on the master only: re-sending replays the latch and waits again.
                Written::Unsynced { replicas, .. } => Error::NoSyncedReplicas {
                    operation: Operation::Unlock,
                    name: name.to_owned(),
                    replicas,
                },
                Written::Refused(e) => return Err(Error::from_redis(Operation::Unlock, key, e)),
                Written::Unknown(lost) => {
                    unknown = true;
                    lost.into_error(Operation::Unlock, name)
                }
            },
            Err(e) if e.is_transient() => e,
            Err(e) => return Err(e),
        };
        if retry >= services.config.retry_attempts {
            if unknown {
                telemetry::reconciled(Reconciles::Unlock, name, false);
            }
            return Err(failure);
        }
        tracing::debug!(lock = name, error = %failure, retry, "re-sending unlock with the same request id");
        tokio::time::sleep(services.config.retry_backoff(retry)).await;
        retry += 1;
    }
}

/// How a hand-off ended.
enum Passing {
    /// Passed, or the release is over otherwise (the lease was lost, the outcome reconciled).
    Done(Result<Released>),
    /// Not passed and nothing changed: unlock as usual.
    Unlock,
}

/// Passes the last hold of `from` (renewal stopped, `lease` its lease) to the claimed local waiter,
/// in one script. A reply that is lost is never re-sent: both owners' holds are undone on the same
/// connection after it (whatever it did, the lock ends up released, and published), then the waiter
/// tries as usual. (It runs inside a [`Releasing`], which is never dropped half-way, so the undos
/// need arming only once the reply is known to be missing.)
async fn pass<K: Kind + ?Sized>(
    services: &Services,
    kind: &K,
    hand_off: &dyn HandOff<Token = K::Token>,
    from: &str,
    lease: Duration,
    claim: Claim,
) -> Passing {
    let (name, key, queue) = (kind.name(), kind.key(), hand_off.queue());
    let Ok(mut conn) = services.commands.get(Operation::Unlock, name).await else {
        claim.failed();
        return Passing::Unlock;
    };
    let (to, to_lease) = (claim.field().to_owned(), claim.lease());
    let sent_at = Instant::now();
    let written = services
        .commands
        .write(&mut conn.conn, &hand_off.hand_off_call(from, &to, to_lease))
        .await;
    let failure = match written {
        Written::Ran(Value::Int(passed)) if passed > 0 => {
            services.telemetry.handed_off(kind.label(), name);
            if !claim.passed(passed.unsigned_abs(), sent_at) {
                // The waiter is gone: release its hold (to the next waiter, or for real).
                let released = Box::pin(release(services, kind, &to)).await;
                if let Err(e) = released {
                    tracing::warn!(lock = name, error = %e, "releasing a hold passed to a dropped waiter failed");
                }
            }
            return Passing::Done(Ok(Released::Fully));
        }
        // Held more than once (a local count behind Redis'), or a writer that also reads.
        Written::Ran(Value::Int(0)) => {
            claim.failed();
            return Passing::Unlock;
        }
        Written::Ran(Value::Nil) => {
            claim.failed();
            services.cohorts.released(key, queue, from, None);
            return Passing::Done(Err(Error::NotOwner {
                name: name.to_owned(),
                field: from.to_owned(),
            }));
        }
        Written::Refused(e) => {
            claim.failed();
            services.cohorts.released(key, queue, from, None);
            return Passing::Done(Err(Error::from_redis(Operation::Unlock, key, e)));
        }
        Written::Ran(other) => Error::unexpected(Operation::Unlock, name, other),
        Written::Unsynced { replicas, .. } => Error::NoSyncedReplicas {
            operation: Operation::Unlock,
            name: name.to_owned(),
            replicas,
        },
        Written::Unknown(unknown) => unknown.into_error(Operation::Unlock, name),
    };
    // Whatever the script did is undone; then the lock is free (or another client's), and the
    // waiter tries. The undos run in the background until they are done (or the holds they undo
    // have expired); the caller waits for them no longer than for an unlock and its re-sends. The
    // waiter may try before they are done: an undo takes one hold away if its owner has one, so a
    // waiter that took the passed hold again (a re-entry) ends with one hold, as it should.
    claim.failed();
    let undos = [(to.as_str(), to_lease), (from, lease)].map(|(owner, lease)| {
        let call = kind.undo_acquire_call(owner, 0, lease, Wait::Forever);
        let undo = Undo::arm(services, conn.clone(), || call, lease, Reconciles::HandOff);
        services.background.spawn(undo.finish())
    });
    let budget = services
        .config
        .command_timeout
        .saturating_mul(services.config.retry_attempts.saturating_add(1));
    let reconciled = matches!(
        tokio::time::timeout(budget, futures::future::join_all(undos)).await,
        Ok(undone) if undone.iter().all(|undo| matches!(undo, Ok(true)))
    );
    services.cohorts.released(key, queue, from, None);
    let outcome = match failure {
        Error::Timeout { .. } | Error::Backend { .. } if reconciled => Ok(Released::Fully),
        failure => Err(failure),
    };
    tracing::debug!(
        lock = name,
        ?outcome,
        "reconciled a hand-off whose outcome was unknown"
    );
    Passing::Done(outcome)
}

/// Deletes the lock `kind` whoever holds it (the kind's force-unlock script, which also wakes a
/// waiter). Returns whether a lock was deleted. This client's guards of the lock see their lease lost.
///
/// # Cancel safety
///
/// Not cancel safe: if dropped, the lock may or may not have been deleted.
pub(crate) async fn force_unlock<K: Kind + ?Sized>(services: &Services, kind: &K) -> Result<bool> {
    let name = kind.name();
    services.watchdog.forget(kind.key());
    let call = kind.force_unlock_call();
    let mut conn = services.commands.get(Operation::ForceUnlock, name).await?;
    match services.commands.write(&mut conn.conn, &call).await {
        Written::Ran(Value::Int(deleted)) => Ok(deleted == 1),
        Written::Ran(other) => Err(Error::unexpected(Operation::ForceUnlock, name, other)),
        Written::Unsynced { replicas, .. } => Err(Error::NoSyncedReplicas {
            operation: Operation::ForceUnlock,
            name: name.to_owned(),
            replicas,
        }),
        Written::Refused(e) => Err(Error::from_redis(Operation::ForceUnlock, kind.key(), e)),
        Written::Unknown(unknown) => Err(unknown.into_error(Operation::ForceUnlock, name)),
    }
}

/// A release in progress: awaited, it runs on the caller's task; dropped before it completed (or
/// never awaited), it finishes in the background. Either way it is the same release, with the same
/// request id, so it applies once.
pub(crate) struct Releasing {
    pending: Option<Pin<Box<dyn Future<Output = Result<Released>> + Send>>>,
    background: Background,
    name: String,
}

impl Releasing {
    /// A release of one hold of `field` on `kind`.
    pub(crate) fn new<K: Kind + ?Sized>(
        services: &Arc<Services>,
        kind: Arc<K>,
        field: String,
    ) -> Self {
        let name = kind.name().to_owned();
        let services_for_release = services.clone();
        Self {
            pending: Some(Box::pin(async move {
                release(&services_for_release, &*kind, &field).await
            })),
            background: services.background.clone(),
            name,
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
        drop(self.background.spawn(async move {
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
