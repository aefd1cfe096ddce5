//! Fault injection under the history checker (`rlock_tests::history`).
//!
//! Each scenario runs `rlock-torture` worker processes contending for a few locks on a private Redis,
//! injects one kind of fault (on loopback only), then checks every worker's history: no overlap
//! outside signalled lease loss, every attempt completed, nothing panicked, no hold left in Redis.
//! On top of that each scenario asserts what its fault must (and must not) cause, e.g. that a killed
//! holder's lock frees within the watchdog timeout.
//!
//! The scenarios whose faults hit what differs between lock kinds (holds, waits and queues; wake-ups
//! over pub/sub; undoing dropped acquires) run over every kind, as `<scenario>::<kind>` (see
//! [`FleetKind`]): `rw` mixes readers and writers of one read-write lock under the reader-writer model,
//! and the histories of the kinds that queue (the fair lock, the non-reentrant fair lock) are also
//! held to FIFO order. The non-reentrant kinds' cases of the scenarios that only replay their
//! twins' channels and hand-offs are left to the soak (ignored here, for the suite's budget). The
//! others hit the client's connections, which every kind shares, and run on the reentrant lock.
//!
//! The scenarios are short (a few seconds each). `scripts/soak.sh` runs the same scenarios longer by
//! setting `RLOCK_SOAK_SECS`, and collects the figures each one appends to `RLOCK_FAULTS_REPORT`.
//! A holder partitioned from Redis while it keeps running is in `faults_partition.rs`.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::AsyncCommands as _;
use rlock_redisson::{Codec, Container, EntryNames, EntryObject, Error, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{client_with, epoch_ms, eventually, pause_clients, raw, raw_blocking};
use rlock_tests::history::fleet::FleetKind;
use rlock_tests::history::{
    DoubleApplies, Event, FaultKind, Fleet, History, Mode, Operator, Record, Report, Summary,
    WorkerSpec, error_kind, local_hand_offs, now_ns, publish, scenario_length as length,
};
use rlock_tests::kind_matrix;

const TORTURE: &str = env!("CARGO_BIN_EXE_rlock-torture");

/// Publishes the figures of `report`, then asserts the history is sound.
fn conclude(scenario: &str, report: &Report) {
    publish(&report.summary(scenario));
    report.assert_sound();
}

fn client_pause(admin: &mut redis::Connection, pause: Duration) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(pause.as_millis() as u64)
        .arg("ALL")
        .query(admin)
        .expect("CLIENT PAUSE");
}

fn kill_subscribers(admin: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(admin)
        .expect("CLIENT KILL TYPE pubsub")
}

fn pubsub_numsub(admin: &mut redis::Connection, channel: &str) -> i64 {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(admin)
        .expect("PUBSUB NUMSUB");
    counts.first().map_or(0, |(_, n)| *n)
}

/// Whether `process` acquired some lock after `since_ns`.
fn acquired_after(report: &Report, process: &str, since_ns: u64) -> bool {
    report
        .holds
        .values()
        .flatten()
        .any(|h| h.id.process == process && h.acquired_ns > since_ns)
}

/// The suite can fail: workers on two different Redis servers "share" a lock name without excluding
/// each other, and the checker must see their holds overlap.
#[test]
fn the_checker_catches_two_holders_of_one_lock() {
    let (first, second) = (RedisServer::start(), RedisServer::start());
    let mut fleet = Fleet::new(TORTURE, &first.url());
    let spec = WorkerSpec {
        run_for: Duration::from_secs(1),
        tasks: 2,
        hold: Duration::from_millis(10),
        ..WorkerSpec::new(&["split:x"])
    };
    let _ = fleet.spawn(&spec);
    let _ = fleet.spawn_on(&second.url(), &spec);
    let report = fleet.finish(Duration::from_secs(2));
    assert!(
        !report.overlaps.is_empty(),
        "two servers, two holders at once: {}",
        report.summary("split brain")
    );
    assert!(report.overlaps.iter().all(|o| o.evidence.clock));
    assert!(!report.violations().is_empty());
}

