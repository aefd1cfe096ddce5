//! Local wake-ups: how a message on a channel wakes the waiters of this client.
//!
//! # Implementation details
//!
//! Each subscribed channel has one [`Wakeups`]: a counting primitive in the spirit of the
//! `java.util.concurrent.Semaphore` behind Redisson's `RedissonLockEntry` (docs/protocol.md §3.1),
//! built on tokio's FIFO [`Semaphore`]. A waiter *arms* before the retry it guards, so a wake-up
//! that arrives while the retry is on the wire is banked for it instead of lost (tokio's
//! `Notified::enable` pattern, but counting: a `Notify` banks only one wake-up, which is not enough
//! for "wake up to n").
//!
//! Banked wake-ups are capped at the number of armed waiters, so a burst of messages while nobody
//! listens does not turn into a burst of pointless retries later.
//!
//! A [`WakeRule`] maps a message payload to wake-ups, per kind (docs/protocol.md §3.2, §8.5, §8.7):
//!
//! | rule | message | effect |
//! |---|---|---|
//! | [`WakeRule::OneOrAll`] (locks) | `0` / `1` | wake one / wake every armed waiter |
//! | [`WakeRule::All`] (group locks) | `0` or `1` | wake every armed waiter |
//! | [`WakeRule::Permits`] (semaphores) | `n` | wake up to `n` armed waiters |
//! | [`WakeRule::CountDown`] (count-down latch) | `0` / `1` | open (every waiter passes) / close |
//!
//! Anything else is ignored, as Java ignores it.
//!
//! An open latch lets through every waiter that was armed before it opened. A waiter that arms
//! while it is already open does not pass on that opening: it armed after it, so its own retry (the
//! latch's count) already tells whether the count is still zero; if the count went up again since,
//! the opening is stale for it and it waits for the next one. Java's reclosable latch instead lets
//! it through and its `while count > 0` loop spins until the closing message arrives.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use futures::FutureExt;
use futures::future::Either;
use tokio::sync::{AcquireError, Notify, Semaphore, SemaphorePermit};

/// How a channel's messages wake local waiters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeRule {
    /// Lock channels: `0` wakes one waiter (banked if none sleeps yet), `1` wakes every waiter.
    OneOrAll,
    /// Group lock channels: `0` or `1` wakes every waiter. Waiters of one group wait for different
    /// values, and a release frees some of them: the one waiter `0` would wake may not be the one
    /// whose values are free (docs/protocol.md §8.9).
    All,
    /// Semaphore channels: a message carrying `n` wakes up to `n` waiters.
    Permits,
    /// Count-down latch channels: `0` opens the latch (every waiter passes until it closes), `1`
    /// closes it.
    CountDown,
}

impl WakeRule {
    /// Applies one message to `wakeups`. Java decodes payloads with `Long.valueOf`: exactly an
    /// optionally signed decimal integer; anything else wakes nobody.
    pub(crate) fn apply(self, payload: &[u8], wakeups: &Wakeups) -> bool {
        let Some(value) = std::str::from_utf8(payload)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
        else {
            return false;
        };
        match (self, value) {
            (Self::OneOrAll, 0) => wakeups.wake(1),
            (Self::OneOrAll, 1) | (Self::All, 0 | 1) => wakeups.wake_all(),
            (Self::Permits, n) if n > 0 => wakeups.wake(usize::try_from(n).unwrap_or(usize::MAX)),
            (Self::CountDown, 0) => wakeups.open(),
            (Self::CountDown, 1) => wakeups.close(),
            _ => return false,
        }
        true
    }
}

/// The counting wake-up primitive of one channel; see the module docs.
#[derive(Debug)]
pub(crate) struct Wakeups {
    /// Banked wake-ups; waiters take them in FIFO order.
    banked: Semaphore,
    /// Waiters armed for the next wake-up (between [`Wakeups::arm`] and being woken or leaving).
    armed: AtomicUsize,
    /// A latch's channel's ([`WakeRule::CountDown`]): its waiters listen for its openings too.
    /// Boxed: every other channel, one per name a waiter waits on, would keep room for it.
    latch: Option<Box<Latch>>,
}

