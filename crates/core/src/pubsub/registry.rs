//! The local half of the subscriber: the channels this client wants, and what each waiter holds.
//!
//! [`Registry`] maps each channel to a [`Channel`] with a reference count (one per live
//! [`Subscription`]): it is the *desired* state, which the subscriber task (`task.rs`) makes the
//! server's. A channel's local end carries its [`WakeRule`] and [`Wakeups`], whether the server
//! confirmed it on the current connection, and the messages it had; [`Listening`] marks where a
//! live channel stood, so that a hold passed with no command can tell later whether anyone
//! published.

use std::borrow::Borrow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::tracker::{Desired, SubscriptionTracker};
use crate::telemetry::Subscriptions;
use crate::wake::{Armed, WakeRule, Wakeups};

/// The local end of one channel.
#[derive(Debug)]
pub(crate) struct Channel {
    /// The channel's name: the registry's key, and the subscriber's.
    name: Arc<str>,
    /// Local subscriptions (live [`Subscription`]s); changed under the registry's lock only.
    refs: AtomicUsize,
    /// What a message does, as the kind that first subscribed the channel says.
    rule: WakeRule,
    /// Whether a kind that needs every waiter woken ([`WakeRule::All`]) shares the channel with
    /// one whose rule is another (a group lock and a lock named after the group share the lock's
    /// channel, docs/protocol.md §8.9): then every message wakes everyone. A waiter woken for
    /// nothing tries once more; one left asleep would sleep out its bound.
    wakes_all: AtomicBool,
    /// The local waiters' wake-ups.
    wakeups: Wakeups,
    /// Whether the server has confirmed the subscription on the current connection.
    subscribed: AtomicBool,
    /// Messages received so far (what a yielding local queue waits to see move).
    messages: AtomicU64,
    /// Signalled on each of the channel's events: a confirmation (also of a channel already
    /// live), a message, a new live period, the end of one, and the server refusing subscriptions
    /// for good. What [`Subscription::confirmed`] and [`Listening::changed`] wait for: one
    /// notification for all of them (each waiter checks its own condition again when woken), as
    /// every channel keeps one.
    events: Notify,
    /// The registry-wide number of the live period the channel is in (see [`Mark`]).
    period: AtomicU64,
}

/// Where a live channel stood at one instant: its live period and how many messages it had had.
/// The same mark later means that the channel stayed subscribed all along and no message came:
/// nobody published on it in between, or the server would have delivered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    period: u64,
    messages: u64,
}

/// This client listening on a live channel since a mark, for as long as it is kept: what a hold
/// that may pass with no command keeps (see [`crate::cohort`]). Taken before a write, it tells
/// later whether anyone published on the channel since, an unlock of the lock included.
#[derive(Debug)]
pub(crate) struct Listening {
    subscription: Subscription,
    mark: Mark,
}

impl Listening {
    /// Whether the channel stayed live since the mark and carried no message.
    pub(crate) fn unchanged(&self) -> bool {
        self.subscription.mark() == Some(self.mark)
    }

    /// Listening on the same channel from the same mark, for another party (a streak's watch
    /// follows its first holder's listening): it keeps the channel subscribed too.
    pub(crate) fn follow(&self) -> Self {
        Self {
            subscription: self.subscription.registry.subscribe(
                self.subscription.channel.name.clone(),
                self.subscription.channel.rule,
            ),
            mark: self.mark,
        }
    }

    /// Completes once the channel is no longer [unchanged](Listening::unchanged): a message came,
    /// or it stopped being live or began a new live period (messages may have been missed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn changed(&self) {
        loop {
            let heard = self.subscription.channel.events.notified();
            tokio::pin!(heard);
            let _ = heard.as_mut().enable();
            if !self.unchanged() {
                return;
            }
            heard.await;
        }
    }

    /// Marks the channel as it stands now, once it is live: what was heard so far has been acted
    /// on.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits, and marks nothing if dropped.
    pub(crate) async fn mark_now(&mut self) {
        loop {
            if let Some(mark) = self.subscription.mark() {
                self.mark = mark;
                return;
            }
            self.subscription.confirmed().await;
        }
    }
}

