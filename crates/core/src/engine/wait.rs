//! The wait loop every kind's acquisition runs: try → acquired | wait(bound) → retry.
//!
//! It knows nothing of Redis: an attempt is any future that says acquired or busy-for-at-most, and
//! wake-ups come from the subscriber's [`Registry`]. That keeps it testable in-process, on tokio's
//! paused clock (see the tests below).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;
use tokio::time::Instant;

use super::lock_wire::{Attempt, ChannelName};
use super::patience::{Patience, far_future};
use crate::cohort::Nudged;
use crate::error::Result;
use crate::pubsub::{Registry, Subscription};
use crate::services::Services;
use crate::telemetry::{Acquisition, Path};
use crate::wake::{Turn, WakeRule};

/// A local event that sends a waiter back to its attempt (a local queue's nudge, see
/// [`crate::cohort`]).
#[must_use = "futures do nothing unless polled"]
pub(crate) enum Nudge<'a> {
    /// Nothing local wakes the waiter.
    Never,
    /// Its local queue changed: what nearly every parked head of a queue waits for, kept inline
    /// (two words) rather than boxed.
    Queue(Nudged<'a>),
    /// Anything else (the queue or a local holder's lease lost, the queue or a streak's end):
    /// rare, boxed.
    Boxed(Pin<Box<dyn Future<Output = ()> + Send + 'a>>),
}

impl Future for Nudge<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.get_mut() {
            Self::Never => Poll::Pending,
            Self::Queue(nudged) => Pin::new(nudged).poll(cx),
            Self::Boxed(nudged) => nudged.as_mut().poll(cx),
        }
    }
}

/// What a waiter's kind and its local queue add to its wait: one reference in a parked waiter's
/// future for both.
pub(crate) trait WaitHooks: Sync {
    /// The next poll interval of a waiter nothing can wake, after the previous one and the number
    /// of polls in a row.
    fn poll_delay(&self, previous: Option<Duration>, polls: u32) -> Duration;

    /// A local event that wakes the waiter too, besides the channel ([`Nudge::Never`] if none).
    fn nudge(&self) -> Nudge<'_>;
}

/// The hooks of a waiter that only its channel and its polls wake.
pub(crate) struct Polls(pub(crate) fn(Option<Duration>, u32) -> Duration);

impl WaitHooks for Polls {
    fn poll_delay(&self, previous: Option<Duration>, polls: u32) -> Duration {
        (self.0)(previous, polls)
    }

    fn nudge(&self) -> Nudge<'_> {
        Nudge::Never
    }
}

/// Where a waiter listens and how long it may wait.
pub(crate) struct Waiting<'a> {
    /// The subscriber's local half.
    pub(crate) registry: &'a Arc<Registry>,
    /// The channel that wakes this waiter and its rule; `None` for a kind that only polls.
    pub(crate) channel: Option<(ChannelName<'a>, WakeRule)>,
    /// When to give up; `None` waits until acquired.
    pub(crate) deadline: Option<Instant>,
    /// Its polls' intervals, and the local events that wake it too.
    pub(crate) hooks: &'a dyn WaitHooks,
    /// The acquisition's span and metrics: told of each attempt and why it was made (and the
    /// name, for logs).
    pub(crate) acquisition: &'a Acquisition<'a>,
}

/// Where a waiter of one kind listens: [`Waiting`] without what the client and the caller supply.
pub(crate) struct Listen<'a> {
    /// The channel that wakes its waiters and its rule; `None` for a kind that only polls.
    pub(crate) channel: Option<(ChannelName<'a>, WakeRule)>,
    /// Its polls' intervals, and the local events that wake it too.
    pub(crate) hooks: &'a dyn WaitHooks,
    /// The acquisition's span and metrics.
    pub(crate) acquisition: &'a Acquisition<'a>,
}

/// [`wait`] on this client's subscriber, until `patience` runs out.
///
/// # Cancel safety
///
/// As [`wait`].
pub(crate) fn wait_on<'a, T, F, Fut>(
    services: &'a Services,
    listen: Listen<'a>,
    patience: Patience,
    attempt: F,
) -> impl Future<Output = Result<Option<T>>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    let waiting = Waiting {
        registry: services.subscriber.registry(),
        channel: listen.channel,
        deadline: patience.deadline(),
        hooks: listen.hooks,
        acquisition: listen.acquisition,
    };
    wait(waiting, attempt)
}

