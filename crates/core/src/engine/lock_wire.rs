//! What varies between lock kinds: the [`LockWire`] trait.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use redis::{RedisError, Value};

use super::patience::Patience;
use crate::error::{Error, Result, Subject};
use crate::scripts::ScriptCall;
use crate::services::Services;
use crate::wake::WakeRule;
use crate::watchdog::Renewal;

/// A wake-up channel's name as a kind hands it out: its own, shared (with the subscriber's
/// registry, with other waiters), or one made for the call (a per-waiter channel).
pub(crate) type ChannelName<'a> = Cow<'a, Arc<str>>;

/// How long a waiter sleeps when nothing bounds its wait: a lock without TTL (a foreign key without
/// expiry), a semaphore without permits, a latch not yet at zero. It still wakes on messages; this
/// only bounds the wait when a message is lost (a reconnect, a writer that does not publish).
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// The first and the longest poll interval of a waiter that nothing wakes (its subscription is not
/// live): a doubling back-off between them.
const DEGRADED_POLL: (Duration, Duration) = (Duration::from_millis(25), Duration::from_secs(1));

/// The poll interval of a waiter whose subscription is not live: 25 ms, doubling up to 1 s.
pub(crate) fn degraded_poll(previous: Option<Duration>, _polls: u32) -> Duration {
    previous.map_or(DEGRADED_POLL.0, |previous| {
        (previous * 2).min(DEGRADED_POLL.1)
    })
}