impl Channel {
    /// A waiter whose messages wake as `rule` says joined the channel.
    fn joined_by(&self, rule: WakeRule) {
        if rule == WakeRule::All && self.rule != WakeRule::All {
            self.wakes_all.store(true, Ordering::Release);
        }
    }

    fn new(name: Arc<str>, rule: WakeRule) -> Self {
        Self {
            name,
            refs: AtomicUsize::new(0),
            rule,
            wakes_all: AtomicBool::new(false),
            wakeups: Wakeups::new(rule),
            subscribed: AtomicBool::new(false),
            messages: AtomicU64::new(0),
            events: Notify::new(),
            period: AtomicU64::new(0),
        }
    }
}

/// The wanted channels, each its own entry, found by its name ([`Channel::name`], kept once): a
/// word each, as every waiter on its own name has its channel.
type Channels = foldhash::HashSet<ByName>;

/// A channel as an entry of [`Channels`]: equal, hashed and looked up by its name.
#[derive(Debug)]
struct ByName(Arc<Channel>);

impl Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        &self.0.name
    }
}

impl std::hash::Hash for ByName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ByName {}

impl Desired<Arc<str>> for Channels {
    fn wanted(&self, channel: &str) -> Option<bool> {
        self.get(channel)
            .map(|entry| entry.0.subscribed.load(Ordering::Acquire))
    }

    fn every(&self) -> Vec<Arc<str>> {
        self.iter().map(|entry| entry.0.name.clone()).collect()
    }
}

/// The desired subscriptions and their local ends: what waiters see of the subscriber.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// The wanted channels. Hashed with foldhash, as every map a lock and unlock looks in (see
    /// [`crate::ledger::Ledger`]).
    channels: Mutex<Channels>,
    /// The channels wanted first or given up last since the connection task's last step, which
    /// looks at these only (see [`SubscriptionTracker::mark`]). Taken under `channels`' lock.
    changes: Mutex<Vec<Arc<str>>>,
    /// Wakes the connection task when the desired set changed.
    changed: Notify,
    /// How many channels are live (`subscribed`), as a metric.
    live: Subscriptions,
    /// Whether the server refuses subscriptions for good (an ACL, a proxy without pub/sub): then
    /// nothing is subscribed and every waiter polls.
    refused: AtomicBool,
    /// Live periods begun so far, of all channels: each confirmation of a subscription, and each
    /// interruption that may have lost messages, begins a new one, numbered from here.
    periods: AtomicU64,
    /// How long a new waiter waits for the server to confirm its subscription before it polls
    /// instead ([`Config::subscription_timeout`](crate::Config::subscription_timeout)).
    subscription_timeout: Duration,
}

impl Registry {
    /// An empty registry whose waiters wait `subscription_timeout` for a confirmation.
    pub(crate) fn new(subscription_timeout: Duration) -> Self {
        Self {
            subscription_timeout,
            ..Self::default()
        }
    }

    /// How long a new waiter waits for the server to confirm its subscription before it polls.
    pub(crate) fn subscription_timeout(&self) -> Duration {
        self.subscription_timeout
    }

    /// Registers interest in `channel`, whose messages wake as `rule` says. The subscription is
    /// sent in the background; see [`Subscription::confirmed`]. A new channel keeps the name it is
    /// given: a kind's shared name is kept once.
    pub(crate) fn subscribe<C>(self: &Arc<Self>, channel: C, rule: WakeRule) -> Subscription
    where
        C: AsRef<str> + Into<Arc<str>>,
    {
        let mut channels = self.channels.lock();
        let entry = match channels.get(channel.as_ref()) {
            Some(entry) => entry.0.clone(),
            None => {
                let local = Arc::new(Channel::new(channel.into(), rule));
                let _ = channels.insert(ByName(local.clone()));
                local
            }
        };
        entry.joined_by(rule);
        if entry.refs.fetch_add(1, Ordering::AcqRel) == 0 {
            self.record_change(&entry.name);
            self.changed.notify_one();
        }
        Subscription {
            registry: self.clone(),
            channel: entry,
        }
    }

