//! The fair lock against a real Redis: FIFO hand-off across clients, each waiter woken on its own
//! channel, give-up and cancellation leaving the queue clean, stale waiters purged.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{FairLock, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{self, eventually};
use tokio::sync::mpsc;

const QUEUE: &str = "redisson_lock_queue:{fair}";
const TIMEOUTS: &str = "redisson_lock_timeout:{fair}";

/// The queue and timeout zset are empty: no entry of ours was left behind.
async fn assert_queue_empty(redis: &mut redis::aio::MultiplexedConnection) {
    let queued: Vec<String> = redis.lrange(QUEUE, 0, -1).await.expect("LRANGE");
    let deadlines: Vec<String> = redis.zrange(TIMEOUTS, 0, -1).await.expect("ZRANGE");
    assert!(
        queued.is_empty() && deadlines.is_empty(),
        "{queued:?} {deadlines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_on_different_clients_acquire_in_the_order_they_queued() {
    let server = RedisServer::start();
    let holder = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let guard = holder.fair_lock("fair").lock().await.expect("lock");
    let (order_tx, mut order) = mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for i in 0..4 {
        // One client per waiter, like separate processes; each queues after the previous one.
        let lock: FairLock = harness::client(&server).await.fair_lock("fair");
        let order_tx = order_tx.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.expect("waiter locks");
            order_tx.send(i).expect("order");
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.unlock().await.expect("waiter unlocks");
        }));
        assert!(
            eventually(Duration::from_secs(5), async || {
                redis.llen::<_, usize>(QUEUE).await.expect("LLEN") == i + 1
            })
            .await,
            "waiter {i} queued"
        );
    }
    // Each waiter listens on its own channel `redisson_lock__channel:{fair}:<field>` (it subscribes
    // after its first try queued it).
    let own_channels = eventually(Duration::from_secs(5), async || {
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg("redisson_lock__channel:{fair}:*")
            .query_async(&mut redis)
            .await
            .expect("PUBSUB CHANNELS");
        channels.len() == 4
    })
    .await;
    assert!(own_channels, "four waiters, four channels");
    guard.unlock().await.expect("unlock");
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("every waiter acquires")
            .expect("task");
    }
    let mut acquired = Vec::new();
    while let Ok(i) = order.try_recv() {
        acquired.push(i);
    }
    assert_eq!(acquired, vec![0, 1, 2, 3], "FIFO across clients");
    assert_queue_empty(&mut redis).await;
}

#[tokio::test]
async fn a_waiter_that_gives_up_or_is_dropped_leaves_the_queue() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let lock = client.fair_lock("fair");
    let guard = lock.lock().await.expect("lock");

    // The wait runs out: the waiter takes itself out (Redisson's acquireFailed).
    let other = harness::client(&server).await.fair_lock("fair");
    assert!(
        other
            .try_lock_for(Duration::from_millis(100))
            .await
            .expect("try_lock_for")
            .is_none()
    );
    assert_queue_empty(&mut redis).await;

    // A `tryLock()` never queues.
    assert!(other.try_lock().await.expect("try_lock").is_none());
    assert_queue_empty(&mut redis).await;

    // A storm of lock() futures dropped at random points: none of them stays queued.
    let mut dropped = Vec::new();
    for i in 0..40u64 {
        let lock = other.clone();
        dropped.push(tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_millis(i % 7 * 3), lock.lock()).await;
        }));
    }
    for task in dropped {
        task.await.expect("task");
    }
    client.close().await;
    other.unlock(Owner::new()).await.ok();
    assert!(
        eventually(Duration::from_secs(5), async || {
            let queued: usize = redis.llen(QUEUE).await.expect("LLEN");
            let deadlines: usize = redis.zcard(TIMEOUTS).await.expect("ZCARD");
            queued == 0 && deadlines == 0
        })
        .await,
        "the dropped waiters left the queue"
    );
    assert_eq!(lock.hold_count_of(guard.owner()).await.expect("count"), 1);
    let holders = lock.holders().await.expect("holders");
    assert_eq!(holders.len(), 1, "only the holder: {holders:?}");
    guard.unlock().await.expect("unlock");
    assert!(!lock.is_locked().await.expect("is_locked"));
}