/// One lock kind: its scripts and their argument order, how it decodes their replies, what a hold
/// yields, where its waiters listen, how a lost reply is reconciled and how holds are renewed. The
/// engine does everything else (waiting, undo, release, guards).
///
/// The trait is object safe: a guard keeps its kind as `Arc<dyn LockWire<Token = T>>`. It is public
/// only so that [`Lock<K>`](crate::Lock) can name it; it lives in a private module, so nothing
/// outside the crate can implement or call it (a sealed trait).
pub trait LockWire: Send + Sync + 'static {
    /// What a successful acquisition yields: nothing, or the fenced lock's fencing token.
    type Token: std::fmt::Debug + Send + 'static;

    /// The user-facing name, for errors and logs.
    fn name(&self) -> &str;

    /// What kind it is, in `snake_case`: the `kind` label of its spans and metrics, and the name of
    /// its local hand-off queues (holds pass only between waiters of one kind).
    fn label(&self) -> &'static str;

    /// What it is, in words, for error messages: `lock`, `fair lock`, `write lock`, ...
    fn what(&self) -> &'static str;

    /// What this lock's errors are about: its kind, in words, and its name.
    // The trait is sealed (see above): nothing outside the crate can call this.
    #[allow(private_interfaces)]
    fn subject(&self) -> Subject<'_> {
        Subject::new(self.what(), self.name())
    }

    /// The key holds are counted in: the first key of every script (it routes them in a cluster).
    /// Every kind of Redisson's lock family keeps its holds at the lock's raw name.
    fn key(&self) -> &str {
        self.name()
    }

    /// What this client keeps its books of the lock's holds under: the owners' hold records
    /// ([`crate::ledger::Ledger`]), the watchdog's registrations, the local queues and streaks. The key (the default) for every kind
    /// whose holds are of the whole key; a kind whose holds are of *some* of the key's fields (the
    /// group lock's are of its values, docs/protocol.md §8.9) names the key and that part, so that
    /// holds of different parts of one key are counted and renewed apart. A kind that hands off
    /// ([`LockWire::hand_off`]) holds the whole key. What holds an owner back from the lock while a
    /// reconciliation may run (an undo, a release in the background) stays per key.
    fn scope(&self) -> &str {
        self.key()
    }

    /// What the watchdog's renewal of a hold sends besides its key and the owners' fields (see
    /// [`Renewal::add`]): nothing for a hold of the whole key, the values of a group lock.
    fn renewal_part(&self) -> &[String] {
        &[]
    }

    /// The hash field of an owner whose client-wide field is `field` (`<node-uuid>:<owner-id>`);
    /// a kind with its own suffix (the write lock's `:write`) adds it here.
    fn field(&self, field: String) -> String {
        field
    }

    /// The channel a waiter with `field` listens on and how its messages wake, or `None` for a kind
    /// whose waiters only poll. A kind lends its own name where it has one: the subscriber keeps
    /// the name it is first given, so that a channel's name is kept once however many parts hold
    /// it.
    fn channel(&self, field: &str) -> Option<(ChannelName<'_>, WakeRule)>;

    /// How long a waiter that nothing can wake (no channel, or a subscription that is not live)
    /// waits before its next try, after `polls` such waits in a row, the last one `previous`.
    fn poll_delay(&self, previous: Option<Duration>, polls: u32) -> Duration {
        degraded_poll(previous, polls)
    }

    /// One acquire attempt by `field` for a hold of `lease`, by a caller prepared to wait as `wait`
    /// says (a fair lock queues only a caller that waits, and tells the queue how long).
    /// `held_before` is the owner's hold count as this client knows it, the count the undo of this
    /// attempt compares with: a kind whose script cannot tell the owner's holds of this lock from
    /// its other holds of the key (the group lock) checks it there.
    fn acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall;

    /// Decodes the acquire script's reply; `None` for a reply the protocol does not allow.
    fn decode_acquire(&self, reply: &Value) -> Option<Attempt<Taken<Self::Token>>>;

    /// Whether the acquire script never shortens the key when the owner re-enters (the write lock
    /// adds the lease to the key's TTL, the read lock keeps the longer of the two), so that it is
    /// sent the hold's own lease as Redisson sends it. The others (the RLock family's scripts set
    /// the TTL to the lease they are sent) are sent at least what the owner's other holds were
    /// promised (see [`crate::ledger`]).
    fn reentry_keeps_ttl(&self) -> bool {
        false
    }

    /// Reads an error reply of the acquire script (the script ran and changed nothing): a kind that
    /// refuses some acquisitions in the script itself turns its refusal into a typed error (the
    /// non-reentrant locks refuse a re-entry); `None` for any other error, which the engine maps as
    /// it maps every Redis error (`WRONGTYPE` to [`Error::WrongType`], else [`Error::Backend`]).
    fn acquire_refused(&self, _error: &RedisError) -> Option<Error> {
        None
    }

    /// Whether the acquire script refuses a holder's re-entry ([`LockWire::acquire_refused`]),
    /// leaving its count as it was. An undo compares the owner's count with the count it had before
    /// the attempt, and a refused attempt adds nothing: two attempts of one owner in flight at once
    /// could make the undo of the refused one remove the hold the other took. So the engine runs
    /// such an owner's attempts on one lock one at a time, and the count an undo compares with is
    /// exact.
    fn refuses_reentry(&self) -> bool {
        false
    }

    /// Reconciles an acquire whose reply was lost: sent after it on the same connection, it undoes
    /// exactly what it may have done (the hold it may have added, given the hold count `field` had
    /// before; a queue entry made for a caller waiting as `wait`).
    fn undo_acquire_call(
        &self,
        field: &str,
        held_before: u32,
        lease: Duration,
        patience: Patience,
    ) -> ScriptCall;

    /// Leaves whatever a waiter that gives up (its wait ran out, or its future was dropped) left in
    /// Redis: a fair lock's queue entry. `None` when waiting leaves nothing behind.
    fn give_up_call(&self, _field: &str, _patience: Patience) -> Option<ScriptCall> {
        None
    }

    /// Refuses an acquisition that this client's own holds make impossible (a read holder asking
    /// for the write lock of the same lock would wait for itself forever). `base_field` is the
    /// owner's client-wide field, before [`LockWire::field`].
    fn refuse(&self, _services: &Services, _base_field: &str) -> Result<()> {
        Ok(())
    }

    /// How to ask whether the lock is held: `None` for "the key exists" (`EXISTS`), else a script
    /// replying 1 or 0.
    fn is_locked_call(&self) -> Option<ScriptCall> {
        None
    }

    /// Releases one hold of `field` idempotently under `latch` (docs/protocol.md §2.3): replies 1
    /// released, 0 still held, nil not the owner. `lease` is re-applied while holds remain.
    fn unlock_call(
        &self,
        field: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall;

    /// Deletes the lock whoever holds it and wakes a waiter: replies 1 when deleted, else 0.
    fn force_unlock_call(&self) -> ScriptCall;

    /// How the watchdog renews this kind's holds.
    fn renewal(&self) -> &'static Renewal;

    /// The token of a re-entry that this client counts by itself, while the owner holds the lock by
    /// a free hand-off (see [`crate::cohort::Streak`]) and Redis keeps another owner's field: for a
    /// kind that shares the reentrant lock's hash and whose re-entry writes nothing but the count.
    /// `None` (the default) where a re-entry must write (the fenced lock's new token) or is
    /// refused: such a re-entry of a lent hold is refused ([`Error::ReentryRefused`]).
    fn local_reentry(&self) -> Option<Self::Token> {
        None
    }

    /// How a holder passes its hold to a waiter of this client without releasing it (local
    /// hand-off, see [`crate::cohort`]); `None` for kinds whose holders do not exclude each other
    /// or that are fair across clients.
    fn hand_off(&self) -> Option<&dyn HandOff<Token = Self::Token>> {
        None
    }
}

/// The local hand-off of an exclusive kind: one script that replaces the releasing owner's field by
/// the next owner's, re-applies the lease and publishes nothing, so that to every other client the
/// lock stays held.
pub trait HandOff: Send + Sync {
    /// What the next owner's hold yields.
    type Token;

    /// Passes the last hold of `from` to `to`, for `lease`, idempotently under `latch` (kept for
    /// `latch_ttl`), as an unlock is: a re-send replays the first outcome. Replies nil when `from`
    /// holds nothing, 0 when it holds more than once (nothing changed), else a positive integer for
    /// [`HandOff::handed_off`].
    fn hand_off_call(
        &self,
        from: &str,
        to: &str,
        lease: Duration,
        latch: &str,
        latch_ttl: Duration,
    ) -> ScriptCall;

    /// The next owner's token, from the hand-off's positive reply.
    fn handed_off(&self, reply: u64) -> Self::Token;

    /// The token of a hold passed with no script at all (a free hand-off, see [`crate::cohort`]),
    /// for a kind where nothing in Redis must change per acquisition; `None` (the default) where
    /// every acquisition must write (the fenced lock's new token) or a free pass is not safe (the
    /// write lock: this client's read acquire would be admitted as the root's).
    fn passed_freely(&self) -> Option<Self::Token> {
        None
    }
}

/// The outcome of one acquire attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Attempt<T> {
    /// Acquired (or re-entered), with what the hold yields.
    Acquired(T),
    /// Held by someone else: try again after at most this long, or when woken.
    Busy(Duration),
}

