//! Cancelled and timed-out operations: nothing is left held, nothing is applied twice.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Error, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{client, client_with, eventually, fast_timeouts, pause_clients, raw};

#[tokio::test]
async fn dropped_acquire_futures_leave_no_hold_behind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let names: Vec<String> = (0..4).map(|i| format!("cancel:storm:{i}")).collect();
    let holder = client
        .lock(names[0].as_str())
        .lock()
        .await
        .expect("hold one name");
    // Hundreds of acquires, each dropped after a random delay: before, during or after its script,
    // while subscribing, while waiting, or just after acquiring.
    let attempts: Vec<_> = (0..400)
        .map(|i| {
            let lock = client.lock(names[i % names.len()].as_str());
            let budget = Duration::from_micros(fastrand::u64(0..3_000));
            tokio::spawn(async move {
                // An acquire that wins in time is dropped at once (released in the background).
                drop(tokio::time::timeout(budget, lock.lock()).await);
            })
        })
        .collect();
    for attempt in attempts {
        attempt.await.expect("attempt task");
    }
    holder.unlock().await.expect("unlock");
    let quiet = eventually(Duration::from_secs(5), async || {
        let mut left = 0;
        for name in &names {
            let fields: Vec<String> = redis.hkeys(name).await.expect("hkeys");
            left += fields.len();
        }
        left == 0
    })
    .await;
    assert!(quiet, "no stray field remains in any lock hash");
    assert_eq!(client.stats().renewing_locks, 0);
    assert_eq!(client.stats().subscribed_channels, 0);
}

#[tokio::test]
async fn an_acquire_dropped_while_its_script_is_in_flight_is_undone() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let lock = client.lock("cancel:in-flight");
    pause_clients(&mut redis, 300).await;
    let dropped = tokio::time::timeout(Duration::from_millis(50), lock.lock()).await;
    assert!(
        dropped.is_err(),
        "the acquire was still waiting for its reply"
    );
    // The script runs when the pause ends; the undo runs right after it on the same connection.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        eventually(Duration::from_secs(2), async || !lock
            .is_locked()
            .await
            .expect("is_locked"))
        .await,
        "the hold taken by the dropped acquire was released"
    );
    let other = client
        .lock("cancel:in-flight")
        .try_lock()
        .await
        .expect("try_lock");
    assert!(other.is_some(), "and the lock is free for others");
}