    /// Joins `channel`, for a waiter whose messages wake as `rule` says, only if it is already
    /// subscribed and live (another local waiter listens on it): then joining costs no round trip.
    pub(crate) fn join_live(
        self: &Arc<Self>,
        channel: &str,
        rule: WakeRule,
    ) -> Option<Subscription> {
        let subscription = self.join_live_listening(channel)?;
        subscription.channel.joined_by(rule);
        Some(subscription)
    }

    /// [`Registry::join_live`] for a listener, which waits for no wake-up.
    fn join_live_listening(self: &Arc<Self>, channel: &str) -> Option<Subscription> {
        let channels = self.channels.lock();
        let entry = &channels.get(channel)?.0;
        if !entry.subscribed.load(Ordering::Acquire) {
            return None;
        }
        let _ = entry.refs.fetch_add(1, Ordering::AcqRel);
        Some(Subscription {
            registry: self.clone(),
            channel: entry.clone(),
        })
    }

    /// How many messages `channel` has received while subscribed (0 when it is not).
    pub(crate) fn messages(&self, channel: &str) -> u64 {
        self.channel(channel)
            .map_or(0, |c| c.messages.load(Ordering::Acquire))
    }

    /// Listens on `channel` from now on, if it is already live (another local waiter listens):
    /// joining costs no round trip, and [`Listening::unchanged`] tells later whether anything was
    /// published on it since.
    pub(crate) fn listen(self: &Arc<Self>, channel: &str) -> Option<Listening> {
        let subscription = self.join_live_listening(channel)?;
        let mark = subscription.mark()?;
        Some(Listening { subscription, mark })
    }

    /// `channel` begins a new live period: what was marked before may have missed messages.
    fn begin_period(&self, channel: &Channel) {
        let period = self.periods.fetch_add(1, Ordering::AcqRel) + 1;
        channel.period.store(period, Ordering::Release);
        channel.events.notify_waiters();
    }

    /// How many channels are subscribed (or being subscribed) right now.
    pub(crate) fn channel_count(&self) -> usize {
        self.channels.lock().len()
    }

    fn channel(&self, name: &str) -> Option<Arc<Channel>> {
        self.channels.lock().get(name).map(|entry| entry.0.clone())
    }

    /// Marks freshly subscribed channels live and wakes their waiters once: they may have missed a
    /// message while the subscription was being (re-)established.
    pub(crate) fn confirm<N: Borrow<str>>(&self, subscribed: &[N]) {
        let channels = self.channels.lock();
        for name in subscribed {
            if let Some(ByName(channel)) = channels.get(name.borrow()) {
                if !channel.subscribed.swap(true, Ordering::AcqRel) {
                    self.begin_period(channel);
                    self.live.live();
                }
                channel.events.notify_waiters();
                channel.wakeups.wake_all();
            }
        }
    }

    /// Delivers a message to the channel's local waiters, by the channel's wake rule.
    pub(crate) fn dispatch(&self, name: &str, payload: &[u8]) {
        let Some(channel) = self.channel(name) else {
            return;
        };
        let _ = channel.messages.fetch_add(1, Ordering::AcqRel);
        channel.events.notify_waiters();
        let rule = if channel.wakes_all.load(Ordering::Acquire) {
            WakeRule::All
        } else {
            channel.rule
        };
        if !rule.apply(payload, &channel.wakeups) {
            tracing::debug!(
                channel = name,
                "ignored a message its wake rule does not know"
            );
        }
    }

    /// One channel stopped being live: its waiters re-try now, then wait bounded by the PTTL.
    pub(super) fn lost(&self, name: &str) {
        if let Some(channel) = self.channel(name) {
            if channel.subscribed.swap(false, Ordering::AcqRel) {
                self.live.gone();
            }
            channel.events.notify_waiters();
            channel.wakeups.wake_all();
        }
    }

    /// Messages may have been missed: every waiter re-tries, and every channel begins a new period.
    pub(super) fn wake_all(&self) {
        for ByName(channel) in self.channels.lock().iter() {
            self.begin_period(channel);
            channel.wakeups.wake_all();
        }
    }