/// What an acquire script took. rlock's acquire scripts reply the owner's hold count where
/// Redisson's reply nil (Java never sees rlock's replies; the writes are Redisson's), and are told
/// the owner's count as this client knows it: one sent as a re-entry (a count above 0) that finds
/// the owner's field gone writes nothing and says so, rather than create the field as that
/// re-entry (see [`crate::ledger`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Taken<T> {
    /// Acquired or re-entered: what the hold yields, and the owner's hold count in Redis after it.
    Held { token: T, count: u32 },
    /// Sent as a re-entry, it found the owner's field gone (the hold was deleted or expired): it
    /// wrote nothing.
    Gone,
}

/// The owner's hold count an acquire script replied: a positive integer.
pub(crate) fn hold_count_reply(count: &Value) -> Option<u32> {
    match *count {
        Value::Int(count) if count > 0 => u32::try_from(count).ok(),
        _ => None,
    }
}

impl Attempt<Taken<()>> {
    /// The reply of rlock's acquire scripts of Redisson's common form: `{count}` when acquired or
    /// re-entered (where Redisson's reply nil), `{0}` when a re-entry found the owner's field gone,
    /// else the lock's `PTTL`; `None` for anything else.
    pub(crate) fn from_count_or_pttl(reply: &Value) -> Option<Self> {
        match reply {
            Value::Array(count) => match count.as_slice() {
                [Value::Int(0)] => Some(Self::Acquired(Taken::Gone)),
                [count] => hold_count_reply(count)
                    .map(|count| Self::Acquired(Taken::Held { token: (), count })),
                _ => None,
            },
            Value::Int(pttl) => Some(Self::busy_for_pttl(*pttl)),
            _ => None,
        }
    }
}

impl<T> Attempt<T> {
    /// A busy lock whose `PTTL` is `pttl`: wait until it expires at the latest; a key without
    /// expiry (`-1`) is re-checked every [`RECHECK`], a vanished one (`-2`) at once.
    pub(crate) fn busy_for_pttl(pttl: i64) -> Self {
        Self::Busy(match pttl {
            ttl if ttl >= 0 => Duration::from_millis(ttl.unsigned_abs()),
            -1 => RECHECK,
            _ => Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pttl_bounds_the_wait() {
        assert_eq!(
            Attempt::<()>::busy_for_pttl(1500),
            Attempt::Busy(Duration::from_millis(1500))
        );
        assert_eq!(Attempt::<()>::busy_for_pttl(-1), Attempt::Busy(RECHECK));
        assert_eq!(
            Attempt::<()>::busy_for_pttl(-2),
            Attempt::Busy(Duration::ZERO)
        );
    }
}