/// One kind's case of a kind-generic scenario below ([`kind_matrix!`]): `<scenario>::<kind>`.
macro_rules! fleet_case {
    ($scenario:ident () [$(#[$attr:meta])*] $test:ident: $kind:ident $(($object:path))?) => {
        #[test]
        $(#[$attr])*
        fn $test() {
            super::$scenario(super::FleetKind::$kind);
        }
    };
}

kind_matrix! {
    a_killed_holder_frees_its_lock_within_the_watchdog_timeout => fleet_case!(),
    also { rw: Rw },
}

// The non-reentrant kinds' channels and wake-ups are their twins': the suite's budget leaves their
// cases here, and of the hand-offs (their twin's script), to the soak.
kind_matrix! {
    waiters_acquire_through_killed_subscriber_connections => fleet_case!(),
    skip { spin: "its waiters poll and nothing is published: no subscriber connection to kill" },
    ignore {
        non_reentrant: "suite budget: the twin kind's case covers it; scripts/soak.sh runs it",
        non_reentrant_fair: "suite budget: the twin kind's case covers it; scripts/soak.sh runs it",
    },
    also { rw: Rw },
}

kind_matrix! {
    cancellation_storms_leave_no_stray_field_in_any_lock => fleet_case!(),
    also { rw: Rw },
}

// The kinds whose hand-offs can be counted (the script's `HDEL`, see `local_hand_offs`, plus the
// free ones the workers report).
kind_matrix! {
    hand_offs_survive_killed_holders_and_cancellation_storms => fleet_case!(),
    skip {
        fair: "no local hand-off: the queue's head takes the lock",
        spin: "no local hand-off: its waiters poll",
        read: "readers share: nothing is handed off",
        write: "its hand-offs are not the lock's `HDEL`: faults_proxy.rs's and lost_replies.rs's \
            cases play its hand-off script",
        non_reentrant_fair: "no local hand-off: the queue's head takes the lock",
    },
    ignore {
        non_reentrant: "suite budget: the twin kind's case covers it; scripts/soak.sh runs it",
    },
}

// The kinds whose holds pass freely (no Redis command) between watchdog holds.
kind_matrix! {
    free_hand_offs_survive_force_unlocks_and_one_shot_tries => fleet_case!(),
    skip {
        fair: "no local hand-off: the queue's head takes the lock",
        spin: "no local hand-off: its waiters poll",
        fenced: "each hold takes a new token in Redis: none passes freely",
        read: "readers share: nothing is handed off",
        write: "its hand-offs run its script: none passes freely",
        non_reentrant_fair: "no local hand-off: the queue's head takes the lock",
    },
    ignore {
        non_reentrant: "suite budget: the twin kind's case covers it; scripts/soak.sh runs it",
    },
}

/// What users do (`Users`): on the reentrant lock, whose holds pass freely in long streaks, and
/// with the five kinds that share a lock's hash mixed on each name (`mixed`).
macro_rules! what_users_do {
    ($($scenario:ident),+ $(,)?) => {$(
        kind_matrix! {
            $scenario => fleet_case!(),
            skip {
                fair: "in `mixed`",
                spin: "in `mixed`",
                fenced: "in `mixed`",
                read: "its holds do not share the lock's hash",
                write: "its holds do not share the lock's hash",
                non_reentrant: "in `mixed`",
                non_reentrant_fair: "not one of the kinds `mixed` mixes (`HASH_SHARING`)",
            },
            also { mixed: Mixed },
        }
    )+};
}

what_users_do!(
    re_entries_and_two_futures_of_one_owner,
    nested_holds_mixing_leases,
    holds_released_outer_first_and_guards_replaced,
    force_unlocks_of_every_kind_local_and_remote,
    silent_deletes_by_an_operator,
);

/// What users do (`Users`, the five kinds that share a lock's hash mixed, with Java's threads) on
/// the locks of a map's entries, named as Java names them: braces, `+` and `/` in every key and
/// channel. Kind `entries` of `scripts/soak.sh`.
mod what_users_do_on_map_entries {
    use super::*;

    #[test]
    fn entries() {
        let server = RedisServer::start();
        let names = map_entry_names();
        let users = Users::start_on(
            &server,
            FleetKind::Mixed,
            &names,
            length(Duration::from_secs(4)),
            Habits {
                local_force_unlocks: 3,
                ..Habits::default()
            },
        );
        let (report, summary) =
            users.finish(&scenario("what users do, map entries", FleetKind::Mixed));
        assert!(
            summary.reentered_holds > 0,
            "owners re-entered their holds: {summary}"
        );
        assert!(
            report.acquired_after("w2", 0),
            "the Java process held the entry locks too: {summary}"
        );
        for name in &names {
            assert!(
                report.holds.keys().any(|held| held == name),
                "nobody held {name}: {summary}"
            );
        }
    }
}

/// A scenario's name in the figures, with the kind it ran on.
fn scenario(what: &str, kind: FleetKind) -> String {
    format!("{what} ({})", kind.name())
}

/// Holders killed while holding free their lock when their lease runs out: a waiter takes over (for
/// read holds, which nobody waits for, their timeout keys expire). A fair lock's killed *waiter*
/// blocks its queue until its deadline, then is purged as stale, as in Redisson.
///
/// Each round is staged so that what it asserts follows from the guarantees alone, however slow the
/// machine: a victim whose hold outlasts the round acquires a lock while nobody else contends (a
/// spin-lock victim racing polling contenders could wait for as long as they poll: spin locks are
/// not fair), contenders then start on that lock, and the victim is killed once each of their tasks
/// has started an attempt. For an exclusive hold those attempts all wait, and nothing else can start
/// before one of them acquires, so the first acquisition after the kill is a hand-off from the dead
/// holder. In the read/write mix the victim takes the write side and the read side in turn: a killed
/// reader's hold is shared with live readers rather than passed on (readers are admitted while
/// writers wait, so writers may wait as long as readers keep coming), and what must free is its
/// timeout key.
fn a_killed_holder_frees_its_lock_within_the_watchdog_timeout(kind: FleetKind) {
    const WATCHDOG: Duration = Duration::from_secs(1);
    let server = RedisServer::start();
    let mut admin = raw_blocking(&server);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let base = WorkerSpec {
        watchdog: WATCHDOG,
        kind,
        fair_wait_timeout: FAIR_WAIT,
        ..WorkerSpec::new(&["kill:a", "kill:b"])
    };
    let victim_kinds = match kind {
        FleetKind::Rw => vec![FleetKind::Write, FleetKind::Read],
        _ => vec![kind],
    };
    // How long a round takes at most, on a quiet machine: the kill, the lease running out, the rest
    // of the contenders' run (and for the fair lock, a killed waiter's round).
    let round = WATCHDOG * 3
        + if kind.queues() {
            FAIR_WAITER_CYCLE
        } else {
            Duration::ZERO
        };
    // One round per kind of victim, then more while `$RLOCK_SOAK_SECS` lasts.
    let soak_until = Instant::now() + length(Duration::ZERO);
    let (mut kills, mut purged, mut freed_by) = (0, Vec::new(), Vec::new());
    for turn in 0.. {
        if turn >= victim_kinds.len() && Instant::now() + round > soak_until {
            break;
        }
        let victim_kind = victim_kinds[turn % victim_kinds.len()];
        // Every earlier worker has finished: the victim acquires at once.
        let victim = fleet.spawn(&WorkerSpec {
            tasks: 1,
            hold: FOREVER,
            run_for: FOREVER,
            kind: victim_kind,
            ..base.clone()
        });
        let held = fleet
            .wait_holding(victim, STARTUP)
            .expect("the victim acquires a lock");
        let contenders = WorkerSpec {
            names: vec![held.clone()],
            run_for: WATCHDOG * 2,
            // No live fair-lock waiter goes stale: while a queue never empties, its head's deadline
            // stays where the first waiter's was set (each acquisition takes the allowance off the
            // deadlines behind it, docs/protocol.md §6.4), so a short allowance would purge live
            // waiters.
            fair_wait_timeout: FOREVER,
            ..base.clone()
        };
        let contending: Vec<usize> = (0..2).map(|_| fleet.spawn(&contenders)).collect();
        for &index in &contending {
            let started = fleet.wait_until(index, STARTUP, |records| {
                let attempts = records
                    .iter()
                    .filter(|r| matches!(r.event, Event::Started { .. }))
                    .count();
                attempts >= contenders.tasks as usize
            });
            assert!(
                started,
                "every task of {} tried the lock",
                fleet.name(index)
            );
        }
        fleet.kill(victim);
        kills += 1;
        if victim_kind.excludes() {
            freed_by.push(fleet.name(victim).to_owned());
        } else {
            let node = node_id(&fleet, victim);
            let expired = eventually_sync(WATCHDOG + Duration::from_millis(500), || {
                read_hold_keys(&mut admin, &held, &node) == 0
            });
            assert!(
                expired,
                "a killed reader's hold outlived the watchdog timeout"
            );
        }
        for index in contending {
            assert!(finished(&fleet, index), "{} finished", fleet.name(index));
        }
        if kind.queues() {
            purged.push(a_killed_waiter_is_purged_at_its_deadline(
                &mut fleet, &base, &mut admin,
            ));
            kills += 1;
        }
    }
    let report = fleet.finish(WATCHDOG + Duration::from_secs(1));
    let mut summary = report.summary(&scenario("kill -9 of a holder", kind));
    if let Some(late) = purged.iter().max() {
        let _ = summary.figures.insert(
            "max time a killed fair waiter stayed queued past its deadline (ms)".into(),
            late.as_secs_f64() * 1e3,
        );
    }
    publish(&summary);
    report.assert_sound();
    assert_eq!(report.faults[&FaultKind::KillHolder], kills);
    assert_eq!(report.lease_losses(), 0, "nobody else lost a lease");
    for victim in &freed_by {
        let gaps: Vec<Duration> = report
            .handoffs
            .iter()
            .filter(|h| h.after_crash && h.from.process == *victim)
            .map(|h| Duration::from_nanos(h.gap_ns))
            .collect();
        let [freed] = gaps[..] else {
            panic!("killed {victim}'s lock passed to one waiter, not {gaps:?}");
        };
        assert!(
            freed <= WATCHDOG + Duration::from_millis(500),
            "a killed holder's lock freed after {freed:?}, watchdog timeout {WATCHDOG:?}"
        );
    }
}

/// A hold (and a run) longer than any scenario: its worker is killed while holding.
const FOREVER: Duration = Duration::from_secs(3600);

/// How long a worker may take to start, connect and log its first steps on a loaded machine.
const STARTUP: Duration = Duration::from_secs(10);

/// Waits until worker `index` has logged that it finished its run (its attempts all over).
fn finished(fleet: &Fleet, index: usize) -> bool {
    fleet.wait_until(index, Duration::from_secs(30), |records| {
        records
            .iter()
            .any(|r| matches!(r.event, Event::Finished { .. }))
    })
}

/// A fair-lock waiter's queue deadline allowance (`fair_lock_wait_timeout`) in
/// [`a_killed_waiter_is_purged_at_its_deadline`]: the longest a killed waiter blocks its queue once
/// it is at the head. Its deadline (this plus the lease it queued behind) comes after the blocker's
/// hold ends, so it does reach the head.
const FAIR_WAIT: Duration = Duration::from_secs(1);

/// How long [`a_killed_waiter_is_purged_at_its_deadline`] takes at most: a hold of up to 1.2 s,
/// the dead waiter's deadline after it, and the purge.
const FAIR_WAITER_CYCLE: Duration = Duration::from_millis(3500);

/// A fair-lock waiter killed in the queue behind a long hold stays there, blocking the waiters
/// behind it once it is at the head, until its deadline; the scripts of their waits then purge it.
/// Returns how long after its deadline it left the queue. Starts when no other worker runs.
fn a_killed_waiter_is_purged_at_its_deadline(
    fleet: &mut Fleet,
    base: &WorkerSpec,
    admin: &mut redis::Connection,
) -> Duration {
    let once = WorkerSpec {
        tasks: 1,
        run_for: Duration::from_millis(100),
        ..base.clone()
    };
    let blocker = fleet.spawn(&WorkerSpec {
        hold: Duration::from_millis(800),
        ..once.clone()
    });
    let held = fleet
        .wait_holding(blocker, STARTUP)
        .expect("the blocker acquires a lock");
    let victim = fleet.spawn(&WorkerSpec {
        names: vec![held.clone()],
        ..once
    });
    let queued = fleet.wait_until(victim, STARTUP, |records| {
        records
            .iter()
            .any(|r| matches!(r.event, Event::Queued { .. }))
    });
    assert!(queued, "the waiter queued behind the blocker");
    let node = node_id(fleet, victim);
    fleet.kill(victim);
    // Waiters queue behind the dead one; the deadline it got when it queued is at least
    // `FAIR_WAIT` away, time enough for them to start.
    let behind = fleet.spawn(&WorkerSpec {
        names: vec![held.clone()],
        run_for: Duration::from_millis(100),
        ..base.clone()
    });
    // Its deadline moves up by the wait each time a waiter ahead acquires; at the head it blocks
    // everyone, so its deadline stays put until it goes stale.
    let mut last_seen = None;
    let purged = eventually_sync(Duration::from_secs(5), || {
        let entry = queue_entry(admin, &held, &node);
        let gone = entry.is_none();
        last_seen = entry.or(last_seen.take());
        gone
    });
    let purged_at_ms = i64::try_from(epoch_ms()).expect("epoch ms fit an i64");
    let (position, deadline_ms) = last_seen.expect("the waiter was queued");
    assert!(purged, "the killed waiter was purged");
    assert_eq!(position, 0, "the killed waiter was seen blocking the queue");
    assert!(
        purged_at_ms >= deadline_ms,
        "the killed waiter left the queue {} ms before its deadline",
        deadline_ms - purged_at_ms
    );
    let late = Duration::from_millis((purged_at_ms - deadline_ms).unsigned_abs());
    assert!(
        late <= Duration::from_millis(500),
        "the killed waiter stayed in the queue {late:?} past its deadline"
    );
    for index in [blocker, behind] {
        assert!(finished(fleet, index), "{} finished", fleet.name(index));
    }
    late
}

/// The node id that worker `index` logged when it was ready: the prefix of its hash fields.
fn node_id(fleet: &Fleet, index: usize) -> String {
    fleet
        .records(index)
        .into_iter()
        .find_map(|r| match r.event {
            Event::Ready { node_id } => Some(node_id),
            _ => None,
        })
        .expect("the worker logged its node id")
}

/// The position of a waiter of client `node` in fair lock `name`'s queue, with its deadline (epoch
/// ms).
fn queue_entry(admin: &mut redis::Connection, name: &str, node: &str) -> Option<(usize, i64)> {
    let queue: Vec<String> = redis::cmd("LRANGE")
        .arg(format!("redisson_lock_queue:{{{name}}}"))
        .arg(0)
        .arg(-1)
        .query(admin)
        .expect("LRANGE");
    let position = queue.iter().position(|entry| entry.starts_with(node))?;
    // Purged between the two reads: no longer queued.
    let deadline: Option<i64> = redis::cmd("ZSCORE")
        .arg(format!("redisson_lock_timeout:{{{name}}}"))
        .arg(&queue[position])
        .query(admin)
        .expect("ZSCORE");
    Some((position, deadline?))
}

/// How many read-hold timeout keys client `node` has on read-write lock `name`.
fn read_hold_keys(admin: &mut redis::Connection, name: &str, node: &str) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{name}}}:{node}:*:rwlock_timeout:*"))
        .query(admin)
        .expect("KEYS");
    keys.len()
}

