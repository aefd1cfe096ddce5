//! Local wait queues and bounded local hand-off (lock cohorting) for the exclusive kinds.
//!
//! The words of the engine (hold, patience, undo, latch, live, queue, head, claim, streak, root,
//! lent, yield, ...) mean what the glossary of `docs/architecture.md` says.
//!
//! # Implementation details
//!
//! Redisson's protocol wakes one waiter *per client* on each unlock (docs/protocol.md §3.2): every
//! client that has waiters sends a try, one wins, the others sleep again. With several tasks of one
//! client waiting for the same lock, each of them also sends its own first try, and a lock passing
//! between two tasks of one client still leaves Redis in between (unlock, publish, a new race).
//! This module keeps that traffic local:
//!
//! - **One queue per (client, lock key).** Tasks of this client that want the lock, through any
//!   kind that shares its hash (a reentrant, non-reentrant and fenced lock of one name), line up
//!   in FIFO order; only the queue's head talks to Redis (tries, subscribes, waits). A newcomer
//!   that finds waiters, or a local holder, queues behind them instead of sending a doomed try.
//!   Re-entry by a holder and one-shot tries (`try_lock()`) do not queue. The queue's holder is
//!   one per key, whatever kind it took the lock through, so a release through any kind lets the
//!   head try (an owner's holds through two kinds are one hold in Redis, and its last release
//!   may go through either).
//! - **While a local task holds the lock**, the head does not try either: it waits for the holder's
//!   release, a message on the lock's channel, or the holder's lease to be lost.
//! - **Hand-off.** A holder releasing its last hold while the head waits (not while it has a try on
//!   the wire), and wants the lock through the same kind (each kind writes its own hand-off: a
//!   fenced one increments the token), claims the head ([`Next::HandOff`]) and passes the lock
//!   to it in one script: the owner's field is replaced by the head's, the lease re-applied,
//!   nothing published. To Redis, and to a Java client, the lock stays held: the hash is
//!   Redisson's at every instant.
//! - **Free hand-off.** Where nothing in Redis must change per acquisition (the kind's
//!   [`HandOff::passed_freely`]), and both the releasing hold and the head's are watchdog holds,
//!   the lock passes with no command at all: the queue *lends* the hold. Redis keeps the hash of
//!   the owner that took the lock from Redis (the streak's *root*), renewed by the watchdog as
//!   before; every local holder of the streak shares one lease-lost signal. The streak is one
//!   object per lock key, whatever the kind ([`Streak`], found by [`Cohorts::streak_on`]), which
//!   says who holds the lent hold: the lent holder's re-entries are counted there, every other
//!   local owner, the root included, holds nothing and sends nothing for the key until the streak
//!   is over (the root's field in Redis is not its own any more). A script hand-off or the real
//!   release that ends the streak names the root's field; [`Streak`]'s docs give its invariants. A
//!   hold may be lent only if the client has listened on the lock's channel since before Redis gave
//!   it, and nothing was published there since ([`Listening`]): whoever deletes the lock publishes
//!   an unlock, so a force unlock elsewhere, heard or still on its way, sends the next hand-off to
//!   the script, which checks the field. The engine adds that the root's hash is known held (a
//!   renewal confirmed recently enough, on the clock), and watches the channel during the streak to
//!   tell its holder at once when the root's field is gone.
//! - **The bound.** After [`Config::local_handoff_limit`] hand-offs in a row, or once the streak
//!   has lasted [`Config::local_handoff_window`], the holder releases for real (unlock and
//!   publish), and the queue *yields*: its head does not try again before one more round trip (as
//!   long as the unlock took) has passed after the unlock's reply, nor before the unlock message
//!   has come back to this client (or a second round trip has passed), so that waiters of other
//!   clients, woken by the same message, get their try to Redis first.
//!
//! Seen from Redis and from a Java client, a streak is one hold of the root's field, for the streak
//! plus its last holder's critical section.
//!
//! The queue knows nothing of Redis: the engine runs the scripts and tells the queue what happened.
//! Each queue lives in [`Cohorts`] while it has waiters or a holder, and is dropped when idle.
//!
//! [`Config::local_handoff_limit`]: crate::Config::local_handoff_limit
//! [`Config::local_handoff_window`]: crate::Config::local_handoff_window
//! [`HandOff::passed_freely`]: crate::engine::HandOff::passed_freely

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use parking_lot::Mutex;
use smallvec::SmallVec;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ledger::Expiry;
use crate::pubsub::Listening;

/// The queues by key, looked up by borrowing the caller's key: every lock and unlock looks. Hashed
/// with foldhash, as every map a lock and unlock looks in (see [`Ledger`]). A queue is its own
/// entry (found by its key), so that its key is kept once, by the queue.
///
/// [`Ledger`]: crate::ledger::Ledger
type Queues = foldhash::HashSet<ByKey>;

/// This client's local queues, one per lock key that has local waiters or a local holder. A
/// handle: every ticket and claim keeps one, so it is one pointer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cohorts(Arc<Shared>);

/// What a [`Cohorts`] handle shares.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    queues: Mutex<Queues>,
    /// The open streaks of free hand-offs, by lock key: at most one per key, whatever the kind.
    streaks: Mutex<foldhash::HashMap<String, Arc<Streak>>>,
    /// How many streaks are open: while there is none, nobody needs to look for one.
    open_streaks: AtomicUsize,
    /// Hand-offs so far (by script or free), free ones, and streaks of free ones.
    handoffs: AtomicU64,
    free_handoffs: AtomicU64,
    streaks_begun: AtomicU64,
    /// Confirmations of streaks' roots in Redis (see [`Streak::heard`]).
    confirmations: AtomicU64,
}

impl std::ops::Deref for Cohorts {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

#[derive(Debug)]
struct Queue {
    /// The queue's identity: the lock's key. Kinds sharing a key (a reentrant and a fenced lock of
    /// one name) queue together, but a hold passes only between holders of one kind.
    key: Box<str>,
    state: Mutex<State>,
}

/// A queue as an entry of [`Queues`]: equal, hashed and looked up by its key.
#[derive(Debug)]
struct ByKey(Arc<Queue>);

impl std::borrow::Borrow<str> for ByKey {
    fn borrow(&self) -> &str {
        &self.0.key
    }
}

impl std::hash::Hash for ByKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.key.hash(state);
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for ByKey {}

#[derive(Debug, Default)]
struct State {
    /// FIFO; the front is the head, the only waiter that talks to Redis. The first is kept inline:
    /// most queues only ever hold a lone waiter. Short: a waiter leaving moves those behind it.
    waiters: SmallVec<[Arc<Waiter>; 1]>,
    /// The local owner that holds the lock, as far as this client knows, through whichever kind.
    /// Boxed: a lone waiter's queue has none, and every queue would keep room for one.
    occupant: Option<Box<Occupant>>,
    /// Hand-offs since the lock last came from Redis (when it did is the occupant's).
    streak: u32,
    /// After a real release that ended a streak: the head waits for the unlock message. Boxed:
    /// rare, and every queue, a lone waiter's included, would keep room for it.
    yielding: Option<Box<Yield>>,
}

impl State {
    fn is_idle(&self) -> bool {
        self.waiters.is_empty() && self.occupant.is_none()
    }

