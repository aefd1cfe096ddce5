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

use std::collections::HashSet;
use std::hash::BuildHasher;

/// What the server is subscribed to on the current connection (or being asked for by the batch on
/// the wire), and that batch's channels. A new connection starts from the default: nothing.
#[derive(Debug, Default)]
pub(super) struct SubscriptionTracker {
    server: HashSet<String>,
    in_flight: Vec<String>,
}

/// The next step towards the desired set.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Diff {
    /// Wanted channels that the server already has while their local end is not live: confirm them
    /// now, nothing is sent for them.
    pub(super) already_subscribed: Vec<String>,
    /// The batch to send, if the server differs from the desired set.
    pub(super) batch: Option<Batch>,
}

/// One `SUBSCRIBE` or `UNSUBSCRIBE` batch.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Batch {
    /// Channels nobody wants any more; sent before any subscribe.
    Unsubscribe(Vec<String>),
    /// Channels wanted and missing.
    Subscribe(Vec<String>),
}

impl SubscriptionTracker {
    /// The next step from the server's subscriptions to `desired` (wanted channels, each with its
    /// local end), where `live` says whether a local end is confirmed. The batch it returns counts
    /// as sent: call [`SubscriptionTracker::batch_done`] when its reply comes, before the next step.
    pub(super) fn next<V, S: BuildHasher>(
        &mut self,
        desired: &std::collections::HashMap<String, V, S>,
        live: impl Fn(&V) -> bool,
    ) -> Diff {
        let mut already_subscribed = Vec::new();
        let mut missing = Vec::new();
        for (name, local) in desired {
            if !self.server.contains(name) {
                missing.push(name.clone());
            } else if !live(local) {
                already_subscribed.push(name.clone());
            }
        }
        let stale: Vec<String> = self
            .server
            .iter()
            .filter(|name| !desired.contains_key(*name))
            .cloned()
            .collect();
        let batch = if !stale.is_empty() {
            for name in &stale {
                let _ = self.server.remove(name);
            }
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

    /// The batch on the wire was answered: the channels it subscribed, to confirm.
    pub(super) fn batch_done(&mut self) -> Vec<String> {
        std::mem::take(&mut self.in_flight)
    }

    /// The server dropped `channel` by itself (or acknowledged an unsubscribe). Returns whether
    /// that lost a subscription somebody relies on: `channel` is `wanted` and not part of the batch
    /// on the wire. Then the server no longer has it, and the next step subscribes it again.
    pub(super) fn dropped(&mut self, channel: &str, wanted: bool) -> bool {
        if !wanted || self.in_flight.iter().any(|name| name == channel) {
            return false;
        }
        let _ = self.server.remove(channel);
        true
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The desired set: channel → whether its local end is live.
    fn desired(channels: &[(&str, bool)]) -> HashMap<String, bool> {
        channels
            .iter()
            .map(|&(name, live)| (name.to_owned(), live))
            .collect()
    }

    fn step(tracker: &mut SubscriptionTracker, channels: &[(&str, bool)]) -> Diff {
        let mut diff = tracker.next(&desired(channels), |live| *live);
        diff.already_subscribed.sort();
        if let Some(Batch::Subscribe(names) | Batch::Unsubscribe(names)) = &mut diff.batch {
            names.sort();
        }
        diff
    }

    fn subscribe(names: &[&str]) -> Diff {
        batch(Batch::Subscribe(
            names.iter().map(|n| (*n).to_owned()).collect(),
        ))
    }

    fn batch(batch: Batch) -> Diff {
        Diff {
            already_subscribed: Vec::new(),
            batch: Some(batch),
        }
    }

    const IN_SYNC: Diff = Diff {
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
}