/// Polls `check` every 5 ms until it returns true or `limit` passes; returns whether it did.
fn eventually_sync(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Subscriber connections killed again and again: waiters re-subscribe and still acquire promptly.
fn waiters_acquire_through_killed_subscriber_connections(kind: FleetKind) {
    const WATCHDOG: Duration = Duration::from_secs(2);
    let server = RedisServer::start();
    let mut admin = raw_blocking(&server);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(3));
    let spec = WorkerSpec {
        run_for: run,
        watchdog: WATCHDOG,
        hold: Duration::from_millis(20),
        kind,
        // Nobody dies here, so no fair-lock waiter may go stale: while a queue never empties, its
        // head's deadline stays where the first waiter's was set (docs/protocol.md §6.4), and with
        // the default allowance (5 s) live waiters of a soak-length run were purged and re-queued
        // behind later ones (seen: out of turn).
        fair_wait_timeout: FOREVER,
        ..WorkerSpec::new(&["pubsub:a", "pubsub:b"])
    };
    for _ in 0..3 {
        let _ = fleet.spawn(&spec);
    }
    let started = Instant::now();
    thread::sleep(Duration::from_millis(300));
    while started.elapsed() + Duration::from_millis(600) < run {
        fleet.record_fault("redis", FaultKind::KillSubscribers);
        let _ = kill_subscribers(&mut admin);
        thread::sleep(Duration::from_millis(fastrand::u64(150..400)));
    }
    let report = fleet.finish(Duration::from_secs(2));
    conclude(&scenario("CLIENT KILL TYPE pubsub", kind), &report);
    assert_eq!(report.lease_losses(), 0);
    if !kind.excludes() {
        return; // readers never wait for readers
    }
    let slowest = report.max_handoff(false).expect("locks changed hands");
    // Waits are bounded by the PTTL (the watchdog timeout) even when a message is lost; rlock
    // re-tries as soon as its subscriber reconnects, so nobody waits anywhere near that long.
    assert!(
        slowest < WATCHDOG / 2,
        "a waiter took {slowest:?} to take over a released lock (PTTL {WATCHDOG:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_unlock_message_costs_a_reconnect_not_a_lease() {
    let server = RedisServer::start();
    let holder = client_with(&server, |_| {}).await;
    let waiter = client_with(&server, |_| {}).await;
    let mut admin = raw_blocking(&server);
    let mut redis = raw(&server).await;
    let rounds = length(Duration::from_secs(10)).as_secs() * 2;
    let mut delays = Vec::new();
    for round in 0..rounds {
        let name = format!("lost:{round}");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let guard = holder
            .lock(name.as_str())
            .lock()
            .await
            .expect("holder locks");
        let lock = waiter.lock(name.as_str());
        let waiting = tokio::spawn(async move {
            let guard = lock.lock().await.expect("the waiter acquires");
            (tokio::time::Instant::now(), guard)
        });
        let subscribed = eventually(Duration::from_secs(5), async || {
            let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query_async(&mut redis)
                .await
                .expect("PUBSUB NUMSUB");
            counts.first().is_some_and(|(_, n)| *n == 1)
        })
        .await;
        assert!(subscribed, "the waiter subscribed");
        tokio::time::sleep(Duration::from_millis(20)).await;
        // Drop the waiter's subscriber connection and unlock before it can reconnect (its first
        // reconnect attempt is 50 ms away): the unlock message reaches nobody.
        assert!(kill_subscribers(&mut admin) >= 1);
        assert_eq!(pubsub_numsub(&mut admin, &channel), 0, "nobody listens");
        guard.unlock().await.expect("holder unlocks");
        let unlocked = tokio::time::Instant::now();
        let (acquired, guard) = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the waiter acquires long before the 30 s PTTL")
            .expect("waiter task");
        delays.push(acquired.saturating_duration_since(unlocked));
        guard.unlock().await.expect("waiter unlocks");
    }
    let slowest = delays.iter().max().copied().unwrap_or_default();
    let mut summary = Summary {
        scenario: "lost unlock message".into(),
        runs: 1,
        processes: 1,
        acquisitions: 2 * delays.len(),
        ..Summary::default()
    };
    let _ = summary
        .faults
        .insert(FaultKind::KillSubscribers.label().to_owned(), delays.len());
    let _ = summary.figures.insert(
        "max wake-up delay after a lost unlock message (ms)".into(),
        slowest.as_secs_f64() * 1e3,
    );
    publish(&summary);
    assert!(
        slowest < Duration::from_millis(500),
        "a waiter that lost the unlock message acquired after {slowest:?}: {delays:?}"
    );
}

#[test]
fn client_pause_and_a_frozen_server_are_bounded_and_recovered() {
    const COMMAND_TIMEOUT: Duration = Duration::from_millis(250);
    const WATCHDOG: Duration = Duration::from_secs(3);
    const OUTAGE: Duration = Duration::from_millis(1200);
    let server = RedisServer::start();
    let mut admin = raw_blocking(&server);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(5));
    let spec = WorkerSpec {
        run_for: run,
        watchdog: WATCHDOG,
        command_timeout: COMMAND_TIMEOUT,
        hold: Duration::from_millis(10),
        ..WorkerSpec::new(&["outage:a", "outage:b"])
    };
    let bounded = WorkerSpec {
        wait: Some(Duration::from_secs(1)),
        ..spec.clone()
    };
    for worker in [&bounded, &bounded, &spec] {
        let _ = fleet.spawn(worker);
    }
    let started = Instant::now();
    thread::sleep(Duration::from_millis(500));
    let mut freeze = false;
    let mut recovered_at = now_ns();
    while started.elapsed() + OUTAGE * 2 < run {
        if freeze {
            fleet.record_fault("redis", FaultKind::StopServer);
            server.pause();
            thread::sleep(OUTAGE);
            server.resume();
        } else {
            fleet.record_fault("redis", FaultKind::ClientPause);
            client_pause(&mut admin, OUTAGE);
            thread::sleep(OUTAGE);
        }
        recovered_at = now_ns();
        freeze = !freeze;
        thread::sleep(Duration::from_millis(600));
    }
    let report = fleet.finish(Duration::from_secs(2));
    conclude("CLIENT PAUSE and SIGSTOP of redis-server", &report);
    assert_eq!(report.lease_losses(), 0, "outages shorter than a lease");
    let failed: usize = report.errors.values().sum();
    assert!(
        failed + report.gave_up > 0,
        "the outages were felt: {report:?}"
    );
    assert!(
        report
            .errors
            .keys()
            .all(|kind| kind == "timeout" || kind == "backend"),
        "only timeouts and backend errors: {:?}",
        report.errors
    );
    // A bounded wait may overrun by one attempt: a pool checkout and one command, each bounded by the
    // command timeout.
    let overrun = Duration::from_nanos(report.max_overrun_ns.expect("bounded waits ran"));
    assert!(
        overrun <= COMMAND_TIMEOUT * 2 + Duration::from_millis(400),
        "a try_lock_for overran its wait by {overrun:?}"
    );
    for worker in 0..3 {
        assert!(
            acquired_after(&report, &format!("w{worker}"), recovered_at),
            "w{worker} acquired again after the last outage"
        );
    }
}

/// A slow server within the deadline is waited for: `command_timeout` decides, not redis-rs' default
/// 500 ms response timeout (which the pool once inherited, failing such calls with `Backend`).
#[tokio::test]
async fn a_reply_within_the_command_timeout_is_waited_for() {
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.command_timeout = Duration::from_secs(3);
    })
    .await;
    let mut redis = raw(&server).await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1000)
        .arg("ALL")
        .query_async(&mut redis)
        .await
        .expect("CLIENT PAUSE");
    let started = tokio::time::Instant::now();
    let outcome = client.lock("slow-reply").try_lock().await;
    let took = started.elapsed();
    let guard = outcome
        .unwrap_or_else(|e| panic!("failed after {took:?}, within the 3 s command timeout: {e:?}"))
        .expect("the lock is free");
    assert!(
        took >= Duration::from_millis(900),
        "answered after the pause"
    );
    guard.unlock().await.expect("unlock");
}

