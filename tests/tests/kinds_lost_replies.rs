//! Every kind's acquire whose reply is lost (the server paused past the command timeout, or the
//! future dropped while the script is in flight) is reconciled: the hold it may have taken and the
//! queue entry it may have made are undone, and an earlier hold of the same owner is left intact
//! (also when the lost reply was a non-reentrant kind's refusal of that owner's re-entry).

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::kind::{FairQueue, LockKind};
use rlock_redisson::{Client, Error, Lock, Owner};
use rlock_tests::harness::{eventually, fast_timeouts, pause_clients, raw};
use rlock_tests::redisson::KINDS;
use rlock_tests::{RedisServer, rlock_object};

/// Every key in the (private) server, but the fenced lock's token counter, which never expires.
async fn keys_left(redis: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = redis.keys("*").await.expect("KEYS");
    keys.retain(|key| !key.starts_with("redisson_lock_token:"));
    keys.sort();
    keys
}

/// An acquire dropped while its script waits behind a paused server leaves nothing once it ran.
async fn dropped_in_flight_leaves_nothing<K: LockKind>(
    lock: Lock<K>,
    redis: &mut redis::aio::MultiplexedConnection,
) {
    pause_clients(redis, 300).await;
    let dropped = tokio::time::timeout(Duration::from_millis(50), lock.lock()).await;
    assert!(
        dropped.is_err(),
        "{}: still waiting for the reply",
        lock.name()
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let settled = eventually(Duration::from_secs(3), async || {
        keys_left(redis).await.is_empty()
    })
    .await;
    assert!(
        settled,
        "{}: left {:?}",
        lock.name(),
        keys_left(redis).await
    );
}

/// A re-entry that times out is undone; the owner's first hold stays, counted once.
async fn timed_out_reentry_keeps_the_first_hold<K: LockKind>(
    lock: Lock<K>,
    redis: &mut redis::aio::MultiplexedConnection,
) {
    let owner = Owner::new();
    let lock = lock.with_owner(owner);
    let first = lock.lock().await.expect("first hold");
    pause_clients(redis, 300).await;
    match lock.try_lock().await {
        Err(Error::Timeout { .. }) => {}
        other => panic!("{}: expected a timeout, got {other:?}", lock.name()),
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let settled = eventually(Duration::from_secs(3), async || {
        lock.hold_count().await.expect("hold_count") == 1
    })
    .await;
    assert!(settled, "{}: the earlier hold is intact", lock.name());
    assert!(!first.is_lease_lost());
    first.unlock().await.expect("unlock");
    let gone = eventually(Duration::from_secs(3), async || {
        keys_left(redis).await.is_empty()
    })
    .await;
    assert!(gone, "{}: left {:?}", lock.name(), keys_left(redis).await);
}

#[tokio::test]
async fn every_kind_undoes_an_acquire_whose_reply_was_lost() {
    let server = RedisServer::start();
    let client = fast_timeouts(&server).await;
    let mut redis = raw(&server).await;
    for kind in KINDS {
        let object = kind.rlock(&client, &format!("lost:{}", kind.interface()));
        rlock_object!(object.clone(), lock => {
            dropped_in_flight_leaves_nothing(lock, &mut redis).await;
        });
        // A non-reentrant kind refuses the re-entry, which changes nothing; but its caller cannot
        // tell a lost refusal from a lost second hold: the undo must leave the single hold there is.
        rlock_object!(object, lock => {
            timed_out_reentry_keeps_the_first_hold(lock, &mut redis).await;
        });
    }
    client.close().await;
}

/// A waiter of the fair `lock` (of `name`) queued behind a holder, whose reply is lost (the server
/// paused past the command timeout), leaves the queue.
async fn a_queued_waiter_whose_reply_was_lost_leaves_the_queue<K: FairQueue>(
    name: &str,
    of: impl Fn(&Client) -> Lock<K>,
) {
    let server = RedisServer::start();
    let holder = fast_timeouts(&server).await;
    let client = fast_timeouts(&server).await;
    let mut redis = raw(&server).await;
    let guard = of(&holder).lock().await.expect("lock");
    pause_clients(&mut redis, 300).await;
    // The script queues this waiter after the pause; its reply is long given up on by then.
    let waited = of(&client).try_lock_for(Duration::from_secs(5)).await;
    assert!(matches!(waited, Err(Error::Timeout { .. })), "{waited:?}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let left = eventually(Duration::from_secs(3), async || {
        let queued: usize = redis
            .llen(format!("redisson_lock_queue:{{{name}}}"))
            .await
            .expect("LLEN");
        let deadlines: usize = redis
            .zcard(format!("redisson_lock_timeout:{{{name}}}"))
            .await
            .expect("ZCARD");
        queued == 0 && deadlines == 0
    })
    .await;
    assert!(left, "{name}: no queue entry of the lost acquire remains");
    guard.unlock().await.expect("unlock");
}

#[tokio::test]
async fn a_queued_fair_waiter_whose_reply_was_lost_leaves_the_queue() {
    a_queued_waiter_whose_reply_was_lost_leaves_the_queue("lost:queue", |client| {
        client.fair_lock("lost:queue")
    })
    .await;
}

#[tokio::test]
async fn a_queued_non_reentrant_fair_waiter_whose_reply_was_lost_leaves_the_queue() {
    let name = "lost:non-reentrant-queue";
    a_queued_waiter_whose_reply_was_lost_leaves_the_queue(name, |client| {
        client.non_reentrant_fair_lock(name)
    })
    .await;
}