    /// The head, if any.
    fn head(&self) -> Option<&Arc<Waiter>> {
        self.waiters.first()
    }

    /// Wakes the head, if any.
    fn nudge_head(&self) {
        if let Some(head) = self.head() {
            head.nudge();
        }
    }

    /// Removes `waiter` from the queue; the next head, if the head changed, is woken.
    fn remove(&mut self, waiter: &Arc<Waiter>) {
        let was_head = self.head().is_some_and(|head| Arc::ptr_eq(head, waiter));
        self.waiters.retain(|w| !Arc::ptr_eq(w, waiter));
        if was_head {
            self.nudge_head();
        }
    }

    /// `field` holds the lock, its own field in Redis (a lent hold is returned); `handed_off` keeps
    /// the current streak going.
    fn hold(
        &mut self,
        field: &str,
        expiry: Option<Expiry>,
        listening: Option<Listening>,
        handed_off: bool,
    ) {
        let streak_since = if handed_off {
            self.occupant
                .as_ref()
                .and_then(|holder| holder.streak_since)
        } else {
            self.streak = 0;
            Some(Instant::now())
        };
        self.occupant = Some(Box::new(Occupant {
            field: field.to_owned(),
            expiry,
            listening,
            streak_since,
        }));
        self.yielding = None;
    }
}

/// The local owner that holds a queue's lock, as far as this client knows (the public
/// [`Holder`](crate::Holder) is what Redis says about any holder).
#[derive(Debug)]
struct Occupant {
    field: String,
    /// `None` between a hand-off and the new owner taking it up (its lease was just applied).
    expiry: Option<Expiry>,
    /// This client listening on the lock's channel since before the write that gave Redis the hold
    /// (the acquire or the hand-off script), if the channel was live then: unchanged at a free
    /// hand-off, it means nobody unlocked the lock since (a force unlock publishes). A hold taken
    /// while nobody of this client listened on the channel has none, and passes by script. Kept
    /// along a streak, it keeps the client subscribed.
    listening: Option<Listening>,
    /// When the lock last came from Redis: kept along hand-offs (see [`State::streak`]).
    streak_since: Option<Instant>,
}

impl Occupant {
    /// The holder's lease, unless it is known lost.
    fn live_expiry(&self) -> Option<Option<&Expiry>> {
        match &self.expiry {
            Some(expiry) if expiry.is_lost() => None,
            expiry => Some(expiry.as_ref()),
        }
    }
}

/// A yield after a real release: the head tries no sooner than `not_before`, and not before a
/// message beyond `messages` has arrived on the lock's channel unless `at_latest` has passed.
///
/// Waiters of other clients hear the unlock about when its reply comes back here, and their tries
/// then need half a round trip to reach Redis: a head that tried as soon as the reply (or its own
/// copy of the message) arrived would win nearly every race.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Yield {
    /// The channel's message count before the unlock was sent.
    pub(crate) messages: u64,
    /// No try before this.
    pub(crate) not_before: Instant,
    /// A try at the latest then, message or not.
    pub(crate) at_latest: Instant,
}

impl Yield {
    /// How much longer the head waits, if at all.
    fn left(&self, messages: u64, now: Instant) -> Option<Duration> {
        if now < self.not_before {
            Some(self.not_before - now)
        } else if messages == self.messages && now < self.at_latest {
            Some(self.at_latest - now)
        } else {
            None
        }
    }
}

#[derive(Debug)]
struct Waiter {
    /// Shared with the acquisition that waits.
    field: Arc<str>,
    /// The kind it waits through (`LockWire::label`): only a holder of that kind passes it a hold.
    label: &'static str,
    lease: Duration,
    /// Whether its hold would be renewed by the watchdog (no fixed lease): only such a waiter is
    /// passed a hold freely.
    renewed: bool,
    /// How many times the queue changed for this waiter (see [`Nudged`]), and its task to wake
    /// then. A counter and a waker rather than a `Notify`, whose waiting future is 64 bytes: a
    /// parked waiter keeps its [`Nudged`] inline, two words.
    nudges: AtomicU32,
    task: AtomicWaker,
    /// Changed only with the queue's state locked (the state lock first).
    slot: Mutex<Slot>,
}

impl Waiter {
    /// The queue changed for this waiter: its [`Nudged`], pending or future, completes.
    fn nudge(&self) {
        let _ = self.nudges.fetch_add(1, Ordering::AcqRel);
        self.task.wake();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Queued. The head may be between tries.
    Waiting,
    /// The head has a try on the wire: no hand-off to it now (its try would re-enter the passed
    /// hold).
    Trying,
    /// A holder is handing the lock to it (the script is on the wire).
    Claimed,
    /// Handed the lock: the hand-off script's reply and when it was sent.
    Passed { reply: u64, sent_at: Instant },
    /// Lent the lock by a free hand-off (Redis unchanged).
    Lent,
    /// Its acquisition was dropped while claimed, or before it took a passed lock up.
    Abandoned,
}

/// What the head does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The lock was passed to it: the hand-off script's reply and when it was sent.
    Passed { reply: u64, sent_at: Instant },
    /// The lock was lent to it by a free hand-off: take it up with [`Ticket::take_lent`].
    Lent,
    /// A holder is handing the lock to it: wait for [`Ticket::settled`].
    Claimed,
    /// A local owner holds the lock and its lease is not known lost: wait for a nudge, at most
    /// until the lease's end (`None`: a watchdog lease, whose loss nudges).
    Held(Option<Instant>),
    /// The lock was released after a streak: wait for its message, at most this long.
    Yield(Duration),
    /// Try in Redis; report the outcome with [`Ticket::tried`].
    Try,
}

/// A streak of free hand-offs on one lock key: the one place that says who holds a lent hold.
///
/// From its first free hand-off until it ends, Redis keeps the field of the owner that took the
/// lock from Redis (the *root*), and the streak holds the root's watchdog registration, which keeps
/// that field renewed. The lock passes between this client's owners without Redis. Its invariants:
///
/// - **One holder.** At most one local owner holds the lent hold ([`Phase::Held`]); re-entries by
///   that owner, of any kind that shares the lock's hash, are counted by this client and answered
///   under the same lock as every release ([`Streak::reenter`], [`Streak::release`]), so a
///   re-entry never races the release that ends the streak.
/// - **Nobody else acts on the key.** While the streak is open, no local owner but the holder, the
///   root included, sends an acquisition, a release or a hand-off of the key to Redis: each waits
///   for [`Streak::over`] (the root's field in Redis is not its own any more).
/// - **One lease-lost signal.** Every lent holder, the root included when it is lent the hold back,
///   observes the streak's own token, a child of the root's registration's: a loss of the
///   registration fires it, and so does the streak's end, so nobody still inside can miss it.
/// - **It ends in Redis first.** The streak is over only once its last write (the root's unlock, a
///   script hand-off, or the clean-up after a loss) has its reply; until then, others wait.
#[derive(Debug)]
pub(crate) struct Streak {
    key: String,
    /// The field Redis keeps: the owner that took the lock from Redis.
    pub(crate) root: String,
    /// The root's watchdog registration, which the streak holds until it ends.
    pub(crate) generation: u64,
    /// Every lent holder's lease-lost signal.
    lost: CancellationToken,
    phase: Mutex<Phase>,
    /// When the last command that Redis answered with the root's field still there was sent.
    heard_at: Mutex<Instant>,
    /// When the hold was last lent, and a wake-up for the streak's watch when it is.
    lent_at: Mutex<Option<Instant>>,
    lent: Notify,
    /// Wakes releases waiting for a confirmation ([`Streak::confirmed_since`]).
    heard: Notify,
    /// Wakes acquisitions waiting for the streak to be over.
    over: Notify,
}