#[tokio::test]
async fn a_timed_out_reentry_is_undone_without_touching_the_earlier_hold() {
    let server = RedisServer::start();
    let client = fast_timeouts(&server).await;
    let mut redis = raw(&server).await;
    let owner = Owner::new();
    let lock = client.lock("cancel:reentry").with_owner(owner);
    let first = lock.lock().await.expect("first hold");
    pause_clients(&mut redis, 300).await;
    match lock.try_lock().await {
        Err(Error::Timeout { .. }) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The re-entry ran after the pause (count 2), then its undo (count 1): never 0, never left at 2.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let settled = eventually(Duration::from_secs(2), async || {
        lock.hold_count_of(owner).await.expect("hold_count") == 1
    })
    .await;
    assert!(
        settled,
        "the earlier hold is intact and the timed-out one undone"
    );
    assert!(!first.is_lease_lost());
    first.unlock().await.expect("unlock");
    assert!(!lock.is_locked().await.expect("is_locked"));
}

#[tokio::test]
async fn an_unlock_whose_reply_is_lost_is_applied_exactly_once() {
    let server = RedisServer::start();
    let client = fast_timeouts(&server).await;
    let mut redis = raw(&server).await;
    let owner = Owner::new();
    let lock = client.lock("cancel:unlock-once").with_owner(owner);
    let outer = lock.lock().await.expect("first hold");
    let inner = lock.lock().await.expect("second hold");
    pause_clients(&mut redis, 250).await;
    // The first send times out; the re-send (same request id) replays the stored result.
    inner.unlock().await.expect("unlock eventually confirmed");
    assert_eq!(
        lock.hold_count_of(owner).await.expect("hold_count"),
        1,
        "decremented once, not twice"
    );
    outer.unlock().await.expect("unlock");
    assert!(!lock.is_locked().await.expect("is_locked"));
}

#[tokio::test]
async fn operations_against_a_stopped_redis_fail_within_their_deadline() {
    let server = RedisServer::start();
    let client = fast_timeouts(&server).await;
    let lock = client.lock("cancel:stopped");
    server.pause();
    let started = tokio::time::Instant::now();
    let outcome = lock.try_lock().await;
    let took = started.elapsed();
    server.resume();
    assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
    assert!(took < Duration::from_millis(500), "took {took:?}");
    // And everything recovers once Redis answers again.
    let guard = lock
        .try_lock_for(Duration::from_secs(5))
        .await
        .expect("try_lock_for")
        .expect("acquired after recovery");
    guard.unlock().await.expect("unlock");
    assert!(
        eventually(Duration::from_secs(2), async || !lock
            .is_locked()
            .await
            .expect("is_locked"))
        .await
    );
}

#[tokio::test]
async fn close_waits_for_background_releases() {
    let server = RedisServer::start();
    let client = fast_timeouts(&server).await;
    let mut redis = raw(&server).await;
    let names: Vec<String> = (0..50).map(|i| format!("cancel:close:{i}")).collect();
    for name in &names {
        // Dropped at once: released in the background.
        drop(client.lock(name.as_str()).lock().await.expect("lock"));
    }
    client.close().await;
    for name in &names {
        let exists: bool = redis.exists(name).await.expect("exists");
        assert!(!exists, "{name} was released before close returned");
    }
    // The client remains usable after close.
    let guard = client
        .lock("cancel:close:after")
        .lock()
        .await
        .expect("lock");
    guard.unlock().await.expect("unlock");
}

/// Acquisitions dropped while they wait for an in-flight slot on their connection were never
/// sent, so nothing is undone for them, and a burst of wait-forever attempts leaves a share of the
/// slots to other requests (issue 38): with one pooled connection and Redis paused, 60 `lock()`
/// calls on names of their own take the 40 of the connection's 50 slots that such attempts may
/// hold and queue 20 behind them, while a bounded read still finds a slot and is answered once
/// the pause ends. All 60 are dropped during the pause. Once Redis runs again it has run the 40
/// acquires that were sent and their 40 undos, not 60 of each, and nothing is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_before_its_turn_on_the_connection_sends_nothing() {
    const SENT: u64 = 40;
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.pool_size = 1;
        config.local_handoff = false;
    })
    .await;
    let mut redis = raw(&server).await;
    let warm = client.lock("slots:warm");
    warm.lock()
        .await
        .expect("lock")
        .unlock()
        .await
        .expect("unlock");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = scripts_run(&mut redis).await;
    let paused = tokio::time::Instant::now();
    pause_clients(&mut redis, 1_000).await;
    // One task awaits them all, so that they are dropped together: a queued acquire is not
    // polled between the drop of one that held a slot and its own.
    let locks: Vec<_> = (0..SENT + 10)
        .map(|i| client.lock(format!("slots:{i}")))
        .collect();
    let acquires = tokio::spawn(async move {
        futures::future::join_all(locks.iter().map(|lock| lock.lock())).await;
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let read = client.lock("slots:read");
    let bounded = tokio::spawn(async move { read.is_locked().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    acquires.abort();
    assert!(
        acquires.await.is_err_and(|e| e.is_cancelled()),
        "every acquire was still waiting when dropped"
    );
    // This connection's commands wait for the pause too.
    tokio::time::sleep_until(paused + Duration::from_millis(1_100)).await;
    assert!(
        matches!(bounded.await.expect("the read's task"), Ok(false)),
        "a bounded read behind the burst got a slot and its answer"
    );
    let settled = eventually(Duration::from_secs(5), async || {
        let keys: Vec<String> = redis.keys("slots:*").await.expect("KEYS");
        scripts_run(&mut redis).await >= before + 2 * SENT && keys.is_empty()
    })
    .await;
    assert!(settled, "the acquires that were sent ran and were undone");
    // Whatever is still to come would be another undo: give it time to show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = scripts_run(&mut redis).await - before;
    assert_eq!(
        calls,
        2 * SENT,
        "only the {SENT} acquires that got a slot were sent, and undone"
    );
}

/// Scripts Redis ran (`EVALSHA` calls that did not fail, as `NOSCRIPT` does before a script is
/// loaded).
async fn scripts_run(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(redis)
        .await
        .expect("INFO commandstats");
    let stat = |stats: &str, name: &str| -> u64 {
        stats
            .split(',')
            .find_map(|kv| kv.strip_prefix(name)?.parse().ok())
            .unwrap_or(0)
    };
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:"))
        .map_or(0, |stats| {
            stat(stats, "calls=") - stat(stats, "failed_calls=")
        })
}
