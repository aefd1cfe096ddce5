//! Watchdogs across the sides: a holder without a lease keeps the other side waiting past its
//! lease, for as long as it holds, and the waiter gets the lock right after the unlock. A holder's
//! watchdog also notices when the other side force-unlocks its lock, and never resurrects it. The
//! non-reentrant lock's holds are the `RLock`'s, renewed alike: the scaled tests and the
//! force-unlock run for it too.
//!
//! The two `thirty_seconds` tests use the default 30 s watchdog and take ~36 s each (run them in
//! parallel, as `cargo test` does); the `scaled` tests do the same with a 900 ms watchdog.

use std::time::Duration;

use rlock_tests::redisson::{RedissonVersion, lock_channel};
use rlock_tests::{RedisServer, harness};
use tokio::time::Instant;

use crate::support::{
    InteropKind, Latencies, Party, Redis, Side, WAKE_LIMIT, every_kind, holds, woken,
};

/// Renewed every 300 ms, which leaves 600 ms for a stalled machine.
const SCALED_WATCHDOG: Duration = Duration::from_millis(900);

/// `holder` takes the `kind` lock without a lease and keeps it for `hold_for` (longer than its
/// watchdog lease) while `waiter` waits: the hash keeps the holder's field all along, and the
/// waiter owns the lock within milliseconds of the unlock.
async fn renewal_outlasts_the_lease(
    server: &RedisServer,
    kind: InteropKind,
    holder: Party,
    waiter: Party,
    hold_for: Duration,
) {
    let mut redis = Redis::connect(server).await;
    let name = "interop:watchdog";
    let hold = holder.get(kind, name).lock(1).await;
    let waiting = waiter.get(kind, name).spawn_lock(2);
    let _ = redis.wait_parked(&lock_channel(name), 1).await;
    let until = Instant::now() + hold_for;
    let mut lowest_pttl = i64::MAX;
    while Instant::now() < until {
        tokio::time::sleep(hold_for / 40).await;
        assert!(!waiting.is_finished(), "the waiter took a held lock");
        assert_eq!(redis.hash(name).await, holds([(holder.field(1), 1)]));
        lowest_pttl = lowest_pttl.min(redis.pttl(name).await);
    }
    assert!(lowest_pttl > 0, "the lease never ran out");
    assert!(holder.is_renewing(name));

    let unlocked_at = Instant::now();
    hold.release().await;
    let (acquired_at, hold) = woken(waiting).await;
    let mut latencies = Latencies::default();
    latencies.record(unlocked_at, acquired_at);
    latencies.check(
        &format!(
            "{kind} wake-up after a renewed hold of {hold_for:?}, {} -> {}",
            holder.side(),
            waiter.side()
        ),
        WAKE_LIMIT,
    );
    assert!(!holder.is_renewing(name), "renewal stops with the unlock");
    hold.release().await;
}

mod thirty_seconds {
    use super::*;

    /// 35 s: past the 30 s lease, with renewals at 10, 20 and 30 s.
    const HOLD_FOR: Duration = Duration::from_secs(35);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn java_holder_keeps_rlock_waiting() {
        let server = RedisServer::start();
        let holder = Party::connect(Side::Java, &server).await;
        let waiter = Party::connect(Side::Rlock, &server).await;
        renewal_outlasts_the_lease(&server, InteropKind::REENTRANT, holder, waiter, HOLD_FOR).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rlock_holder_keeps_java_waiting() {
        let server = RedisServer::start();
        let holder = Party::connect(Side::Rlock, &server).await;
        let waiter = Party::connect(Side::Java, &server).await;
        renewal_outlasts_the_lease(&server, InteropKind::REENTRANT, holder, waiter, HOLD_FOR).await;
    }
}

mod scaled {
    use super::*;

    /// Three leases.
    const HOLD_FOR: Duration = Duration::from_millis(2_700);

    async fn java_holder(version: RedissonVersion, kind: InteropKind) {
        let server = RedisServer::start();
        let holder = Party::java(&server, version, Some(SCALED_WATCHDOG)).await;
        let waiter = Party::connect_with(Side::Rlock, &server, Some(SCALED_WATCHDOG)).await;
        renewal_outlasts_the_lease(&server, kind, holder, waiter, HOLD_FOR).await;
    }