/// Runs `attempt` until it acquires (`Ok(Some(token))`), the deadline passes (`Ok(None)`) or it
/// fails (its error):
///
/// 1. **Try.** When another local waiter already listens on the channel, join it first (free);
///    otherwise the first try goes out alone, so the uncontended path is one round trip.
/// 2. **Subscribe.** After a first failure, subscribe and wait until the server confirms it, so no
///    message can slip between the try and the wait (bounded by the subscription timeout; past it,
///    or at once where the server refuses subscriptions, the waiter polls).
/// 3. **Arm, retry, wait.** Arm the channel's wake-up *before* each retry, retry, and on failure
///    wait for a wake-up or the bound the attempt returned (the lock's PTTL), never past the
///    deadline. A waiter whose subscription is not live also waits at most the kind's poll delay.
///
/// # Cancel safety
///
/// Cancel safe as far as the loop goes: dropping it leaves the subscription, and a waiter that was
/// woken but dropped before its retry completed hands its wake-up to the next local waiter. What an
/// attempt in flight may have done in Redis is the attempt's to reconcile.
///
/// A plain function returning the loop, rather than an `async fn`: an `async fn` keeps its
/// arguments in every state of its future, next to the parts moved out of them, and a parked
/// waiter would carry both (issue 38: a waiter's memory).
pub(crate) fn wait<'a, T, F, Fut>(
    waiting: Waiting<'a>,
    mut attempt: F,
) -> impl Future<Output = Result<Option<T>>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    let Waiting {
        registry,
        channel,
        deadline,
        hooks,
        acquisition,
    } = waiting;
    async move {
        // Another local waiter's live subscription is joined at once (free); otherwise the first
        // try goes out alone, and the waiter subscribes only once it failed.
        let mut subscription: Option<Subscription> = channel
            .as_ref()
            .and_then(|(channel, rule)| registry.join_live(channel, *rule));
        let mut unsubscribed = subscription.is_none();
        // Why the next attempt is made.
        let mut path = Path::FirstTry;
        // The wake-up that led to the current try: passed on if the try does not complete.
        let mut turn = Turn::none();
        let mut poll = None;
        let mut polls = 0;
        loop {
            // In a block, so that the armed waiter, moved into the wait below, keeps no room of
            // its own in a parked waiter's future.
            let (bound, armed) = {
                // Armed before the try: a wake-up from now on is banked for this waiter.
                let armed = subscription.as_ref().map(Subscription::arm);
                acquisition.attempt(path);
                match attempt().await? {
                    Attempt::Acquired(token) => {
                        turn.used();
                        return Ok(Some(token));
                    }
                    Attempt::Busy(bound) => {
                        turn.used();
                        (bound, armed)
                    }
                }
            };
            let now = Instant::now();
            if expired(deadline, now) {
                return Ok(None);
            }
            acquisition.waiting();
            if let Some((channel, rule)) = channel.as_ref().filter(|_| unsubscribed) {
                // Nothing was armed: there was no subscription.
                drop(armed);
                unsubscribed = false;
                let confirm_by = now + registry.subscription_timeout();
                let confirm_by = deadline.map_or(confirm_by, |d| d.min(confirm_by));
                let joined = registry.subscribe(Arc::clone(channel), *rule);
                // Boxed: once per waiting acquisition, and larger than a parked waiter's state,
                // which every waiting task's future would otherwise keep room for.
                let (joined, confirmed_path) =
                    Box::pin(confirmed(joined, confirm_by, hooks, acquisition)).await;
                (subscription, path) = (Some(joined), confirmed_path);
                turn = Turn::none();
                continue;
            }
            let polling = if subscription.as_ref().is_some_and(Subscription::is_live) {
                (poll, polls) = (None, 0);
                None
            } else {
                let delay = hooks.poll_delay(poll, polls);
                (poll, polls) = (Some(delay), polls + 1);
                Some(delay)
            };
            let (until, timer) = wake_by(now, bound, polling, deadline);
            // Not an `async` block, which would keep the armed waiter next to its wait; consumed
            // whole, so that it keeps no room of its own either.
            let woken = armed.map_or_else(
                || Either::Right(std::future::pending()),
                |armed| Either::Left(armed.woken()),
            );
            (turn, path) = tokio::select! {
                turn = woken => (turn, Path::Message),
                () = tokio::time::sleep_until(until) => (Turn::none(), timer),
                () = hooks.nudge() => (Turn::none(), Path::Nudged),
            };
        }
    }
}

