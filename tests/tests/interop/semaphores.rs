//! Semaphores shared across the sides (docs/protocol.md §8.5, §8.6, §11.4–§11.5), for both kinds
//! (the `RSemaphore` and the `RPermitExpirableSemaphore`, its permits taken without a lease):
//!
//! - the permits are shared exactly: emulated Java threads and rlock tasks contend for a few
//!   permits at once, every hold goes into the history checker's counting model (never more
//!   permits held than there are, every acquisition completed), and both sides count the permits
//!   back at the end;
//! - a release wakes the other side's waiter within [`WAKE_LIMIT`], on one server and in a cluster
//!   (sharded pub/sub);
//! - `n` permits given back at once wake `n` waiters of the other side (Java's
//!   `min(waiters, n)`, rlock's up-to-`n` rule), not one more.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock_tests::RedisServer;
use rlock_tests::history::{Event, History, Hold, Mode, Record, now_ns};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::support::{
    Latencies, Party, PartySemaphore, Permits, Redis, SemaphoreKind, Side, Site, Topology,
    WAKE_LIMIT, both_semaphores, woken,
};

const NAME: &str = "interop:semaphore";

/// Its channel (§1.4), literally: waiters of both sides must subscribe exactly this.
const CHANNEL: &str = "redisson_sc:{interop:semaphore}";

// ===== permits shared exactly =====

/// The semaphore's permits in the contention scenario.
const PERMITS: u32 = 3;
/// Clients of each side in the contention scenario.
const CLIENTS_PER_SIDE: usize = 2;
/// Tasks (Java threads) of each client.
const WORKERS_PER_CLIENT: u32 = 3;
/// Acquisitions of each task: 2 × 2 × 3 × 20 = 240 in all.
const ROUNDS: u64 = 20;
/// How long a timed acquire may wait: far more than the contention ever makes it, so it never
/// gives up.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long the whole contention may take (a second or two in practice).
const CONTENTION_LIMIT: Duration = Duration::from_secs(20);

/// Two Java clients and two rlock clients, three tasks each, take one or two of the semaphore's
/// three permits 20 times each (waiting without limit, or up to [`PATIENCE`]) and hold them for a
/// moment. The history of every hold (with an `INCR` fence taken inside it) is checked with the
/// counting model: never more than three permits held at once, all three held at once at some
/// point (the contention was real), every acquisition completed. Both sides then count three
/// permits available, and nobody is subscribed any more.
async fn permits_are_shared_exactly(kind: SemaphoreKind) {
    let server = RedisServer::start();
    let redis = Redis::connect(&server).await;
    let mut parties = Vec::new();
    for side in [Side::Java, Side::Rlock] {
        for _ in 0..CLIENTS_PER_SIDE {
            parties.push(Party::connect(side, &server).await);
        }
    }
    assert!(
        parties[0]
            .semaphore(kind, NAME)
            .try_set_permits(PERMITS)
            .await
    );
    let history = Arc::new(Mutex::new(History::new()));
    history.lock().expect("history").push(Record {
        process: "setup".to_owned(),
        at_ns: now_ns(),
        event: Event::Permits {
            name: NAME.to_owned(),
            permits: PERMITS,
        },
    });

    let started = Instant::now();
    let mut workers = Vec::new();
    for (client, party) in parties.iter().enumerate() {
        for task in 0..WORKERS_PER_CLIENT {
            let worker = Worker {
                process: format!("{}-{client}", party.side()),
                task,
                semaphore: party.semaphore(kind, NAME),
                fences: redis.conn.clone(),
                history: history.clone(),
            };
            workers.push(tokio::spawn(worker.run()));
        }
    }
    let all = futures::future::join_all(workers);
    let results = tokio::time::timeout(CONTENTION_LIMIT, all)
        .await
        .expect("every acquisition completes: no waiter was left asleep");
    for result in results {
        result.expect("a worker failed");
    }
    let elapsed = started.elapsed();

    let report = history.lock().expect("history").check();
    report.assert_sound();
    let total = parties.len() * WORKERS_PER_CLIENT as usize * ROUNDS as usize;
    assert_eq!(report.acquisitions(), total, "every acquisition completed");
    assert_eq!(report.gave_up, 0, "no timed acquire ran out");
    let most = most_permits_held(&report.holds[NAME]);
    eprintln!(
        "interop permits: {kind}: {total} acquisitions by {} Java and {} rlock tasks in {elapsed:?}, \
         at most {most} of {PERMITS} permits held at once",
        CLIENTS_PER_SIDE * WORKERS_PER_CLIENT as usize,
        CLIENTS_PER_SIDE * WORKERS_PER_CLIENT as usize,
    );
    assert_eq!(most, PERMITS, "the permits were contended to the full");

    for party in [&parties[0], &parties[CLIENTS_PER_SIDE]] {
        let semaphore = party.semaphore(kind, NAME);
        let side = party.side();
        let available = semaphore.available_permits().await;
        assert_eq!(
            available,
            i64::from(PERMITS),
            "{side} counts every permit back"
        );
        if let PartySemaphore::Expirable(semaphore) = semaphore {
            assert_eq!(semaphore.acquired_permits().await, 0, "{side}: none taken");
        }
    }
    let mut check = redis.clone();
    let unsubscribed = rlock_tests::harness::eventually(Duration::from_secs(2), async || {
        check.subscribers(CHANNEL).await == 0
    });
    assert!(unsubscribed.await, "every waiter unsubscribed");
}

