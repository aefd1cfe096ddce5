//! The fenced lock (tokens strictly increasing, re-entry included) and the spin lock (polling, no
//! pub/sub at all) against a real Redis; both share the reentrant lock's hash.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Owner, SpinBackoff};
use rlock_tests::RedisServer;
use rlock_tests::harness::{self, command_calls};

#[tokio::test]
async fn every_fenced_acquisition_takes_a_greater_token() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let lock = client.fenced_lock("fenced");
    assert_eq!(
        lock.token().await.expect("token"),
        0,
        "nil reads as 0, as in Java"
    );
    let mut tokens = Vec::new();
    Owner::scope(Owner::new(), async {
        let outer = lock.lock().await.expect("lock");
        let inner = lock.lock().await.expect("re-enters");
        tokens.extend([*outer.token(), *inner.token()]);
        inner.unlock().await.expect("unlock");
        outer.unlock().await.expect("unlock");
    })
    .await;
    let again = lock
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(5))
        .await
        .expect("try")
        .expect("free");
    tokens.push(*again.token());
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(lock.token().await.expect("token"), tokens[2]);
    let counter: u64 = redis
        .get("redisson_lock_token:{fenced}")
        .await
        .expect("GET");
    assert_eq!(counter, tokens[2]);
    let ttl: i64 = redis
        .pttl("redisson_lock_token:{fenced}")
        .await
        .expect("PTTL");
    assert_eq!(ttl, -1, "the token counter never expires");
    // The hash is the reentrant lock's: the two kinds exclude each other.
    assert!(
        client
            .lock("fenced")
            .try_lock()
            .await
            .expect("try")
            .is_none()
    );
    again.unlock().await.expect("unlock");
}

#[tokio::test]
async fn spin_waiters_poll_and_nothing_is_published_or_subscribed() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let lock = client.spin_lock("spin");
    let guard = lock
        .lock_with_lease(Duration::from_secs(5))
        .await
        .expect("lock");
    let waiter = tokio::spawn({
        let lock =
            client.spin_lock_with_backoff("spin", SpinBackoff::Constant(Duration::from_millis(5)));
        async move { lock.lock().await.expect("the poller acquires") }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        client.stats().subscribed_channels,
        0,
        "spin waiters never subscribe"
    );
    let before = command_calls(&mut redis).await;
    guard.unlock().await.expect("unlock");
    let polled = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter's next poll takes it")
        .expect("task");
    let after = command_calls(&mut redis).await;
    let published =
        after.get("publish").copied().unwrap_or(0) - before.get("publish").copied().unwrap_or(0);
    assert_eq!(published, 0, "a spin unlock publishes nothing");
    // The hash is the reentrant lock's.
    assert!(client.lock("spin").try_lock().await.expect("try").is_none());
    polled.unlock().await.expect("unlock");
}

#[tokio::test]
async fn the_watchdog_keeps_a_spin_lock() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let client = harness::client_with(&server, |config| config.watchdog_timeout = watchdog).await;
    let mut redis = harness::raw(&server).await;
    let guard = client.spin_lock("spin").lock().await.expect("lock");
    tokio::time::sleep(watchdog * 3).await;
    let pttl: i64 = redis.pttl("spin").await.expect("PTTL");
    assert!(pttl > 0, "renewed past three timeouts (pttl {pttl})");
    assert!(!guard.is_lease_lost());
    guard.unlock().await.expect("unlock");
    assert_eq!(client.stats().renewing_locks, 0);
}
