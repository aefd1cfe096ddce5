//! The fault scenarios of `faults.rs`, on the synchronizers: the semaphore, the permit-expirable
//! semaphore, the count-down latch, the multi-lock and the group lock.
//!
//! As there, `rlock-torture` worker processes contend on a private Redis (here with
//! `--synchronizer`), the harness injects a fault, and the history checker proves from the workers'
//! logs what must hold whatever the fault: a semaphore's holds are permits, and at no instant may
//! more be held than the semaphore has (the checker's counting model); a latch's waits are shared
//! holds that must all complete (every waiter wakes); a multi-lock's holds exclude each other. No
//! worker may panic, every attempt must complete or fail with a typed error, and nothing may be left
//! taken in Redis at the end. On top of that each scenario asserts what its fault must cause:
//!
//! * `kill -9` of a process holding a semaphore's permits: **they come back only by `release`**,
//!   exactly as Redisson's do (permits have no owner and no lease; nothing in Redis says who took
//!   them). The scenario sees them stay taken, gives them back from another client
//!   (`semaphore.release(n)`), and counts them as "permits lost to killed holders" in its summary.
//! * `kill -9` of a process holding expirable permits: they come back at their expiry, counted back
//!   in by the next call of any process on the semaphore (here a waiting contender's acquire).
//! * `CLIENT KILL TYPE pubsub` with waiters on a semaphore, an expirable semaphore and a latch:
//!   every waiter still wakes.
//! * `CLIENT PAUSE` and `SIGSTOP` of redis-server during acquires and count-downs: no permit or
//!   count-down is applied twice (the permits and the count add up at the end, within the calls
//!   whose outcome was unknown), and every outcome is typed.
//! * A multi-lock whose members live on two servers while one is frozen or killed: no partial hold
//!   is left once it is back (checked on both servers).
//! * The group lock (Redisson's faster multi-lock): `kill -9` of holders, whose values free at the
//!   lease's end, with the waiting contenders' subscriber connections killed: every waiter wakes.
//!
//! Each scenario takes a few seconds; `scripts/soak.sh` runs them longer through `RLOCK_SOAK_SECS`
//! and adds up the figures each one appends to `RLOCK_FAULTS_REPORT`.

use std::str::FromStr;
use std::thread;
use std::time::{Duration, Instant};

use rlock_redisson::{CountDownLatch, Error, PermitId};
use rlock_tests::RedisServer;
use rlock_tests::harness::{
    client_with, epoch_ms, eventually, kill_subscribers, pause_clients, raw,
};
use rlock_tests::history::{
    Event, FaultKind, Fleet, Report, Summary, Synchronizer, WorkerSpec, error_kind, now_ns,
    publish, scenario_length as length,
};
use tokio::runtime::Runtime;

const TORTURE: &str = env!("CARGO_BIN_EXE_rlock-torture");

/// The scenarios that run on several synchronizers, one test per synchronizer.
macro_rules! over_synchronizers {
    ($($scenario:ident: [$($test:ident: $synchronizer:ident),+ $(,)?];)+) => {$(
        mod $scenario {
            $(
                #[test]
                fn $test() {
                    super::$scenario(super::Synchronizer::$synchronizer);
                }
            )+
        }
    )+};
}

over_synchronizers! {
    waiters_wake_through_killed_subscriber_connections: [
        semaphore: Semaphore, expirable: Expirable, latch: Latch,
    ];
    client_pause_and_a_frozen_server_apply_nothing_twice: [
        semaphore: Semaphore, expirable: Expirable, latch: Latch,
    ];
}

/// A runtime for the harness's own rlock client and Redis connection.
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A scenario's name in the figures, with the synchronizer it ran on.
fn scenario(what: &str, synchronizer: Synchronizer) -> String {
    format!("{what} ({})", synchronizer.name())
}

/// Workers contending for `names` of `synchronizer`: semaphores of `permits` permits. Their
/// commands time out after 3 s, not 300 ms: a plain semaphore's acquire whose reply comes late only
/// because the machine is loaded would be `OutcomeUnknown`, its permits maybe taken for good (seen
/// with two CPU hogs: every permit gone, the waiters starved). The outage scenarios set it shorter.
fn contenders(synchronizer: Synchronizer, names: &[&str], permits: u32) -> WorkerSpec {
    WorkerSpec {
        synchronizer: Some(synchronizer),
        permits,
        command_timeout: Duration::from_secs(3),
        ..WorkerSpec::new(names)
    }
}

