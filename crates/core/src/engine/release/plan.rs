//! A release's decisions, as plain functions of what the client knows locally.
//!
//! [`super::release`] asks the local objects (the streak open on the key, the owner's record in
//! the ledger, the local queue), hands their answers to these functions, and carries out the plan
//! they return: a script on the wire, or nothing. The model check (`cohort/model.rs`) calls the
//! same functions with the same objects and carries the plan out against its abstract Redis, so
//! that what it explores is the engine's own choice at each branch, not a copy of it. Nothing here
//! awaits or sends.
//!
//! A release decides in three steps, each on what the step before it left:
//!
//! 1. [`way`]: through the streak of free hand-offs open on the key (Redis holds the streak root's
//!    field), not at all (the guard's record ended), or through the owner's own field.
//! 2. For the last hold of a kind that hands off, the local queue names who is next
//!    ([`crate::cohort::Cohorts::releasing`]), and a free hand-off is tried first.
//! 3. [`write()`]: once the hold has left its record, what the release sends. For a streak's last
//!    holder, [`streak_write`] instead: how the streak ends.

use std::sync::Arc;
use std::time::Duration;

use crate::cohort::{Claim, Next, Streak};
use crate::connection::Connection;
use crate::ledger::{Expiry, Ledger, Left};

/// Which way a release goes, before the local queue is asked.
#[derive(Debug)]
pub(crate) enum Way {
    /// Through the streak open on the key: while it lasts, Redis holds its root's field and only
    /// the lent holder holds ([`Streak::release`] says what this release did to it).
    Streak(Arc<Streak>),
    /// The guard's record ended (lost, or replaced by a hold created afresh): what it counted on is
    /// gone, and a later hold of the owner must not lose a count to it. `NotOwner`, nothing sent.
    Stale,
    /// Through the owner's own field in Redis; `last` when this is its record's last hold (the
    /// local queue is asked who is next).
    Own { last: bool },
}

/// The way a release of `member` (a guard's hold; `None`: any of the owner's) by `field` of
/// `scope` goes, `streak` being the streak open on the key, if any.
///
/// During a streak, an owner whose acquire passed the streak's gate before the streak opened and
/// ran once the streak's end had unlocked the root's field holds its own field in Redis
/// ([`Ledger::holds_in_redis`]): it releases it there.
pub(crate) fn way(
    streak: Option<Arc<Streak>>,
    ledger: &Ledger,
    scope: &str,
    field: &str,
    member: Option<&Expiry>,
) -> Way {
    match streak {
        Some(streak) if !ledger.holds_in_redis(scope, field) => Way::Streak(streak),
        _ if ledger.is_stale(scope, field, member) => Way::Stale,
        _ => Way::Own {
            last: ledger.count(scope, field) <= 1,
        },
    }
}

/// What a release through the owner's own field sends.
#[derive(Debug)]
pub(crate) enum Write {
    /// Nothing: nothing of this release's is left in Redis (`NotOwner`).
    Nothing,
    /// The kind's unlock of the owner's field. `others`: members of the record remain, and an
    /// unlock that finds no field loses them (a delete that nobody heard). `frees_queue`: the
    /// owner's record ends with it, and the key's local queue, which this release did not ask (a
    /// kind that does not hand off) but which may count the owner as its holder (it took the lock
    /// through another kind), lets its head try once the unlock is done.
    Unlock { others: bool, frees_queue: bool },
    /// The hand-off script, from the owner's field to the claimed waiter.
    Pass(Claim),
    /// The unlock, for real: the local queue is told once it is done, its head held back a while
    /// when `yielding` (see [`Next::Release`]).
    UnlockForReal { yielding: bool },
}

/// A release's plan: what it sends, with which lease and on which connection.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) write: Write,
    /// The lease the script gives the key should holds remain.
    pub(crate) lease: Duration,
    pub(crate) conn: Option<Connection>,
}