/// The openings of a latch's channel.
#[derive(Debug, Default)]
struct Latch {
    /// An open latch lets every waiter through.
    open: AtomicBool,
    /// How many times the latch opened: a waiter passes an open latch only if it opened since the
    /// waiter armed.
    openings: AtomicU64,
    /// Told when the latch opens.
    opened: Notify,
}

impl Wakeups {
    /// The wake-ups of a channel whose messages wake as `rule` says.
    pub(crate) fn new(rule: WakeRule) -> Self {
        Self {
            banked: Semaphore::new(0),
            armed: AtomicUsize::new(0),
            latch: (rule == WakeRule::CountDown).then(Box::default),
        }
    }

    /// Arms a waiter: from now on a wake-up is banked for it until it waits with [`Armed::woken`].
    pub(crate) fn arm(&self) -> Armed<'_> {
        let _ = self.armed.fetch_add(1, Ordering::AcqRel);
        Armed {
            wakeups: self,
            openings: self
                .latch
                .as_ref()
                .map_or(0, |latch| latch.openings.load(Ordering::Acquire)),
        }
    }

    /// Wakes up to `n` armed waiters (banking for those still on their way to sleep).
    pub(crate) fn wake(&self, n: usize) {
        let unserved = self
            .armed
            .load(Ordering::Acquire)
            .saturating_sub(self.banked.available_permits());
        let n = n.min(unserved);
        if n > 0 {
            self.banked.add_permits(n);
        }
    }

    /// Wakes every armed waiter.
    pub(crate) fn wake_all(&self) {
        self.wake(usize::MAX);
    }

    /// Opens the latch: every waiter passes until [`Wakeups::close`].
    fn open(&self) {
        debug_assert!(self.latch.is_some(), "only a latch's channel opens");
        if let Some(latch) = &self.latch {
            latch.open.store(true, Ordering::Release);
            let _ = latch.openings.fetch_add(1, Ordering::AcqRel);
            latch.opened.notify_waiters();
        }
    }

    /// Closes the latch: waiters wait for the next opening.
    fn close(&self) {
        if let Some(latch) = &self.latch {
            latch.open.store(false, Ordering::Release);
        }
    }

    /// Whether the latch is open.
    #[cfg(test)]
    fn is_open(&self) -> bool {
        self.latch
            .as_ref()
            .is_some_and(|latch| latch.open.load(Ordering::Acquire))
    }

    /// Whether the latch is open and opened after a waiter armed with `openings` seen.
    fn opened_since(&self, openings: u64) -> bool {
        self.latch.as_ref().is_some_and(|latch| {
            latch.open.load(Ordering::Acquire) && latch.openings.load(Ordering::Acquire) != openings
        })
    }

    /// Takes a banked wake-up, waiting for one in FIFO order.
    async fn banked_turn(&self) -> Turn<'_> {
        self.take_banked(self.banked.acquire().await)
    }

    /// The wake-up a wait for a banked one took.
    fn take_banked(&self, taken: Result<SemaphorePermit<'_>, AcquireError>) -> Turn<'_> {
        // The semaphore is never closed, so acquiring cannot fail.
        if let Ok(permit) = taken {
            permit.forget();
        }
        Turn(Some(self))
    }

    /// A latch's wait: an opening since the waiter armed (with `armed_at` openings seen), or a
    /// banked wake-up (every waiter is woken when the subscription was lost).
    async fn opened_or_banked(&self, latch: &Latch, armed_at: u64) -> Turn<'_> {
        let opened = async {
            loop {
                let notified = latch.opened.notified();
                tokio::pin!(notified);
                let _ = notified.as_mut().enable();
                if self.opened_since(armed_at) {
                    return;
                }
                notified.await;
            }
        };
        tokio::select! {
            biased;
            // An opening lets everyone through: there is no single turn to pass on.
            () = opened => Turn(None),
            turn = self.banked_turn() => turn,
        }
    }

    /// Gives a wake-up back (a woken waiter left before it could use it), so the next waiter gets
    /// it.
    fn pass_on(&self) {
        self.banked.add_permits(1);
    }
}