/// Where a streak stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// This local owner holds the lent hold (its count is in the client's holds).
    Held(String),
    /// Between holders: the last release is deciding where the hold goes.
    Passing,
    /// Ending: the root's unlock, a script hand-off, or the clean-up after a loss is on the wire.
    Ending,
    /// Over: Redis no longer holds anything for the streak.
    Over,
}

/// What a release by one owner does to a streak.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StreakRelease {
    /// The owner does not hold the lent hold: nothing to release here, nothing to send.
    NotHolder,
    /// The owner still holds the lent hold (a re-entry was released).
    Partially,
    /// The owner released its last hold: the streak is between holders, and the release decides
    /// where the hold goes (lent on, passed by script, or unlocked).
    Last,
}

impl Streak {
    /// The lent holder's lease-lost signal (every holder of the streak shares it).
    pub(crate) fn expiry(&self) -> Expiry {
        Expiry::watchdog(self.lost.clone())
    }

    /// Whether `field` holds the lent hold now.
    pub(crate) fn is_held_by(&self, field: &str) -> bool {
        matches!(&*self.phase.lock(), Phase::Held(holder) if holder == field)
    }

    /// Counts a re-entry by `field` (with `count`, under the streak's lock) if it holds the lent
    /// hold.
    pub(crate) fn reenter(&self, field: &str, count: impl FnOnce()) -> bool {
        let phase = self.phase.lock();
        let holds = matches!(&*phase, Phase::Held(holder) if holder == field);
        if holds {
            count();
        }
        holds
    }

    /// One release by `field`: `release` forgets one of its holds and says whether it was the last.
    /// The last one leaves the streak between holders.
    pub(crate) fn release(&self, field: &str, release: impl FnOnce() -> bool) -> StreakRelease {
        let mut phase = self.phase.lock();
        if !matches!(&*phase, Phase::Held(holder) if holder == field) {
            return StreakRelease::NotHolder;
        }
        if !release() {
            return StreakRelease::Partially;
        }
        *phase = Phase::Passing;
        StreakRelease::Last
    }

    /// Lends the hold to `field`, if the streak is between holders (not ending): whether it did.
    pub(crate) fn lend_to(&self, field: &str) -> bool {
        let mut phase = self.phase.lock();
        if *phase != Phase::Passing {
            return false;
        }
        *phase = Phase::Held(field.to_owned());
        *self.lent_at.lock() = Some(Instant::now());
        self.lent.notify_one();
        true
    }

    /// When the hold was last lent: a release that lent it returns once Redis confirmed the
    /// root's field by a read sent at or after this instant ([`Streak::confirmed_since`]).
    pub(crate) fn lent_at(&self) -> Option<Instant> {
        *self.lent_at.lock()
    }

    /// Whether a hold was lent since Redis last confirmed the root's field: a confirmation is due.
    pub(crate) fn confirmation_due(&self) -> bool {
        self.lent_at()
            .is_some_and(|lent_at| lent_at >= self.heard_at())
    }

    /// Completes with `true` once Redis confirmed the root's field by a read (or the streak's last
    /// write) sent at or after `since`, and with `false` once the streak's hold is lost first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn confirmed_since(&self, since: Instant) -> bool {
        loop {
            let heard = self.heard.notified();
            tokio::pin!(heard);
            let _ = heard.as_mut().enable();
            if self.heard_at() >= since {
                return true;
            }
            if self.lost.is_cancelled() {
                return false;
            }
            tokio::select! {
                () = heard => {}
                () = self.lost.cancelled() => {}
            }
        }
    }

    /// Completes when the hold is lent next (or was lent since the last call).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits (a wake-up it did not take is kept for the next call).
    pub(crate) async fn lent(&self) {
        self.lent.notified().await;
    }

    /// The streak's last write goes out (the root's unlock, a script hand-off, the clean-up after a
    /// loss): nobody holds the lent hold any more. `false` if it was already ending.
    pub(crate) fn ending(&self) -> bool {
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Ending | Phase::Over) {
            return false;
        }
        *phase = Phase::Ending;
        true
    }

    /// Redis answered a command sent at `sent_at` with the root's field still there.
    pub(crate) fn heard(&self, sent_at: Instant) {
        {
            let mut heard_at = self.heard_at.lock();
            *heard_at = (*heard_at).max(sent_at);
        }
        self.heard.notify_waiters();
    }

    /// When Redis last confirmed the root's field (the send time of that command).
    pub(crate) fn heard_at(&self) -> Instant {
        *self.heard_at.lock()
    }

    /// Whether the streak is ending or over (its last write was decided).
    pub(crate) fn is_ending(&self) -> bool {
        matches!(*self.phase.lock(), Phase::Ending | Phase::Over)
    }

    /// Completes when the registration the streak holds is lost (or the streak is over).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// Tells every holder still inside that the streak's hold is lost.
    pub(crate) fn lose(&self) {
        self.lost.cancel();
    }

    /// Completes when the streak is over.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn over(&self) {
        loop {
            let over = self.over.notified();
            tokio::pin!(over);
            let _ = over.as_mut().enable();
            if *self.phase.lock() == Phase::Over {
                return;
            }
            over.await;
        }
    }
}

/// What a releasing holder does.
#[derive(Debug)]
pub(crate) enum Next {
    /// Pass the lock to the claimed head.
    HandOff(Claim),
    /// Release for real; `yielding` when local waiters were passed over because of the bound (the
    /// queue yields once the unlock is done, see [`Cohorts::released`]).
    Release { yielding: bool },
    /// Another release of the same holder is passing the lock on right now (it claimed the head):
    /// this one has nothing left to release, and must send nothing (an unlock of the holder's field
    /// would delete a hold that is being lent).
    AlreadyPassing,
}

impl Cohorts {
    fn queue(&self, key: &str) -> Option<Arc<Queue>> {
        Some(self.queues.lock().get(key)?.0.clone())
    }

    /// The queue of `key`, created if there is none.
    fn queue_or_new(queues: &mut Queues, key: &str) -> Arc<Queue> {
        if let Some(queue) = queues.get(key) {
            return queue.0.clone();
        }
        let queue = Arc::new(Queue {
            key: key.into(),
            state: Mutex::default(),
        });
        let _ = queues.insert(ByKey(queue.clone()));
        queue
    }

    /// Drops the queue of `key` if nobody waits in it and nobody holds.
    fn forget_if_idle(&self, key: &str) {
        let mut queues = self.queues.lock();
        if queues.get(key).is_some_and(|q| q.0.state.lock().is_idle()) {
            let _ = queues.remove(key);
        }
    }