/// A worker like `spec`'s that makes one attempt of one task and holds what it takes for long: it
/// is killed while it holds.
fn victim(spec: &WorkerSpec) -> WorkerSpec {
    WorkerSpec {
        tasks: 1,
        run_for: Duration::from_millis(100),
        hold: Duration::from_secs(20),
        ..spec.clone()
    }
}

/// Three workers of `spec` for outages of a server, as `faults.rs`'s: two whose waits are bounded
/// (1 s), one that waits for as long as it takes.
fn spawn_through_outages(fleet: &mut Fleet, spec: &WorkerSpec) {
    let bounded = WorkerSpec {
        wait: Some(Duration::from_secs(1)),
        ..spec.clone()
    };
    for worker in [&bounded, &bounded, spec] {
        let _ = fleet.spawn(worker);
    }
}

/// Whether `check` stays true every time it is polled (every 20 ms) for `limit`.
fn stays(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if !check() {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
    check()
}

/// The field of the hold worker `index` logged last: permit ids, for an expirable semaphore.
fn held_field(fleet: &Fleet, index: usize) -> String {
    fleet
        .records(index)
        .into_iter()
        .rev()
        .find_map(|r| match r.event {
            Event::Acquired { field, .. } => Some(field),
            _ => None,
        })
        .expect("the worker acquired")
}

/// Asserts that every attempt's error is one the fault explains: a timeout, a broken connection, or
/// a call whose outcome is unknown (never a panic, never an untyped error).
fn assert_typed(errors: impl IntoIterator<Item = impl AsRef<str>>) {
    for kind in errors {
        let kind = kind.as_ref();
        assert!(
            ["timeout", "backend", "outcome_unknown"].contains(&kind),
            "an error of kind {kind:?}"
        );
    }
}

/// The counting model can fail: workers on two different Redis servers "share" a semaphore of two
/// permits, each server's giving out two, and the checker must see more than two held at once.
#[test]
fn the_checker_catches_a_semaphore_overfilled() {
    let (first, second) = (RedisServer::start(), RedisServer::start());
    let mut fleet = Fleet::new(TORTURE, &first.url());
    let spec = WorkerSpec {
        run_for: Duration::from_secs(1),
        hold: Duration::from_millis(10),
        ..contenders(Synchronizer::Semaphore, &["split:s"], 2)
    };
    let _ = fleet.spawn(&spec);
    let _ = fleet.spawn_on(&second.url(), &spec);
    let report = fleet.finish(Duration::from_secs(2));
    assert!(
        !report.permit_excesses.is_empty() || !report.overlaps.is_empty(),
        "two servers, up to four permits held at once: {}",
        report.summary("split semaphore")
    );
    assert!(!report.violations().is_empty());
    assert_eq!(
        report.leaked,
        Vec::<String>::new(),
        "each server got its permits back"
    );
}

/// Holders killed with `SIGKILL` while they hold every permit of a semaphore: the permits stay
/// taken (no lease brings them back, nor the time that frees a killed holder's lock) until another
/// client releases them, as with Redisson's `RSemaphore`, whose permits have no owner. Contenders
/// with bounded waits give up meanwhile, and take permits again once they are given back.
#[test]
fn a_killed_holders_semaphore_permits_come_back_only_by_release() {
    const NAME: &str = "kill:semaphore";
    const PERMITS: u32 = 3;
    const WATCHDOG: Duration = Duration::from_secs(1);
    let server = RedisServer::start();
    let runtime = runtime();
    let client = runtime.block_on(client_with(&server, |_| {}));
    let semaphore = client.semaphore(NAME);
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(3));
    let spec = WorkerSpec {
        run_for: run,
        tasks: 2,
        think: Duration::from_millis(20),
        watchdog: WATCHDOG,
        wait: Some(Duration::from_millis(300)),
        take: 1..=2,
        ..contenders(Synchronizer::Semaphore, &[NAME], PERMITS)
    };
    for _ in 0..2 {
        let _ = fleet.spawn(&spec);
    }
    let victim = WorkerSpec {
        wait: None,
        take: PERMITS..=PERMITS,
        ..victim(&spec)
    };
    // Each cycle: a victim takes every permit, is killed, the permits stay taken for longer than a
    // killed lock holder's lease, and another client gives them back.
    let cycle = WATCHDOG * 2 + Duration::from_millis(500);
    let started = Instant::now();
    let (mut kills, mut lost, mut given_back_at) = (0, 0, now_ns());
    while kills == 0 || started.elapsed() + cycle < run {
        let index = fleet.spawn(&victim);
        assert!(
            fleet.wait_holding(index, Duration::from_secs(5)).is_some(),
            "the victim takes every permit"
        );
        fleet.kill(index);
        kills += 1;
        lost += PERMITS;
        let available = || {
            runtime
                .block_on(semaphore.available_permits())
                .expect("read")
        };
        assert!(
            stays(WATCHDOG + Duration::from_millis(500), || available() == 0),
            "a killed holder's permits came back by themselves: {} available",
            available()
        );
        runtime
            .block_on(semaphore.release(PERMITS))
            .expect("another client gives them back");
        given_back_at = now_ns();
        thread::sleep(Duration::from_millis(300));
    }
    fleet.wait_finished();
    let available = runtime
        .block_on(semaphore.available_permits())
        .expect("read");
    let report = fleet.finish(Duration::from_secs(1));
    let mut summary = report.summary("kill -9 of a holder (semaphore)");
    summary.permits_lost_to_killed_holders = usize::try_from(lost).expect("a small count");
    publish(&summary);
    report.assert_sound();
    assert_eq!(
        available,
        i64::from(PERMITS),
        "every permit is back after the run"
    );
    assert_eq!(report.faults[&FaultKind::KillHolder], kills);
    assert_eq!(report.lease_losses(), 0);
    assert!(
        report.gave_up > 0,
        "contenders gave up while nothing was left"
    );
    for worker in ["w0", "w1"] {
        assert!(
            report.acquired_after(worker, given_back_at),
            "{worker} took permits given back"
        );
    }
}

