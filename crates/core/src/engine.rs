//! The acquisition engine that every lock kind runs on.
//!
//! # Implementation details
//!
//! A lock kind says *what* to send (its scripts, its channel); the engine decides *when*:
//!
//! 1. **Try.** Run the kind's acquire script. A nil reply means acquired; a number is the lock's PTTL.
//!    The uncontended path ends here, after one round trip.
//! 2. **Subscribe.** Register interest in the kind's unlock channel (shared and reference-counted per
//!    client) and wait until the server confirms it, so no unlock can slip between the try and the wait.
//! 3. **Arm, retry, wait.** Arm the channel's notification *before* each retry (tokio's
//!    `Notified::enable`), retry, and on failure wait for a wake-up or the returned PTTL, whichever is
//!    first, and never past the caller's deadline. An unlock published during the retry is therefore
//!    never lost. If the subscription cannot be confirmed, waits are additionally capped so the waiter
//!    degrades to polling instead of failing.
//! 4. **Leave.** Dropping the subscription unsubscribes when the last local waiter leaves.
//!
//! # Outcomes that are not known
//!
//! A script whose reply never arrives (timeout, broken connection, or the caller dropping the future)
//! may still have run. rlock never re-sends an acquire blindly: an [`Undo`] guard holds the very
//! connection the acquire went out on and, unless the reply was seen, sends the kind's undo script on
//! that connection from a background task. Redis runs commands of one connection in order, so the
//! undo runs after the acquire if the acquire runs at all, and it removes exactly the hold that the
//! acquire added (it compares the owner's count with the count the owner had before).
//!
//! Unlocks are made idempotent instead: one request id (the unlock latch, PROTOCOL.md §2.3) is used for
//! every re-send, so a re-sent unlock that had already run replays its stored result.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::Inner;
use crate::connection::{Connection, Elapsed, Synced, outcome_unknown};
use crate::error::{Error, Operation, Result};
use crate::names;
use crate::owner::Owner;
use crate::scripts::ScriptCall;

/// How long a waiter sleeps when the lock has no TTL at all (a foreign key without expiry): it still
/// wakes on messages, this only bounds the wait if none comes.
const NO_TTL_RECHECK: Duration = Duration::from_secs(1);
/// The first and the longest poll interval of a waiter whose subscription is not live.
const DEGRADED_POLL: (Duration, Duration) = (Duration::from_millis(25), Duration::from_secs(1));

/// What varies between lock kinds. The engine does everything else.
pub(crate) trait LockKind: Send + Sync {
    /// The user-facing name, for errors and logs.
    fn name(&self) -> &str;
    /// The key that holds the lock.
    fn key(&self) -> &str;
    /// The channel that unlocks are published on.
    fn channel(&self) -> &str;
    /// One acquire attempt: replies nil when acquired, else the PTTL in ms.
    fn acquire_call(&self, field: &str, lease: Duration) -> ScriptCall;
    /// Undoes an acquire whose reply was lost, given the owner's hold count before it.
    fn undo_acquire_call(&self, field: &str, held_before: u32, lease: Duration) -> ScriptCall;
    /// Releases one hold idempotently under `latch`: replies 1 released, 0 still held, nil not owner.
    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall;
}

/// How long a hold lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    /// The watchdog timeout, renewed by the watchdog until released.
    Watchdog,
    /// A fixed lease: the lock expires then unless released first.
    Fixed(Duration),
}

/// How long to keep trying.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// Until acquired.
    Forever,
    /// Until this much time has passed (zero: one attempt).
    For(Duration),
}

/// A confirmed hold.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) field: String,
    pub(crate) expiry: Expiry,
}

/// How a hold can end without being released.
#[derive(Clone, Debug)]
pub(crate) enum Expiry {
    /// Watchdog hold: cancelled when the watchdog finds the lock lost.
    Watchdog(CancellationToken),
    /// Fixed lease: ends at this instant (measured from when the acquire was sent).
    At(Instant),
}