/// An unlock is bounded by the retry policy even when Redis does not answer: every try waits for
/// the command (or connect) timeout, then it gives up with `Timeout` or `Backend` (the hold expires
/// with its lease). A release that hands off must be bounded alike: its hand-off times out, and the
/// undos sent after it must not keep the caller past the same bound.
///
/// (Found by this test: the undos used to be awaited on the caller's task for up to their holds'
/// leases, so the unlock returned only when Redis answered again, 6 s later.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_unlock_is_bounded_while_redis_is_frozen() {
    const COMMAND_TIMEOUT: Duration = Duration::from_millis(200);
    const FROZEN: Duration = Duration::from_secs(6);
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.command_timeout = COMMAND_TIMEOUT;
        // A re-send after a timeout opens a new connection, which a frozen server never answers.
        config.connect_timeout = COMMAND_TIMEOUT;
        config.retry_attempts = 2;
        config.retry_delay = Duration::from_millis(50);
        config.retry_max_delay = Duration::from_millis(100);
        // Every release with a local waiter hands off, however slow this run is.
        config.local_handoff_window = Duration::from_secs(60);
    })
    .await;
    // A try per attempt (the first and each re-send), each at most the command (or connect)
    // timeout and the longest back-off, and the slack of a loaded machine.
    let bound = (COMMAND_TIMEOUT + Duration::from_millis(100)) * 3 + Duration::from_millis(700);

    // The control: an unlock without a waiter gives up within the bound.
    let guard = client.lock("frozen:alone").lock().await.expect("lock");
    server.pause();
    let started = tokio::time::Instant::now();
    let unlocked = guard.unlock().await;
    let alone = started.elapsed();
    server.resume();
    assert!(
        matches!(unlocked, Err(Error::Timeout { .. } | Error::Backend { .. })),
        "the control unlock gives up: {unlocked:?}"
    );
    assert!(
        alone <= bound,
        "the control unlock took {alone:?}, bound {bound:?}"
    );

    let lock = client.lock("frozen:hand-off");
    let first = lock.clone().with_owner(Owner::new());
    let second = lock.with_owner(Owner::new());
    let guard = first.lock().await.expect("A locks");
    let mut waiting = std::pin::pin!(second.lock());
    // The acquire joins the local queue before its first await: A's release hands off to it.
    assert!(futures::poll!(&mut waiting).is_pending(), "B waits for A");
    server.pause();
    let started = tokio::time::Instant::now();
    let unlocking = tokio::spawn(async move {
        let unlocked = guard.unlock().await;
        (unlocked, started.elapsed())
    });
    tokio::time::sleep(FROZEN).await;
    server.resume();
    let (unlocked, took) = unlocking.await.expect("unlock task");
    let guard = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("B acquires once Redis answers")
        .expect("B's acquire");
    guard.unlock().await.expect("B unlocks");
    assert!(
        took <= bound,
        "the hand-off's unlock took {took:?} ({unlocked:?}) while Redis was frozen for {FROZEN:?}; \
         an unlock without a waiter gave up after {alone:?} (bound {bound:?})"
    );
}

#[test]
fn a_restart_with_aof_mid_run_is_survived() {
    const WATCHDOG: Duration = Duration::from_secs(3);
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(4));
    let spec = WorkerSpec {
        run_for: run,
        watchdog: WATCHDOG,
        hold: Duration::from_millis(10),
        ..WorkerSpec::new(&["restart:a", "restart:b"])
    };
    for _ in 0..3 {
        let _ = fleet.spawn(&spec);
    }
    let started = Instant::now();
    thread::sleep(Duration::from_secs(1));
    let mut restarted_at = now_ns();
    while started.elapsed() + Duration::from_secs(2) < run {
        fleet.record_fault("redis", FaultKind::RestartServer);
        server.restart();
        restarted_at = now_ns();
        thread::sleep(Duration::from_secs(1));
    }
    let report = fleet.finish(Duration::from_secs(2));
    conclude("redis-server restart with AOF", &report);
    assert_eq!(report.lease_losses(), 0, "restarts shorter than a lease");
    for worker in 0..3 {
        assert!(
            acquired_after(&report, &format!("w{worker}"), restarted_at),
            "w{worker} reconnected and acquired after the last restart"
        );
    }
    // The restarted server had no scripts: clients got NOSCRIPT, loaded them and went on.
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut raw_blocking(&server))
        .expect("INFO errorstats");
    assert!(
        info.lines()
            .any(|line| line.starts_with("errorstat_NOSCRIPT:")),
        "scripts were reloaded after NOSCRIPT: {info}"
    );
}

/// Acquires dropped at random points, also mid-script: no hold, queue entry or read-hold key is left.
fn cancellation_storms_leave_no_stray_field_in_any_lock(kind: FleetKind) {
    let server = RedisServer::start();
    let mut admin = raw_blocking(&server);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(3));
    // A 30 s watchdog: a stray field could not expire before the leak check looks for it.
    let spec = WorkerSpec {
        run_for: run,
        tasks: 4,
        watchdog: Duration::from_secs(30),
        hold: Duration::from_millis(2),
        cancel_percent: 60,
        cancel_within: Duration::from_millis(3),
        kind,
        ..WorkerSpec::new(&["storm:a", "storm:b", "storm:c"])
    };
    for _ in 0..3 {
        let _ = fleet.spawn(&spec);
    }
    fleet.record_fault("redis", FaultKind::CancellationStorm);
    // Short pauses leave scripts in flight, so that many acquires are dropped mid-script.
    let started = Instant::now();
    while started.elapsed() + Duration::from_millis(500) < run {
        thread::sleep(Duration::from_millis(300));
        fleet.record_fault("redis", FaultKind::ClientPause);
        client_pause(&mut admin, Duration::from_millis(100));
    }
    let report = fleet.finish(Duration::from_secs(2));
    conclude(&scenario("cancellation storm", kind), &report);
    // Read holds never wait for each other, so in the `read` scenario a drop lands only while the
    // acquire's script is in flight (well under a millisecond of each 3 ms window): a few dozen in a
    // short run on an idle machine (77 of 2422 attempts seen), hundreds for the kinds that wait.
    assert!(
        report.cancelled >= 20,
        "{} acquires dropped",
        report.cancelled
    );
    assert!(report.acquisitions() >= 100);
    assert_eq!(report.lease_losses(), 0);
}

/// Local hand-offs (rlock's default) under fire. Processes of four tasks pass two locks among their
/// tasks (2 ms holds, well inside the 10 ms hand-off window), next to a process whose tasks race in
/// Redis without hand-off (`--no-local-handoff`); 40 % of the acquisitions are dropped at random:
/// while queued locally, while claimed by a releasing holder, mid-script. And again and again a
/// process is killed with `SIGKILL` in the middle of a streak, while it holds. Hand-offs must really
/// happen, no acquire may be applied twice, a killed holder's lock must free within its lease, and
/// the history must be sound.
fn hand_offs_survive_killed_holders_and_cancellation_storms(kind: FleetKind) {
    const WATCHDOG: Duration = Duration::from_secs(1);
    const NAMES: [&str; 2] = ["streak:a", "streak:b"];
    let server = RedisServer::start();
    let mut redis = raw_blocking(&server);
    let hand_offs_before = local_hand_offs(&mut redis);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(4));
    let storming = WorkerSpec {
        run_for: run,
        tasks: 4,
        watchdog: WATCHDOG,
        hold: Duration::from_millis(2),
        think: Duration::from_millis(1),
        cancel_percent: 40,
        cancel_within: Duration::from_millis(5),
        kind,
        ..WorkerSpec::new(&NAMES)
    };
    let racing = WorkerSpec {
        tasks: 2,
        local_handoff: false,
        ..storming.clone()
    };
    for spec in [&storming, &storming, &racing] {
        let _ = fleet.spawn(spec);
    }
    fleet.record_fault("redis", FaultKind::CancellationStorm);
    let doubles = DoubleApplies::watch(raw_blocking(&server), &NAMES);
    // Each cycle a fresh victim's four tasks queue for one lock and, once it has it, pass it among
    // themselves: 200 ms holds, in a streak that may last a minute, so that it is killed in the
    // middle of a hold (the kill is seen ~5 ms after the hold) and of a streak (after three holds,
    // at least two of them handed off). Its lock must pass to a contender once its lease runs out.
    let victim = WorkerSpec {
        names: vec![NAMES[0].to_owned()],
        hold: Duration::from_millis(200),
        cancel_percent: 0,
        local_handoff_window: Some(Duration::from_secs(60)),
        ..storming.clone()
    };
    let cycle = WATCHDOG * 2 + Duration::from_millis(500);
    let started = Instant::now();
    let mut kills = 0;
    while kills == 0 || started.elapsed() + cycle < run {
        let index = fleet.spawn(&WorkerSpec {
            run_for: run.saturating_sub(started.elapsed()),
            ..victim.clone()
        });
        let held = fleet.wait_holding_again(index, Duration::from_secs(5), 3);
        assert!(held.is_some(), "the victim holds in a streak");
        fleet.kill(index);
        kills += 1;
        thread::sleep(WATCHDOG + Duration::from_millis(300));
    }
    let report = fleet.finish(WATCHDOG + Duration::from_secs(1));
    let doubles = doubles.stop();
    let mut summary = report.summary(&scenario("hand-offs, kill -9 and cancellations", kind));
    summary.double_applies = doubles.len();
    // The killed victims' free hand-offs are not in the count: they report none.
    summary.count_hand_offs(local_hand_offs(&mut redis) - hand_offs_before);
    publish(&summary);
    report.assert_sound();
    assert!(doubles.is_empty(), "acquires applied twice: {doubles:?}");
    assert!(summary.hand_offs > 0, "locks were handed off locally");
    assert!(kills >= 1);
    assert_eq!(report.faults[&FaultKind::KillHolder], kills);
    assert!(
        report.cancelled >= 50,
        "{} acquires dropped",
        report.cancelled
    );
    assert_eq!(report.lease_losses(), 0, "nobody else lost a lease");
    let freed = report
        .max_handoff(true)
        .expect("a waiter took over a killed holder's lock");
    assert!(
        freed <= WATCHDOG + Duration::from_millis(500),
        "a killed holder's lock freed after {freed:?}, watchdog timeout {WATCHDOG:?}"
    );
}