/// An armed waiter; disarms on drop (once woken, or dropped before).
#[derive(Debug)]
pub(crate) struct Armed<'a> {
    wakeups: &'a Wakeups,
    /// The latch's openings when this waiter armed.
    openings: u64,
}

impl<'a> Armed<'a> {
    /// Waits for a wake-up (at once if one was banked or the latch opened since this waiter armed).
    /// The returned [`Turn`]
    /// gives the wake-up on to the next waiter unless it is [`Turn::used`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a waiter dropped while waiting takes no wake-up.
    ///
    /// Made of the semaphore's wait and the armed waiter alone, rather than an `async` block,
    /// which would keep the armed waiter and the wakeups again beside them in every parked
    /// waiter's future.
    pub(crate) fn woken(self) -> impl Future<Output = Turn<'a>> {
        let wakeups = self.wakeups;
        match &wakeups.latch {
            // Boxed: only a latch's waiters listen for an opening too, and every other parked
            // waiter's future would otherwise keep room for it.
            Some(latch) => Either::Left(Box::pin(async move {
                let turn = wakeups.opened_or_banked(latch, self.openings).await;
                drop(self);
                turn
            })),
            None => Either::Right(wakeups.banked.acquire().map(move |taken| {
                // Disarmed before the turn is handed on, as a waiter that leaves disarms first.
                drop(self);
                wakeups.take_banked(taken)
            })),
        }
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        let _ = self.wakeups.armed.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A wake-up in hand. A waiter that retries with it calls [`Turn::used`]; dropped unused (the
/// waiter was cancelled or failed before it could retry), it passes the wake-up on to the next
/// waiter.
#[derive(Debug)]
#[must_use = "dropping a turn passes it on"]
pub(crate) struct Turn<'a>(Option<&'a Wakeups>);

impl Turn<'_> {
    /// A turn that is nobody's (the first try, or a wake-up by timeout).
    pub(crate) fn none() -> Self {
        Self(None)
    }

