//! Mutual exclusion under mixed contention, for every lock kind whose holders exclude each other
//! (all but the read lock; readers against writers: `rw`): emulated Java threads (two clients) and
//! rlock tasks (two clients) increment a non-atomic GET/SET counter under one lock; the counter
//! ends exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::redisson::RedissonVersion;
use rlock_tests::{RedisServer, harness};

use crate::support::{InteropKind, Party, PartyLock, Redis, Side, every_kind};

const NAME: &str = "interop:counter";
const COUNTER: &str = "interop:counter:value";
const WORKERS_PER_CLIENT: u64 = 2;
const ITERATIONS: u64 = 12;
/// Far below the 30 s PTTL a waiter would sleep out if some unlock failed to wake it.
const LIMIT: Duration = Duration::from_secs(25);
/// How much longer a Java worker of the write lock may take with watchdog holds: one PTTL. A write
/// unlock publishes `1`, and Java's `1` releases only the threads blocked on the entry's semaphore at
/// that instant (docs/protocol.md §3.2: `latch.release(latch.getQueueLength())`, nothing banked),
/// so a Java waiter between its try and its wait misses the message and sleeps out the PTTL:
/// Redisson's own race, reproduced by the emulator (seen in about 4 % of runs with four test
/// processes at once: the lock free, one Java worker left asleep on its subscription). rlock banks
/// the wake-up, so rlock's workers keep [`LIMIT`].
const JAVA_WRITE_WAKE_UP_MISSED: Duration = Duration::from_secs(30);

/// Two Java clients of `version` and two rlock clients, two workers each, every worker taking the
/// `kind` lock `ITERATIONS` times (with `lease`, or the watchdog).
async fn counter_stays_exact(kind: InteropKind, version: RedissonVersion, lease: Option<Duration>) {
    let server = RedisServer::start();
    let mut redis = Redis::connect(&server).await;
    let parties = [
        Party::java(&server, version, None).await,
        Party::java(&server, version, None).await,
        Party::connect(Side::Rlock, &server).await,
        Party::connect(Side::Rlock, &server).await,
    ];
    let inside = Arc::new(AtomicUsize::new(0));
    // The Java parties' workers, then rlock's.
    let mut workers = [Vec::new(), Vec::new()];
    for (i, party) in parties.iter().enumerate() {
        for thread in 1..=WORKERS_PER_CLIENT {
            let lock = party.get(kind, NAME);
            let conn = redis.conn.clone();
            workers[i / 2].push(tokio::spawn(work(
                lock,
                thread,
                lease,
                conn,
                inside.clone(),
            )));
        }
    }
    let [java, rlock] = workers;
    let started = tokio::time::Instant::now();
    let rlock = tokio::time::timeout(LIMIT, futures::future::join_all(rlock))
        .await
        .expect("rlock's workers finish well before a 30 s PTTL: no wake-up was lost");
    let java_limit = if kind == InteropKind::WRITE && lease.is_none() {
        LIMIT + JAVA_WRITE_WAKE_UP_MISSED
    } else {
        LIMIT
    };
    let java = tokio::time::timeout_at(started + java_limit, futures::future::join_all(java))
        .await
        .expect("Java's workers finish well before a 30 s PTTL: no wake-up was lost");
    for result in rlock.into_iter().chain(java) {
        result.expect("a worker failed");
    }

    let total = WORKERS_PER_CLIENT * ITERATIONS * parties.len() as u64;
    let counter: u64 = redis.conn.get(COUNTER).await.expect("GET counter");
    assert_eq!(counter, total, "every increment happened under exclusion");
    assert!(!redis.exists(NAME).await, "the lock is free at the end");
    let mut check = redis.clone();
    let clean = harness::eventually(Duration::from_secs(2), async || {
        check.channels().await.is_empty() && check.latch_keys().await.is_empty()
    })
    .await;
    assert!(
        clean,
        "every waiter unsubscribed and every latch was deleted"
    );
}

async fn work(
    lock: PartyLock,
    thread: u64,
    lease: Option<Duration>,
    mut conn: redis::aio::MultiplexedConnection,
    inside: Arc<AtomicUsize>,
) {
    for _ in 0..ITERATIONS {
        let hold = match lease {
            None => lock.lock(thread).await,
            Some(lease) => lock.lock_with_lease(thread, lease).await,
        };
        assert_eq!(
            inside.fetch_add(1, Ordering::SeqCst),
            0,
            "two holders at once"
        );
        let value: Option<u64> = conn.get(COUNTER).await.expect("GET");
        tokio::time::sleep(Duration::from_millis(1)).await;
        let _: () = conn
            .set(COUNTER, value.unwrap_or(0) + 1)
            .await
            .expect("SET");
        let _ = inside.fetch_sub(1, Ordering::SeqCst);
        hold.release().await;
    }
}

async fn java_head_and_rlock_with_watchdog_holds(kind: InteropKind) {
    counter_stays_exact(kind, RedissonVersion::V4, None).await;
}

async fn java_3_12_and_rlock_with_leases(kind: InteropKind) {
    counter_stays_exact(kind, RedissonVersion::V3_12, Some(Duration::from_secs(10))).await;
}

async fn java_3_31_and_rlock_with_leases(kind: InteropKind) {
    counter_stays_exact(kind, RedissonVersion::V3_31, Some(Duration::from_secs(10))).await;
}

every_kind!(exclusive one_test: java_head_and_rlock_with_watchdog_holds);
// The non-reentrant locks are 4.4+: no 3.x client has them.
every_kind!(
    exclusive reentrant one_test: java_3_12_and_rlock_with_leases,
    java_3_31_and_rlock_with_leases,
);