/// What a release through the owner's own field sends, given who the queue said is next
/// (`next`; `None` when it was not asked: not the last hold, or a kind that does not hand off, or
/// a free hand-off declined and given back as [`Next::HandOff`]), what the hold's leaving its
/// record left, and whether a streak is open on the key now. `unknown_lease` is the lease for a
/// hold this client has no record of (the watchdog timeout).
///
/// A claim not carried out is given back (the claimed waiter goes on waiting).
pub(crate) fn write(
    next: Option<Next>,
    left: Left,
    streak_open: bool,
    unknown_lease: Duration,
) -> Plan {
    let ended = matches!(left, Left::Last { .. });
    let (lease, conn, others) = match left {
        Left::Stale => return Plan::nothing(next),
        // Another release of this owner lent its last hold meanwhile (a misuse: two releases of
        // one hold at once): nothing of this owner's is left in Redis to release.
        Left::Unknown if streak_open => return Plan::nothing(next),
        Left::Unknown => (unknown_lease, None, false),
        Left::Partially { lease, conn } => (lease, conn, true),
        Left::Last { lease, conn } => (lease, conn, false),
    };
    let write = match next {
        None => Write::Unlock {
            others,
            frees_queue: ended,
        },
        Some(Next::HandOff(claim)) => Write::Pass(claim),
        Some(Next::Release { yielding }) => Write::UnlockForReal { yielding },
        // Another release of this owner claimed the head. Either it is passing the lock by
        // script, its other future's last hold, which this one's re-entry, sent meanwhile, made a
        // count of 2 in Redis; or it is a second release of this one hold (a misuse) that took
        // the claim, and this one took the hold from the record before it: that one then finds
        // nothing of its own left and sends nothing. Either way this hold is released through
        // Redis as any other (a hand-off script then finds the field held once, or twice and
        // unlocks instead), and the queue is told, as after any unlock for real: a head whose
        // claim fails must not wait for a holder that is gone.
        Some(Next::AlreadyPassing) => Write::UnlockForReal { yielding: false },
    };
    Plan { write, lease, conn }
}

impl Plan {
    fn nothing(next: Option<Next>) -> Self {
        if let Some(Next::HandOff(claim)) = next {
            claim.failed();
        }
        Self {
            write: Write::Nothing,
            lease: Duration::ZERO,
            conn: None,
        }
    }
}

/// How a streak ends in Redis once its holder released its last hold and no free hand-off was
/// made.
#[derive(Debug)]
pub(crate) enum StreakWrite {
    /// The hand-off script, from the root's field to the claimed waiter.
    Pass(Claim),
    /// The unlock of the root's field, for real (see [`Write::UnlockForReal`]).
    UnlockForReal { yielding: bool },
}

/// What a streak's last release does instead of a free hand-off that the claimed waiter was
/// declined: a script cannot pass the root's own field to the root (which waits again, for a
/// fixed lease say), so the streak ends with a real release, and the root tries as usual.
pub(crate) fn declined(claim: Claim, root: &str) -> Next {
    if claim.field() == root {
        claim.failed();
        Next::Release { yielding: false }
    } else {
        Next::HandOff(claim)
    }
}