/// Free hand-offs (a lock passed between watchdog holds of one process's tasks with no Redis
/// command, Redis keeping the hash of the streak's first owner) while another client force-unlocks
/// the locks mid-streak, and while every owner that just released makes one one-shot `try_lock()`.
/// Processes of four tasks pass two locks among their tasks (2 ms holds, inside the 10 ms
/// hand-off window), next to a process whose tasks race in Redis without hand-off; every 100–300
/// ms this test's own rlock client force-unlocks one of the locks (`force_unlock`: the key deleted
/// and an unlock message published, as Redisson's `forceUnlock`), whoever holds it.
///
/// A force unlock makes an overlap legitimate only where its holder was told its lease was lost:
/// the client must end the streak when it hears the message it did not send and signal the holder
/// of the moment, and a hold taken from Redis learns it from its unlock (`LeaseLost`). A one-shot
/// try right after a release that passed the lock on must find it held: during a streak the client
/// answers for the key, and the first owner's field in Redis must not let that owner (or anyone)
/// in. Free hand-offs, force unlocks and lease losses must all really happen.
fn free_hand_offs_survive_force_unlocks_and_one_shot_tries(kind: FleetKind) {
    const NAMES: [&str; 2] = ["forced:a", "forced:b"];
    let server = RedisServer::start();
    let mut redis = raw_blocking(&server);
    let hand_offs_before = local_hand_offs(&mut redis);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(4));
    let streaking = WorkerSpec {
        run_for: run,
        tasks: 4,
        hold: Duration::from_millis(2),
        think: Duration::from_millis(1),
        try_after_release: true,
        kind,
        ..WorkerSpec::new(&NAMES)
    };
    let racing = WorkerSpec {
        tasks: 2,
        local_handoff: false,
        ..streaking.clone()
    };
    for spec in [&streaking, &streaking, &racing] {
        let _ = fleet.spawn(spec);
    }
    let operator = Operator::connect(&server.url());
    let object = kind.object().expect("a lock kind of its own");
    now_and_then(Instant::now(), run, &NAMES, |name| {
        // Only a force unlock that found the lock held hit anyone.
        if operator.force_unlock(object, name) {
            fleet.record_fault("redis", FaultKind::ForceUnlock);
        }
    });
    let report = fleet.finish(Duration::from_secs(2));
    let mut summary = report.summary(&scenario(
        "free hand-offs, force unlocks, one-shot tries",
        kind,
    ));
    summary.count_hand_offs(local_hand_offs(&mut redis) - hand_offs_before);
    publish(&summary);
    report.assert_sound();
    assert!(summary.free_hand_offs > 0, "locks passed freely: {summary}");
    assert!(
        report
            .faults
            .get(&FaultKind::ForceUnlock)
            .copied()
            .unwrap_or(0)
            > 0,
        "force unlocks found the locks held: {summary}"
    );
    assert!(report.lease_losses() > 0, "holders were told: {summary}");
    // The only bounded attempts are the tries after a release: some found the lock passed on.
    assert!(
        report.gave_up > 0,
        "one-shot tries found the lock held: {summary}"
    );
}

/// Calls `fault` with one of `names` at random every 100–300 ms, from 300 ms into a run of `run`
/// that started at `started` until 300 ms before its end.
fn now_and_then(started: Instant, run: Duration, names: &[&str], mut fault: impl FnMut(&str)) {
    let margin = Duration::from_millis(300);
    thread::sleep(margin.saturating_sub(started.elapsed()));
    while started.elapsed() + margin < run {
        fault(names[fastrand::usize(..names.len())]);
        thread::sleep(Duration::from_millis(fastrand::u64(100..300)));
    }
}

/// The locks of the scenarios of what users do.
const USERS_NAMES: [&str; 2] = ["users:a", "users:b"];

/// The locks of two entries of the map `users`, as Java's `getLock(key)` names them: a Kryo5
/// string `"a"` and a StringCodec `"héllo"`, whose hashes hold a `+` and a `/`, behind the map's
/// hash tag (docs/protocol.md §13.1).
fn map_entry_names() -> Vec<String> {
    let names = |codec| EntryNames::new(Container::Map, "users", codec, None);
    vec![
        names(Codec::Kryo5).name("a", EntryObject::Lock),
        names(Codec::String).name("héllo", EntryObject::Lock),
    ]
    .into_iter()
    .map(|name| name.expect("a string encodes"))
    .collect()
}

/// What users do to a lock, as a fleet on one server, with what it watches there. Two processes of
/// four tasks whose owners take the lock through `kind` (the reentrant lock, or `mixed`: one of the
/// five kinds that share the lock's hash at random, lock, spin, fair, fenced, non-reentrant) and
/// re-enter their hold up to three times more, nested, through kinds picked alike (refused where
/// the kind refuses: a non-reentrant re-entry, a fenced re-entry of a lent hold), make a fifth of
/// their attempts as two futures of one owner, and try once more after each release; holds of
/// 2 ms, inside the 10 ms hand-off window, so that locks also pass freely within a process. Beside
/// them a process of the emulated Java client (Redisson 4.x) of the same kinds, its threads
/// re-entering as well, and a process whose tasks race in Redis without hand-off. Acquisitions
/// wait up to a second: a fair waiter barged by the other kinds gives up rather than hold the run
/// up.
///
/// Its zeros, on top of a sound history: no hold count in Redis above what its owner's attempts
/// could have made (`DoubleApplies::stop_against`: owners re-enter here), and no attempt failed
/// but as the kinds refuse re-entries.
struct Users {
    fleet: Fleet,
    names: Vec<String>,
    redis: redis::Connection,
    doubles: DoubleApplies,
    hand_offs_before: u64,
    started: Instant,
    run: Duration,
}

impl Users {
    /// Starts the fleet of `kind` for `run`; its rlock processes also force-unlock a lock through
    /// their own client after `local_force_unlocks` % of their attempts.
    fn start(
        server: &RedisServer,
        kind: FleetKind,
        run: Duration,
        local_force_unlocks: u8,
    ) -> Self {
        let habits = Habits {
            local_force_unlocks,
            ..Habits::default()
        };
        Self::with_habits(server, kind, run, habits)
    }

    /// [`Users::start`] on [`USERS_NAMES`], with the rlock processes' `habits`.
    fn with_habits(server: &RedisServer, kind: FleetKind, run: Duration, habits: Habits) -> Self {
        let names = USERS_NAMES.map(str::to_owned);
        Self::start_on(server, kind, &names, run, habits)
    }

    /// [`Users::with_habits`] on the locks `names`.
    fn start_on(
        server: &RedisServer,
        kind: FleetKind,
        names: &[String],
        run: Duration,
        habits: Habits,
    ) -> Self {
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut redis = raw_blocking(server);
        let hand_offs_before = local_hand_offs(&mut redis);
        let mut fleet = Fleet::new(TORTURE, &server.url());
        let users = WorkerSpec {
            run_for: run,
            tasks: 4,
            hold: Duration::from_millis(2),
            think: Duration::from_millis(1),
            wait: Some(Duration::from_secs(1)),
            kind,
            reenter_max: 3,
            join_percent: 20,
            try_after_release: true,
            force_unlock_percent: habits.local_force_unlocks,
            lease_percent: habits.lease_percent,
            outer_first_percent: habits.outer_first_percent,
            replace_percent: habits.replace_percent,
            ..WorkerSpec::new(&name_refs)
        };
        let java = WorkerSpec {
            tasks: 2,
            join_percent: 0,
            try_after_release: false,
            force_unlock_percent: 0,
            java: true,
            ..users.clone()
        };
        let racing = WorkerSpec {
            tasks: 2,
            local_handoff: false,
            ..users.clone()
        };
        let started = Instant::now();
        for spec in [&users, &users, &java, &racing] {
            let _ = fleet.spawn(spec);
        }
        Self {
            fleet,
            doubles: DoubleApplies::watch(raw_blocking(server), &name_refs),
            names: names.to_vec(),
            redis,
            hand_offs_before,
            started,
            run,
        }
    }