/// One task of the contention scenario, writing its holds into the shared history.
struct Worker {
    process: String,
    task: u32,
    semaphore: PartySemaphore,
    /// A plain connection for the fences.
    fences: MultiplexedConnection,
    history: Arc<Mutex<History>>,
}

impl Worker {
    /// [`ROUNDS`] acquisitions: every third takes two permits, waiting without limit; of the
    /// others, every second waits up to [`PATIENCE`] (the emulator's timed acquire takes one
    /// permit).
    async fn run(mut self) {
        let fence_key = format!("{NAME}:fence");
        for seq in 0..ROUNDS {
            let permits = if seq % 3 == 0 { 2 } else { 1 };
            let timed = permits == 1 && seq % 2 == 1;
            self.log(Event::Started {
                task: self.task,
                seq,
                name: NAME.to_owned(),
                wait_ms: timed.then(|| u64::try_from(PATIENCE.as_millis()).expect("ms")),
                mode: Mode::Exclusive,
                permits,
                owner: None,
                kind: None,
            });
            let taken = if timed {
                self.semaphore.try_acquire_for(permits, PATIENCE).await
            } else {
                Some(self.semaphore.acquire(permits).await)
            };
            let Some(taken) = taken else {
                self.log(Event::GaveUp {
                    task: self.task,
                    seq,
                });
                continue;
            };
            let acquired_ns = now_ns();
            let fence: i64 = self.fences.incr(&fence_key, 1).await.expect("INCR");
            self.push(
                acquired_ns,
                Event::Acquired {
                    task: self.task,
                    seq,
                    fence: Some(fence),
                    field: String::new(),
                },
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
            let fence_after: i64 = self.fences.get(&fence_key).await.expect("GET");
            let released_ns = now_ns();
            taken.release().await;
            let unlock_ms = (now_ns() - released_ns) / 1_000_000;
            self.push(
                released_ns,
                Event::Released {
                    task: self.task,
                    seq,
                    fence_after: Some(fence_after),
                    lease_lost: false,
                    unlock_error: None,
                    unlock_ms,
                    signalled: None,
                    dropped: false,
                },
            );
        }
    }

    fn log(&self, event: Event) {
        self.push(now_ns(), event);
    }

    fn push(&self, at_ns: u64, event: Event) {
        let record = Record {
            process: self.process.clone(),
            at_ns,
            event,
        };
        self.history.lock().expect("history").push(record);
    }
}

/// The most permits the holds of one semaphore held at once (intervals that only touch do not
/// overlap, as in the checker).
fn most_permits_held(holds: &[Hold]) -> u32 {
    let mut edges: Vec<(u64, i64)> = holds
        .iter()
        .flat_map(|hold| {
            let permits = i64::from(hold.permits);
            [(hold.acquired_ns, permits), (hold.end_ns, -permits)]
        })
        .collect();
    // At one instant, ends before starts.
    edges.sort_unstable();
    let (mut held, mut most) = (0, 0);
    for (_, change) in edges {
        held += change;
        most = most.max(held);
    }
    u32::try_from(most).expect("a count")
}

both_semaphores!(one_test: permits_are_shared_exactly);

// ===== wake-ups across the sides =====

/// Hand-offs each wake-up scenario times.
const WAKE_ROUNDS: usize = 10;

/// `releaser` holds the semaphore's only permit while `waiter` waits for it (subscribed, asleep:
/// nothing expires; in a cluster with `SSUBSCRIBE` on the semaphore's master), then releases it:
/// the waiter has it within [`WAKE_LIMIT`].
async fn a_release_wakes_the_other_side(
    kind: SemaphoreKind,
    topology: Topology,
    releaser: Side,
    waiter: Side,
) {
    let site = Site::start(topology);
    let releaser = site.party(releaser).await;
    let waiter = site.party(waiter).await;
    let mut redis = site.redis(NAME).await;
    let semaphore = releaser.semaphore(kind, NAME);
    assert!(semaphore.try_set_permits(1).await);
    let mut latencies = Latencies::default();
    for _ in 0..WAKE_ROUNDS {
        let held = semaphore.acquire(1).await;
        let waiting = waiter.semaphore(kind, NAME).spawn_acquire(1);
        let _ = redis.wait_parked(CHANNEL, 1).await;
        if topology == Topology::Cluster {
            let sharded = redis.shard_channels().await;
            assert_eq!(
                sharded,
                vec![CHANNEL.as_bytes()],
                "SSUBSCRIBE on the master of {NAME}"
            );
        }
        let released_at = Instant::now();
        held.release().await;
        let (acquired_at, taken) = woken(waiting).await;
        latencies.record(released_at, acquired_at);
        assert_eq!(semaphore.available_permits().await, 0);
        taken.release().await;
    }
    assert_eq!(semaphore.available_permits().await, 1);
    latencies.check(
        &format!(
            "{kind} release wakes waiter, {} -> {} ({})",
            releaser.side(),
            waiter.side(),
            site.label()
        ),
        WAKE_LIMIT,
    );
}

/// Both kinds on one server; the plain semaphore also in a cluster (the permit-expirable one
/// publishes and subscribes alike, on the same channel).
mod a_release_wakes_the_other_side {
    mod plain {
        crate::support::directions!(
            super::super::a_release_wakes_the_other_side,
            crate::support::SemaphoreKind::Plain,
            crate::support::Topology::Single
        );

