//! The subscription diff: what the server is subscribed to on one connection, against what the
//! registry wants, as plain data.
//!
//! The subscriber task brings the server's subscriptions to the desired set one batch at a time:
//! first it unsubscribes what nobody wants any more, then it subscribes what is missing, and a
//! channel the server has while its local end is not live yet (it was given up and wanted again
//! before its unsubscribe was sent) is confirmed without a round trip. A channel the server drops by
//! itself (a sharded channel whose slot moved) is subscribed again, unless it is part of the batch
//! on the wire, whose reply is still to come. Nothing here talks to Redis or knows the registry's
//! types, so the unit tests below check every step on maps of names.
//!
//! A step costs what changed, not what is wanted: it looks only at the channels marked since the
//! last step ([`SubscriptionTracker::mark`]: wanted first, given up last, dropped by the server),
//! and at every wanted channel once, on a new connection. A hundred thousand waiters that each
//! subscribe and later give up their channel cost a hundred thousand looks, not one pass over the
//! registry per batch.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// A channel's name as the tracker keeps it: the registry's `Arc<str>` (shared with the channel's
/// local end, so that a subscribed channel's name is kept once), plain `String`s in the tests.
pub(super) trait Name: Clone + Eq + Hash + Borrow<str> + for<'a> From<&'a str> {}

impl<N: Clone + Eq + Hash + Borrow<str> + for<'a> From<&'a str>> Name for N {}

/// What the server is subscribed to on the current connection (or being asked for by the batch on
/// the wire), and that batch's channels. A new connection starts from the default: nothing.
#[derive(Debug)]
pub(super) struct SubscriptionTracker<N = Arc<str>> {
    server: HashSet<N>,
    in_flight: Vec<N>,
    /// Channels whose wanted state may differ from the server's: the next step looks at them.
    pending: HashSet<N>,
    /// Whether the next step looks at every wanted channel: a new connection has none of them.
    fresh: bool,
}

impl<N> Default for SubscriptionTracker<N> {
    fn default() -> Self {
        Self {
            server: HashSet::new(),
            in_flight: Vec::new(),
            pending: HashSet::new(),
            fresh: true,
        }
    }
}

/// The next step towards the desired set.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Diff<N = Arc<str>> {
    /// Wanted channels that the server already has while their local end is not live: confirm them
    /// now, nothing is sent for them.
    pub(super) already_subscribed: Vec<N>,
    /// The batch to send, if the server differs from the desired set.
    pub(super) batch: Option<Batch<N>>,
}

/// One `SUBSCRIBE` or `UNSUBSCRIBE` batch.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Batch<N = Arc<str>> {
    /// Channels nobody wants any more; sent before any subscribe.
    Unsubscribe(Vec<N>),
    /// Channels wanted and missing.
    Subscribe(Vec<N>),
}

/// The desired set, as a step sees it.
pub(super) trait Desired<N> {
    /// `Some` when `channel` is wanted: whether its local end is live (confirmed).
    fn wanted(&self, channel: &str) -> Option<bool>;

    /// Every wanted channel.
    fn every(&self) -> Vec<N>;
}

impl<N: Name> SubscriptionTracker<N> {
    /// The next step from the server's subscriptions to `desired`. The batch it returns counts as
    /// sent: call [`SubscriptionTracker::batch_done`] when its reply comes, before the next step.
    ///
    /// Only the channels [marked](SubscriptionTracker::mark) since the last step are looked at
    /// (every wanted one on a new connection); those a batch leaves for later stay marked.
    pub(super) fn next(&mut self, desired: &impl Desired<N>) -> Diff<N> {
        if std::mem::take(&mut self.fresh) {
            self.pending.extend(desired.every());
        }
        let mut already_subscribed = Vec::new();
        let mut missing = Vec::new();
        let mut stale = Vec::new();
        for name in self.pending.drain() {
            let key: &str = name.borrow();
            match (desired.wanted(key), self.server.contains(key)) {
                (Some(_), false) => missing.push(name),
                (Some(false), true) => already_subscribed.push(name),
                (None, true) => stale.push(name),
                // In step with the server.
                (Some(_), true) | (None, false) => {}
            }
        }
        let batch = if !stale.is_empty() {
            for name in &stale {
                let _ = self.server.remove::<str>(name.borrow());
            }
            // Unsubscribes go first: the missing ones wait for the next step.
            self.pending.extend(missing);
            Some(Batch::Unsubscribe(stale))
        } else if missing.is_empty() {
            None
        } else {
            self.server.extend(missing.iter().cloned());
            self.in_flight.clone_from(&missing);
            Some(Batch::Subscribe(missing))
        };
        Diff {
            already_subscribed,
            batch,
        }
    }