    /// Calls `fault` now and then while the fleet runs (see [`now_and_then`]), with the fleet to
    /// record it in.
    fn meanwhile(&mut self, mut fault: impl FnMut(&mut Fleet, &str)) {
        let fleet = &mut self.fleet;
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        now_and_then(self.started, self.run, &names, |name| fault(fleet, name));
    }

    /// Ends the run: publishes the figures of `scenario` with the double applies and the local
    /// hand-offs (the hand-off scripts' `HDEL`s, which no other script of these kinds sends, plus
    /// the free ones the workers report) counted in, and asserts the zeros; returns the history
    /// and its figures.
    fn finish(mut self, scenario: &str) -> (Report, Summary) {
        let report = self.fleet.finish(Duration::from_secs(2));
        let doubles = self.doubles.stop_against(&report);
        let mut summary = report.summary(scenario);
        summary.double_applies = doubles.len();
        summary.count_hand_offs(local_hand_offs(&mut self.redis) - self.hand_offs_before);
        publish(&summary);
        report.assert_sound();
        assert!(doubles.is_empty(), "acquires applied twice: {doubles:?}");
        assert!(
            report.errors.keys().all(|error| error == "reentry_refused"),
            "attempts failed only as re-entries refused: {:?}",
            report.errors
        );
        (report, summary)
    }
}

/// What the rlock processes of [`Users`] do besides, in percent (see [`WorkerSpec`]'s fields of
/// the same names).
#[derive(Clone, Copy, Default)]
struct Habits {
    /// Attempts after which a task force-unlocks a lock through its own client.
    local_force_unlocks: u8,
    /// Acquisitions taken with a short fixed lease.
    lease_percent: u8,
    /// Re-entries released outer-first.
    outer_first_percent: u8,
    /// First holds with a fixed lease kept past it and replaced by the owner's next hold.
    replace_percent: u8,
}

/// How many faults of `kind` a history recorded.
fn faults_of(report: &Report, kind: FaultKind) -> usize {
    report.faults.get(&kind).copied().unwrap_or(0)
}

/// What users do, and nothing else (see [`Users`]): nested re-entries at random depth, two futures
/// of one owner, rlock's and Java's holders on each name (with `mixed`, the five kinds that share
/// the lock's hash), next to free hand-offs and one-shot tries. Holds of one owner are one hold to
/// the checker, and an owner that believed it re-entered a hold its client no longer had would
/// overlap the next holder, or be told its lease was lost with no fault to lose it: the history
/// must be sound with no lease lost, every kind must have refused only what it refuses, and each
/// of those behaviours must really have happened.
fn re_entries_and_two_futures_of_one_owner(kind: FleetKind) {
    let server = RedisServer::start();
    let users = Users::start(&server, kind, length(Duration::from_secs(4)), 0);
    let (report, summary) = users.finish(&scenario("what users do", kind));
    let lost: Vec<_> = report
        .holds
        .values()
        .flatten()
        .filter(|hold| hold.lease_lost)
        .map(|hold| format!("{:?} of {:?} on {}", hold.id, hold.owner, hold.name))
        .collect();
    assert!(
        lost.is_empty(),
        "nobody lost a lease: {summary}\nlost: {}; unlock errors: {:?}",
        lost.join(", "),
        report.unlock_errors
    );
    assert!(
        summary.reentered_holds > 0,
        "owners re-entered their holds: {summary}"
    );
    if kind == FleetKind::Mixed {
        assert!(
            report.errors.get("reentry_refused").copied().unwrap_or(0) > 0,
            "non-reentrant kinds refused re-entries: {summary}"
        );
    }
    // With one kind, tasks queue locally behind each other and the lock passes freely; mixed
    // kinds mostly barge (only the lock and the non-reentrant lock queue locally), so a short run
    // on a loaded machine may see no free hand-off at all.
    if kind == FleetKind::Lock {
        assert!(summary.free_hand_offs > 0, "locks passed freely: {summary}");
    }
    assert!(
        report.acquired_after("w2", 0),
        "the Java process held the locks too: {summary}"
    );
}

/// What users do (see [`Users`]) with nested holds that mix `lock()` and `lock_with_lease` (issue
/// 46): 40 % of the rlock workers' acquisitions, first holds and re-entries alike, take a fixed
/// lease of 1 to 15 holds, so that a re-entry's lease is now shorter, now longer than the holds
/// around it, and some run out inside their holds. A re-entry must not shorten the key under the
/// holds around it, a fixed-lease unlock must not end another hold's renewal, and a lease that runs
/// out is told to its holder: the checker allows an overlap only where a holder was told.
fn nested_holds_mixing_leases(kind: FleetKind) {
    let server = RedisServer::start();
    let habits = Habits {
        lease_percent: 40,
        ..Habits::default()
    };
    let users = Users::with_habits(&server, kind, length(Duration::from_secs(4)), habits);
    let (report, summary) = users.finish(&scenario("what users do, mixed leases", kind));
    assert!(
        summary.reentered_holds > 0,
        "owners re-entered their holds: {summary}"
    );
    assert!(
        report.lease_losses() > 0,
        "fixed leases were mixed in, and some ran out inside their holds: {summary}"
    );
    // Nothing deletes the locks here: a hold whose guard had not said it was lost must find its
    // field at its unlock (an inner lease must not have shortened the key under it, nor an inner
    // unlock ended its renewal).
    assert!(
        report.unsignalled_losses.is_empty(),
        "unlocks found a lease lost that their guard had not signalled: {summary}\n{}",
        report.unsignalled_losses.join("\n")
    );
}

/// What users do (see [`Users`]) with holds that end out of the order they were taken in (issue
/// 46), fixed leases mixed in as in [`nested_holds_mixing_leases`]: half the rlock workers'
/// re-entries are released outer-first (the hold around a re-entry is released as soon as the
/// re-entry returned, which holds on after it; with `mixed`, a `Lock` released while its owner's
/// `SpinLock` of the name still holds, say), and half their first holds with a fixed lease are kept
/// past it, as a guard kept in a slot, and dropped only once the owner's next acquisition returned
/// (`slot = Some(lock.lock().await?)`). A release through one kind must leave the owner's hold
/// through another whole, a late drop of an old guard must not touch the owner's new hold, and no
/// unlock may find a lease lost that its guard had not signalled.
fn holds_released_outer_first_and_guards_replaced(kind: FleetKind) {
    let server = RedisServer::start();
    let habits = Habits {
        lease_percent: 30,
        outer_first_percent: 50,
        replace_percent: 50,
        ..Habits::default()
    };
    let users = Users::with_habits(&server, kind, length(Duration::from_secs(4)), habits);
    let name = "what users do, outer-first releases and replaced guards";
    let (report, summary) = users.finish(&scenario(name, kind));
    for habit in [FaultKind::OuterFirstRelease, FaultKind::ReplacedGuard] {
        assert!(
            faults_of(&report, habit) > 0,
            "the workers tried it: {}: {summary}",
            habit.label()
        );
    }
    assert!(
        report.unsignalled_losses.is_empty(),
        "unlocks found a lease lost that their guard had not signalled: {summary}\n{}",
        report.unsignalled_losses.join("\n")
    );
}

/// What users do (see [`Users`]) while locks are force-unlocked, whoever holds them, by every kind
/// that shares the lock's hash: by the workers on their own clients (after 3 % of their attempts,
/// 10 % with the mixed kinds,
/// so also mid-streak by a task of the streak's own client), and every 100–300 ms by another
/// client, rlock's or the emulated Java client's (every such force unlock publishes on the lock's
/// channel). A force unlock makes an overlap legitimate only where its holder was told its lease
/// was lost: by the unlock message, by the streak's end, or by its unlock (`LeaseLost`, Java's
/// `IllegalMonitorStateException`).
fn force_unlocks_of_every_kind_local_and_remote(kind: FleetKind) {
    let server = RedisServer::start();
    let operator = Operator::connect(&server.url());
    // A worker's own force unlock comes after its attempt, and counts only if it finds the lock
    // held by someone else: the mixed kinds barge rather than pass holds along, so their locks are
    // free more often, and 3 % found a held lock 1 to 3 times a run (0 in one run of the suite).
    let local_force_unlocks = if kind == FleetKind::Mixed { 10 } else { 3 };
    let mut users = Users::start(
        &server,
        kind,
        length(Duration::from_secs(4)),
        local_force_unlocks,
    );
    users.meanwhile(|fleet, name| {
        if let Some(fault) = operator.any_force_unlock(name) {
            fleet.record_fault("redis", fault);
        }
    });
    let (report, summary) = users.finish(&scenario("what users do, force unlocks", kind));
    assert!(
        faults_of(&report, FaultKind::ForceUnlock) > 0,
        "other clients' force unlocks found the locks held: {summary}"
    );
    assert!(
        faults_of(&report, FaultKind::LocalForceUnlock) > 0,
        "the workers' own force unlocks found the locks held: {summary}"
    );
    assert!(report.lease_losses() > 0, "holders were told: {summary}");
}