/// What this client has seen confirmed of each owner's holds: how many, and the lease of the latest.
/// The count tells an undo what the owner held before the acquire it undoes; the lease is what a
/// partial release re-applies, as Redisson re-applies the lease its holds were taken with.
#[derive(Debug, Default)]
pub(crate) struct Holds(Mutex<HashMap<(String, Owner), (u32, Duration)>>);

impl Holds {
    fn count(&self, key: &str, owner: Owner) -> u32 {
        self.0
            .lock()
            .get(&(key.to_owned(), owner))
            .map_or(0, |(count, _)| *count)
    }

    fn add(&self, key: &str, owner: Owner, lease: Duration) {
        let mut holds = self.0.lock();
        let (count, latest) = holds.entry((key.to_owned(), owner)).or_insert((0, lease));
        *count += 1;
        *latest = lease;
    }

    /// Forgets one hold; returns the lease of the owner's latest hold, if this client knew of any.
    fn remove(&self, key: &str, owner: Owner) -> Option<Duration> {
        let mut holds = self.0.lock();
        let id = (key.to_owned(), owner);
        let (count, lease) = holds.get_mut(&id)?;
        let lease = *lease;
        *count -= 1;
        if *count == 0 {
            let _ = holds.remove(&id);
        }
        Some(lease)
    }
}

/// Validates a lease: at least a millisecond (Redis' resolution), at most [`crate::config::MAX_LEASE`].
pub(crate) fn check_lease(lease: Duration) -> Result<()> {
    if lease < Duration::from_millis(1) || lease > crate::config::MAX_LEASE {
        return Err(Error::InvalidArgument(format!(
            "a lease must be between 1 ms and {:?}, got {lease:?}",
            crate::config::MAX_LEASE
        )));
    }
    Ok(())
}

/// Acquires `kind` for `owner`, waiting as `wait` says. `Ok(None)` means the wait ran out.
///
/// # Cancel safety
///
/// Cancel safe: dropping the future at any point leaves no hold behind (see the module docs), and a
/// waiter that was woken but dropped before it could retry hands its turn to the next local waiter.
pub(crate) async fn acquire(
    client: &Inner,
    kind: &impl LockKind,
    owner: Owner,
    wait: Wait,
    lease: Lease,
) -> Result<Option<Held>> {
    let deadline = match wait {
        Wait::Forever => None,
        Wait::For(wait) => Some(Instant::now().checked_add(wait).unwrap_or_else(far_future)),
    };
    let expired = |now: Instant| deadline.is_some_and(|d| now >= d);
    let field = client.field(owner);
    // Joining a channel another local waiter already listens on costs nothing, so do it before the
    // first try; otherwise the first try goes out alone and the uncontended path stays one round trip.
    let mut subscription = client.subscriber.join_live(kind.channel());
    let mut woken_turn = false;
    let mut poll = DEGRADED_POLL.0;
    loop {
        let Some(listening) = subscription.as_ref() else {
            if let Attempt::Acquired(held) = attempt(client, kind, owner, &field, lease).await? {
                return Ok(Some(held));
            }
            if expired(Instant::now()) {
                return Ok(None);
            }
            let joined = client.subscriber.subscribe(kind.channel());
            let confirm_by = Instant::now() + client.config.subscription_timeout;
            let confirm_by = deadline.map_or(confirm_by, |d| d.min(confirm_by));
            if tokio::time::timeout_at(confirm_by, joined.confirmed())
                .await
                .is_err()
            {
                tracing::warn!(
                    lock = kind.name(),
                    "subscription not confirmed in time; polling"
                );
            }
            subscription = Some(joined);
            continue;
        };

        let woken = listening.notified();
        tokio::pin!(woken);
        // Armed before the try: an unlock published from now on cannot be missed.
        let _ = woken.as_mut().enable();
        let turn = TurnGuard(woken_turn.then_some(listening));
        let pttl = match attempt(client, kind, owner, &field, lease).await {
            Ok(Attempt::Acquired(held)) => {
                turn.used();
                return Ok(Some(held));
            }
            Ok(Attempt::Held { pttl }) => {
                turn.used();
                pttl
            }
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        if expired(now) {
            return Ok(None);
        }
        let mut sleep = match pttl {
            ttl if ttl >= 0 => Duration::from_millis(ttl.unsigned_abs()),
            -1 => NO_TTL_RECHECK,
            _ => Duration::ZERO,
        };
        if listening.is_live() {
            poll = DEGRADED_POLL.0;
        } else {
            sleep = sleep.min(poll);
            poll = (poll * 2).min(DEGRADED_POLL.1);
        }
        // A foreign key may report any PTTL, even one no Instant can represent.
        let slept = now.checked_add(sleep).unwrap_or_else(far_future);
        let until = deadline.map_or(slept, |d| d.min(slept));
        woken_turn = tokio::select! {
            () = &mut woken => true,
            () = tokio::time::sleep_until(until) => false,
        };
    }
}

/// An instant no deadline reaches (for waits too long to represent).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// While a woken waiter uses its turn, holds the turn; if the waiter is dropped (or fails) before it
/// could retry, the wake-up goes to the next local waiter instead of being lost.
struct TurnGuard<'a>(Option<&'a crate::pubsub::Subscription>);