/// Whether the wait's deadline has passed.
fn expired(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|deadline| now >= deadline)
}

/// Waits until the server confirms the waiter's new subscription (at most until `confirm_by`), or
/// a local nudge: why the next attempt is made. A subscription the server did not confirm makes
/// the waiter poll. A plain function returning the wait, as [`wait`], which keeps it small.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn keeps its arguments twice in every waiter's future"
)]
fn confirmed<'a>(
    joined: Subscription,
    confirm_by: Instant,
    hooks: &'a dyn WaitHooks,
    acquisition: &'a Acquisition<'a>,
) -> impl Future<Output = (Subscription, Path)> + 'a {
    async move {
        let path = tokio::select! {
            confirmed = tokio::time::timeout_at(confirm_by, joined.confirmed()) => {
                if joined.is_live() {
                    Path::Subscribed
                } else {
                    // A server that refuses subscriptions was reported once, by the subscriber.
                    if confirmed.is_err() {
                        tracing::warn!(lock = acquisition.name(), "subscription not confirmed in time; polling");
                    }
                    Path::Polling
                }
            }
            () = hooks.nudge() => Path::Nudged,
        };
        (joined, path)
    }
}

/// When a parked waiter wakes by itself, and why: the bound its attempt returned, or its next poll
/// when that comes first, never past the deadline. A function of its own, so that its
/// intermediate values take no room in a parked waiter's future.
fn wake_by(
    now: Instant,
    bound: Duration,
    polling: Option<Duration>,
    deadline: Option<Instant>,
) -> (Instant, Path) {
    let (sleep, timer) = match polling {
        Some(delay) if delay <= bound => (delay, Path::Polling),
        _ => (bound, Path::TtlExpiry),
    };
    // A foreign key may report any PTTL, even one no Instant can represent.
    let slept = now.checked_add(sleep).unwrap_or_else(far_future);
    match deadline {
        Some(deadline) if deadline <= slept => (deadline, Path::Deadline),
        _ => (slept, timer),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use parking_lot::Mutex;
    use tokio::task::JoinHandle;

    use super::*;
    use crate::telemetry::Telemetry;

    const CHANNEL: &str = "redisson_lock__channel:{test}";
    const PTTL: Duration = Duration::from_secs(30);

    /// A lock in memory: attempts see it held until `release`, and count themselves.
    #[derive(Default)]
    struct FakeLock {
        held: Mutex<bool>,
        attempts: AtomicU32,
    }

    impl FakeLock {
        fn attempts(&self) -> u32 {
            self.attempts.load(Ordering::Acquire)
        }

        fn try_once(&self) -> Attempt<()> {
            let _ = self.attempts.fetch_add(1, Ordering::AcqRel);
            let mut held = self.held.lock();
            if *held {
                Attempt::Busy(PTTL)
            } else {
                *held = true;
                Attempt::Acquired(())
            }
        }

        fn release(&self) {
            *self.held.lock() = false;
        }
    }

    fn degraded(previous: Option<Duration>, _polls: u32) -> Duration {
        previous.map_or(Duration::from_millis(25), |p| {
            (p * 2).min(Duration::from_secs(1))
        })
    }

    /// A waiter that runs `attempt`, woken through `registry`'s channel (or polling when `channel`
    /// is false).
    fn spawn_wait<F, Fut>(
        registry: &Arc<Registry>,
        channel: bool,
        patience: Option<Duration>,
        attempt: F,
    ) -> JoinHandle<Result<Option<()>>>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Attempt<()>>> + Send,
    {
        let registry = registry.clone();
        tokio::spawn(async move {
            let telemetry = Telemetry::default();
            let acquisition = untraced(&telemetry);
            let waiting = Waiting {
                registry: &registry,
                channel: channel.then(|| (ChannelName::Owned(CHANNEL.into()), WakeRule::OneOrAll)),
                deadline: patience.map(|patience| Instant::now() + patience),
                hooks: &Polls(degraded),
                acquisition: &acquisition,
            };
            wait(waiting, attempt).await
        })
    }

    fn untraced(telemetry: &Telemetry) -> Acquisition<'_> {
        Acquisition::start(telemetry, "lock", "test", None, Patience::Forever)
    }

    /// A waiter on `lock`.
    fn waiter(
        registry: &Arc<Registry>,
        lock: &Arc<FakeLock>,
        channel: bool,
        patience: Option<Duration>,
    ) -> JoinHandle<Result<Option<()>>> {
        let lock = lock.clone();
        spawn_wait(registry, channel, patience, move || {
            let lock = lock.clone();
            async move { Ok(lock.try_once()) }
        })
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    /// A held lock and a live channel (a holder-side subscription keeps it registered).
    fn contended() -> (Arc<Registry>, Arc<FakeLock>, Subscription) {
        let registry = Arc::new(Registry::new(Duration::from_millis(7500)));
        let lock = Arc::new(FakeLock::default());
        assert_eq!(lock.try_once(), Attempt::Acquired(()));
        let listening = registry.subscribe(CHANNEL, WakeRule::OneOrAll);
        registry.confirm(&[CHANNEL.to_owned()]);
        (registry, lock, listening)
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_uncontended_path_is_one_try_and_no_subscription() {
        let registry = Arc::new(Registry::new(Duration::from_millis(7500)));
        let lock = Arc::new(FakeLock::default());
        let acquired = waiter(&registry, &lock, true, None).await.expect("task");
        assert!(matches!(acquired, Ok(Some(()))));
        assert_eq!(lock.attempts(), 1);
        assert_eq!(registry.channel_count(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_first_failure_subscribes_then_retries_once_confirmed() {
        let registry = Arc::new(Registry::new(Duration::from_millis(7500)));
        let lock = Arc::new(FakeLock::default());
        assert_eq!(lock.try_once(), Attempt::Acquired(()));
        let task = waiter(&registry, &lock, true, None);
        settle().await;
        assert_eq!(
            lock.attempts(),
            2,
            "the first try, then it waits for the subscription"
        );
        assert_eq!(registry.channel_count(), 1);
        registry.confirm(&[CHANNEL.to_owned()]);
        settle().await;
        // Subscribed: it retries once at once (a message may have slipped by meanwhile), then
        // sleeps.
        let after_confirm = lock.attempts();
        assert_eq!(after_confirm, 3);
        lock.release();
        registry.dispatch(CHANNEL, b"0");
        assert!(matches!(task.await.expect("task"), Ok(Some(()))));
        assert_eq!(lock.attempts(), after_confirm + 1);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn zero_wakes_exactly_one_waiter_and_one_wakes_all() {
        let (registry, lock, _listening) = contended();
        let waiters: Vec<_> = (0..3)
            .map(|_| waiter(&registry, &lock, true, None))
            .collect();
        settle().await;
        let parked = lock.attempts();
        assert_eq!(parked, 1 + 3, "each joined the live channel and tried once");
        registry.dispatch(CHANNEL, b"0");
        settle().await;
        assert_eq!(lock.attempts(), parked + 1, "one `0`, one retry");
        registry.dispatch(CHANNEL, b"1");
        settle().await;
        assert_eq!(
            lock.attempts(),
            parked + 1 + 3,
            "one `1`, every waiter retries"
        );
        registry.dispatch(CHANNEL, b"2");
        settle().await;
        assert_eq!(lock.attempts(), parked + 4, "other messages wake nobody");
        for waiter in waiters {
            waiter.abort();
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn without_a_message_the_pttl_bounds_the_wait_and_the_deadline_ends_it() {
        let (registry, lock, _listening) = contended();
        let started = Instant::now();
        let forever = waiter(&registry, &lock, true, None);
        let bounded = waiter(&registry, &lock, true, Some(Duration::from_millis(100)));
        settle().await;
        assert_eq!(lock.attempts(), 3);
        assert!(matches!(bounded.await.expect("task"), Ok(None)));
        assert_eq!(started.elapsed(), Duration::from_millis(100));
        assert_eq!(lock.attempts(), 4, "a last try at the deadline");
        tokio::time::sleep_until(started + PTTL - Duration::from_millis(1)).await;
        assert_eq!(lock.attempts(), 4, "nothing before the PTTL ran out");
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(lock.attempts(), 5, "one retry when it did");
        forever.abort();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_woken_waiter_dropped_before_its_retry_passes_the_wake_up_on() {
        let (registry, lock, listening) = contended();
        // The first waiter's retries never complete, so a wake-up it takes is in flight when it
        // goes.
        let entered = Arc::new(AtomicU32::new(0));
        let stuck = spawn_wait(&registry, true, None, {
            let entered = entered.clone();
            move || {
                let entered = entered.clone();
                async move {
                    if entered.fetch_add(1, Ordering::AcqRel) == 0 {
                        Ok(Attempt::Busy(PTTL))
                    } else {
                        std::future::pending().await
                    }
                }
            }
        });
        settle().await;
        let other = waiter(&registry, &lock, true, None);
        settle().await;
        let parked = lock.attempts();
        registry.dispatch(CHANNEL, b"0");
        settle().await;
        assert_eq!(
            entered.load(Ordering::Acquire),
            2,
            "the stuck waiter was first in line"
        );
        assert_eq!(lock.attempts(), parked, "and the only one woken");
        stuck.abort();
        settle().await;
        assert_eq!(
            lock.attempts(),
            parked + 1,
            "its wake-up went to the other waiter"
        );
        other.abort();
        drop(listening);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_unconfirmed_subscription_degrades_to_polling_with_back_off() {
        let registry = Arc::new(Registry::new(Duration::from_millis(7500)));
        let lock = Arc::new(FakeLock::default());
        assert_eq!(lock.try_once(), Attempt::Acquired(()));
        let started = Instant::now();
        let task = waiter(&registry, &lock, true, None);
        tokio::time::sleep(Duration::from_millis(7500)).await;
        settle().await;
        assert_eq!(
            lock.attempts(),
            3,
            "first try, then once the confirmation wait ran out"
        );
        // Then polls after 25, 50, 100 ms.
        for (after, attempts) in [(25, 4), (75, 5), (175, 6)] {
            tokio::time::sleep_until(started + Duration::from_millis(7500 + after)).await;
            settle().await;
            assert_eq!(lock.attempts(), attempts, "{after} ms");
        }
        task.abort();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_kind_without_a_channel_polls_and_never_subscribes() {
        let registry = Arc::new(Registry::new(Duration::from_millis(7500)));
        let lock = Arc::new(FakeLock::default());
        assert_eq!(lock.try_once(), Attempt::Acquired(()));
        let task = waiter(&registry, &lock, false, None);
        settle().await;
        assert_eq!(lock.attempts(), 2);
        tokio::time::sleep(Duration::from_millis(25)).await;
        settle().await;
        assert_eq!(lock.attempts(), 3);
        lock.release();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(matches!(task.await.expect("task"), Ok(Some(()))));
        assert_eq!(lock.attempts(), 4);
        assert_eq!(registry.channel_count(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn each_attempt_is_counted_with_its_reason() {
        let registry = Arc::new(Registry::new(Duration::from_millis(7500)));
        let lock = Arc::new(FakeLock::default());
        assert_eq!(lock.try_once(), Attempt::Acquired(()));
        let telemetry = Telemetry::default();
        let acquisition = untraced(&telemetry);
        let waiting = Waiting {
            registry: &registry,
            channel: Some((ChannelName::Owned(CHANNEL.into()), WakeRule::OneOrAll)),
            deadline: None,
            hooks: &Polls(degraded),
            acquisition: &acquisition,
        };
        let try_lock = || {
            let lock = lock.clone();
            async move { Ok(lock.try_once()) }
        };
        let (acquired, ()) = tokio::join!(wait(waiting, try_lock), async {
            settle().await;
            assert_eq!(acquisition.path(), Some(Path::FirstTry));
            registry.confirm(&[CHANNEL.to_owned()]);
            settle().await;
            assert_eq!(acquisition.path(), Some(Path::Subscribed));
            lock.release();
            registry.dispatch(CHANNEL, b"0");
        });
        assert!(matches!(acquired, Ok(Some(()))));
        assert_eq!(acquisition.attempts(), 3);
        assert_eq!(acquisition.path(), Some(Path::Message));
    }
}
