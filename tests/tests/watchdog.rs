//! The watchdog: it keeps locks alive past their timeout, stops with the unlock, batches renewals, and
//! tells holders when their lease is lost.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Error, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{client_with, evalsha_calls, raw};
use tokio::time::Instant;

const WATCHDOG: Duration = Duration::from_millis(600);

async fn short_watchdog(server: &RedisServer) -> rlock_redisson::Client {
    client_with(server, |config| {
        config.watchdog_timeout = WATCHDOG;
        config.command_timeout = Duration::from_millis(150);
        config.retry_delay = Duration::from_millis(50);
        config.retry_max_delay = Duration::from_millis(100);
    })
    .await
}

#[tokio::test]
async fn the_watchdog_keeps_a_lock_past_its_timeout_and_stops_after_unlock() {
    let server = RedisServer::start();
    let client = short_watchdog(&server).await;
    let mut redis = raw(&server).await;
    let guard = client.lock("watchdog:alive").lock().await.expect("lock");
    let held_until = Instant::now() + WATCHDOG * 4;
    while Instant::now() < held_until {
        let pttl: i64 = redis.pttl("watchdog:alive").await.expect("pttl");
        assert!(pttl > 0, "the lock stays alive (pttl {pttl})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!guard.is_lease_lost());
    assert_eq!(client.stats().renewing_locks, 1);
    guard.unlock().await.expect("unlock");
    assert_eq!(
        client.stats().renewing_locks,
        0,
        "renewal stops with the unlock"
    );

    let before = evalsha_calls(&mut redis).await;
    tokio::time::sleep(WATCHDOG * 2).await;
    assert_eq!(
        evalsha_calls(&mut redis).await,
        before,
        "no renewal after unlock"
    );
    let exists: bool = redis.exists("watchdog:alive").await.expect("exists");
    assert!(!exists);
}

#[tokio::test]
async fn reentrant_holds_are_renewed_until_the_last_one_is_released() {
    let server = RedisServer::start();
    let client = short_watchdog(&server).await;
    let mut redis = raw(&server).await;
    let lock = client.lock("watchdog:reentrant").with_owner(Owner::new());
    let outer = lock.lock().await.expect("lock");
    let inner = lock.lock().await.expect("re-enter");
    inner.unlock().await.expect("partial unlock");
    tokio::time::sleep(WATCHDOG * 3).await;
    let pttl: i64 = redis.pttl("watchdog:reentrant").await.expect("pttl");
    assert!(pttl > 0, "still renewed after a partial unlock");
    assert_eq!(client.stats().renewing_locks, 1);
    outer.unlock().await.expect("unlock");
    assert_eq!(client.stats().renewing_locks, 0);
}

#[tokio::test]
async fn a_lock_deleted_under_its_holder_signals_lease_lost() {
    let server = RedisServer::start();
    let client = short_watchdog(&server).await;
    let mut redis = raw(&server).await;
    let guard = client.lock("watchdog:deleted").lock().await.expect("lock");
    let _: () = redis.del("watchdog:deleted").await.expect("del");
    let deleted = Instant::now();
    tokio::time::timeout(WATCHDOG * 2, guard.lease_lost())
        .await
        .expect("lease loss is signalled within a renewal interval or so");
    eprintln!(
        "lease loss signalled {:?} after the delete",
        deleted.elapsed()
    );
    assert!(guard.is_lease_lost());
    assert_eq!(client.stats().renewing_locks, 0);
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));
}

#[tokio::test]
async fn a_lock_taken_over_by_someone_else_signals_lease_lost() {
    let server = RedisServer::start();
    let client = short_watchdog(&server).await;
    let other = short_watchdog(&server).await;
    let mut redis = raw(&server).await;
    let guard = client.lock("watchdog:taken").lock().await.expect("lock");
    let _: () = redis.del("watchdog:taken").await.expect("del");
    let thief = other
        .lock("watchdog:taken")
        .lock()
        .await
        .expect("other client locks");
    tokio::time::timeout(WATCHDOG * 2, guard.lease_lost())
        .await
        .expect("lease loss is signalled");
    // The loser's renewal did not extend the thief's lock, and its release does not touch it.
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));
    let fields: Vec<String> = redis.hkeys("watchdog:taken").await.expect("hkeys");
    assert_eq!(fields, vec![thief.field().to_owned()]);
    thief.unlock().await.expect("unlock");
}

#[tokio::test]
async fn an_unreachable_redis_for_a_whole_lease_signals_lease_lost() {
    let server = RedisServer::start();
    let client = short_watchdog(&server).await;
    let guard = client
        .lock("watchdog:unreachable")
        .lock()
        .await
        .expect("lock");
    server.pause();
    let paused = Instant::now();
    let signalled = tokio::time::timeout(WATCHDOG * 3, guard.lease_lost()).await;
    let after = paused.elapsed();
    server.resume();
    signalled.expect("lease loss is signalled while Redis is still unreachable");
    assert!(
        after <= WATCHDOG * 2,
        "signalled {after:?} after Redis stopped answering"
    );
}

#[tokio::test]
async fn renewals_are_batched_a_hundred_locks_per_script() {
    let server = RedisServer::start();
    let client = short_watchdog(&server).await;
    let mut redis = raw(&server).await;
    let mut guards = Vec::new();
    for i in 0..250 {
        guards.push(
            client
                .lock(format!("watchdog:batch:{i}"))
                .lock()
                .await
                .expect("lock"),
        );
    }
    // Let one renewal round pass, then count scripts over five renewal periods.
    tokio::time::sleep(WATCHDOG / 3).await;
    let before = evalsha_calls(&mut redis).await;
    let started = Instant::now();
    tokio::time::sleep(WATCHDOG / 3 * 5).await;
    let scripts = evalsha_calls(&mut redis).await - before;
    let periods = (started.elapsed().as_secs_f64() / (WATCHDOG / 3).as_secs_f64()).ceil() as u64;
    eprintln!("{scripts} renewal scripts in {periods} periods for 250 locks");
    assert!(
        scripts <= 3 * periods,
        "at most ceil(250/100) = 3 scripts per period, got {scripts}"
    );
    assert!(
        scripts >= 3 * (periods - 2),
        "renewals happen every period, got {scripts}"
    );
    for i in 0..250 {
        let pttl: i64 = redis
            .pttl(format!("watchdog:batch:{i}"))
            .await
            .expect("pttl");
        assert!(pttl > 0);
    }
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }
    assert_eq!(client.stats().renewing_locks, 0);
}