    async fn rlock_holder(kind: InteropKind) {
        let server = RedisServer::start();
        let holder = Party::connect_with(Side::Rlock, &server, Some(SCALED_WATCHDOG)).await;
        let waiter = Party::connect_with(Side::Java, &server, Some(SCALED_WATCHDOG)).await;
        renewal_outlasts_the_lease(&server, kind, holder, waiter, HOLD_FOR).await;
    }

    /// 3.31: one renewal timer per lock (§4.3).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn java_3_31_holder_keeps_rlock_waiting() {
        java_holder(RedissonVersion::V3_31, InteropKind::REENTRANT).await;
    }

    /// HEAD: one batched renewal task (§4.2).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn java_head_holder_keeps_rlock_waiting() {
        java_holder(RedissonVersion::V4, InteropKind::REENTRANT).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rlock_holder_keeps_java_waiting() {
        rlock_holder(InteropKind::REENTRANT).await;
    }

    /// HEAD's batched task renews a non-reentrant hold as an `RLock`'s (§8.8: `LockTask`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn java_head_non_reentrant_holder_keeps_rlock_waiting() {
        java_holder(RedissonVersion::V4, InteropKind::NON_REENTRANT).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rlock_non_reentrant_holder_keeps_java_waiting() {
        rlock_holder(InteropKind::NON_REENTRANT).await;
    }
}

/// `forcer` deletes a lock that `holder` keeps with a (900 ms) watchdog: within a renewal or two
/// the holder's watchdog finds its field gone and stops, without recreating the key; an rlock
/// holder's guard reports the lease lost.
async fn foreign_force_unlock_is_noticed(kind: InteropKind, holder: Side, forcer: Side) {
    let server = RedisServer::start();
    let holder = Party::connect_with(holder, &server, Some(SCALED_WATCHDOG)).await;
    let forcer = Party::connect(forcer, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = "interop:forced";
    let hold = holder.get(kind, name).lock(1).await;
    tokio::time::sleep(SCALED_WATCHDOG).await;
    assert!(holder.is_renewing(name));

    assert!(forcer.get(kind, name).force_unlock().await);
    let stopped = harness::eventually(SCALED_WATCHDOG * 2, async || !holder.is_renewing(name));
    assert!(stopped.await, "the holder's watchdog noticed the loss");
    assert_ne!(hold.is_lease_lost(), Some(false), "rlock tells the guard");
    tokio::time::sleep(SCALED_WATCHDOG / 2).await;
    assert!(!redis.exists(name).await, "renewal never recreates a lock");
    drop(hold);
}

every_kind!(lock_and_twin both_directions: foreign_force_unlock_is_noticed);

/// The renewal scripts check the owner field (§4.2, §4.3): Java's (one per lock in 3.31, batched
/// in HEAD), run by hand over a lock rlock holds and one Java holds, renew only Java's, and leave
/// rlock's TTL alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_renewal_only_extends_java_holds() {
    let server = RedisServer::start();
    let rlock = Party::connect(Side::Rlock, &server).await;
    let mut redis = Redis::connect(&server).await;
    let (rlock_name, java_name) = ("interop:renew:rlock", "interop:renew:java");
    let rlock_hold = rlock
        .lock(rlock_name)
        .lock_with_lease(1, Duration::from_secs(5))
        .await;
    for version in [RedissonVersion::V3_31, RedissonVersion::V4] {
        let party = Party::java(&server, version, None).await;
        let java = party.java_client();
        java.get_lock(java_name)
            .lock_with_lease(1, Duration::from_secs(5))
            .await
            .expect("java lock");
        let renewed = java.renew(&[(rlock_name, 1), (java_name, 1)]).await;
        assert_eq!(
            renewed.expect("renewal script"),
            vec![false, true],
            "{version:?}"
        );
        assert!(
            redis.pttl(java_name).await > 29_000,
            "{version:?} renewed its own hold"
        );
        assert!(
            redis.pttl(rlock_name).await <= 5_000,
            "{version:?} left rlock's hold alone"
        );
        assert_eq!(
            java.get_lock(java_name).unlock(1).await.expect("unlock"),
            Some(1)
        );
    }
    assert_eq!(redis.hash(rlock_name).await, holds([(rlock.field(1), 1)]));
    rlock_hold.release().await;
}
