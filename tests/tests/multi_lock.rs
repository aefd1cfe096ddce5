//! The multi-lock and the red lock over locks on separate Redis servers: all or nothing (or a
//! majority), Redisson's lease arithmetic, no partial hold left behind by failures, cancellation or
//! two multi-locks taking the same locks in opposite orders.

#![allow(deprecated)] // RedLock is deprecated, as in Redisson; it is still tested.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{AnyLock, MultiLock, Owner, RedLock};
use rlock_tests::RedisServer;
use rlock_tests::harness;
use rlock_tests::harness::exists;
use tokio::time::Instant;

#[tokio::test]
async fn a_multi_lock_takes_locks_on_two_servers_all_or_nothing() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let (first, second) = (harness::client(&one).await, harness::client(&two).await);
    let (mut redis_one, mut redis_two) = (harness::raw(&one).await, harness::raw(&two).await);
    let multi = MultiLock::new([first.lock("account:1"), second.lock("account:2")]);
    assert_eq!(multi.names(), ["account:1", "account:2"]);
    let guard = multi.try_lock().await.expect("try").expect("both free");
    assert!(exists(&mut redis_one, "account:1").await && exists(&mut redis_two, "account:2").await);
    let ttl: i64 = redis_two.pttl("account:2").await.expect("PTTL");
    assert!(ttl > 25_000, "watchdog lease: {ttl}");
    assert!(multi.is_held_by(guard.owner()).await.expect("held"));
    assert!(!multi.is_held_by(Owner::new()).await.expect("held"));

    // Another owner finds the second busy: the first it took is released again.
    let other = MultiLock::new([first.lock("account:3"), second.lock("account:2")]);
    assert!(
        other
            .try_lock_for(Duration::from_millis(100))
            .await
            .expect("try")
            .is_none()
    );
    assert!(
        !exists(&mut redis_one, "account:3").await,
        "no partial hold"
    );
    guard.unlock().await.expect("unlock");
    assert!(
        !exists(&mut redis_one, "account:1").await && !exists(&mut redis_two, "account:2").await
    );
    let both = other.try_lock().await.expect("try").expect("free now");
    both.unlock().await.expect("unlock");
}

#[tokio::test]
async fn a_lease_is_applied_to_every_member_once_all_are_held() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let (first, second) = (harness::client(&one).await, harness::client(&two).await);
    let (mut redis_one, mut redis_two) = (harness::raw(&one).await, harness::raw(&two).await);
    let multi = MultiLock::new([
        AnyLock::from(first.fair_lock("lease:a")),
        second.read_write_lock("lease:b").write().into(),
        second.lock("lease:c").into(),
    ]);
    let guard = multi
        .try_lock_with_lease(Duration::from_secs(30), Duration::from_secs(5))
        .await
        .expect("try")
        .expect("free");
    // Members were taken for twice the wait (60 s), then set to the lease.
    for (on_one, key) in [(true, "lease:a"), (false, "lease:b"), (false, "lease:c")] {
        let redis = if on_one {
            &mut redis_one
        } else {
            &mut redis_two
        };
        let ttl: i64 = redis.pttl(key).await.expect("PTTL");
        assert!((4_000..=5_000).contains(&ttl), "{key}: {ttl}");
    }
    assert_eq!(guard.names(), ["lease:a", "lease:b", "lease:c"]);
    assert!(!guard.is_lease_lost());
    guard.unlock().await.expect("unlock");
}

#[tokio::test]
async fn two_multi_locks_taking_the_same_locks_in_opposite_orders_both_finish() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let clients = [
        (harness::client(&one).await, harness::client(&two).await),
        (harness::client(&one).await, harness::client(&two).await),
    ];
    let inside = Arc::new(AtomicI64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(side, (first, second))| {
            let (a, b) = (first.lock("order:a"), second.lock("order:b"));
            let multi = if side == 0 {
                MultiLock::new([a, b])
            } else {
                MultiLock::new([b, a])
            };
            let inside = inside.clone();
            tokio::spawn(async move {
                let mut took = Vec::new();
                for _ in 0..2 {
                    let asked = Instant::now();
                    let guard = multi.lock().await.expect("lock");
                    took.push(asked.elapsed());
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "exclusive");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await.expect("unlock");
                }
                took
            })
        })
        .collect();
    let mut waits = Vec::new();
    for task in tasks {
        waits.extend(task.await.expect("task"));
    }
    let total = started.elapsed();
    eprintln!("opposite-order multi-locks: 4 acquisitions in {total:?}, waits {waits:?}");
    assert!(total < Duration::from_secs(30), "{total:?}");
    let (mut redis_one, mut redis_two) = (harness::raw(&one).await, harness::raw(&two).await);
    assert!(!exists(&mut redis_one, "order:a").await && !exists(&mut redis_two, "order:b").await);
}

#[tokio::test]
async fn a_dropped_multi_lock_acquire_leaves_no_partial_hold() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let (first, second) = (harness::client(&one).await, harness::client(&two).await);
    let (mut redis_one, mut redis_two) = (harness::raw(&one).await, harness::raw(&two).await);
    let blocker = second.lock("drop:b").lock().await.expect("lock");
    let multi = MultiLock::new([first.lock("drop:a"), second.lock("drop:b")]);
    for patience in [1, 5, 20, 60] {
        let waiting = tokio::time::timeout(Duration::from_millis(patience), multi.lock()).await;
        assert!(waiting.is_err(), "the second member is held");
    }
    first.close().await;
    assert!(
        !exists(&mut redis_one, "drop:a").await,
        "the first member was released"
    );
    blocker.unlock().await.expect("unlock");
    assert!(!exists(&mut redis_two, "drop:b").await);
    assert_eq!(
        first.stats().subscribed_channels + second.stats().subscribed_channels,
        0
    );
}

#[tokio::test]
async fn a_red_lock_needs_a_majority_and_releases_what_it_took_without_one() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let mut clients = Vec::new();
    for server in &servers {
        clients.push(harness::client(server).await);
    }
    let red = RedLock::new(clients.iter().map(|client| client.lock("red")));
    let intruder = clients[2].lock("red").lock().await.expect("lock");
    let guard = red
        .try_lock_for(Duration::from_millis(300))
        .await
        .expect("try")
        .expect("2 of 3");
    assert_eq!(guard.names().len(), 2);
    guard.unlock().await.expect("unlock ignores errors");
    let second_intruder = clients[1].lock("red").lock().await.expect("lock");
    assert!(
        red.try_lock_for(Duration::from_millis(300))
            .await
            .expect("try")
            .is_none()
    );
    let mut redis = harness::raw(&servers[0]).await;
    assert!(
        !exists(&mut redis, "red").await,
        "a minority taken is released"
    );
    intruder.unlock().await.expect("unlock");
    second_intruder.unlock().await.expect("unlock");
}