    /// Puts `field` (an owner that holds nothing yet) at the back of the queue of lock `key`,
    /// waiting through the kind `label`; `lease` is what a hold passed to it is given, `renewed`
    /// when that lease is the watchdog's.
    pub(crate) fn join(
        &self,
        key: &str,
        label: &'static str,
        field: impl Into<Arc<str>>,
        lease: Duration,
        renewed: bool,
    ) -> Ticket {
        let waiter = Arc::new(Waiter {
            field: field.into(),
            label,
            lease,
            renewed,
            nudges: AtomicU32::new(0),
            task: AtomicWaker::new(),
            slot: Mutex::new(Slot::Waiting),
        });
        let mut queues = self.queues.lock();
        let queue = Self::queue_or_new(&mut queues, key);
        let behind = {
            let mut state = queue.state.lock();
            state.waiters.push(waiter.clone());
            state.waiters.len() > 1 || state.occupant.is_some()
        };
        drop(queues);
        Ticket {
            cohorts: self.clone(),
            queue,
            waiter,
            seen: AtomicU32::new(0),
            behind,
        }
    }

    /// `field` took the lock from Redis (a try outside the queue: `try_lock()`), holding it once;
    /// `listening` on the lock's channel since before the try was sent, if it was live.
    pub(crate) fn held(
        &self,
        key: &str,
        field: &str,
        expiry: Expiry,
        listening: Option<Listening>,
    ) {
        let mut queues = self.queues.lock();
        let queue = Self::queue_or_new(&mut queues, key);
        queue
            .state
            .lock()
            .hold(field, Some(expiry), listening, false);
    }

    /// `field` took up a lock passed to it, with this lease.
    pub(crate) fn took_over(&self, key: &str, field: &str, expiry: Expiry) {
        if let Some(queue) = self.queue(key) {
            let mut state = queue.state.lock();
            if let Some(holder) = state.occupant.as_mut().filter(|h| h.field == field) {
                holder.expiry = Some(expiry);
            }
        }
    }

    /// `field` is about to release its last hold through the kind `label`: hand the lock to the
    /// head, or release for real. At most `limit` hand-offs in a row, within `window` of the lock
    /// coming from Redis.
    pub(crate) fn releasing(
        &self,
        key: &str,
        label: &'static str,
        field: &str,
        limit: u32,
        window: Duration,
    ) -> Next {
        let release = Next::Release { yielding: false };
        let Some(queue) = self.queue(key) else {
            return release;
        };
        let state = queue.state.lock();
        if state.occupant.as_ref().is_none_or(|h| h.field != field) {
            return release;
        }
        let Some(head) = state.head() else {
            return release;
        };
        // Another future of the releasing owner, queued before the owner held anything: nothing
        // passes from an owner to itself (a hand-off script would replace the field by itself and
        // delete the lock); the lock is released, and that future takes it from Redis.
        if *head.field == *field {
            return release;
        }
        // A head waiting through another kind: each kind writes its own hand-off (a fenced one
        // increments the token), so it tries once the lock is released.
        if head.label != label {
            return release;
        }
        let mut slot = head.slot.lock();
        if *slot == Slot::Claimed {
            return Next::AlreadyPassing;
        }
        if *slot != Slot::Waiting {
            return release;
        }
        // A free hand-off needs a live watchdog hold on both sides, and the lock's channel
        // unchanged since the hold came from Redis: nobody unlocked it (a message ends a streak's
        // free hand-offs).
        let lendable = head.renewed
            && state.occupant.as_ref().is_some_and(|holder| {
                holder.listening.as_ref().is_some_and(Listening::unchanged)
                    && holder
                        .expiry
                        .as_ref()
                        .is_some_and(|expiry| expiry.fixed_end().is_none() && !expiry.is_lost())
            });
        let within = state.streak < limit
            && state
                .occupant
                .as_ref()
                .and_then(|holder| holder.streak_since)
                .is_some_and(|since| since.elapsed() < window);
        if !within {
            return Next::Release { yielding: true };
        }
        *slot = Slot::Claimed;
        drop(slot);
        let head = head.clone();
        drop(state);
        Next::HandOff(Claim {
            cohorts: self.clone(),
            queue,
            waiter: head,
            lendable,
            settled: false,
        })
    }

    /// The open streak of free hand-offs on `key`, whatever its kind: while it lasts, Redis keeps
    /// another field than the local holder's, and this client's acquisitions, releases and hold
    /// counts of `key` go through it first. One atomic load when no streak is open anywhere.
    pub(crate) fn streak_on(&self, key: &str) -> Option<Arc<Streak>> {
        if self.open_streaks.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.streaks.lock().get(key).cloned()
    }

    /// Opens a streak on `key`: Redis keeps `root`'s field, under
    /// the watchdog registration `generation` whose loss `registration_lost` signals, and last
    /// confirmed it by a command sent at `heard_at`. It starts between holders (its first hand-off
    /// is being decided). `None` if a streak is open on `key` already.
    pub(crate) fn open_streak(
        &self,
        key: &str,
        root: &str,
        generation: u64,
        registration_lost: &CancellationToken,
        heard_at: Instant,
    ) -> Option<Arc<Streak>> {
        let mut streaks = self.streaks.lock();
        if streaks.contains_key(key) {
            return None;
        }
        let streak = Arc::new(Streak {
            key: key.to_owned(),
            root: root.to_owned(),
            generation,
            lost: registration_lost.child_token(),
            phase: Mutex::new(Phase::Passing),
            heard_at: Mutex::new(heard_at),
            lent_at: Mutex::new(None),
            lent: Notify::new(),
            heard: Notify::new(),
            over: Notify::new(),
        });
        let _ = streaks.insert(key.to_owned(), streak.clone());
        let _ = self.open_streaks.fetch_add(1, Ordering::AcqRel);
        Some(streak)
    }

    /// A streak opened by [`Cohorts::open_streak`] lent its first hold (it is counted then).
    pub(crate) fn began_streak(&self) {
        let _ = self.streaks_begun.fetch_add(1, Ordering::Relaxed);
    }

    /// The streak is over: Redis holds nothing for it any more (its last write has its reply).
    /// Anyone still inside is told the hold is lost, and acquisitions waiting for it go on.
    pub(crate) fn close_streak(&self, streak: &Arc<Streak>) {
        {
            let mut streaks = self.streaks.lock();
            if streaks
                .get(&streak.key)
                .is_some_and(|s| Arc::ptr_eq(s, streak))
            {
                let _ = streaks.remove(&streak.key);
                let _ = self.open_streaks.fetch_sub(1, Ordering::AcqRel);
            }
        }
        *streak.phase.lock() = Phase::Over;
        streak.lost.cancel();
        streak.over.notify_waiters();
    }

    /// `field`'s hold of `key` ended (released for real, or lost), through whichever kind: the head
    /// may try, after `yielding` if given. One owner's holds through two kinds of one hash (a lock
    /// re-entered through the spin lock of its name) are one hold in Redis, and the release of its
    /// last one may go through a kind other than the one it took the lock through.
    pub(crate) fn released(&self, key: &str, field: &str, yielding: Option<Yield>) {
        let Some(queue) = self.queue(key) else {
            return;
        };
        {
            let mut state = queue.state.lock();
            if state.occupant.as_ref().is_some_and(|h| h.field == field) {
                state.occupant = None;
                state.streak = 0;
                state.yielding = yielding.map(Box::new);
                state.nudge_head();
            }
        }
        self.forget_if_idle(key);
    }