/// How the streak ends, given who is next and whether this release began its end
/// ([`Streak::ending`]). `None` when its loss began it first: its watch unlocks the root's field,
/// the release sends nothing (`NotOwner`), and the local queue is told.
pub(crate) fn streak_write(next: Next, began_ending: bool) -> Option<StreakWrite> {
    match next {
        next if !began_ending => {
            if let Next::HandOff(claim) = next {
                claim.failed();
            }
            None
        }
        Next::HandOff(claim) => Some(StreakWrite::Pass(claim)),
        // No other release of the holder can be passing the lock on: the streak says who holds.
        Next::Release { yielding } => Some(StreakWrite::UnlockForReal { yielding }),
        Next::AlreadyPassing => Some(StreakWrite::UnlockForReal { yielding: false }),
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::cohort::Cohorts;
    use crate::cohort::fixtures::{KEY, KIND, LEASE, LIMIT, WINDOW};

    /// Cohorts where `holder` holds the lock and `waiter` waits in its queue.
    fn queue(holder: &str, waiter: &str) -> (Cohorts, crate::cohort::Ticket) {
        let cohorts = Cohorts::default();
        let expiry = Expiry::watchdog(CancellationToken::new());
        cohorts.held(KEY, holder, expiry, None);
        let ticket = cohorts.join(KEY, KIND, waiter, LEASE, true);
        (cohorts, ticket)
    }

    fn next(cohorts: &Cohorts, holder: &str) -> Next {
        cohorts.releasing(KEY, KIND, holder, LIMIT, WINDOW)
    }

    fn last() -> Left {
        Left::Last {
            lease: LEASE,
            conn: None,
        }
    }

    #[test]
    fn a_last_hold_of_a_free_lock_is_unlocked_and_ends_the_record() {
        let plan = write(None, last(), false, LEASE);
        assert!(matches!(
            plan.write,
            Write::Unlock {
                others: false,
                frees_queue: true
            }
        ));
        assert_eq!(plan.lease, LEASE);
    }

    #[test]
    fn an_inner_hold_keeps_the_longest_lease_left_and_the_record() {
        let left = Left::Partially {
            lease: Duration::from_millis(250),
            conn: None,
        };
        let plan = write(None, left, false, LEASE);
        assert!(matches!(
            plan.write,
            Write::Unlock {
                others: true,
                frees_queue: false
            }
        ));
        assert_eq!(plan.lease, Duration::from_millis(250));
    }

    #[test]
    fn a_hold_of_no_record_is_unlocked_under_the_watchdog_lease() {
        let plan = write(None, Left::Unknown, false, LEASE);
        assert!(matches!(
            plan.write,
            Write::Unlock {
                others: false,
                frees_queue: false
            }
        ));
        assert_eq!(plan.lease, LEASE);
    }

    #[test]
    fn a_claimed_head_is_passed_the_lock() {
        let (cohorts, _ticket) = queue("h", "a");
        let plan = write(Some(next(&cohorts, "h")), last(), false, LEASE);
        let Write::Pass(claim) = plan.write else {
            panic!("expected a pass, got {:?}", plan.write);
        };
        assert_eq!(claim.field(), "a");
    }

    /// A release that finds its hold already gone (a stale guard, or lent meanwhile by another
    /// release of the owner) sends nothing, and the head it claimed waits again: the next release
    /// can claim it.
    #[test]
    fn nothing_is_sent_for_a_hold_gone_and_the_claim_is_given_back() {
        for (left, streak_open) in [(Left::Stale, false), (Left::Unknown, true)] {
            let (cohorts, _ticket) = queue("h", "a");
            let plan = write(Some(next(&cohorts, "h")), left, streak_open, LEASE);
            assert!(matches!(plan.write, Write::Nothing));
            assert!(matches!(next(&cohorts, "h"), Next::HandOff(_)));
        }
    }

    /// The CI failure of issue 46: two releases of one hold at once; the second one asks the
    /// queue while the first holds the claim, and takes the hold from the record before it. It
    /// unlocks for real, so the queue is told, and the head does not wait for a holder that is
    /// gone once the first one's claim fails.
    #[test]
    fn a_release_beside_another_claiming_the_head_unlocks_for_real() {
        let (cohorts, _ticket) = queue("h", "a");
        let claim = next(&cohorts, "h");
        assert!(matches!(claim, Next::HandOff(_)));
        let plan = write(Some(next(&cohorts, "h")), last(), false, LEASE);
        assert!(matches!(
            plan.write,
            Write::UnlockForReal { yielding: false }
        ));
    }

    #[test]
    fn a_release_over_the_bound_unlocks_for_real_and_yields() {
        let plan = write(Some(Next::Release { yielding: true }), last(), false, LEASE);
        assert!(matches!(
            plan.write,
            Write::UnlockForReal { yielding: true }
        ));
    }

    #[test]
    fn a_streak_lost_meanwhile_sends_nothing_and_gives_the_claim_back() {
        let (cohorts, _ticket) = queue("h", "a");
        assert!(streak_write(next(&cohorts, "h"), false).is_none());
        assert!(matches!(next(&cohorts, "h"), Next::HandOff(_)));
    }

    #[test]
    fn a_streak_ends_by_passing_the_root_field_or_unlocking_it() {
        let (cohorts, _ticket) = queue("h", "a");
        assert!(matches!(
            streak_write(next(&cohorts, "h"), true),
            Some(StreakWrite::Pass(claim)) if claim.field() == "a"
        ));
        assert!(matches!(
            streak_write(Next::Release { yielding: true }, true),
            Some(StreakWrite::UnlockForReal { yielding: true })
        ));
        assert!(matches!(
            streak_write(Next::AlreadyPassing, true),
            Some(StreakWrite::UnlockForReal { yielding: false })
        ));
    }

    /// A script cannot pass the root's own field to the root: the streak is unlocked instead, and
    /// the root, waiting again, tries as usual; anyone else is passed the lock by script.
    #[test]
    fn a_declined_lend_to_the_root_becomes_a_release() {
        let (cohorts, _ticket) = queue("h", "root");
        let Next::HandOff(claim) = next(&cohorts, "h") else {
            panic!("expected a claim");
        };
        assert!(matches!(
            declined(claim, "root"),
            Next::Release { yielding: false }
        ));
        assert!(
            matches!(next(&cohorts, "h"), Next::HandOff(_)),
            "given back"
        );
        let Next::HandOff(claim) = next(&cohorts, "h") else {
            panic!("expected a claim");
        };
        assert!(matches!(declined(claim, "other"), Next::HandOff(_)));
    }

    #[test]
    fn a_release_goes_through_the_open_streak_unless_its_guard_is_stale() {
        let (cohorts, ledger) = (Cohorts::default(), Ledger::new(false));
        let stale = Expiry::watchdog(CancellationToken::new()).in_record(7);
        assert!(matches!(
            way(None, &ledger, KEY, "h", None),
            Way::Own { last: true }
        ));
        assert!(matches!(
            way(None, &ledger, KEY, "h", Some(&stale)),
            Way::Stale
        ));
        let streak = cohorts
            .open_streak(KEY, "root", 1, &CancellationToken::new(), Instant::now())
            .expect("no streak open yet");
        assert!(matches!(
            way(Some(streak), &ledger, KEY, "h", None),
            Way::Streak(_)
        ));
    }
}