/// Holders killed with `SIGKILL` while they hold an expirable semaphore's only permit, with a lease:
/// the permit comes back at its expiry, not before, counted back in by the acquire of a contender
/// waiting for it (any call of any process on the semaphore counts expired permits back in,
/// Redisson's as well as rlock's).
#[test]
fn a_killed_holders_expirable_permits_are_reclaimed_at_their_expiry() {
    const NAME: &str = "kill:expirable";
    const LEASE: Duration = Duration::from_secs(1);
    // A worker ends an expirable hold early, when its lease may have run out counting from the start
    // of its attempt; a victim that waited for the permit long enough would give it back before it
    // is killed (seen under load: the permit was already gone). Its longer lease outlasts any wait
    // the contenders' 1 s leases can cause.
    const VICTIM_LEASE: Duration = Duration::from_secs(3);
    let server = RedisServer::start();
    let runtime = runtime();
    let mut redis = runtime.block_on(raw(&server));
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(3));
    let spec = WorkerSpec {
        run_for: run,
        tasks: 2,
        lease: Some(LEASE),
        ..contenders(Synchronizer::Expirable, &[NAME], 1)
    };
    for _ in 0..2 {
        let _ = fleet.spawn(&spec);
    }
    let victim = WorkerSpec {
        lease: Some(VICTIM_LEASE),
        ..victim(&spec)
    };
    let cycle = VICTIM_LEASE + LEASE;
    let started = Instant::now();
    let (mut kills, mut latest) = (0, Duration::ZERO);
    while kills == 0 || started.elapsed() + cycle < run {
        let index = fleet.spawn(&victim);
        assert!(
            fleet.wait_holding(index, Duration::from_secs(5)).is_some(),
            "the victim takes the permit"
        );
        let id = PermitId::from_str(&held_field(&fleet, index)).expect("a permit id");
        // Let the contenders wait for it.
        thread::sleep(Duration::from_millis(100));
        fleet.kill(index);
        kills += 1;
        let mut expiry = None;
        let reclaimed = runtime.block_on(eventually(VICTIM_LEASE * 2, async || {
            let score: Option<u64> = redis::cmd("ZSCORE")
                .arg(format!("{{{NAME}}}:timeout"))
                .arg(id.as_bytes())
                .query_async(&mut redis)
                .await
                .expect("ZSCORE");
            expiry = score.or(expiry);
            score.is_none()
        }));
        let reclaimed_at = epoch_ms();
        let expiry = expiry.expect("the permit was seen taken");
        assert!(reclaimed, "the killed holder's permit was reclaimed");
        assert!(
            reclaimed_at >= expiry,
            "reclaimed {} ms before its expiry",
            expiry - reclaimed_at
        );
        let late = Duration::from_millis(reclaimed_at - expiry);
        assert!(
            late <= Duration::from_millis(500),
            "reclaimed {late:?} late"
        );
        latest = latest.max(late);
        thread::sleep(Duration::from_millis(300));
    }
    let report = fleet.finish(Duration::from_secs(1));
    let mut summary = report.summary("kill -9 of a holder (expirable)");
    let _ = summary.figures.insert(
        "max time a killed holder's expirable permit outlived its expiry (ms)".into(),
        latest.as_secs_f64() * 1e3,
    );
    publish(&summary);
    report.assert_sound();
    assert_eq!(report.faults[&FaultKind::KillHolder], kills);
    assert_eq!(report.lease_losses(), 0);
    let freed = report
        .max_handoff(true)
        .expect("a contender took a killed holder's permit");
    assert!(
        freed <= VICTIM_LEASE + Duration::from_millis(500),
        "a killed holder's permit was taken over after {freed:?}, lease {VICTIM_LEASE:?}"
    );
}