/// What users do (see [`Users`]) while an operator deletes the locks every 100–300 ms with nothing
/// published on their channels: `DEL`, `UNLINK`, Java's `RSpinLock` and `RFairLock`
/// `forceUnlock`. A holder that took its hold from Redis learns it from its unlock or from a
/// renewal. A streak of free hand-offs hears nothing, but a release that lends the hold returns
/// only once Redis confirmed the first owner's field after the hand-off (README, "What a
/// successful `unlock()` proves"): a field found gone fails it with `LeaseLost` and fires the
/// `lease_lost()` of every holder lent the hold since. The checker allows an overlap only where a
/// holder was told.
fn silent_deletes_by_an_operator(kind: FleetKind) {
    let server = RedisServer::start();
    let mut operator = Operator::connect(&server.url());
    let mut users = Users::start(&server, kind, length(Duration::from_secs(4)), 0);
    users.meanwhile(|fleet, name| {
        if let Some(fault) = operator.silent_delete(name) {
            fleet.record_fault("redis", fault);
        }
    });
    let (report, summary) = users.finish(&scenario("what users do, silent deletes", kind));
    assert!(
        faults_of(&report, FaultKind::SilentDelete) > 0,
        "silent deletes found the locks held: {summary}"
    );
    assert!(report.lease_losses() > 0, "holders were told: {summary}");
}

#[test]
fn a_holder_frozen_past_its_lease_is_told_and_the_overlap_is_a_known_window() {
    const WATCHDOG: Duration = Duration::from_secs(1);
    const FREEZE: Duration = Duration::from_millis(2500);
    let server = RedisServer::start();
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(4));
    let contenders = WorkerSpec {
        run_for: run,
        tasks: 2,
        watchdog: WATCHDOG,
        ..WorkerSpec::new(&["frozen:x"])
    };
    // The victim holds for 4–12 s: after the freeze only the lease-lost signal can end its hold soon.
    let victim = WorkerSpec {
        tasks: 1,
        hold: Duration::from_secs(8),
        run_for: Duration::from_millis(100),
        ..contenders.clone()
    };
    let started = Instant::now();
    let mut frozen = Vec::new();
    let mut contending = false;
    while started.elapsed() + FREEZE + Duration::from_secs(1) < run || frozen.is_empty() {
        let index = fleet.spawn(&victim);
        assert!(
            fleet.wait_holding(index, Duration::from_secs(5)).is_some(),
            "the victim acquires"
        );
        if !contending {
            for _ in 0..2 {
                let _ = fleet.spawn(&contenders);
            }
            contending = true;
        }
        let name = fleet.name(index).to_owned();
        fleet.record_fault(&name, FaultKind::StopHolder);
        fleet.stop(index);
        thread::sleep(FREEZE);
        let resumed = now_ns();
        fleet.resume(index);
        frozen.push((name, resumed));
        thread::sleep(Duration::from_millis(300));
    }
    let report = fleet.finish(Duration::from_secs(2));
    conclude("SIGSTOP of a holder past its lease", &report);
    assert_eq!(
        report.lease_losses(),
        frozen.len(),
        "exactly the frozen holders lost their lease"
    );
    assert!(
        report.unsafe_windows.len() >= frozen.len(),
        "contenders took the lock while each victim was frozen: {:?}",
        report.unsafe_windows
    );
    for (name, resumed) in &frozen {
        let hold = report
            .holds
            .values()
            .flatten()
            .find(|h| &h.id.process == name)
            .expect("the victim's hold is in the history");
        assert!(hold.lease_lost, "{name} was told its lease was lost");
        let told_after = Duration::from_nanos(hold.end_ns.saturating_sub(*resumed));
        assert!(
            told_after < WATCHDOG,
            "{name} left its critical section {told_after:?} after SIGCONT"
        );
    }
}

#[test]
fn a_slow_subscriber_dropped_by_redis_reconnects_and_acquires() {
    const WATCHDOG: Duration = Duration::from_secs(2);
    const NAME: &str = "slow:x";
    let server = RedisServer::start_with(&["--client-output-buffer-limit", "pubsub 64kb 32kb 1"]);
    let mut admin = raw_blocking(&server);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(3));
    let spec = WorkerSpec {
        run_for: run,
        tasks: 2,
        watchdog: WATCHDOG,
        hold: Duration::from_millis(30),
        ..WorkerSpec::new(&[NAME])
    };
    for _ in 0..3 {
        let _ = fleet.spawn(&spec);
    }
    let channel = format!("redisson_lock__channel:{{{NAME}}}");
    let garbage = "x".repeat(8192);
    let started = Instant::now();
    let mut resumed_at = Vec::new();
    thread::sleep(Duration::from_millis(300));
    while started.elapsed() + Duration::from_secs(1) < run {
        // Freeze one worker (a subscriber that stops reading) and flood its lock channel with
        // garbage: Redis drops the connection once the output buffer passes its limit.
        let index = resumed_at.len() % 3;
        let name = fleet.name(index).to_owned();
        if !freeze_while_subscribed(&fleet, index, &mut admin, &channel) {
            continue;
        }
        fleet.record_fault(&name, FaultKind::SlowSubscriber);
        // The kernel's socket buffers take a few MB before Redis' own output buffer grows.
        let before = slow_clients_dropped(&server);
        for _ in 0..50 {
            let mut flood = redis::pipe();
            for _ in 0..100 {
                let _ = flood.cmd("PUBLISH").arg(&channel).arg(&garbage);
            }
            let _: Vec<i64> = flood.query(&mut admin).expect("PUBLISH");
            if slow_clients_dropped(&server) > before {
                break;
            }
        }
        thread::sleep(Duration::from_millis(200));
        fleet.resume(index);
        resumed_at.push((name, now_ns()));
        thread::sleep(Duration::from_millis(300));
    }
    let report = fleet.finish(Duration::from_secs(2));
    conclude("slow subscriber dropped by Redis", &report);
    let dropped = slow_clients_dropped(&server);
    assert!(
        dropped >= resumed_at.len(),
        "Redis dropped {dropped} slow subscribers for {} floods",
        resumed_at.len()
    );
    assert_eq!(report.lease_losses(), 0);
    for (name, resumed) in &resumed_at[..resumed_at.len() - 1] {
        assert!(
            acquired_after(&report, name, *resumed),
            "{name} acquired again after it was dropped"
        );
    }
    let slowest = report.max_handoff(false).expect("locks changed hands");
    assert!(slowest < WATCHDOG, "hand-off took {slowest:?}");
}

/// How many clients Redis has dropped for exceeding their output buffer limit (from its log).
fn slow_clients_dropped(server: &RedisServer) -> usize {
    std::fs::read_to_string(server.dir().join("redis.log"))
        .expect("the server log")
        .matches("overcoming of output buffer limits")
        .count()
}