impl TurnGuard<'_> {
    fn used(mut self) {
        self.0 = None;
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        if let Some(subscription) = self.0 {
            subscription.pass_on_wake();
        }
    }
}

enum Attempt {
    Acquired(Held),
    Held { pttl: i64 },
}

/// One acquire attempt. In replicated topologies an acquire that no replica acknowledged is undone and
/// tried again, as Redisson does (PROTOCOL.md §5.3), before it fails with `NoSyncedReplicas`.
async fn attempt(
    client: &Inner,
    kind: &impl LockKind,
    owner: Owner,
    field: &str,
    lease: Lease,
) -> Result<Attempt> {
    let mut retry = 0;
    loop {
        match attempt_once(client, kind, owner, field, lease).await? {
            Tried::Done(attempt) => return Ok(attempt),
            Tried::Unsynced { replicas } if retry >= client.config.retry_attempts => {
                return Err(Error::NoSyncedReplicas {
                    operation: Operation::Acquire,
                    name: kind.name().to_owned(),
                    replicas,
                });
            }
            Tried::Unsynced { replicas } => {
                tracing::warn!(
                    lock = kind.name(),
                    replicas,
                    retry,
                    "no replica acknowledged the acquire; undone, retrying"
                );
                tokio::time::sleep(client.config.retry_backoff(retry)).await;
                retry += 1;
            }
        }
    }
}

enum Tried {
    Done(Attempt),
    /// Acquired on the master, but no replica acknowledged it: the undo is under way.
    Unsynced {
        replicas: u32,
    },
}

/// One acquire script, with its undo armed until the reply is seen.
async fn attempt_once(
    client: &Inner,
    kind: &impl LockKind,
    owner: Owner,
    field: &str,
    lease: Lease,
) -> Result<Tried> {
    let conn = client.commands.get(Operation::Acquire, kind.name()).await?;
    // The request's state (undo, script call, reply futures: kilobytes) lives on the heap, and only
    // while a connection is in hand, so a waiting task's future stays small.
    Box::pin(attempt_on(client, kind, owner, field, lease, conn)).await
}