/// Subscriber connections killed again and again while workers wait: on a semaphore's or an
/// expirable semaphore's permits (nine tasks, two permits), or for a latch the harness closes and
/// opens again. Every waiter still wakes: every attempt completes, and a latch's waiters wake within
/// the one-second re-check that bounds a lost message.
fn waiters_wake_through_killed_subscriber_connections(synchronizer: Synchronizer) {
    const NAME: &str = "pubsub:x";
    let server = RedisServer::start();
    let runtime = runtime();
    let mut redis = runtime.block_on(raw(&server));
    let client = runtime.block_on(client_with(&server, |_| {}));
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(3));
    let spec = WorkerSpec {
        run_for: run,
        hold: Duration::from_millis(20),
        think: Duration::from_millis(10),
        take: 1..=2,
        lease: Some(Duration::from_secs(10)),
        ..contenders(synchronizer, &[NAME], 2)
    };
    for _ in 0..3 {
        let _ = fleet.spawn(&spec);
    }
    let latch = client.count_down_latch(NAME);
    let started = Instant::now();
    let mut opened = Vec::new();
    thread::sleep(Duration::from_millis(300));
    let mut last_kill = now_ns();
    while started.elapsed() + Duration::from_millis(1500) < run {
        if synchronizer == Synchronizer::Latch {
            assert!(runtime.block_on(latch.try_set_count(2)).expect("set"));
            // Let the workers wait on the closed latch.
            thread::sleep(Duration::from_millis(150));
        }
        fleet.record_fault("redis", FaultKind::KillSubscribers);
        let _ = runtime.block_on(kill_subscribers(&mut redis));
        last_kill = now_ns();
        if synchronizer == Synchronizer::Latch {
            for _ in 0..2 {
                runtime.block_on(latch.count_down()).expect("count down");
            }
            opened.push(now_ns());
            // Open for longer than a re-check, so that a waiter that lost the message sees it.
            thread::sleep(Duration::from_millis(1200));
        } else {
            thread::sleep(Duration::from_millis(fastrand::u64(150..400)));
        }
    }
    let report = fleet.finish(Duration::from_secs(2));
    let mut summary = report.summary(&scenario("CLIENT KILL TYPE pubsub", synchronizer));
    let wakes = latch_wake_ups(&report, NAME, &opened);
    if let Some(slowest) = wakes.iter().max() {
        let _ = summary.figures.insert(
            "max wake-up of a latch waiter after killed subscribers (ms)".into(),
            slowest.as_secs_f64() * 1e3,
        );
    }
    publish(&summary);
    report.assert_sound();
    assert_eq!(report.lease_losses(), 0);
    if synchronizer == Synchronizer::Latch {
        assert!(!opened.is_empty());
        assert!(
            wakes.len() >= opened.len(),
            "waiters were waiting when the latch opened: {} wake-ups",
            wakes.len()
        );
        let slowest = wakes.iter().max().copied().unwrap_or_default();
        assert!(
            slowest < Duration::from_millis(1500),
            "a latch waiter woke {slowest:?} after it opened"
        );
    } else {
        for worker in ["w0", "w1", "w2"] {
            assert!(
                report.acquired_after(worker, last_kill),
                "{worker} took permits after the last kill"
            );
        }
    }
}

/// How long after each opening of latch `name` (at `opened`, ns) its waiters that were waiting then
/// saw it open.
fn latch_wake_ups(report: &Report, name: &str, opened: &[u64]) -> Vec<Duration> {
    let holds = report.holds.get(name).map_or(&[][..], Vec::as_slice);
    opened
        .iter()
        .flat_map(|&at| {
            holds
                .iter()
                .filter(move |h| h.started_ns < at && h.acquired_ns >= at)
                .map(move |h| Duration::from_nanos(h.acquired_ns - at))
        })
        .collect()
}