#[tokio::test]
async fn a_stale_head_is_purged_and_the_lock_goes_to_the_next() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    // A waiter that died long ago still heads the queue, with a deadline in the past.
    let dead = "3b241101-e2bb-4255-8caf-4136c566a962:99";
    let _: () = redis.rpush(QUEUE, dead).await.expect("RPUSH");
    let _: () = redis.zadd(TIMEOUTS, dead, 1).await.expect("ZADD");
    let lock = client.fair_lock("fair");
    let guard = lock
        .try_lock_for(Duration::from_secs(1))
        .await
        .expect("try_lock_for")
        .expect("the stale head is purged, not waited for");
    assert_queue_empty(&mut redis).await;
    // A live head is respected: a newcomer's tryLock() does not jump the queue.
    guard.unlock().await.expect("unlock");
    let live = "3b241101-e2bb-4255-8caf-4136c566a962:98";
    let far = i64::try_from(
        (std::time::SystemTime::now() + Duration::from_secs(3600))
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("epoch ms");
    let _: () = redis.rpush(QUEUE, live).await.expect("RPUSH");
    let _: () = redis.zadd(TIMEOUTS, live, far).await.expect("ZADD");
    assert!(lock.try_lock().await.expect("try_lock").is_none());
    let queue = lock.queue().await.expect("queue");
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].field, live);
    assert_eq!(queue[0].deadline_ms, Some(far));
}

#[tokio::test]
async fn reentry_and_unlock_of_a_missing_fair_lock() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let lock = client.fair_lock("fair");
    Owner::scope(Owner::new(), async {
        let outer = lock.lock().await.expect("lock");
        let inner = lock.lock().await.expect("re-enters, without queueing");
        assert_eq!(lock.hold_count().await.expect("count"), 2);
        inner.unlock().await.expect("unlock");
        outer.unlock().await.expect("unlock");
    })
    .await;
    // Redisson reports success for the unlock of a fair lock that is not held; rlock reports that
    // the owner holds nothing, as for an `RLock` (docs/protocol.md §6.7).
    assert!(matches!(
        lock.unlock(Owner::new()).await,
        Err(rlock_redisson::Error::NotOwner { .. })
    ));
    assert!(!lock.force_unlock().await.expect("force_unlock"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_that_gives_up_on_a_free_lock_wakes_the_next_waiter() {
    let server = RedisServer::start();
    let mut redis = harness::raw(&server).await;
    // A foreign holder with a long TTL, which will vanish without publishing anything.
    let foreign = "3b241101-e2bb-4255-8caf-4136c566a962:7";
    let _: () = redis.hset("fair", foreign, 1).await.expect("HSET");
    let _: () = redis.pexpire("fair", 30_000).await.expect("PEXPIRE");
    let head = harness::client(&server).await.fair_lock("fair");
    let giving_up = tokio::spawn(async move { head.lock().await });
    assert!(
        eventually(Duration::from_secs(5), async || redis
            .llen::<_, usize>(QUEUE)
            .await
            .expect("LLEN")
            == 1)
        .await
    );
    let next = harness::client(&server).await.fair_lock("fair");
    let waiting = tokio::spawn(async move { next.lock().await.expect("next waiter") });
    assert!(
        eventually(Duration::from_secs(5), async || redis
            .llen::<_, usize>(QUEUE)
            .await
            .expect("LLEN")
            == 2)
        .await
    );
    // The lock frees silently, then the head gives up (its future dropped): its give-up must wake
    // the next waiter, which would otherwise sleep out its bound (the 30 s TTL it queued behind).
    let _: () = redis.del("fair").await.expect("DEL");
    giving_up.abort();
    let guard = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken by the give-up, not by its 30 s bound")
        .expect("task");
    guard.unlock().await.expect("unlock");
    assert_queue_empty(&mut redis).await;
}