    /// The retry happened: the wake-up is consumed.
    pub(crate) fn used(mut self) {
        self.0 = None;
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Some(wakeups) = self.0.take() {
            wakeups.pass_on();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    /// `n` tasks that each arm, then wait once; returns the counter of those woken.
    async fn sleepers(wakeups: &Arc<Wakeups>, n: usize) -> Arc<AtomicUsize> {
        let woken = Arc::new(AtomicUsize::new(0));
        for _ in 0..n {
            let (wakeups, woken) = (wakeups.clone(), woken.clone());
            drop(tokio::spawn(async move {
                wakeups.arm().woken().await.used();
                let _ = woken.fetch_add(1, Ordering::AcqRel);
            }));
        }
        settle().await;
        woken
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    fn count(woken: &AtomicUsize) -> usize {
        woken.load(Ordering::Acquire)
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn zero_wakes_exactly_one_and_one_wakes_all() {
        let wakeups = Arc::new(Wakeups::new(WakeRule::OneOrAll));
        let woken = sleepers(&wakeups, 4).await;
        assert_eq!(count(&woken), 0);
        assert!(WakeRule::OneOrAll.apply(b"0", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 1);
        assert!(WakeRule::OneOrAll.apply(b"1", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 4);
        assert_eq!(wakeups.banked.available_permits(), 0, "nothing left over");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn on_a_group_channel_zero_wakes_everyone() {
        let wakeups = Arc::new(Wakeups::new(WakeRule::All));
        let woken = sleepers(&wakeups, 3).await;
        assert!(WakeRule::All.apply(b"0", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 3);
        let woken = sleepers(&wakeups, 2).await;
        assert!(WakeRule::All.apply(b"1", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 2);
        assert!(!WakeRule::All.apply(b"2", &wakeups));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn other_payloads_wake_nobody() {
        let wakeups = Arc::new(Wakeups::new(WakeRule::OneOrAll));
        let woken = sleepers(&wakeups, 2).await;
        for payload in [&b"2"[..], b"-1", b"x", b"", b" 0", b"\xff"] {
            assert!(!WakeRule::OneOrAll.apply(payload, &wakeups), "{payload:?}");
        }
        assert!(!WakeRule::Permits.apply(b"0", &wakeups));
        assert!(!WakeRule::Permits.apply(b"-3", &wakeups));
        assert!(!WakeRule::CountDown.apply(b"2", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn permits_wake_up_to_n_and_lose_none() {
        let wakeups = Arc::new(Wakeups::new(WakeRule::Permits));
        let woken = sleepers(&wakeups, 5).await;
        assert!(WakeRule::Permits.apply(b"3", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 3, "3 of 5, not one, not all");
        // Two messages back to back, before anyone ran: both count.
        assert!(WakeRule::Permits.apply(b"1", &wakeups));
        assert!(WakeRule::Permits.apply(b"1", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 5);
        // More than the waiters: the surplus is not banked.
        assert!(WakeRule::Permits.apply(b"7", &wakeups));
        assert_eq!(wakeups.banked.available_permits(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_wake_up_while_armed_is_banked_for_the_armed_waiter() {
        let wakeups = Wakeups::new(WakeRule::OneOrAll);
        let armed = wakeups.arm();
        // The message arrives while the waiter's retry is on the wire.
        assert!(WakeRule::OneOrAll.apply(b"0", &wakeups));
        tokio::time::timeout(Duration::from_millis(1), armed.woken())
            .await
            .expect("banked wake-up returns at once")
            .used();
        // Nobody armed: nothing is banked.
        wakeups.wake(1);
        assert_eq!(wakeups.banked.available_permits(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_unused_turn_passes_to_the_next_waiter_and_a_used_one_does_not() {
        let wakeups = Arc::new(Wakeups::new(WakeRule::OneOrAll));
        let first = wakeups.arm();
        wakeups.wake(1);
        let turn = tokio::time::timeout(Duration::from_millis(1), first.woken())
            .await
            .expect("the banked wake-up is the first waiter's");
        let woken = sleepers(&wakeups, 1).await;
        assert_eq!(count(&woken), 0);
        drop(turn); // the first waiter went away before using it
        settle().await;
        assert_eq!(count(&woken), 1, "the dropped turn went to the sleeper");

        let second = wakeups.arm();
        wakeups.wake(1);
        second.woken().await.used();
        let later = sleepers(&wakeups, 1).await;
        assert_eq!(count(&later), 0, "a used turn is consumed");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_latch_opens_for_everyone_until_closed() {
        let wakeups = Arc::new(Wakeups::new(WakeRule::CountDown));
        let woken = sleepers(&wakeups, 3).await;
        assert!(WakeRule::CountDown.apply(b"0", &wakeups));
        settle().await;
        assert_eq!(count(&woken), 3);
        // A waiter armed while it was open waits for the next opening (its own retry saw the
        // count).
        let late = wakeups.arm();
        assert!(
            tokio::time::timeout(Duration::from_millis(1), wakeups.arm().woken())
                .await
                .is_err(),
            "an opening before arming does not let a waiter through"
        );
        assert!(WakeRule::CountDown.apply(b"0", &wakeups));
        tokio::time::timeout(Duration::from_millis(1), late.woken())
            .await
            .expect("a new opening does")
            .used();
        assert_eq!(wakeups.banked.available_permits(), 0, "nothing left banked");
        assert!(WakeRule::CountDown.apply(b"1", &wakeups));
        let later = sleepers(&wakeups, 2).await;
        assert_eq!(count(&later), 0, "a closed latch holds waiters");
        assert!(WakeRule::CountDown.apply(b"0", &wakeups));
        settle().await;
        assert_eq!(count(&later), 2);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_closed_latch_still_wakes_its_waiters_when_every_waiter_is_woken() {
        // What the registry does when a subscription was lost: every waiter looks again.
        let wakeups = Arc::new(Wakeups::new(WakeRule::CountDown));
        let woken = sleepers(&wakeups, 2).await;
        wakeups.wake_all();
        settle().await;
        assert_eq!(count(&woken), 2);
        assert!(!wakeups.is_open());
    }
}