    /// How many waiters all queues hold.
    pub(crate) fn waiters(&self) -> usize {
        let queues = self.queues.lock();
        queues.iter().map(|q| q.0.state.lock().waiters.len()).sum()
    }

    /// How many locks were passed locally so far (by script or free).
    pub(crate) fn handoffs(&self) -> u64 {
        self.handoffs.load(Ordering::Relaxed)
    }

    /// How many of those hand-offs were free, and how many streaks of free hand-offs began.
    pub(crate) fn free_handoffs(&self) -> (u64, u64) {
        (
            self.free_handoffs.load(Ordering::Relaxed),
            self.streaks_begun.load(Ordering::Relaxed),
        )
    }

    /// Redis confirmed `streak`'s root by a read sent at `sent_at` (see [`Streak::heard`]).
    pub(crate) fn confirmed(&self, streak: &Streak, sent_at: Instant) {
        streak.heard(sent_at);
        let _ = self.confirmations.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times Redis confirmed a streak's root so far.
    pub(crate) fn confirmations(&self) -> u64 {
        self.confirmations.load(Ordering::Relaxed)
    }

    /// How many queues exist (for tests: idle queues are dropped).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queues.lock().len()
    }
}

/// One waiter's place in a queue. Dropping it leaves the queue (cancel safe); a lock passed to it
/// and not taken up is the caller's to release (see [`Ticket::abandon`]).
#[derive(Debug)]
pub(crate) struct Ticket {
    cohorts: Cohorts,
    queue: Arc<Queue>,
    waiter: Arc<Waiter>,
    /// The waiter's nudges taken so far: one more than this is a nudge not yet acted on (as a
    /// `Notify` keeps one permit).
    seen: AtomicU32,
    behind: bool,
}

impl Ticket {
    /// Whether, when it joined, others waited ahead of it or a local owner held the lock.
    pub(crate) fn joined_behind(&self) -> bool {
        self.behind
    }

    fn slot(&self) -> Slot {
        *self.waiter.slot.lock()
    }

    /// Waits until this waiter heads the queue (or was passed the lock). `false` when `deadline`
    /// passed first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn until_head(&self, deadline: Option<Instant>) -> bool {
        loop {
            let nudged = self.nudged();
            {
                let state = self.queue.state.lock();
                let head = state
                    .head()
                    .is_some_and(|head| Arc::ptr_eq(head, &self.waiter));
                if head || !matches!(self.slot(), Slot::Waiting) {
                    return true;
                }
            }
            match deadline {
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, nudged).await.is_err() {
                        return false;
                    }
                }
                None => nudged.await,
            }
        }
    }

    /// What the head does next; `messages` reads the lock channel's message count (only while the
    /// queue yields).
    pub(crate) fn step(&self, messages: impl FnOnce() -> u64) -> Step {
        let mut state = self.queue.state.lock();
        let mut slot = self.waiter.slot.lock();
        match *slot {
            Slot::Passed { reply, sent_at } => return Step::Passed { reply, sent_at },
            Slot::Lent => return Step::Lent,
            Slot::Claimed => return Step::Claimed,
            Slot::Waiting | Slot::Trying | Slot::Abandoned => {}
        }
        if let Some(expiry) = state
            .occupant
            .as_ref()
            .and_then(|holder| holder.live_expiry())
        {
            let until = expiry.and_then(Expiry::fixed_end);
            return Step::Held(until);
        }
        if let Some(yielding) = state.yielding.as_deref() {
            if let Some(left) = yielding.left(messages(), Instant::now()) {
                return Step::Yield(left);
            }
            state.yielding = None;
        }
        *slot = Slot::Trying;
        Step::Try
    }

    /// The head's try came back: `Some` when it took the lock (it leaves the queue and holds),
    /// `None` when it did not (or failed). `listening` on the lock's channel since before the try.
    pub(crate) fn tried(&self, acquired: Option<Expiry>, listening: Option<Listening>) {
        let mut state = self.queue.state.lock();
        match acquired {
            Some(expiry) => {
                state.remove(&self.waiter);
                state.hold(&self.waiter.field, Some(expiry), listening, false);
            }
            None => {
                let mut slot = self.waiter.slot.lock();
                if *slot == Slot::Trying {
                    *slot = Slot::Waiting;
                }
            }
        }
    }

    /// Waits until a hand-off to this waiter has settled (passed, or given up).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn settled(&self) {
        loop {
            let nudged = self.nudged();
            if self.slot() != Slot::Claimed {
                return;
            }
            nudged.await;
        }
    }

    /// Completes when the queue changed for this waiter (it may take a passed lock, try, or look
    /// again) since it last took a nudge: at once if it changed meanwhile, as a `Notify`'s permit.
    /// A parked waiter waits for it, together with [`Ticket::holder_lease`]'s loss when there is
    /// one.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a nudge is taken only by the poll that completes it.
    pub(crate) fn nudged(&self) -> Nudged<'_> {
        Nudged { ticket: self }
    }

    /// The local holder's lease while it is not known lost (its loss or its end ends a parked
    /// waiter's wait): `None` without a local holder, as for every waiter of a burst on names held
    /// elsewhere, or between a hand-off and its taking up.
    pub(crate) fn holder_lease(&self) -> Option<Expiry> {
        self.queue
            .state
            .lock()
            .occupant
            .as_ref()
            .and_then(|holder| holder.live_expiry())
            .flatten()
            .cloned()
    }

    /// Takes a nudge not taken yet, if there is one.
    fn take_nudge(&self) -> bool {
        let nudges = self.waiter.nudges.load(Ordering::Acquire);
        self.seen.swap(nudges, Ordering::AcqRel) != nudges
    }

    /// The waiter's field.
    pub(crate) fn field(&self) -> &Arc<str> {
        &self.waiter.field
    }

    /// Leaves the queue now. Returns whether a lock was passed or lent to this waiter that it did
    /// not take up: the caller must release that hold.
    pub(crate) fn abandon(&self) -> bool {
        let (passed, idle) = {
            let mut state = self.queue.state.lock();
            let mut slot = self.waiter.slot.lock();
            let passed = match *slot {
                Slot::Passed { .. } | Slot::Lent => {
                    *slot = Slot::Abandoned;
                    true
                }
                // The releaser settles the claim, and releases the hold if it passes.
                Slot::Claimed => {
                    *slot = Slot::Abandoned;
                    false
                }
                Slot::Waiting | Slot::Trying => {
                    *slot = Slot::Abandoned;
                    drop(slot);
                    state.remove(&self.waiter);
                    false
                }
                Slot::Abandoned => false,
            };
            (passed, state.is_idle())
        };
        // A queue left busy is dropped by whoever leaves it idle (they all look).
        if idle {
            self.cohorts.forget_if_idle(&self.queue.key);
        }
        passed
    }

    /// Marks a passed lock as taken up: the ticket's drop leaves it alone.
    pub(crate) fn take(&self) {
        *self.waiter.slot.lock() = Slot::Abandoned;
    }

    /// Takes up a lock lent to this waiter: its lease is the streak's (the root's watchdog lease).
    pub(crate) fn take_lent(&self) -> Option<Expiry> {
        let state = self.queue.state.lock();
        *self.waiter.slot.lock() = Slot::Abandoned;
        state
            .occupant
            .as_ref()
            .filter(|holder| *holder.field == *self.waiter.field)
            .and_then(|holder| holder.expiry.clone())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let _ = self.abandon();
    }
}