async fn attempt_on(
    client: &Inner,
    kind: &impl LockKind,
    owner: Owner,
    field: &str,
    lease: Lease,
    conn: Connection,
) -> Result<Tried> {
    let lease_time = match lease {
        Lease::Watchdog => client.watchdog.timeout(),
        Lease::Fixed(lease) => lease,
    };
    let held_before = client.holds.count(kind.key(), owner);
    let mut undo = Undo::arm(
        client,
        conn,
        kind.undo_acquire_call(field, held_before, lease_time),
        lease_time,
    );
    let call = kind.acquire_call(field, lease_time);
    let sent_at = Instant::now();
    let reply = client
        .commands
        .run(client.commands.write(&mut undo.connection().conn, &call))
        .await;
    let name = kind.name();
    match reply {
        // Dropping the armed undo sends it, on this connection, right after the acquire.
        Ok(Ok(Synced {
            reply: Value::Nil,
            unsynced: Some(replicas),
        })) => Ok(Tried::Unsynced { replicas }),
        Ok(Ok(Synced {
            reply: Value::Nil, ..
        })) => {
            undo.disarm();
            client.holds.add(kind.key(), owner, lease_time);
            let expiry = match lease {
                Lease::Watchdog => {
                    Expiry::Watchdog(client.watchdog.register(kind.key(), owner, field, sent_at))
                }
                Lease::Fixed(lease) => Expiry::At(sent_at + lease),
            };
            Ok(Tried::Done(Attempt::Acquired(Held {
                field: field.to_owned(),
                expiry,
            })))
        }
        Ok(Ok(Synced {
            reply: Value::Int(pttl),
            ..
        })) => {
            undo.disarm();
            Ok(Tried::Done(Attempt::Held { pttl }))
        }
        // The script ran but replied nonsense: whatever it did is undone.
        Ok(Ok(other)) => Err(Error::unexpected(Operation::Acquire, name, other.reply)),
        // Redis refused the script (e.g. WRONGTYPE): it changed nothing.
        Ok(Err(e)) if !outcome_unknown(&e) => {
            undo.disarm();
            Err(Error::from_redis(Operation::Acquire, kind.key(), e))
        }
        Ok(Err(source)) => Err(Error::Backend {
            operation: Operation::Acquire,
            source,
        }),
        Err(Elapsed) => Err(Error::timeout(
            Operation::Acquire,
            name,
            client.commands.timeout,
        )),
    }
}

/// Undoes an acquire unless disarmed: on drop, sends the undo script on the acquire's own connection
/// from a background task (so it runs after the acquire, if the acquire runs at all).
struct Undo {
    conn: Connection,
    call: Option<ScriptCall>,
    commands: crate::connection::Commands,
    background: crate::client::Background,
    /// After this long the hold has expired by itself and the undo can stop trying.
    lease: Duration,
}

impl Undo {
    fn arm(client: &Inner, conn: Connection, call: ScriptCall, lease: Duration) -> Self {
        Self {
            conn,
            call: Some(call),
            commands: client.commands.clone(),
            background: client.background.clone(),
            lease,
        }
    }

    fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    fn disarm(&mut self) {
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

async fn undo(
    commands: crate::connection::Commands,
    mut conn: Connection,
    call: ScriptCall,
    lease: Duration,
) {
    let give_up_at = Instant::now() + lease;
    let lock = call.keys().first().cloned().unwrap_or_default();
    // On the acquire's connection, wait as long as the hold could live: a paused server answers late.
    let mut reply = tokio::time::timeout(lease, call.invoke(&mut conn.conn))
        .await
        .map_err(|_| Elapsed);
    drop(conn);
    let mut attempt = 0;
    loop {
        match reply {
            Ok(Ok(value)) => {
                let undone = matches!(value, Value::Int(1));
                tracing::debug!(%lock, undone, "reconciled an unconfirmed acquire");
                return;
            }
            Ok(Err(e)) if !outcome_unknown(&e) => {
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
            Ok(mut conn) => commands.run(call.invoke(&mut conn.conn)).await,
            Err(_) => Err(Elapsed),
        };
    }
}

/// What an unlock did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// The last hold was released and waiters were woken.
    Fully,
    /// The owner still holds the lock re-entrantly.
    Partially,
}

/// Releases one hold of `kind` by `owner`. If holds remain, their lease is re-applied: the watchdog
/// timeout while some are renewed here, else the lease of the owner's latest hold (PROTOCOL.md §11.10).
///
/// Renewal stops first. The unlock is re-sent after a timeout or a broken connection with the same
/// request id, so a re-send of an unlock that had run replays its result instead of releasing twice.
///
/// # Cancel safety
///
/// Not cancel safe: the public API runs it on a spawned task so that it always completes.
pub(crate) async fn release(
    client: &Inner,
    kind: &impl LockKind,
    owner: Owner,
) -> Result<Released> {
    client.watchdog.deregister(kind.key(), owner);
    let latest = client.holds.remove(kind.key(), owner);
    let lease = match latest {
        Some(lease) if !client.watchdog.is_renewing(kind.key()) => lease,
        _ => client.watchdog.timeout(),
    };
    let field = client.field(owner);
    let latch = names::unlock_latch(kind.key(), &names::new_request_id());
    let call = kind.unlock_call(&field, lease, &latch, client.config.unlock_latch_ttl());
    let name = kind.name();
    let mut retry = 0;
    loop {
        let failure = match client.commands.get(Operation::Unlock, name).await {
            Ok(mut conn) => match client
                .commands
                .run(client.commands.write(&mut conn.conn, &call))
                .await
            {
                // Applied on the master only: re-sending replays the latch and waits again.
                Ok(Ok(Synced {
                    unsynced: Some(replicas),
                    ..
                })) => Error::NoSyncedReplicas {
                    operation: Operation::Unlock,
                    name: name.to_owned(),
                    replicas,
                },
                Ok(Ok(Synced { reply, .. })) => {
                    let released = match reply {
                        Value::Int(1) => Ok(Released::Fully),
                        Value::Int(0) => Ok(Released::Partially),
                        Value::Nil => {
                            return Err(Error::NotOwner {
                                name: name.to_owned(),
                                field,
                            });
                        }
                        other => Err(Error::unexpected(Operation::Unlock, name, other)),
                    };
                    forget_latch(client, latch);
                    return released;
                }
                Ok(Err(e)) if !outcome_unknown(&e) => {
                    return Err(Error::from_redis(Operation::Unlock, kind.key(), e));
                }
                Ok(Err(source)) => Error::Backend {
                    operation: Operation::Unlock,
                    source,
                },
                Err(Elapsed) => Error::timeout(Operation::Unlock, name, client.commands.timeout),
            },
            Err(e) if e.is_transient() => e,
            Err(e) => return Err(e),
        };
        if retry >= client.config.retry_attempts {
            return Err(failure);
        }
        tracing::debug!(lock = name, error = %failure, retry, "re-sending unlock with the same request id");
        tokio::time::sleep(client.config.retry_backoff(retry)).await;
        retry += 1;
    }
}

/// How long an unlock latch whose reply is in hand waits to be deleted with the others.
const LATCH_BATCH_DELAY: Duration = Duration::from_millis(100);

/// Unlock latches whose replies are in hand, deleted together (one `DEL` per slot) a moment later.
/// Deleting each one on its own, as Redisson does, costs a command, a task and a wake-up per unlock;
/// nothing reads a latch after its reply was seen, and each also expires by itself.
#[derive(Debug, Default)]
pub(crate) struct Latches(Arc<Mutex<Vec<String>>>);

/// Deletes an unlock latch once its reply is in hand (best effort, in the background, batched).
fn forget_latch(client: &Inner, latch: String) {
    let first = {
        let mut pending = client.latches.0.lock();
        pending.push(latch);
        pending.len() == 1
    };
    if !first {
        return;
    }
    let pending = client.latches.0.clone();
    let commands = client.commands.clone();
    drop(client.background.spawn(async move {
        tokio::time::sleep(LATCH_BATCH_DELAY).await;
        let latches = std::mem::take(&mut *pending.lock());
        let mut by_slot: HashMap<_, Vec<String>> = HashMap::new();
        for latch in latches {
            by_slot
                .entry(commands.slot_of(&latch))
                .or_default()
                .push(latch);
        }
        for latches in by_slot.into_values() {
            let _ = commands
                .query::<()>(Operation::Unlock, "", redis::cmd("DEL").arg(&latches))
                .await;
        }
    }));
}
