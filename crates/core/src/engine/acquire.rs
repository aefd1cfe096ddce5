//! Acquisition: the wait loop around a kind's acquire script, with the undo of unknown outcomes.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::guard::Guard;
use super::hold::Expiry;
use super::kind::{Attempt, Kind};
use super::synced::{Synced, until_synced};
use super::wait::{Listen, wait_on};
use super::{Lease, Wait};
use crate::connection::{Commands, Connection, Written, outcome_unknown};
use crate::error::{Error, Operation, Result};
use crate::owner::Owner;
use crate::scripts::ScriptCall;
use crate::services::{Background, Services};

/// Acquires `kind` for `owner`, waiting as `wait` says. `Ok(None)` means the wait ran out.
///
/// # Cancel safety
///
/// Cancel safe: dropping the future at any point leaves no hold behind (an acquire that may have
/// run is undone, see [`Undo`]), no wait-queue entry (the kind's give-up runs), and a waiter that
/// was woken but dropped before it could retry hands its turn to the next local waiter.
pub(crate) async fn acquire<K: Kind>(
    services: &Arc<Services>,
    kind: &Arc<K>,
    owner: Owner,
    wait_for: Wait,
    lease: Lease,
) -> Result<Option<Guard<K::Token>>> {
    let base_field = services.field(owner);
    kind.refuse(services, &base_field)?;
    let field = kind.field(base_field);
    let poll_delay = |previous, polls| kind.poll_delay(previous, polls);
    let listen = Listen {
        name: kind.name(),
        channel: kind.channel(&field),
        poll_delay: &poll_delay,
    };
    let give_up = GiveUp::arm(services, kind.give_up_call(&field, wait_for));
    let (kind_ref, field_ref) = (&**kind, field.as_str());
    // An attempt's state (connection checkout, undo, script call, reply futures) lives on the heap,
    // and only while it runs, so a waiting task's future stays small.
    let acquired = wait_on(services, listen, wait_for, move || {
        Box::pin(attempt(services, kind_ref, field_ref, lease, wait_for))
    })
    .await;
    match acquired {
        Ok(Some((token, expiry))) => {
            give_up.disarm();
            let kind: Arc<dyn Kind<Token = K::Token>> = kind.clone();
            Ok(Some(Guard::new(
                kind,
                services.clone(),
                owner,
                field,
                token,
                expiry,
            )))
        }
        Ok(None) => {
            give_up.finish().await;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// One acquire attempt. In replicated topologies an acquire that no replica acknowledged is undone and
/// tried again, as Redisson does (PROTOCOL.md §5.3), before it fails with `NoSyncedReplicas`.
async fn attempt<K: Kind>(
    services: &Services,
    kind: &K,
    field: &str,
    lease: Lease,
    wait: Wait,
) -> Result<Attempt<(K::Token, Expiry)>> {
    until_synced(services, Operation::Acquire, kind.name(), || async {
        let conn = services
            .commands
            .get(Operation::Acquire, kind.name())
            .await?;
        attempt_on(services, kind, field, lease, wait, conn).await
    })
    .await
}

/// One acquire script, with its undo armed until the reply is seen.
async fn attempt_on<K: Kind>(
    services: &Services,
    kind: &K,
    field: &str,
    lease: Lease,
    wait: Wait,
    conn: Connection,
) -> Result<Synced<Attempt<(K::Token, Expiry)>>> {
    let lease_time = match lease {
        Lease::Watchdog => services.watchdog.timeout(),
        Lease::Fixed(lease) => lease,
    };
    let held_before = services.holds.count(kind.key(), field);
    let mut undo = Undo::arm(
        services,
        conn,
        kind.undo_acquire_call(field, held_before, lease_time, wait),
        lease_time,
    );
    let call = kind.acquire_call(field, lease_time, wait);
    let sent_at = Instant::now();
    let written = services.commands.write(&mut undo.conn.conn, &call).await;
    let name = kind.name();
    let (reply, synced) = match written {
        Written::Ran(reply) => (reply, None),
        Written::Unsynced { reply, replicas } => (reply, Some(replicas)),
        // Redis refused the script (e.g. WRONGTYPE): it changed nothing.
        Written::Refused(e) => {
            undo.disarm();
            return Err(Error::from_redis(Operation::Acquire, kind.key(), e));
        }
        // The armed undo reconciles whatever the script may have done.
        Written::Unknown(unknown) => return Err(unknown.into_error(Operation::Acquire, name)),
    };
    match (kind.decode_acquire(&reply), synced) {
        // Dropping the armed undo sends it, on this connection, right after the acquire.
        (Some(Attempt::Acquired(_)), Some(replicas)) => Ok(Synced::Unsynced { replicas }),
        (Some(Attempt::Acquired(token)), None) => {
            undo.disarm();
            services.holds.add(kind.key(), field, lease_time);
            let expiry = match lease {
                Lease::Watchdog => Expiry::Watchdog(services.watchdog.register(
                    kind.renewal(),
                    kind.key(),
                    field,
                    sent_at,
                )),
                Lease::Fixed(lease) => Expiry::At(sent_at + lease),
            };
            Ok(Synced::Done(Attempt::Acquired((token, expiry))))
        }
        (Some(Attempt::Busy(bound)), _) => {
            undo.disarm();
            Ok(Synced::Done(Attempt::Busy(bound)))
        }
        // The script ran but replied nonsense: whatever it did is undone.
        (None, _) => Err(Error::unexpected(Operation::Acquire, name, reply)),
    }
}

/// Undoes an acquire unless disarmed: on drop, sends the undo script on the acquire's own connection
/// from a background task (so it runs after the acquire, if the acquire runs at all).
pub(crate) struct Undo {
    pub(crate) conn: Connection,
    call: Option<ScriptCall>,
    commands: Commands,
    background: Background,
    /// After this long the hold has expired by itself and the undo can stop trying.
    lease: Duration,
}

impl Undo {
    /// Arms `call` as the undo of what is about to be sent on `conn`; it keeps trying for as long as
    /// what it undoes could live (`lease`).
    pub(crate) fn arm(
        services: &Services,
        conn: Connection,
        call: ScriptCall,
        lease: Duration,
    ) -> Self {
        Self {
            conn,
            call: Some(call),
            commands: services.commands.clone(),
            background: services.background.clone(),
            lease,
        }
    }

    /// The reply was seen: nothing to undo.
    pub(crate) fn disarm(&mut self) {
        self.call = None;
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            // A handle on the same multiplexed connection: the undo queues up behind the acquire.
            let conn = self.conn.clone();
            let commands = self.commands.clone();
            drop(
                self.background
                    .spawn(undo(commands, conn, call, self.lease)),
            );
        }
    }
}

async fn undo(commands: Commands, mut conn: Connection, call: ScriptCall, lease: Duration) {
    let give_up_at = Instant::now() + lease;
    let lock = call.keys().first().cloned().unwrap_or_default();
    // On the acquire's connection, wait as long as the hold could live: a paused server answers late.
    let mut reply = tokio::time::timeout(lease, call.invoke(&mut conn.conn))
        .await
        .ok();
    drop(conn);
    let mut attempt = 0;
    loop {
        match reply {
            Some(Ok(value)) => {
                let undone = matches!(value, Value::Int(1));
                tracing::debug!(%lock, undone, "reconciled an unconfirmed acquire");
                return;
            }
            Some(Err(e)) if !outcome_unknown(&e) => {
                tracing::warn!(%lock, error = %e, "undo of an unconfirmed acquire refused");
                return;
            }
            _ if Instant::now() >= give_up_at => {
                tracing::warn!(%lock, "could not undo an unconfirmed acquire; it expires with its lease");
                return;
            }
            _ => {}
        }
        // The connection broke, so the acquire either ran before that or never will: any connection
        // will do now.
        tokio::time::sleep(Duration::from_millis(50 << attempt.min(5))).await;
        attempt += 1;
        reply = match commands.get(Operation::Acquire, &lock).await {
            Ok(mut conn) => commands.run(call.invoke(&mut conn.conn)).await.ok(),
            Err(_) => None,
        };
    }
}

/// A waiter's give-up (PROTOCOL.md §6.6): run when the wait ran out, sent in the background when the
/// acquisition is dropped or failed, unless disarmed by success. Empty for kinds that need none.
struct GiveUp<'a> {
    call: Option<ScriptCall>,
    services: &'a Services,
}

impl<'a> GiveUp<'a> {
    fn arm(services: &'a Services, call: Option<ScriptCall>) -> Self {
        Self { call, services }
    }

    fn disarm(mut self) {
        self.call = None;
    }

    /// Gives up now, on the caller's task.
    async fn finish(mut self) {
        if let Some(call) = self.call.take() {
            // Boxed: a write's future is kilobytes, and every acquire future would carry it inline.
            Box::pin(give_up(self.services.commands.clone(), call)).await;
        }
    }
}

impl Drop for GiveUp<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            let commands = self.services.commands.clone();
            drop(self.services.background.spawn(give_up(commands, call)));
        }
    }
}

/// Best effort: a give-up that fails leaves an entry that Redis-side stale purging removes.
async fn give_up(commands: Commands, call: ScriptCall) {
    let lock = call.keys().first().cloned().unwrap_or_default();
    let outcome = match commands.get(Operation::Acquire, &lock).await {
        Ok(mut conn) => commands.write(&mut conn.conn, &call).await,
        Err(e) => {
            tracing::warn!(%lock, error = %e, "could not give up a wait");
            return;
        }
    };
    if !matches!(outcome, Written::Ran(_)) {
        tracing::warn!(%lock, ?outcome, "giving up a wait failed; the entry goes stale");
    }
}