/// Outages of the whole server, `CLIENT PAUSE` and `SIGSTOP` of redis-server by turns, while workers
/// take and give back permits (bounded and unbounded waits) or wait for a latch the harness counts
/// down from many tasks at once. Nothing is applied twice: never more permits held than there are
/// (the checker), and at the end the permits, or the count-downs, add up to what the calls reported
/// (a call whose outcome is unknown may or may not have been applied). Every outcome is typed.
///
/// A plain semaphore's acquire whose reply the outage lost (`OutcomeUnknown`) may have taken its
/// permits for good, as the semaphore's docs say (rlock does not send it again, nor does Redisson):
/// its waits are all bounded here, the harness gives such permits back at the end and counts them
/// in the figures. An expirable semaphore's acquires are undone by rlock, and its releases (by id)
/// are sent again by the workers.
fn client_pause_and_a_frozen_server_apply_nothing_twice(synchronizer: Synchronizer) {
    const NAME: &str = "outage:x";
    const PERMITS: u32 = 3;
    const COMMAND_TIMEOUT: Duration = Duration::from_millis(250);
    const OUTAGE: Duration = Duration::from_millis(800);
    let server = RedisServer::start();
    let runtime = runtime();
    let mut redis = runtime.block_on(raw(&server));
    let client = runtime.block_on(client_with(&server, |config| {
        config.command_timeout = COMMAND_TIMEOUT;
    }));
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(4));
    let spec = WorkerSpec {
        run_for: run,
        watchdog: Duration::from_secs(3),
        command_timeout: COMMAND_TIMEOUT,
        hold: Duration::from_millis(10),
        think: Duration::from_millis(5),
        take: 1..=2,
        // Longer than an outage, a hold and the run: a permit left taken is still there at the end.
        lease: Some(Duration::from_secs(10)),
        ..contenders(synchronizer, &[NAME], PERMITS)
    };
    // A plain semaphore's acquire whose reply is lost may have taken its permits for good (rlock
    // does not send it again, nor does Redisson): a wait without a bound could last for ever.
    let spec = match synchronizer {
        Synchronizer::Semaphore => WorkerSpec {
            wait: Some(Duration::from_secs(1)),
            ..spec
        },
        _ => spec,
    };
    spawn_through_outages(&mut fleet, &spec);
    let latch = client.count_down_latch(NAME);
    let mut count_downs = CountDowns::default();
    let started = Instant::now();
    thread::sleep(Duration::from_millis(400));
    let mut freeze = false;
    let mut recovered_at = now_ns();
    while started.elapsed() + OUTAGE * 2 < run {
        // A latch closed for a batch of count-downs sent into the outage.
        let batch = (synchronizer == Synchronizer::Latch).then(|| {
            assert!(runtime.block_on(latch.try_set_count(COUNT)).expect("set"));
            runtime.spawn(count_down(latch.clone(), COUNT))
        });
        if freeze {
            fleet.record_fault("redis", FaultKind::StopServer);
            server.pause();
            thread::sleep(OUTAGE);
            server.resume();
        } else {
            fleet.record_fault("redis", FaultKind::ClientPause);
            runtime.block_on(pause_clients(&mut redis, OUTAGE.as_millis() as u64));
            thread::sleep(OUTAGE);
        }
        recovered_at = now_ns();
        freeze = !freeze;
        if let Some(batch) = batch {
            let batch = runtime.block_on(batch).expect("no panic");
            // Count-downs that Redis had received when the outage ended run right after it.
            thread::sleep(Duration::from_millis(300));
            let left = runtime.block_on(latch.count()).expect("count");
            count_downs.check(&batch, COUNT - left);
            // Open it for the waiters.
            for _ in 0..left {
                runtime.block_on(latch.count_down()).expect("count down");
            }
            count_downs.add(&batch);
        }
        thread::sleep(Duration::from_millis(500));
    }
    fleet.wait_finished();
    let unaccounted = match synchronizer {
        Synchronizer::Semaphore => {
            let semaphore = client.semaphore(NAME);
            let available = runtime
                .block_on(semaphore.available_permits())
                .expect("read");
            let missing = i64::from(PERMITS) - available;
            // Restored, so that the leak check sees the semaphore as it should be.
            if missing > 0 {
                runtime
                    .block_on(semaphore.add_permits(missing))
                    .expect("add");
            }
            missing
        }
        // Taken permits are in the sorted set: the leak check sees them.
        _ => 0,
    };
    let report = fleet.finish(Duration::from_secs(2));
    let mut summary = report.summary(&scenario(
        "CLIENT PAUSE and SIGSTOP of redis-server",
        synchronizer,
    ));
    count_downs.report(&mut summary);
    let unknown_permits = report.errors.get("outcome_unknown").copied().unwrap_or(0)
        + report
            .unlock_errors
            .get("outcome_unknown")
            .copied()
            .unwrap_or(0);
    let _ = summary.figures.insert(
        "semaphore permits taken by acquires of unknown outcome (given back)".into(),
        unaccounted as f64,
    );
    publish(&summary);
    report.assert_sound();
    assert_eq!(report.lease_losses(), 0, "outages shorter than a lease");
    assert_typed(report.errors.keys().chain(report.unlock_errors.keys()));
    assert_typed(&count_downs.failed);
    assert!(
        unaccounted >= 0,
        "{} permits more than the semaphore was set up with: a release applied twice",
        -unaccounted
    );
    // An acquire or a release of unknown outcome may have taken (or not given back) two permits.
    assert!(
        unaccounted <= 2 * i64::try_from(unknown_permits).expect("a small count"),
        "{unaccounted} permits missing, {unknown_permits} calls of unknown outcome"
    );
    let felt = report.errors.values().sum::<usize>() + report.gave_up + count_downs.failed.len();
    assert!(felt > 0, "the outages were felt");
    // Unless the outages took permits for good, which may leave too few for everyone.
    if unaccounted == 0 {
        for worker in ["w0", "w1", "w2"] {
            assert!(
                report.acquired_after(worker, recovered_at),
                "{worker} acquired again after the last outage"
            );
        }
    }
}