/// The future of [`Ticket::nudged`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub(crate) struct Nudged<'a> {
    ticket: &'a Ticket,
}

impl Future for Nudged<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.ticket.take_nudge() {
            return Poll::Ready(());
        }
        // Registered, then looked again: a nudge in between wakes the task just registered.
        self.ticket.waiter.task.register(cx.waker());
        if self.ticket.take_nudge() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// A releasing holder's claim on the head, settled by [`Claim::passed`] or [`Claim::failed`] (or by
/// dropping it: failed).
#[derive(Debug)]
pub(crate) struct Claim {
    cohorts: Cohorts,
    queue: Arc<Queue>,
    waiter: Arc<Waiter>,
    /// Whether the holds on both sides allow a free hand-off (see [`Claim::lend`]).
    lendable: bool,
    settled: bool,
}

impl Claim {
    /// The claimed waiter's field.
    pub(crate) fn field(&self) -> &str {
        &self.waiter.field
    }

    /// The releasing holder's listening on the lock's channel, followed from its mark (see
    /// [`Listening::follow`]): what a streak's watch starts from.
    pub(crate) fn listening(&self) -> Option<Listening> {
        let state = self.queue.state.lock();
        state
            .occupant
            .as_ref()
            .and_then(|holder| holder.listening.as_ref())
            .map(Listening::follow)
    }

    /// The lease a hold passed to the claimed waiter gets.
    pub(crate) fn lease(&self) -> Duration {
        self.waiter.lease
    }

    /// Whether the lock may pass to the claimed waiter without Redis, as far as the queue knows:
    /// both holds are live watchdog holds and the lock's channel carried no message since the hold
    /// came from Redis. The engine adds
    /// what only it knows (the kind, and the root's last confirmed renewal).
    pub(crate) fn lendable(&self) -> bool {
        self.lendable
    }

    /// The hand-off ran: the claimed waiter holds the lock. `false` when its acquisition is gone:
    /// the caller must release its hold. `listening` on the lock's channel since before the
    /// hand-off was sent.
    pub(crate) fn passed(
        mut self,
        reply: u64,
        sent_at: Instant,
        listening: Option<Listening>,
    ) -> bool {
        self.settled = true;
        let mut state = self.queue_for_passing();
        state.hold(&self.waiter.field, None, listening, true);
        self.hand_to_waiter(&mut state, Slot::Passed { reply, sent_at })
    }

    /// Lends the lock to the claimed waiter without Redis, along `streak` (which holds what Redis
    /// keeps, and was just lent to it: [`Streak::lend_to`]): the waiter holds the lent hold, under
    /// the streak's lease. `false` when its acquisition is gone: the caller must release the hold
    /// lent to it.
    pub(crate) fn lend(mut self, streak: &Streak) -> bool {
        self.settled = true;
        let mut state = self.queue_for_passing();
        let _ = self.cohorts.free_handoffs.fetch_add(1, Ordering::Relaxed);
        // Taken in place: the next occupant keeps the streak's start.
        let listening = state
            .occupant
            .as_mut()
            .and_then(|holder| holder.listening.take());
        state.hold(&self.waiter.field, Some(streak.expiry()), listening, true);
        self.hand_to_waiter(&mut state, Slot::Lent)
    }

    /// Counts the hand-off and returns the queue's state, locked, without the claimed waiter.
    fn queue_for_passing(&self) -> parking_lot::MutexGuard<'_, State> {
        let _ = self.cohorts.handoffs.fetch_add(1, Ordering::Relaxed);
        let mut state = self.queue.state.lock();
        state.remove(&self.waiter);
        state
    }

    /// The claimed waiter, now the holder, is told (`passed`) unless it is gone: `false` then.
    fn hand_to_waiter(&self, state: &mut State, passed: Slot) -> bool {
        state.streak += 1;
        let mut slot = self.waiter.slot.lock();
        let taken = *slot == Slot::Claimed;
        if taken {
            *slot = passed;
        }
        self.waiter.nudge();
        taken
    }

    /// The lock was not passed: the claimed waiter heads the queue again (and tries once the holder
    /// has released for real).
    pub(crate) fn failed(mut self) {
        self.settle_failed();
    }

    fn settle_failed(&mut self) {
        self.settled = true;
        {
            let mut state = self.queue.state.lock();
            let mut slot = self.waiter.slot.lock();
            if *slot == Slot::Abandoned {
                drop(slot);
                state.remove(&self.waiter);
            } else {
                *slot = Slot::Waiting;
                self.waiter.nudge();
            }
        }
        self.cohorts.forget_if_idle(&self.queue.key);
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.settled {
            self.settle_failed();
        }
    }
}

