//! An acquisition's decisions about a streak of free hand-offs open on its key, as plain functions
//! of the local objects (the streak, the owner's record in the ledger).
//!
//! While a streak is open, Redis holds the streak root's field, not the local holder's: Redis would
//! answer an acquisition wrongly (the root's re-entry would be counted on a hold that is lent; the
//! lent holder would find the key busy). So an acquisition asks the streak first ([`in_streak`]),
//! and an attempt that is about to go to Redis waits instead while the streak lasts ([`gated`]).
//! The engine (`engine/acquire.rs`) carries the answers out; the model check (`cohort/model.rs`)
//! runs the same functions.

use crate::cohort::Cohorts;
use crate::ledger::{Expiry, Ledger};

/// What an acquisition does about the streak open on its key, before anything else.
#[derive(Debug)]
pub(crate) enum InStreak<T> {
    /// No streak, or one whose holder this is not, and the acquisition is prepared to wait: it
    /// goes on (and its attempts wait in [`gated`] until the streak is over).
    GoesOn,
    /// The lent holder re-entered its hold, counted here: what the re-entry yields, and the
    /// streak's lease (a fixed one asked for included), in the holder's lent record.
    Reentered(T, Expiry),
    /// The lent holder, through a kind that refuses re-entry or whose re-entry must write.
    Refused,
    /// Anyone else's one-shot try: the lock is held.
    Busy,
}

/// What an acquisition by `field` of `scope` does about the streak open on it, if any:
/// `reentry` gives what a local re-entry of the kind yields (`None` where it refuses re-entry or
/// its re-entry must write), asked only of the lent holder; `one_try` for a try that does not
/// wait.
pub(crate) fn in_streak<T>(
    cohorts: &Cohorts,
    ledger: &Ledger,
    scope: &str,
    field: &str,
    reentry: impl FnOnce() -> Option<T>,
    one_try: bool,
) -> InStreak<T> {
    let Some(streak) = cohorts.streak_on(scope) else {
        return InStreak::GoesOn;
    };
    if streak.is_held_by(field) {
        let Some(token) = reentry() else {
            return InStreak::Refused;
        };
        let expiry = streak.expiry();
        let mut record = 0;
        if streak.reenter(field, || record = ledger.lend(scope, field, expiry.token())) {
            return InStreak::Reentered(token, expiry.in_record(record));
        }
    }
    if one_try {
        InStreak::Busy
    } else {
        InStreak::GoesOn
    }
}

/// Whether an attempt by `field` on `scope` must wait instead of going to Redis: a streak is open
/// on it and `field` does not hold its lent hold.
pub(crate) fn gated(cohorts: &Cohorts, scope: &str, field: &str) -> bool {
    cohorts
        .streak_on(scope)
        .is_some_and(|streak| !streak.is_held_by(field))
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::cohort::fixtures::{KEY, KIND, LEASE, LIMIT, WINDOW};
    use crate::cohort::{Cohorts, Next, Ticket};

    /// Cohorts with a streak open on the key, its hold lent by `root` to `holder` (whose ticket
    /// comes with them: dropped, it would give the lent hold back).
    fn lent(root: &str, holder: &str) -> (Cohorts, Ticket) {
        let cohorts = Cohorts::default();
        let expiry = Expiry::watchdog(CancellationToken::new());
        cohorts.held(KEY, root, expiry, None);
        let ticket = cohorts.join(KEY, KIND, holder, LEASE, true);
        let streak = cohorts
            .open_streak(KEY, root, 1, &CancellationToken::new(), Instant::now())
            .expect("no streak open yet");
        let Next::HandOff(claim) = cohorts.releasing(KEY, KIND, root, LIMIT, WINDOW) else {
            panic!("expected a claim");
        };
        assert!(streak.lend_to(holder));
        assert!(claim.lend(&streak), "the holder's acquisition is there");
        (cohorts, ticket)
    }

    #[test]
    fn without_a_streak_every_acquisition_goes_to_redis() {
        let (cohorts, ledger) = (Cohorts::default(), Ledger::new(false));
        let answer = in_streak(&cohorts, &ledger, KEY, "a", || Some(()), true);
        assert!(matches!(answer, InStreak::GoesOn));
        assert!(!gated(&cohorts, KEY, "a"));
    }

    #[test]
    fn the_lent_holder_re_enters_in_the_streak_and_is_counted_there() {
        let ((cohorts, _holder), ledger) = (lent("root", "b"), Ledger::new(false));
        let answer = in_streak(&cohorts, &ledger, KEY, "b", || Some(7), false);
        let InStreak::Reentered(7, expiry) = answer else {
            panic!("expected a local re-entry, got {answer:?}");
        };
        assert_eq!(ledger.count(KEY, "b"), 1, "counted in its lent record");
        assert!(!ledger.holds_in_redis(KEY, "b"), "a lent record");
        assert!(!expiry.is_lost());
        assert!(!gated(&cohorts, KEY, "b"), "its attempts go to Redis");
    }

    #[test]
    fn the_lent_holder_through_a_kind_that_refuses_re_entry_is_refused() {
        let ((cohorts, _holder), ledger) = (lent("root", "b"), Ledger::new(false));
        let answer = in_streak(&cohorts, &ledger, KEY, "b", || None::<()>, false);
        assert!(matches!(answer, InStreak::Refused));
        assert_eq!(ledger.count(KEY, "b"), 0);
    }

    /// The root's own field is in Redis, but its hold is lent: its re-entry there would count on
    /// a hold it no longer has. It waits, and its one-shot try fails.
    #[test]
    fn anyone_else_the_root_included_waits_for_the_streak_or_fails_a_try() {
        let ((cohorts, _holder), ledger) = (lent("root", "b"), Ledger::new(false));
        for field in ["root", "c"] {
            let reentry_asked = std::cell::Cell::new(false);
            let reentry = || {
                reentry_asked.set(true);
                Some(())
            };
            let answer = in_streak(&cohorts, &ledger, KEY, field, reentry, true);
            assert!(matches!(answer, InStreak::Busy), "{field}");
            assert!(!reentry_asked.get(), "only the lent holder is asked");
            let answer = in_streak(&cohorts, &ledger, KEY, field, || Some(()), false);
            assert!(matches!(answer, InStreak::GoesOn), "{field}");
            assert!(gated(&cohorts, KEY, field), "{field}");
        }
    }
}