        /// The same in a cluster, where both sides publish and subscribe with sharded pub/sub.
        mod cluster {
            crate::support::directions!(
                super::super::super::a_release_wakes_the_other_side,
                crate::support::SemaphoreKind::Plain,
                crate::support::Topology::Cluster
            );
        }
    }

    mod expirable {
        crate::support::directions!(
            super::super::a_release_wakes_the_other_side,
            crate::support::SemaphoreKind::Expirable,
            crate::support::Topology::Single
        );
    }
}

/// How many permits [`n_permits_wake_n_waiters`] gives back at once.
const N: u32 = 3;

/// `releaser` holds all [`N`] permits while `N + 1` waiters of `waiter` (one client) wait for one
/// each, then gives the `N` back in one call (the `RSemaphore`'s `release(N)` publishes the new
/// count `N`, the permit-expirable semaphore's `tryRelease(ids)` the number released, `N`): `N`
/// waiters have a permit within [`WAKE_LIMIT`], the last one keeps waiting until one of them gives
/// its permit back, and then has it within [`WAKE_LIMIT`] too.
async fn n_permits_wake_n_waiters(kind: SemaphoreKind, releaser: Side, waiter: Side) {
    let server = RedisServer::start();
    let releaser = Party::connect(releaser, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let mut redis = Redis::connect(&server).await;
    let semaphore = releaser.semaphore(kind, NAME);
    assert!(semaphore.try_set_permits(N).await);
    let held = semaphore.acquire(N).await;

    let (sender, mut acquired) = mpsc::unbounded_channel::<(Instant, Permits)>();
    for _ in 0..=N {
        let waiting = waiter.semaphore(kind, NAME).spawn_acquire(1);
        let sender = sender.clone();
        drop(tokio::spawn(async move {
            let _ = sender.send(waiting.await.expect("waiter task"));
        }));
    }
    let _ = redis.wait_parked(CHANNEL, 1).await;

    let mut latencies = Latencies::default();
    let released_at = Instant::now();
    held.release().await;
    let mut taken = Vec::new();
    for _ in 0..N {
        let (acquired_at, permit) = next_acquired(&mut acquired).await;
        latencies.record(released_at, acquired_at);
        taken.push(permit);
    }
    let extra = tokio::time::timeout(Duration::from_millis(200), acquired.recv()).await;
    assert!(extra.is_err(), "a waiter got a permit that was not there");
    assert_eq!(semaphore.available_permits().await, 0);

    let released_at = Instant::now();
    taken.pop().expect("a permit").release().await;
    let (acquired_at, last) = next_acquired(&mut acquired).await;
    latencies.record(released_at, acquired_at);
    taken.push(last);
    for permit in taken {
        permit.release().await;
    }
    assert_eq!(semaphore.available_permits().await, i64::from(N));
    latencies.check(
        &format!(
            "{kind} release of {N} wakes {N} waiters, {} -> {}",
            releaser.side(),
            waiter.side()
        ),
        WAKE_LIMIT,
    );
}

/// The next waiter that took a permit, which must come soon.
async fn next_acquired(
    acquired: &mut mpsc::UnboundedReceiver<(Instant, Permits)>,
) -> (Instant, Permits) {
    tokio::time::timeout(Duration::from_secs(5), acquired.recv())
        .await
        .expect("a waiter was not woken")
        .expect("waiter tasks")
}

both_semaphores!(both_directions: n_permits_wake_n_waiters);