/// What the unit tests of the queues, and of the engine's decisions over them, share: one lock of
/// one kind, and the bounds of a streak.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::time::Duration;

    pub(crate) const KEY: &str = "lock";
    pub(crate) const KIND: &str = "lock";
    pub(crate) const LEASE: Duration = Duration::from_secs(30);
    pub(crate) const LIMIT: u32 = 3;
    pub(crate) const WINDOW: Duration = Duration::from_secs(1);
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::fixtures::{KEY, KIND, LEASE, LIMIT, WINDOW};
    use super::*;
    use crate::pubsub::Registry;
    use crate::wake::WakeRule;

    const CHANNEL: &str = "redisson_lock__channel:{lock}";

    /// Listening on the lock's channel of `subscriber`, live (confirmed by hand: no server).
    fn listening_on(subscriber: &Arc<Registry>) -> Option<Listening> {
        let first = subscriber.subscribe(CHANNEL, WakeRule::OneOrAll);
        subscriber.confirm(&[CHANNEL.to_owned()]);
        let listening = subscriber.listen(CHANNEL);
        drop(first);
        listening
    }

    /// Listening on a live lock channel of a subscriber of its own, which nothing publishes on.
    fn listening() -> Option<Listening> {
        listening_on(&Arc::new(Registry::default()))
    }

    fn watchdog() -> (Expiry, CancellationToken) {
        let lost = CancellationToken::new();
        (Expiry::watchdog(lost.clone()), lost)
    }

    /// A queue where `holder` holds (taken from Redis) and `waiters` queue behind it.
    fn held_by(holder: &str, waiters: &[&str]) -> (Cohorts, Vec<Ticket>, CancellationToken) {
        let cohorts = Cohorts::default();
        let (expiry, lost) = watchdog();
        cohorts.held(KEY, holder, expiry, listening());
        let tickets = waiters
            .iter()
            .map(|field| cohorts.join(KEY, KIND, *field, LEASE, true))
            .collect();
        (cohorts, tickets, lost)
    }

    fn hand_off(cohorts: &Cohorts, from: &str) -> Claim {
        match cohorts.releasing(KEY, KIND, from, LIMIT, WINDOW) {
            Next::HandOff(claim) => claim,
            Next::Release { yielding } => panic!("expected a hand-off, got a release ({yielding})"),
            Next::AlreadyPassing => panic!("expected a hand-off, got another one in progress"),
        }
    }

    #[test]
    fn the_first_waiter_of_a_free_lock_tries_at_once_and_leaves_nothing_behind() {
        let cohorts = Cohorts::default();
        let ticket = cohorts.join(KEY, KIND, "a", LEASE, true);
        assert!(!ticket.joined_behind());
        assert_eq!(ticket.step(|| 0), Step::Try);
        let (expiry, _lost) = watchdog();
        ticket.tried(Some(expiry), listening());
        drop(ticket);
        assert!(matches!(
            cohorts.releasing(KEY, KIND, "a", LIMIT, WINDOW),
            Next::Release { yielding: false }
        ));
        cohorts.released(KEY, "a", None);
        assert_eq!(cohorts.len(), 0, "an idle queue is dropped");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn waiters_behind_a_local_holder_wait_and_the_head_is_passed_the_lock() {
        let (cohorts, tickets, _lost) = held_by("h", &["a", "b"]);
        assert!(tickets.iter().all(Ticket::joined_behind));
        assert!(tickets[0].until_head(None).await);
        assert_eq!(tickets[0].step(|| 0), Step::Held(None), "no doomed try");
        let claim = hand_off(&cohorts, "h");
        assert_eq!(claim.field(), "a");
        assert_eq!(tickets[0].step(|| 0), Step::Claimed);
        let sent_at = Instant::now();
        assert!(claim.passed(1, sent_at, listening()));
        assert_eq!(tickets[0].step(|| 0), Step::Passed { reply: 1, sent_at });
        // `b` heads the queue now, behind the new holder `a`.
        assert!(tickets[1].until_head(Some(Instant::now())).await);
        assert_eq!(tickets[1].step(|| 0), Step::Held(None));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_non_head_waits_for_its_turn_until_its_deadline() {
        let (_cohorts, tickets, _lost) = held_by("h", &["a", "b"]);
        let deadline = Instant::now() + Duration::from_millis(50);
        assert!(!tickets[1].until_head(Some(deadline)).await);
        assert_eq!(Instant::now(), deadline);
    }

    #[test]
    fn the_streak_is_bounded_then_the_queue_yields_until_the_message() {
        let (cohorts, tickets, _lost) = held_by("h", &["a", "b", "c", "d", "e"]);
        let mut from = "h".to_owned();
        for ticket in tickets.iter().take(LIMIT as usize) {
            let claim = hand_off(&cohorts, &from);
            assert!(claim.passed(1, Instant::now(), listening()));
            let (expiry, _) = watchdog();
            ticket.take();
            cohorts.took_over(KEY, claim_field(ticket), expiry);
            from = claim_field(ticket).to_owned();
        }
        assert!(matches!(
            cohorts.releasing(KEY, KIND, &from, LIMIT, WINDOW),
            Next::Release { yielding: true }
        ));
        let now = Instant::now();
        let yielding = Yield {
            messages: 7,
            not_before: now + Duration::from_millis(1),
            at_latest: now + Duration::from_millis(5),
        };
        cohorts.released(KEY, &from, Some(yielding));
        let head = &tickets[LIMIT as usize];
        assert!(
            matches!(head.step(|| 8), Step::Yield(_)),
            "too soon, message or not"
        );
        assert_eq!(
            yielding.left(7, now + Duration::from_millis(2)),
            Some(Duration::from_millis(3))
        );
        assert_eq!(
            yielding.left(8, now + Duration::from_millis(2)),
            None,
            "the message came back"
        );
        assert_eq!(
            yielding.left(7, now + Duration::from_millis(5)),
            None,
            "no message, but enough"
        );
    }

    fn claim_field(ticket: &Ticket) -> &str {
        &ticket.waiter.field
    }

    #[test]
    fn the_window_bounds_the_streak_too() {
        let (cohorts, _tickets, _lost) = held_by("h", &["a"]);
        assert!(matches!(
            cohorts.releasing(KEY, KIND, "h", LIMIT, Duration::ZERO),
            Next::Release { yielding: true }
        ));
    }

    #[test]
    fn a_head_with_a_try_on_the_wire_is_not_claimed() {
        let cohorts = Cohorts::default();
        let ticket = cohorts.join(KEY, KIND, "a", LEASE, true);
        assert_eq!(ticket.step(|| 0), Step::Try);
        // A one-shot try of another owner took the lock meanwhile.
        let (expiry, _lost) = watchdog();
        cohorts.held(KEY, "t", expiry, listening());
        assert!(matches!(
            cohorts.releasing(KEY, KIND, "t", LIMIT, WINDOW),
            Next::Release { yielding: false }
        ));
        ticket.tried(None, None);
        assert_eq!(ticket.step(|| 0), Step::Held(None));
    }

    #[test]
    fn a_lost_lease_lets_the_head_try() {
        let (_cohorts, tickets, lost) = held_by("h", &["a"]);
        assert_eq!(tickets[0].step(|| 0), Step::Held(None));
        lost.cancel();
        assert_eq!(tickets[0].step(|| 0), Step::Try);
    }

    #[test]
    fn a_failed_hand_off_puts_the_head_back_to_wait_for_the_release() {
        let (cohorts, tickets, _lost) = held_by("h", &["a"]);
        hand_off(&cohorts, "h").failed();
        assert_eq!(tickets[0].step(|| 0), Step::Held(None));
        cohorts.released(KEY, "h", None);
        assert_eq!(tickets[0].step(|| 0), Step::Try);
    }

    #[test]
    fn a_waiter_dropped_while_claimed_leaves_the_passed_hold_to_the_releaser() {
        let (cohorts, mut tickets, _lost) = held_by("h", &["a", "b"]);
        let claim = hand_off(&cohorts, "h");
        drop(tickets.remove(0));
        assert!(
            !claim.passed(1, Instant::now(), listening()),
            "the releaser releases it"
        );
        // The lock is `a`'s now, and `b` heads the queue behind it.
        assert_eq!(tickets[0].step(|| 0), Step::Held(None));
        assert!(matches!(
            cohorts.releasing(KEY, KIND, "a", LIMIT, WINDOW),
            Next::HandOff(_)
        ));
    }

    #[test]
    fn a_second_release_of_a_holder_that_is_passing_the_lock_finds_nothing_to_release() {
        let (cohorts, _tickets, _lost) = held_by("h", &["a"]);
        let claim = hand_off(&cohorts, "h");
        assert!(matches!(
            cohorts.releasing(KEY, KIND, "h", LIMIT, WINDOW),
            Next::AlreadyPassing
        ));
        claim.failed();
        assert!(matches!(
            cohorts.releasing(KEY, KIND, "h", LIMIT, WINDOW),
            Next::HandOff(_)
        ));
    }

    #[test]
    fn nothing_passes_from_an_owner_to_itself() {
        let (cohorts, _tickets, _lost) = held_by("h", &["h"]);
        assert!(matches!(
            cohorts.releasing(KEY, KIND, "h", LIMIT, WINDOW),
            Next::Release { yielding: false }
        ));
    }

    #[test]
    fn a_waiter_dropped_after_being_passed_the_lock_returns_it() {
        let (cohorts, tickets, _lost) = held_by("h", &["a"]);
        assert!(hand_off(&cohorts, "h").passed(5, Instant::now(), listening()));
        assert!(tickets[0].abandon());
        assert!(!tickets[0].abandon(), "only once");
    }

    /// Opens a streak of `root`'s hold, as the engine does at the first free hand-off.
    fn streak_of(cohorts: &Cohorts, root: &str, registration: &CancellationToken) -> Arc<Streak> {
        let now = Instant::now();
        let streak = cohorts
            .open_streak(KEY, root, 1, registration, now)
            .expect("none open");
        assert!(
            cohorts
                .open_streak(KEY, root, 1, registration, now)
                .is_none(),
            "one per key"
        );
        streak
    }

    /// Lends `claim`'s hold along `streak`, as the engine does.
    fn lend(claim: Claim, streak: &Streak) -> bool {
        assert!(streak.lend_to(claim.field()), "between holders");
        claim.lend(streak)
    }

    #[test]
    fn a_lent_hold_keeps_its_root_and_one_lease_along_the_streak_until_it_is_over() {
        let (cohorts, tickets, registration) = held_by("h", &["a", "b"]);
        assert!(cohorts.streak_on(KEY).is_none(), "nothing lent yet");
        let claim = hand_off(&cohorts, "h");
        assert!(claim.lendable());
        let streak = streak_of(&cohorts, "h", &registration);
        assert!(lend(claim, &streak), "the waiter takes it");
        cohorts.began_streak();
        assert_eq!(tickets[0].step(|| 0), Step::Lent);
        let expiry = tickets[0].take_lent().expect("the streak's lease");
        assert!(streak.is_held_by("a") && !streak.is_held_by("h"));
        // The holder's re-entries and releases go through the streak, under one lock.
        let mut count = 1;
        assert!(streak.reenter("a", || count += 1));
        assert!(
            !streak.reenter("h", || count += 1),
            "the root holds nothing"
        );
        assert_eq!(streak.release("h", || true), StreakRelease::NotHolder);
        assert_eq!(
            streak.release("a", || {
                count -= 1;
                count == 0
            }),
            StreakRelease::Partially
        );
        assert_eq!(
            streak.release("a", || {
                count -= 1;
                count == 0
            }),
            StreakRelease::Last
        );
        assert!(
            !streak.reenter("a", || count += 1),
            "not while its hold is being passed"
        );
        // `a` lends it on: the root stays `h`, and the streak goes on.
        assert!(lend(hand_off(&cohorts, "a"), &streak));
        let same = cohorts.streak_on(KEY).expect("one streak per key");
        assert!(Arc::ptr_eq(&same, &streak) && same.is_held_by("b"));
        assert_eq!(cohorts.free_handoffs(), (2, 1));
        // The registration's loss reaches every holder of the streak.
        registration.cancel();
        assert!(expiry.is_lost());
        cohorts.close_streak(&streak);
        cohorts.released(KEY, "b", None);
        assert!(cohorts.streak_on(KEY).is_none());
        assert_eq!(cohorts.len(), 0);
    }

    #[test]
    fn a_streak_that_is_over_fires_its_lease_for_whoever_is_still_inside() {
        let (cohorts, tickets, registration) = held_by("h", &["a"]);
        let streak = streak_of(&cohorts, "h", &registration);
        assert!(lend(hand_off(&cohorts, "h"), &streak));
        let expiry = tickets[0].take_lent().expect("the streak's lease");
        assert!(streak.ending());
        assert!(!streak.lend_to("b"), "an ending streak is lent to nobody");
        assert!(!streak.ending(), "it ends once");
        assert!(!expiry.is_lost(), "not before it is over");
        cohorts.close_streak(&streak);
        assert!(expiry.is_lost());
        assert!(
            !registration.is_cancelled(),
            "the root's registration is the engine's to end"
        );
    }

    #[test]
    fn a_fixed_lease_or_an_unlock_message_is_never_lent() {
        let cohorts = Cohorts::default();
        let (expiry, lost) = watchdog();
        cohorts.held(KEY, "h", expiry, listening());
        let fixed = cohorts.join(KEY, KIND, "a", LEASE, false);
        assert!(
            !hand_off(&cohorts, "h").lendable(),
            "the waiter's lease is fixed"
        );
        drop(fixed);
        let _waiter = cohorts.join(KEY, KIND, "b", LEASE, true);
        let claim = hand_off(&cohorts, "h");
        assert!(claim.lendable());
        drop(claim);
        cohorts.held(KEY, "h", Expiry::until(Instant::now() + LEASE), listening());
        assert!(
            !hand_off(&cohorts, "h").lendable(),
            "the holder's lease is fixed"
        );
        let (expiry, _lost) = watchdog();
        cohorts.held(KEY, "h", expiry, None);
        assert!(
            !hand_off(&cohorts, "h").lendable(),
            "not listening since the acquire: an unlock could have gone unheard"
        );
        let subscriber = Arc::new(Registry::default());
        let (expiry, _lost) = watchdog();
        cohorts.held(KEY, "h", expiry, listening_on(&subscriber));
        subscriber.dispatch(CHANNEL, b"0");
        assert!(
            !hand_off(&cohorts, "h").lendable(),
            "an unlock message since the acquire"
        );
        let subscriber = Arc::new(Registry::default());
        let (expiry, _lost) = watchdog();
        cohorts.held(KEY, "h", expiry, listening_on(&subscriber));
        let streak = streak_of(&cohorts, "h", &lost);
        assert!(lend(hand_off(&cohorts, "h"), &streak));
        let _next = cohorts.join(KEY, KIND, "c", LEASE, true);
        // An unlock on the channel mid-streak (a force unlock elsewhere, say).
        subscriber.dispatch(CHANNEL, b"0");
        assert!(
            !hand_off(&cohorts, "b").lendable(),
            "the root's hash may be gone"
        );
        drop(lost);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn dropping_the_head_makes_the_next_waiter_head() {
        let cohorts = Cohorts::default();
        let first = cohorts.join(KEY, KIND, "a", LEASE, true);
        let second = cohorts.join(KEY, KIND, "b", LEASE, true);
        assert!(!second.until_head(Some(Instant::now())).await);
        drop(first);
        assert!(second.until_head(Some(Instant::now())).await);
        drop(second);
        assert_eq!(cohorts.len(), 0);
    }

    /// Kinds sharing a lock's hash queue together: a waiter through another kind waits behind the
    /// local holder rather than sending a doomed try, a hold does not pass to it (its kind writes
    /// its own hand-off), and the holder's release through any kind lets it try.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_waiter_through_another_kind_waits_for_the_holder_and_tries_when_it_releases() {
        const FENCED: &str = "fenced";
        let (cohorts, _, _lost) = held_by("h", &[]);
        let fenced = cohorts.join(KEY, FENCED, "a", LEASE, true);
        assert!(fenced.joined_behind(), "the holder's kind is another");
        assert!(fenced.until_head(None).await);
        assert_eq!(fenced.step(|| 0), Step::Held(None), "no doomed try");
        assert!(
            matches!(
                cohorts.releasing(KEY, KIND, "h", LIMIT, WINDOW),
                Next::Release { yielding: false }
            ),
            "nothing passes to a waiter of another kind"
        );
        let before = fenced.waiter.nudges.load(Ordering::Acquire);
        cohorts.released(KEY, "h", None);
        assert_eq!(
            fenced.waiter.nudges.load(Ordering::Acquire),
            before + 1,
            "the head was woken once"
        );
        assert_eq!(fenced.step(|| 0), Step::Try);
    }
}

#[cfg(test)]
mod model;
