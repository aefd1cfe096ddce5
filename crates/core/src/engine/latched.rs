//! Writes under an unlock latch (docs/protocol.md §2.3): an unlock or a hand-off is re-sent with
//! the same request id while its reply is lost, so a re-send of one that had run replays its
//! outcome instead of acting twice.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::lock_wire::LockWire;
use crate::connection::{Connection, Written};
use crate::error::{Error, Operation, Result, Subject};
use crate::names;
use crate::scripts::ScriptCall;
use crate::services::Services;
use crate::telemetry::{self, Reconciles};

/// What an unlock did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// The last hold was released and waiters were woken.
    Fully,
    /// The owner still holds the lock re-entrantly.
    Partially,
}

/// The kind's unlock script, re-sent with the same request id while its reply is lost. It goes out
/// first on `conn` (the connection the hold was taken on) while the pool would still hand that out.
///
/// An unlock whose outcome is still unknown after every re-send fails, and goes on being re-sent in
/// the background until a reply is seen (or the hold has expired by itself); until then the owner
/// does not act on the lock (see [`crate::reconciling`]): a copy that runs late would otherwise
/// release a hold the owner took since.
pub(super) async fn unlock<K: LockWire + ?Sized>(
    services: &Arc<Services>,
    kind: &K,
    field: &str,
    lease: Duration,
    conn: Option<Connection>,
) -> Result<Released> {
    let latch = names::unlock_latch(kind.key(), names::new_request_id());
    let call = kind.unlock_call(field, lease, &latch, latch_ttl(services, lease));
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

/// The time to live of the latch of a write that releases a hold of `lease` (docs/protocol.md
/// §2.4): the configured one, or the lease if longer. A write whose reply is still unknown after
/// its re-sends is re-sent in the background until the hold has expired by itself
/// ([`resend_until_seen`]); a copy that ran after its latch had expired would apply again instead
/// of replaying its first outcome.
pub(super) fn latch_ttl(services: &Services, lease: Duration) -> Duration {
    services.config.unlock_latch_ttl().max(lease)
}

/// How a write under a latch ended.
pub(super) enum Latched {
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
pub(super) async fn send_latched<K: LockWire + ?Sized>(
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
            Ok(mut conn) => match services.commands.write(&mut conn, call).await {
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
                // A refused re-send changed nothing, but says nothing of the send before it.
                Written::Refused(e) if unknown => Error::from_redis(Operation::Unlock, subject, e),
                Written::Refused(e) => {
                    return Latched::Failed(Error::from_redis(Operation::Unlock, subject, e));
                }
                Written::Unknown(lost) => {
                    unknown = true;
                    lost.into_error(Operation::Unlock, subject)
                }
                // Never sent: a try like any other, and no more unknown than before.
                Written::Unsent(after) => Error::timeout(Operation::Unlock, subject, after),
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

/// Re-sends `call` (a write under a latch, so it applies once) until a reply is seen, backing off
/// between tries, until `give_up_at`: `Some` with the reply, `None` if it gave up. A re-send that
/// Redis refuses changed nothing but tells nothing of the copies before it, which may have run:
/// only a reply does, so the re-sends go on.
pub(super) async fn resend_until_seen(
    services: &Services,
    subject: Subject<'_>,
    call: &ScriptCall,
    give_up_at: Instant,
) -> Option<Value> {
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
        match services.commands.write(&mut conn, call).await {
            Written::Ran(reply) => return Some(reply),
            Written::Refused(e) => {
                tracing::debug!(error = %e, "a re-send of a write in flight was refused");
            }
            Written::Unsynced { .. } | Written::Unknown(_) | Written::Unsent(_) => {}
        }
    }
}

/// Tells telemetry and the logs how a write reconciled in the background ended, and lets its latch
/// go once its reply was seen.
pub(super) fn settled_in_background(
    services: &Services,
    reconciles: Reconciles,
    name: &str,
    latch: String,
    seen: Option<&Value>,
) {
    telemetry::reconciled(reconciles, name, seen.is_some());
    match seen {
        Some(_) => services.forget_latch(latch),
        None => tracing::warn!(
            lock = name,
            "a write in flight gave up; what it holds expires with its lease"
        ),
    }
}