/// The count a latch is set to before an outage, and how many count-downs are sent into it.
const COUNT: u64 = 40;

/// `n` count-downs of `latch` at once, from as many tasks; their outcomes.
async fn count_down(latch: CountDownLatch, n: u64) -> Vec<Result<(), Error>> {
    let calls: Vec<_> = (0..n)
        .map(|_| {
            let latch = latch.clone();
            tokio::spawn(async move { latch.count_down().await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.expect("no panic"));
    }
    outcomes
}

/// The count-downs the harness sent into outages, by outcome.
#[derive(Default)]
struct CountDowns {
    applied: u64,
    /// The kinds of the errors.
    failed: Vec<&'static str>,
}

impl CountDowns {
    /// Asserts that a batch `applied` count-downs: at least those that succeeded, at most those that
    /// may have (succeeded, or outcome unknown).
    fn check(&self, batch: &[Result<(), Error>], applied: u64) {
        let ok = batch.iter().filter(|o| o.is_ok()).count() as u64;
        let unknown = batch
            .iter()
            .filter(|o| matches!(o, Err(Error::OutcomeUnknown { .. })))
            .count() as u64;
        assert!(
            applied >= ok,
            "{applied} count-downs applied, {ok} reported done"
        );
        assert!(
            applied <= ok + unknown,
            "{applied} count-downs applied, {ok} reported done and {unknown} of unknown outcome: {:?}",
            batch
                .iter()
                .filter_map(|o| o.as_ref().err())
                .collect::<Vec<_>>()
        );
    }

    fn add(&mut self, batch: &[Result<(), Error>]) {
        self.applied += batch.len() as u64;
        self.failed.extend(
            batch
                .iter()
                .filter_map(|o| o.as_ref().err().map(error_kind)),
        );
    }

    /// Adds the count-downs to the figures: as attempts, and their errors by kind.
    fn report(&self, summary: &mut Summary) {
        summary.attempts += usize::try_from(self.applied).expect("a small count");
        for kind in &self.failed {
            *summary
                .errors
                .entry(format!("count_down: {kind}"))
                .or_default() += 1;
        }
    }
}

/// Which outage the second server of a multi-lock goes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outage {
    /// `SIGSTOP`, then `SIGCONT`.
    Frozen,
    /// `SIGKILL`, then a restart on the same port, its holds kept by AOF.
    Killed,
}

/// How long a multi-lock scenario's workers run on after the last outage of its second server
/// began, so that every worker, the two whose waits are bounded (1 s) too, can be required to
/// acquire again.
///
/// * Frozen (`SIGSTOP`): connections survive it, and what timed out meanwhile is re-sent and
///   answered once the server runs again: twice the outage covers it.
/// * Killed (`SIGKILL`, restarted with AOF): what the kill cut short may be cleared only by the
///   lease, so a name can stay taken on the restarted server until `watchdog` after the kill:
///   - a member whose unlock found the server down (nothing sent, so nothing re-sent) stays held,
///     AOF keeping its expiry, until its lease ends (README, "Guarantees and limits": it "still
///     expires with its lease"): `watchdog` after the kill at most, since it was taken or last
///     renewed before it;
///   - an acquire whose reply the kill lost is undone in the background, tried 50, 150, 350, 750,
///     1,550 and 3,150 ms after (`undo` in crates/core/src/engine/acquire.rs), giving up once past
///     the lease; its owner waits for it before it tries that lock again (`reconciling`), holding
///     the multi-lock's first member meanwhile, but no longer than its attempt's own bound (a
///     bounded wait once waited for the undo without a bound: attempts of 1 s took 3.3 s, and one
///     run's workers were left too little of the tail: "w1 acquired again after the last outage");
///   - the subscriber reconnects with a back-off of up to 2 s, which a server up for 600 ms between
///     kills seldom resets: a waiter that subscribes before then waits out its wait and tries once
///     more at its end.
///
/// With a tail of `2 * duration` (1.6 s at the shortest) a run could fail: in one, both names were
/// held on the killed server by members whose unlock had failed at the last kill, and came free
/// 3 s after it, 30 ms before the workers stopped starting attempts. With `watchdog` + 2 s: all of
/// the above is over by `watchdog` + 150 ms after the kill; a bounded worker's attempt in progress
/// then ends within its 1 s wait (plus an overrun of a few hundred ms, as the figures show), and
/// its next ones find the names free but for the other workers' 10 ms holds, which wake it: it has
/// over half a second to start one, and each may still wait its 1 s after the end.
fn quiet_after(outage: Outage, duration: Duration, watchdog: Duration) -> Duration {
    match outage {
        Outage::Frozen => duration * 2,
        Outage::Killed => watchdog + Duration::from_secs(2),
    }
}

mod a_multi_lock_across_two_servers_leaves_no_partial_hold {
    #[test]
    fn frozen() {
        super::a_multi_lock_across_two_servers_leaves_no_partial_hold(super::Outage::Frozen);
    }

    #[test]
    fn killed() {
        super::a_multi_lock_across_two_servers_leaves_no_partial_hold(super::Outage::Killed);
    }
}

/// Multi-locks of a lock on each of two servers, while the second one is frozen or killed (and
/// restarted) again and again. A multi-lock that cannot take a member gives back the ones it took:
/// once the server is back, no member holds a field of an attempt that failed or gave up (the leak
/// check looks on both servers while the workers still run, their watchdogs renewing any hold they
/// still had), holds never overlap, and everyone acquires again: the workers run on after the
/// last outage ended (the server meant to be back: a restart may take longer on a loaded machine)
/// for as long as [`quiet_after`] says that takes.
fn a_multi_lock_across_two_servers_leaves_no_partial_hold(outage: Outage) {
    const WATCHDOG: Duration = Duration::from_secs(3);
    const COMMAND_TIMEOUT: Duration = Duration::from_millis(250);
    const OUTAGE: Duration = Duration::from_millis(800);
    let quiet = quiet_after(outage, OUTAGE, WATCHDOG);
    let first = RedisServer::start();
    let mut second = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut fleet = Fleet::new(TORTURE, &first.url());
    // The same outages as with a tail of `OUTAGE * 2` (the quick suite's 4 s, or the soak's
    // length), and then the longer tail, counted from the end of the last outage (see below).
    let run = length(Duration::from_secs(4)) + (quiet - OUTAGE * 2) + OUTAGE;
    let spec = WorkerSpec {
        run_for: run,
        tasks: 2,
        watchdog: WATCHDOG,
        command_timeout: COMMAND_TIMEOUT,
        hold: Duration::from_millis(10),
        multi_url: Some(second.url()),
        ..contenders(Synchronizer::Multi, &["multi:a", "multi:b"], 1)
    };
    spawn_through_outages(&mut fleet, &spec);
    let started = Instant::now();
    thread::sleep(Duration::from_millis(400));
    let mut recovered_at = now_ns();
    // No outage ends later than `quiet` before the workers' end: the tail is counted from when
    // the server is meant to be back, not from the kill, so that what the kill left (leftover
    // holds, undos and the subscriber's back-off, which resume only once it is back) is not
    // squeezed by a restart that took long on a loaded machine. `recovered_at` below is when it
    // was back in fact.
    while started.elapsed() + OUTAGE + quiet < run {
        match outage {
            Outage::Frozen => {
                fleet.record_fault("redis", FaultKind::StopServer);
                second.pause();
                thread::sleep(OUTAGE);
                second.resume();
            }
            Outage::Killed => {
                fleet.record_fault("redis", FaultKind::KillServer);
                second.kill();
                thread::sleep(OUTAGE);
                second.restart();
            }
        }
        recovered_at = now_ns();
        thread::sleep(Duration::from_millis(600));
    }
    // A member taken by an acquire whose reply the outage lost, and not undone, expires with its
    // lease: the leak check waits that long, so that only a hold somebody still renews is left.
    let report = fleet.finish(WATCHDOG + Duration::from_secs(1));
    let name = match outage {
        Outage::Frozen => "SIGSTOP of one of a multi-lock's servers",
        Outage::Killed => "kill -9 of one of a multi-lock's servers",
    };
    publish(&report.summary(name));
    report.assert_sound();
    // Not asserted: no lease should be lost (outages are shorter than a lease), yet about one run
    // in twenty has a multi-lock whose attempt spanned the outage told by its unlock, 15 ms after
    // it acquired, that a member's hold was gone (`LeaseLost`; the figures' `lease_losses`).
    assert_typed(report.errors.keys());
    assert_typed(
        report
            .unlock_errors
            .keys()
            .filter(|kind| kind.as_str() != "lease_lost"),
    );
    // A frozen member is waited for: its unlocks and acquires time out and are tried again.
    let failed: usize = report.errors.values().sum();
    let slow_unlock = Duration::from_millis(report.max_unlock_ms) >= COMMAND_TIMEOUT;
    assert!(
        failed + report.gave_up > 0 || slow_unlock,
        "the outages were felt"
    );
    for worker in ["w0", "w1", "w2"] {
        assert!(
            report.acquired_after(worker, recovered_at),
            "{worker} acquired again after the last outage"
        );
    }
}

/// The group lock (Redisson's faster multi-lock, every attempt taking the same three values of one
/// group, so that its holds exclude each other as a lock's) under what kills a lock's holder and a
/// waiter's messages: holders killed with `SIGKILL` while they hold the values, which free when the
/// lease their watchdog stopped renewing runs out (a waiting contender takes them then), and at
/// each kill the subscriber connections of the waiting contenders killed too (they still wake).
/// Kind `group` of `scripts/soak.sh`.
#[test]
fn a_group_lock_under_killed_holders_and_subscribers() {
    const NAME: &str = "group:g";
    const WATCHDOG: Duration = Duration::from_secs(1);
    let server = RedisServer::start();
    let runtime = runtime();
    let mut redis = runtime.block_on(raw(&server));
    let mut fleet = Fleet::new(TORTURE, &server.url());
    let run = length(Duration::from_secs(4));
    let spec = WorkerSpec {
        run_for: run,
        tasks: 2,
        watchdog: WATCHDOG,
        hold: Duration::from_millis(10),
        think: Duration::from_millis(5),
        ..contenders(Synchronizer::Group, &[NAME], 1)
    };
    for _ in 0..2 {
        let _ = fleet.spawn(&spec);
    }
    let victim = victim(&spec);
    // Each cycle: a victim takes the values, is killed, they free a lease later.
    let cycle = WATCHDOG * 2 + Duration::from_millis(500);
    let started = Instant::now();
    let (mut kills, mut killed_at) = (0, now_ns());
    while kills == 0 || started.elapsed() + cycle < run {
        let index = fleet.spawn(&victim);
        assert!(
            fleet.wait_holding(index, Duration::from_secs(5)).is_some(),
            "the victim takes the group's values"
        );
        fleet.kill(index);
        kills += 1;
        killed_at = now_ns();
        fleet.record_fault("redis", FaultKind::KillSubscribers);
        let _ = runtime.block_on(kill_subscribers(&mut redis));
        thread::sleep(cycle);
    }
    let report = fleet.finish(Duration::from_secs(2));
    publish(&report.summary("kill -9 of a holder and killed subscribers (group lock)"));
    report.assert_sound();
    assert_eq!(report.faults[&FaultKind::KillHolder], kills);
    assert_eq!(report.lease_losses(), 0);
    for worker in ["w0", "w1"] {
        assert!(
            report.acquired_after(worker, killed_at),
            "{worker} took the values a killed holder left"
        );
    }
}
