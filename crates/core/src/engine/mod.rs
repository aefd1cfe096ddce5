//! The acquisition engine that every lock kind runs on.
//!
//! The words of the engine (hold, patience, undo, latch, live, queue, head, claim, streak, root,
//! lent, yield, ...) mean what the glossary of `docs/architecture.md` says.
//!
//! # Implementation details
//!
//! A lock kind (a [`LockWire`]) says *what* to send: its scripts and their arguments, how to read
//! their replies, where its waiters listen and how they are woken, how a lost reply is reconciled
//! and how holds are renewed. The engine decides *when*, the same way for every kind:
//!
//! 1. **Wait loop** ([`wait`]): try → acquired, or busy for at most a bound (the lock's PTTL) →
//!    subscribe → arm the channel's wake-up → retry → wait for a wake-up or the bound. Arming
//!    before the retry means a message published during the retry is never lost. The loop itself is
//!    plain async code over the subscriber's registry, tested in-process on a paused clock.
//! 2. **Acquire** ([`acquire`](mod@acquire)): one attempt is the kind's acquire script, with its
//!    undo armed. A wait-forever acquisition builds that write only once the client admits it
//!    ([`admission::admit`]), so that a burst of any number of waiters parks without one write's
//!    state each.
//! 3. **Hold** ([`Guard`]): registered with the watchdog (under the kind's renewal) unless it has a
//!    fixed lease; the guard carries the lease-lost signal and releases on drop, in the background.
//! 4. **Release** ([`release`]): the kind's unlock script, idempotent under an unlock latch.
//! 5. **Local queue and hand-off** ([`crate::cohort`]), for the kinds that name a [`HandOff`]: a
//!    caller that holds nothing and is prepared to wait queues behind this client's other waiters
//!    and holder; as the head it runs the wait loop, where the queue answers for the attempt while
//!    a local owner holds (no doomed try) and nudges it on local events. A release of the last hold
//!    passes the lock to the head in one script when the queue says so, else unlocks (and the queue
//!    yields, so that other clients get their turn).
//!
//! # Outcomes that are not known
//!
//! A script whose reply never arrives (timeout, broken connection, or the caller dropping the
//! future) may still have run. rlock never re-sends an acquire blindly: an undo guard holds the
//! very connection the acquire went out on and, unless the reply was seen, sends the kind's undo
//! script on that connection from a background task. Redis runs commands of one connection in
//! order, so the undo runs after the acquire if the acquire runs at all, and it removes exactly the
//! hold that the acquire added (it compares the owner's count with the count the owner had before).
//! That count cannot tell the hold the acquire added from one the same owner took since, so while
//! such an undo is in flight its owner does not acquire, release or take a hand-off of that lock
//! ([`crate::reconciling`]). Where an attempt can be refused without adding to the count (the
//! non-reentrant kinds, [`LockWire::refuses_reentry`]), an owner's attempts on one lock also run
//! one at a time, so the count an undo compares with is exact, and wait for the owner's own release
//! of that lock still running in the background (a dropped guard's), which the script would take
//! for a hold.
//!
//! Unlocks and local hand-offs are made idempotent instead: one request id (the unlock latch,
//! docs/protocol.md §2.3) is used for every re-send, so a re-send of one that had already run
//! replays its stored result. A hand-off is never undone: an undo by field could take away the hold
//! its waiter later took by itself.

mod acquire;
mod admission;
mod detached;
mod guard;
mod hand_off;
mod hold;
mod latched;
mod lease;
mod lock_wire;
mod object;
mod patience;
mod release;
mod synced;
mod update;
mod wait;

pub(crate) use acquire::{Undo, acquire, write_armed};
pub(crate) use detached::{Applied, Replicas, write_detached};
pub use guard::Guard;
pub(crate) use hand_off::{held_in_streak, hold_count};
pub(crate) use lease::{Lease, epoch_millis, millis};
pub(crate) use lock_wire::{
    Attempt, ChannelName, HandOff, LockWire, RECHECK, Taken, hold_count_reply,
};
pub(crate) use object::Object;
pub(crate) use patience::Patience;
pub(crate) use release::{Releasing, force_unlock};
pub(crate) use synced::{Synced, until_synced};
pub(crate) use update::update;
/// The acquisition's and the release's decisions, which the model check runs (`cohort/model.rs`).
#[cfg(test)]
pub(crate) use {acquire::plan as acquire_plan, release::plan as release_plan};

/// How a kind's requests wait for a connection's in-flight slot (see [`Patience::queueing`]).
pub(crate) use crate::connection::Queueing;