    /// Completes when the desired set changed: a channel was wanted first or given up last.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits (a change made meanwhile is not lost; the task diffs again).
    pub(super) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Whether a local waiter wants `channel`.
    pub(super) fn wants(&self, channel: &str) -> bool {
        self.channels.lock().contains(channel)
    }

    /// The next step of `server` towards the desired set (see [`SubscriptionTracker::next`]).
    /// Wanted channels that the server already has are confirmed here, under the same lock.
    pub(super) fn diff(&self, server: &mut SubscriptionTracker) -> Option<super::tracker::Batch> {
        let channels = self.channels.lock();
        server.mark(std::mem::take(&mut *self.changes.lock()));
        let diff = server.next(&*channels);
        for name in &diff.already_subscribed {
            if let Some(ByName(channel)) = channels.get(&**name)
                && !channel.subscribed.swap(true, Ordering::AcqRel)
            {
                self.live.live();
                channel.events.notify_waiters();
            }
        }
        diff.batch
    }

    /// Records that `channel` was wanted first or given up last, for the connection task's next
    /// step; nothing once the server refuses subscriptions for good, when no step comes to take it.
    fn record_change(&self, channel: &Arc<str>) {
        if !self.refused() {
            self.changes.lock().push(channel.clone());
        }
    }

    /// Whether the server refuses subscriptions: waiters poll instead of waiting for a
    /// confirmation.
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::Acquire)
    }

    /// The server refused a subscription for good: every waiter stops waiting for a confirmation
    /// and polls from now on.
    pub(super) fn refuse(&self) {
        self.refused.store(true, Ordering::Release);
        self.changes.lock().clear();
        for ByName(channel) in self.channels.lock().iter() {
            channel.events.notify_waiters();
            channel.wakeups.wake_all();
        }
    }

    /// Every channel stops being live; every waiter re-tries now and then waits bounded by the
    /// PTTL.
    pub(super) fn connection_lost(&self) {
        for ByName(channel) in self.channels.lock().iter() {
            if channel.subscribed.swap(false, Ordering::AcqRel) {
                self.live.gone();
            }
            channel.events.notify_waiters();
            channel.wakeups.wake_all();
        }
    }
}

/// One waiter's interest in a channel. Dropping it releases the interest; the last one
/// unsubscribes.
#[derive(Debug)]
pub(crate) struct Subscription {
    registry: Arc<Registry>,
    channel: Arc<Channel>,
}

impl Subscription {
    /// Arms this waiter for the channel's next wake-up. Arm before the retry it guards, so a
    /// message that arrives during the retry is banked instead of lost.
    pub(crate) fn arm(&self) -> Armed<'_> {
        self.channel.wakeups.arm()
    }

    /// Whether the server currently delivers this channel's messages to us.
    pub(crate) fn is_live(&self) -> bool {
        self.channel.subscribed.load(Ordering::Acquire)
    }

    /// Completes once the server has confirmed the subscription, or has refused subscriptions for
    /// good (then [`Subscription::is_live`] stays false).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn confirmed(&self) {
        loop {
            let confirmed = self.channel.events.notified();
            tokio::pin!(confirmed);
            let _ = confirmed.as_mut().enable();
            if self.is_live() || self.registry.refused() {
                return;
            }
            confirmed.await;
        }
    }

    /// How many messages the channel has received so far.
    pub(crate) fn messages(&self) -> u64 {
        self.channel.messages.load(Ordering::Acquire)
    }

    /// Where the channel stands now, if it is live.
    fn mark(&self) -> Option<Mark> {
        if !self.is_live() {
            return None;
        }
        Some(Mark {
            period: self.channel.period.load(Ordering::Acquire),
            messages: self.messages(),
        })
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let name = &*self.channel.name;
        let mut channels = self.registry.channels.lock();
        if self.channel.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(ByName(channel)) = channels.take(name)
                && channel.subscribed.load(Ordering::Acquire)
            {
                self.registry.live.gone();
            }
            self.registry.record_change(&self.channel.name);
            self.registry.changed.notify_one();
        }
    }
}