/// Freezes worker `index` at a moment its subscriber listens on `channel` (as do the other two
/// workers'); returns false if that did not happen within a second.
fn freeze_while_subscribed(
    fleet: &Fleet,
    index: usize,
    admin: &mut redis::Connection,
    channel: &str,
) -> bool {
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        fleet.stop(index);
        if pubsub_numsub(admin, channel) == 3 {
            return true;
        }
        fleet.resume(index);
        thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A burst of `lock()` calls on one client, ten on each name, through a 2 s `CLIENT PAUSE` in its
/// middle (issue 38): the client's own queue of requests and the pause fail none of them (a
/// wait-forever acquisition fails only when Redis fails a request that was sent, and the pause is
/// shorter than the command timeout), every one acquires, and the history checker finds no two
/// holds of one name overlapping. Every waiter races in Redis (no local queue, which would send
/// only the first of each name's waiters), so that the client queues every attempt at once.
/// 10,000 calls here, 100,000 under `scripts/soak.sh`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_waiters_through_a_paused_server() {
    const PER_NAME: usize = 10;
    const PAUSE: Duration = Duration::from_secs(2);
    let waiters = if std::env::var_os("RLOCK_SOAK_SECS").is_some() {
        100_000
    } else {
        10_000
    };
    let server = RedisServer::start();
    let client = client_with(&server, |config| config.local_handoff = false).await;
    let redis = raw(&server).await;
    let history = Arc::new(std::sync::Mutex::new(History::new()));
    let acquired = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..waiters)
        .map(|task| {
            let name = format!("paused-burst:{}", task % (waiters / PER_NAME));
            let lock = client.lock(name.as_str());
            let (history, acquired, mut fences) =
                (history.clone(), acquired.clone(), redis.clone());
            tokio::spawn(async move {
                let task = u32::try_from(task).expect("a task number");
                let log = |at_ns, event| {
                    let process = "burst".to_owned();
                    history.lock().expect("history").push(Record {
                        process,
                        at_ns,
                        event,
                    });
                };
                log(
                    now_ns(),
                    Event::Started {
                        task,
                        seq: 0,
                        name: name.clone(),
                        wait_ms: None,
                        mode: Mode::Exclusive,
                        permits: 1,
                        owner: None,
                        kind: None,
                    },
                );
                let guard = match lock.lock().await {
                    Ok(guard) => guard,
                    Err(e) => {
                        log(
                            now_ns(),
                            Event::Failed {
                                task,
                                seq: 0,
                                error: error_kind(&e).to_owned(),
                                message: e.to_string(),
                            },
                        );
                        return;
                    }
                };
                let acquired_ns = now_ns();
                let fence_key = format!("{name}:fence");
                let fence: Option<i64> = fences.incr(&fence_key, 1).await.ok();
                let _ = acquired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                log(
                    acquired_ns,
                    Event::Acquired {
                        task,
                        seq: 0,
                        fence,
                        field: String::new(),
                    },
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
                let fence_after: Option<i64> = fences.get(&fence_key).await.ok();
                let released_ns = now_ns();
                let unlocked = guard.unlock().await;
                log(
                    released_ns,
                    Event::Released {
                        task,
                        seq: 0,
                        fence_after,
                        lease_lost: false,
                        unlock_error: unlocked.err().map(|e| e.to_string()),
                        unlock_ms: (now_ns() - released_ns).div_ceil(1_000_000),
                        signalled: None,
                        dropped: false,
                    },
                );
            })
        })
        .collect();
    // In the middle of the burst: once a quarter of the calls acquired.
    let quarter = eventually(Duration::from_secs(120), async || {
        acquired.load(std::sync::atomic::Ordering::Relaxed) >= waiters / 4
    })
    .await;
    assert!(quarter, "a quarter of the burst acquired before the pause");
    pause_clients(&mut redis.clone(), PAUSE.as_millis() as u64).await;
    let paused_at = acquired.load(std::sync::atomic::Ordering::Relaxed);
    history.lock().expect("history").push(Record {
        process: "redis".to_owned(),
        at_ns: now_ns(),
        event: Event::Fault {
            kind: FaultKind::ClientPause,
        },
    });
    for task in tasks {
        task.await.expect("a waiter's task");
    }
    let elapsed = started.elapsed();
    assert!(
        paused_at < waiters,
        "the pause came in the middle of the burst: {paused_at} of {waiters} had acquired"
    );
    let history = std::mem::take(&mut *history.lock().expect("history"));
    let report = history.check();
    let failed: Vec<_> = history
        .records()
        .iter()
        .filter(|record| matches!(record.event, Event::Failed { .. }))
        .take(3)
        .collect();
    eprintln!(
        "a burst of {waiters} lock() calls on {} names through a {PAUSE:?} pause: {elapsed:?}, \
         {paused_at} acquired before the pause",
        waiters / PER_NAME
    );
    assert!(failed.is_empty(), "no lock() failed: {failed:?}");
    conclude("a_burst_of_waiters_through_a_paused_server", &report);
    assert_eq!(report.acquisitions(), waiters, "every waiter acquired");
}

/// Operations on a client with one pooled connection, through a `CLIENT PAUSE`: bounded waits and
/// `Timeout` errors while Redis is paused, and a client that works again once it is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_pool_gives_bounded_waits_and_clear_errors() {
    const SLACK: Duration = Duration::from_millis(400);
    // Longer than a command timeout: whatever is sent while Redis is paused times out.
    const PAUSE: Duration = Duration::from_millis(300);
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.pool_size = 1;
        config.command_timeout = POOL_COMMAND_TIMEOUT;
        // Every waiter races in Redis: in the local queue (the default) only one waiter per lock
        // uses a connection, the others wait out their deadline without one, and the operations
        // are over before the pause that should find them queued for the connection.
        config.local_handoff = false;
        config.retry_delay = Duration::from_millis(50);
        config.retry_max_delay = Duration::from_millis(100);
    })
    .await;
    let mut redis = raw(&server).await;
    let names: Vec<String> = (0..10).map(|i| format!("pool:{i}")).collect();
    let rounds = length(Duration::from_secs(1)).as_secs().max(1);
    let (mut attempts, mut acquired, mut timeouts, mut slowest_overrun) = (0, 0, 0, Duration::ZERO);
    for _ in 0..rounds {
        let cycled = Arc::new(tokio::sync::Notify::new());
        let operations: Vec<_> = (0..300)
            .map(|i| {
                pool_operation(
                    client.lock(names[i % names.len()].as_str()),
                    i % 3 != 0,
                    &cycled,
                )
            })
            .collect();
        // A slow server on top, once a first lock/unlock went through (not after a fixed delay,
        // which a loaded machine may not even have started the operations in): the single
        // connection's holder waits, everyone else queues.
        tokio::time::timeout(Duration::from_secs(5), cycled.notified())
            .await
            .expect("an operation locks and unlocks before the pause");
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(PAUSE.as_millis() as u64)
            .arg("ALL")
            .query_async(&mut redis)
            .await
            .expect("CLIENT PAUSE");
        // Sent while Redis is paused: these surely wait for the pool or a reply, and time out.
        let paused: Vec<_> = names
            .iter()
            .flat_map(|name| {
                [false, true]
                    .map(|locks| pool_operation(client.lock(name.as_str()), locks, &cycled))
            })
            .collect();
        let mut outcomes = Vec::new();
        for operation in operations {
            outcomes.push(operation.await.expect("no panic"));
        }
        for operation in paused {
            let (locks, outcome, overrun) = operation.await.expect("no panic");
            assert!(
                matches!(&outcome, Err(e) if e.is_timeout()),
                "an operation sent while Redis was paused timed out: {outcome:?}"
            );
            outcomes.push((locks, outcome, overrun));
        }
        for (locks, outcome, overrun) in outcomes {
            attempts += usize::from(locks);
            slowest_overrun = slowest_overrun.max(overrun);
            match outcome {
                Ok(true) => acquired += 1,
                Ok(false) => {}
                Err(e) => {
                    assert!(e.is_timeout(), "a pool timeout is a Timeout: {e}");
                    assert!(e.to_string().contains("timed out"), "clear message: {e}");
                    timeouts += 1;
                }
            }
        }
        // The operations can all be over (timed out) while Redis is still paused: the next round
        // starts once the client works again, or it would find nothing to lock.
        let lock = client.lock(names[0].as_str());
        let recovered = eventually(Duration::from_secs(2), async || {
            lock.is_locked().await.is_ok()
        })
        .await;
        assert!(recovered, "the client works again after the pause");
    }
    let mut summary = Summary {
        scenario: "pool exhaustion".into(),
        runs: 1,
        processes: 1,
        attempts,
        acquisitions: acquired,
        ..Summary::default()
    };
    let _ = summary.faults.insert(
        FaultKind::PoolExhaustion.label().to_owned(),
        rounds as usize,
    );
    let _ = summary.errors.insert("timeout".into(), timeouts);
    let _ = summary.figures.insert(
        "max overrun of a deadline with pool_size 1 (ms)".into(),
        slowest_overrun.as_secs_f64() * 1e3,
    );
    let leftover = !eventually(Duration::from_secs(2), async || {
        let mut left = 0;
        for name in &names {
            let exists: i64 = redis::cmd("EXISTS")
                .arg(name)
                .query_async(&mut redis)
                .await
                .expect("EXISTS");
            left += exists;
        }
        left == 0
    })
    .await;
    summary.leaked_holds = usize::from(leftover);
    publish(&summary);
    assert!(acquired > 0 && timeouts > 0, "{summary}");
    assert!(
        slowest_overrun <= SLACK,
        "an operation overran its deadline by {slowest_overrun:?}"
    );
    assert!(!leftover, "no hold is left behind");
    let guard = client
        .lock("pool:after")
        .try_lock()
        .await
        .expect("the client still works")
        .expect("free");
    guard.unlock().await.expect("unlock");
    assert_eq!(client.stats().renewing_locks, 0);
}

/// The command timeout of [`an_exhausted_pool_gives_bounded_waits_and_clear_errors`]'s client.
const POOL_COMMAND_TIMEOUT: Duration = Duration::from_millis(100);

/// One operation of [`an_exhausted_pool_gives_bounded_waits_and_clear_errors`] on `lock`, spawned:
/// `try_lock_for` 200 ms and unlock if `locks`, else `is_locked`. Gives back `locks`, whether it
/// locked, and how far it overran its budget (the wait, if any, and two command timeouts); a lock
/// and unlock that went through is told to `cycled`.
fn pool_operation(
    lock: rlock_redisson::Lock,
    locks: bool,
    cycled: &Arc<tokio::sync::Notify>,
) -> tokio::task::JoinHandle<(bool, rlock_redisson::Result<bool>, Duration)> {
    const WAIT: Duration = Duration::from_millis(200);
    let cycled = cycled.clone();
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let (outcome, budget) = if locks {
            let outcome = match lock.try_lock_for(WAIT).await {
                Ok(Some(guard)) => guard.unlock().await.map(|()| true),
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            };
            if matches!(outcome, Ok(true)) {
                cycled.notify_one();
            }
            (outcome, WAIT + POOL_COMMAND_TIMEOUT * 2)
        } else {
            (
                lock.is_locked().await.map(|_| false),
                POOL_COMMAND_TIMEOUT * 2,
            )
        };
        (locks, outcome, started.elapsed().saturating_sub(budget))
    })
}