    /// Channels whose wanted state changed: wanted first, or given up last. The next step looks at
    /// them.
    pub(super) fn mark(&mut self, channels: impl IntoIterator<Item = N>) {
        self.pending.extend(channels);
    }

    /// The batch on the wire was answered: the channels it subscribed, to confirm.
    pub(super) fn batch_done(&mut self) -> Vec<N> {
        std::mem::take(&mut self.in_flight)
    }

    /// The server dropped `channel` by itself (or acknowledged an unsubscribe). Returns whether
    /// that lost a subscription somebody relies on: `channel` is `wanted` and not part of the batch
    /// on the wire. Then the server no longer has it, and the next step subscribes it again.
    pub(super) fn dropped(&mut self, channel: &str, wanted: bool) -> bool {
        if !wanted || self.in_flight.iter().any(|name| name.borrow() == channel) {
            return false;
        }
        let _ = self.server.remove(channel);
        let _ = self.pending.insert(N::from(channel));
        true
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    impl Desired<String> for HashMap<String, bool> {
        fn wanted(&self, channel: &str) -> Option<bool> {
            self.get(channel).copied()
        }

        fn every(&self) -> Vec<String> {
            self.keys().cloned().collect()
        }
    }

    /// The desired set: channel → whether its local end is live.
    fn desired(channels: &[(&str, bool)]) -> HashMap<String, bool> {
        channels
            .iter()
            .map(|&(name, live)| (name.to_owned(), live))
            .collect()
    }

    /// One step after every channel of `channels`, and every one the server has, changed.
    fn step(tracker: &mut SubscriptionTracker<String>, channels: &[(&str, bool)]) -> Diff<String> {
        let server: Vec<String> = tracker.server.iter().cloned().collect();
        tracker.mark(server);
        tracker.mark(channels.iter().map(|(name, _)| (*name).to_owned()));
        sorted(tracker.next(&desired(channels)))
    }

    /// `diff` with its channel lists sorted (a step finds them in hash order).
    fn sorted(mut diff: Diff<String>) -> Diff<String> {
        diff.already_subscribed.sort();
        if let Some(Batch::Subscribe(names) | Batch::Unsubscribe(names)) = &mut diff.batch {
            names.sort();
        }
        diff
    }

    fn subscribe(names: &[&str]) -> Diff<String> {
        batch(Batch::Subscribe(
            names.iter().map(|n| (*n).to_owned()).collect(),
        ))
    }

    fn batch(batch: Batch<String>) -> Diff<String> {
        Diff {
            already_subscribed: Vec::new(),
            batch: Some(batch),
        }
    }

    const IN_SYNC: Diff<String> = Diff {
        already_subscribed: Vec::new(),
        batch: None,
    };

    #[test]
    fn a_new_connection_subscribes_every_wanted_channel_in_one_batch() {
        let mut tracker = SubscriptionTracker::default();
        assert_eq!(
            step(&mut tracker, &[("a", false), ("b", false)]),
            subscribe(&["a", "b"])
        );
        let mut done = tracker.batch_done();
        done.sort();
        assert_eq!(done, ["a", "b"]);
        assert_eq!(step(&mut tracker, &[("a", true), ("b", true)]), IN_SYNC);
    }

    #[test]
    fn channels_nobody_wants_are_unsubscribed_before_new_ones_are_subscribed() {
        let mut tracker = SubscriptionTracker::default();
        let _ = step(&mut tracker, &[("a", false), ("b", false)]);
        let _ = tracker.batch_done();
        assert_eq!(
            step(&mut tracker, &[("b", true), ("c", false)]),
            batch(Batch::Unsubscribe(vec!["a".to_owned()]))
        );
        // An unsubscribe confirms nothing.
        assert!(tracker.batch_done().is_empty());
        assert_eq!(
            step(&mut tracker, &[("b", true), ("c", false)]),
            subscribe(&["c"])
        );
        assert_eq!(tracker.batch_done(), ["c"]);
        assert_eq!(step(&mut tracker, &[("b", true), ("c", true)]), IN_SYNC);
    }

    #[test]
    fn a_channel_wanted_again_before_its_unsubscribe_is_confirmed_without_a_round_trip() {
        let mut tracker = SubscriptionTracker::default();
        let _ = step(&mut tracker, &[("a", false)]);
        let _ = tracker.batch_done();
        // Its last subscription was dropped and a new one taken: the local end is new, not live,
        // and the server never stopped sending.
        assert_eq!(
            step(&mut tracker, &[("a", false)]),
            Diff {
                already_subscribed: vec!["a".to_owned()],
                batch: None,
            }
        );
        assert_eq!(step(&mut tracker, &[("a", true)]), IN_SYNC);
    }

    #[test]
    fn a_wanted_channel_the_server_dropped_is_subscribed_again() {
        let mut tracker = SubscriptionTracker::default();
        let _ = step(&mut tracker, &[("a", false), ("b", false)]);
        let _ = tracker.batch_done();
        assert!(tracker.dropped("a", true));
        assert_eq!(
            step(&mut tracker, &[("a", false), ("b", true)]),
            subscribe(&["a"])
        );
    }

    #[test]
    fn a_drop_of_the_batch_on_the_wire_or_of_an_unwanted_channel_loses_nothing() {
        let mut tracker = SubscriptionTracker::default();
        let _ = step(&mut tracker, &[("a", false)]);
        // The batch subscribing `a` has no reply yet: an unsubscribe push for `a` is older.
        assert!(!tracker.dropped("a", true));
        assert_eq!(tracker.batch_done(), ["a"]);
        // `z` is nobody's (the acknowledgement of our own unsubscribe).
        assert!(!tracker.dropped("z", false));
        assert_eq!(step(&mut tracker, &[("a", true)]), IN_SYNC);
    }

    #[test]
    fn a_dropped_channel_nobody_wants_any_more_is_not_unsubscribed_again() {
        let mut tracker = SubscriptionTracker::default();
        let _ = step(&mut tracker, &[("a", false)]);
        let _ = tracker.batch_done();
        assert!(tracker.dropped("a", true));
        assert_eq!(step(&mut tracker, &[]), IN_SYNC);
    }

    #[test]
    fn a_step_looks_only_at_what_changed_after_the_first() {
        let mut tracker = SubscriptionTracker::default();
        // A new connection: every wanted channel, marked or not.
        assert_eq!(
            sorted(tracker.next(&desired(&[("a", false), ("b", false)]))),
            subscribe(&["a", "b"])
        );
        let _ = tracker.batch_done();
        // `x` is wanted but was never marked: not looked at (a waiter's subscribe marks it).
        let wanted = desired(&[("a", true), ("b", true), ("x", false)]);
        assert_eq!(tracker.next(&wanted), IN_SYNC);
        tracker.mark(["x".to_owned()]);
        assert_eq!(tracker.next(&wanted), subscribe(&["x"]));
        let _ = tracker.batch_done();
        // `a` given up and `c` wanted: the unsubscribe first, `c` stays marked for the next step.
        tracker.mark(["a".to_owned(), "c".to_owned()]);
        let wanted = desired(&[("b", true), ("x", true), ("c", false)]);
        assert_eq!(
            tracker.next(&wanted),
            batch(Batch::Unsubscribe(vec!["a".to_owned()]))
        );
        assert_eq!(tracker.next(&wanted), subscribe(&["c"]));
    }
}
