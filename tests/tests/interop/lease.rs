//! Leases across the sides: a hold with a lease expires silently (nothing is published), the other
//! side's waiter gets the lock as soon as the PTTL it was given runs out, and the expired holder's
//! late unlock is refused without touching the new holder. For the `RLock` and the non-reentrant
//! lock (its hash and channel).

use std::time::Duration;

use rlock_tests::RedisServer;
use rlock_tests::redisson::{RedissonVersion, lock_channel};
use tokio::time::Instant;

use crate::support::{
    InteropKind, Latencies, Listener, Message, Party, Redis, Side, Unlocked, WAKE_LIMIT,
    every_kind, holds, woken,
};

const LEASE: Duration = Duration::from_millis(500);

async fn expiry_hands_over_without_a_message(kind: InteropKind, holder: Side, waiter: Side) {
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let name = "interop:lease";

    let sent_at = Instant::now();
    let expired = holder.get(kind, name).lock_with_lease(1, LEASE).await;
    let replied_at = Instant::now();
    let pttl = redis.pttl(name).await;
    assert!(
        (1..=500).contains(&pttl),
        "the hold has the 500 ms lease (pttl {pttl})"
    );
    let (acquired_at, hold) = woken(waiter.get(kind, name).spawn_lock(2)).await;
    assert!(
        acquired_at >= sent_at + LEASE,
        "the waiter took the lock before the lease ran out"
    );
    let mut latencies = Latencies::default();
    latencies.record(replied_at + LEASE, acquired_at);
    latencies.check(
        &format!(
            "{kind} take-over after a lease, {} -> {}",
            holder.side(),
            waiter.side()
        ),
        WAKE_LIMIT,
    );
    assert_eq!(
        messages.drain(Duration::from_millis(50)).await,
        vec![],
        "an expiry publishes nothing"
    );
    assert_eq!(redis.hash(name).await, holds([(waiter.field(2), 1)]));

    assert_eq!(expired.unlock().await, Unlocked::NotOwner);
    assert_eq!(redis.hash(name).await, holds([(waiter.field(2), 1)]));
    hold.release().await;
    let heard = messages.next(Duration::from_secs(1)).await;
    assert_eq!(
        heard,
        Some(Message::new(lock_channel(name), "0")),
        "a real unlock is heard"
    );
}

every_kind!(lock_and_twin both_directions: expiry_hands_over_without_a_message);

/// A Java client that dies (its watchdog stops) leaves its lock to expire after the watchdog
/// lease; an rlock waiter takes it at the PTTL, with nothing published. (An rlock holder cannot die
/// in-process: its watchdog lives as long as its guards.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_java_holder_is_taken_over_at_its_ttl() {
    let watchdog = Duration::from_millis(600);
    let server = RedisServer::start();
    let java = Party::java(&server, RedissonVersion::V4, Some(watchdog)).await;
    let rlock = Party::connect(Side::Rlock, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let name = "interop:dead";

    let _abandoned = java.lock(name).lock(1).await;
    java.java_client().stop_watchdog();
    let stopped_at = Instant::now();
    let (acquired_at, hold) = woken(rlock.lock(name).spawn_lock(2)).await;
    let waited = acquired_at - stopped_at;
    assert!(
        waited < watchdog + WAKE_LIMIT,
        "taken over at the ttl (after {waited:?})"
    );
    assert_eq!(redis.hash(name).await, holds([(rlock.field(2), 1)]));
    assert_eq!(messages.drain(Duration::from_millis(50)).await, vec![]);
    hold.release().await;
}
