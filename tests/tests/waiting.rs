//! Waiting and waking: pub/sub wake-ups within milliseconds, waits bounded by the PTTL, exact
//! wake-one / wake-all counts, one subscription per name, and recovery after the subscriber reconnects.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Client, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{
    acquired_after, client, client_with, evalsha_calls, eventually, kill_subscribers,
    lock_channel_subscribers, park_subscribed_waiter, raw,
};
use tokio::time::Instant;

const CHANNEL_PREFIX: &str = "redisson_lock__channel:";

/// Holds `name` as a foreign client would (no rlock involved): a hash field with a long PEXPIRE.
async fn hold_foreign(redis: &mut redis::aio::MultiplexedConnection, name: &str, ttl_ms: i64) {
    let _: () = redis
        .hset(name, "00000000-0000-4000-8000-000000000000:1", 1)
        .await
        .expect("hset");
    let _: () = redis.pexpire(name, ttl_ms).await.expect("pexpire");
}

/// Waits until `count` script calls stop growing, i.e. every waiter is parked.
async fn settle(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let mut last = evalsha_calls(redis).await;
    loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let now = evalsha_calls(redis).await;
        if now == last {
            return now;
        }
        last = now;
    }
}

#[tokio::test]
async fn a_waiter_wakes_within_milliseconds_of_an_unlock_despite_a_long_pttl() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "waiting:handoff";
    let mut delays = Vec::new();
    for _ in 0..20 {
        let guard = holder.lock(name).lock().await.expect("holder locks");
        let waiting = park_subscribed_waiter(waiter.lock(name), &mut redis).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let pttl: i64 = redis.pttl(name).await.expect("pttl");
        assert!(
            pttl > 20_000,
            "the PTTL is long ({pttl} ms), so only a message can wake the waiter"
        );
        guard.unlock().await.expect("holder unlocks");
        let (after, guard) = acquired_after(waiting, Instant::now(), Duration::from_secs(5)).await;
        delays.push(after);
        guard.unlock().await.expect("waiter unlocks");
    }
    delays.sort();
    eprintln!(
        "hand-off after unlock: p50 {:?}, max {:?}",
        delays[delays.len() / 2],
        delays[delays.len() - 1]
    );
    assert!(
        delays[delays.len() / 2] < Duration::from_millis(25),
        "{delays:?}"
    );
    assert!(
        delays[delays.len() - 1] < Duration::from_millis(250),
        "{delays:?}"
    );
}

#[tokio::test]
async fn without_a_message_the_wait_is_bounded_by_the_pttl() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    hold_foreign(&mut redis, "waiting:expiry", 400).await;
    let started = Instant::now();
    let guard = client
        .lock("waiting:expiry")
        .lock()
        .await
        .expect("lock after expiry");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "waited {waited:?}: it cannot acquire before expiry"
    );
    assert!(
        waited < Duration::from_millis(1_500),
        "waited {waited:?}: the PTTL bounds the wait"
    );
    guard.unlock().await.expect("unlock");
}

#[tokio::test]
async fn try_lock_for_gives_up_at_its_deadline() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    hold_foreign(&mut redis, "waiting:deadline", 60_000).await;
    let started = Instant::now();
    let got = client
        .lock("waiting:deadline")
        .try_lock_for(Duration::from_millis(300))
        .await
        .expect("try_lock_for");
    let waited = started.elapsed();
    assert!(got.is_none());
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(800),
        "{waited:?}"
    );
    assert!(
        eventually(Duration::from_secs(2), async || lock_channel_subscribers(
            &mut redis,
            "waiting:deadline"
        )
        .await
            == 0)
        .await,
        "the waiter unsubscribed when it gave up"
    );
    assert_eq!(client.stats().subscribed_channels, 0);
}

/// A bounded wait stays bounded behind its owner's own undo (issue 46, found behind a multi-lock's
/// overrun in the soak): an attempt whose reply was lost (the server frozen past the command
/// timeout) leaves an undo that keeps trying until the server answers, for as long as the lease
/// it undoes; the same owner's next `try_lock_for` gives up at its own deadline rather than wait
/// for that undo, and acquires once the server is back and the undo ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_wait_gives_up_at_its_deadline_behind_its_owners_undo() {
    let server = Arc::new(RedisServer::start());
    let client = client_with(&server, |config| {
        config.command_timeout = Duration::from_millis(250);
        config.retry_delay = Duration::from_millis(50);
    })
    .await;
    let lock = client.lock("waiting:behind-undo").with_owner(Owner::new());
    server.pause();
    let first = lock.try_lock_for(Duration::from_secs(1)).await;
    assert!(
        first.is_err(),
        "the frozen server answered nothing: {first:?}"
    );
    // The server stays frozen for 2 s, ten times the bound below.
    let resumed = Arc::new(AtomicBool::new(false));
    let resumer = std::thread::spawn({
        let (server, resumed) = (server.clone(), resumed.clone());
        move || {
            std::thread::sleep(Duration::from_secs(2));
            resumed.store(true, Ordering::SeqCst);
            server.resume();
        }
    });
    let started = Instant::now();
    let second = lock.try_lock_for(Duration::from_millis(200)).await;
    let while_frozen = !resumed.load(Ordering::SeqCst);
    let waited = started.elapsed();
    resumer.join().expect("the resumer thread");
    assert!(
        matches!(second, Ok(None)),
        "gave up at its deadline: {second:?} after {waited:?}"
    );
    assert!(
        while_frozen,
        "it returned only once the server was back, after {waited:?}"
    );
    let guard = lock
        .try_lock_for(Duration::from_secs(10))
        .await
        .expect("try_lock_for")
        .expect("acquired once the undo ran");
    guard.unlock().await.expect("unlock");
}

#[tokio::test]
async fn force_unlock_wakes_a_waiter() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let operator = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "waiting:force";
    let _held = holder.lock(name).lock().await.expect("holder locks");
    let waiting = park_subscribed_waiter(waiter.lock(name), &mut redis).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        operator
            .lock(name)
            .force_unlock()
            .await
            .expect("force_unlock")
    );
    let (after, guard) = acquired_after(waiting, Instant::now(), Duration::from_secs(5)).await;
    assert!(
        after < Duration::from_millis(250),
        "woken {after:?} after the force-unlock"
    );
    guard.unlock().await.expect("unlock");
}

/// Parks `count` waiters of one client on a lock held by a foreign owner for a minute.
async fn park_waiters(
    client: &Client,
    name: &str,
    count: usize,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..count)
        .map(|_| {
            let lock = client.lock(name);
            tokio::spawn(async move {
                drop(lock.lock().await.expect("eventually acquired"));
            })
        })
        .collect()
}

/// Parks 10 waiters of `client` on `name`, held by a foreign owner for a minute; returns them once
/// subscribed and settled, with the script calls so far.
async fn park_behind_foreign_holder(
    client: &Client,
    redis: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> (Vec<tokio::task::JoinHandle<()>>, u64) {
    hold_foreign(redis, name, 60_000).await;
    let waiters = park_waiters(client, name, 10).await;
    assert!(
        eventually(Duration::from_secs(5), async || lock_channel_subscribers(
            redis, name
        )
        .await
            == 1)
        .await
    );
    (waiters, settle(redis).await)
}

/// The wake rule itself, as Redisson applies it: every local waiter races (no local queue).
#[tokio::test]
async fn message_0_wakes_exactly_one_local_waiter_and_1_wakes_all() {
    let server = RedisServer::start();
    let client = client_with(&server, |config| config.local_handoff = false).await;
    let mut redis = raw(&server).await;
    let name = "waiting:exact";
    let channel = format!("{CHANNEL_PREFIX}{{{name}}}");
    let (waiters, parked) = park_behind_foreign_holder(&client, &mut redis, name).await;
    let _: () = redis.publish(&channel, "0").await.expect("publish 0");
    let after_zero = settle(&mut redis).await;
    assert_eq!(after_zero - parked, 1, "`0` makes exactly one waiter retry");

    let _: () = redis
        .publish(&channel, "garbage")
        .await
        .expect("publish garbage");
    let _: () = redis.publish(&channel, "7").await.expect("publish 7");
    let after_noise = settle(&mut redis).await;
    assert_eq!(after_noise, after_zero, "other payloads wake nobody");

    let _: () = redis.publish(&channel, "1").await.expect("publish 1");
    let after_one = settle(&mut redis).await;
    assert_eq!(after_one - after_noise, 10, "`1` makes every waiter retry");

    let _: () = redis.del(name).await.expect("del");
    let _: () = redis.publish(&channel, "1").await.expect("publish 1");
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("every waiter acquires in turn")
            .expect("waiter task");
    }
}

/// With the local queue (the default), waiters of one client queue behind one head: only the head
/// tries, whatever the message, and newcomers send no try of their own.
#[tokio::test]
async fn with_the_local_queue_only_the_head_tries() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "waiting:queued";
    let channel = format!("{CHANNEL_PREFIX}{{{name}}}");
    let before = evalsha_calls(&mut redis).await;
    let (waiters, parked) = park_behind_foreign_holder(&client, &mut redis, name).await;
    assert!(
        parked - before <= 3,
        "the head's first try, its retry once subscribed and its wake-up when the subscription \
         is confirmed; nobody else's: {}",
        parked - before
    );
    for message in ["0", "1"] {
        let before = settle(&mut redis).await;
        let _: () = redis.publish(&channel, message).await.expect("publish");
        let after = settle(&mut redis).await;
        assert_eq!(after - before, 1, "`{message}` makes the head alone retry");
    }
    let _: () = redis.del(name).await.expect("del");
    let _: () = redis.publish(&channel, "0").await.expect("publish 0");
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("every waiter acquires in turn")
            .expect("waiter task");
    }
}

#[tokio::test]
async fn one_subscription_per_name_per_client_released_with_the_last_waiter() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let names = ["waiting:sub:a", "waiting:sub:b", "waiting:sub:c"];
    let mut waiters = Vec::new();
    for name in names {
        hold_foreign(&mut redis, name, 60_000).await;
        waiters.extend(park_waiters(&client, name, 20).await);
    }
    for name in names {
        assert!(
            eventually(Duration::from_secs(5), async || lock_channel_subscribers(
                &mut redis, name
            )
            .await
                == 1)
            .await
        );
    }
    assert_eq!(client.stats().subscribed_channels, 3);
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut redis)
        .await
        .expect("CLIENT LIST");
    assert_eq!(
        list.lines().count(),
        1,
        "one subscriber connection for 60 waiters: {list}"
    );

    for name in names {
        let _: () = redis.del(name).await.expect("del");
        let _: () = redis
            .publish(format!("{CHANNEL_PREFIX}{{{name}}}"), "0")
            .await
            .expect("publish");
    }
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("all acquire")
            .expect("waiter task");
    }
    for name in names {
        assert!(
            eventually(Duration::from_secs(5), async || lock_channel_subscribers(
                &mut redis, name
            )
            .await
                == 0)
            .await
        );
    }
    assert_eq!(client.stats().subscribed_channels, 0);
}

#[tokio::test]
async fn waiters_recover_when_the_subscriber_connection_is_killed() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "waiting:reconnect";
    let guard = holder.lock(name).lock().await.expect("holder locks");
    let waiting = park_subscribed_waiter(waiter.lock(name), &mut redis).await;

    let killed = kill_subscribers(&mut redis).await;
    assert!(killed >= 1);
    assert!(
        eventually(Duration::from_secs(5), async || lock_channel_subscribers(
            &mut redis, name
        )
        .await
            == 1)
        .await,
        "re-subscribed after reconnecting"
    );
    guard.unlock().await.expect("holder unlocks");
    let (after, guard) = acquired_after(waiting, Instant::now(), Duration::from_secs(5)).await;
    assert!(
        after < Duration::from_secs(1),
        "woken by the message, not the 30 s PTTL: {after:?}"
    );
    guard.unlock().await.expect("unlock");
}

#[tokio::test]
async fn contending_tasks_never_overlap() {
    let server = RedisServer::start();
    let clients = [client(&server).await, client(&server).await];
    let inside = Arc::new(AtomicU64::new(0));
    let mut redis = raw(&server).await;
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let lock = clients[i % 2].lock("waiting:contention");
            let inside = inside.clone();
            let mut redis = redis.clone();
            tokio::spawn(async move {
                for _ in 0..15 {
                    let guard = lock.lock().await.expect("lock");
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders at once"
                    );
                    let counter: Option<u64> =
                        redis.get("waiting:contention:counter").await.expect("get");
                    tokio::task::yield_now().await;
                    let _: () = redis
                        .set("waiting:contention:counter", counter.unwrap_or(0) + 1)
                        .await
                        .expect("set");
                    let _ = inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await.expect("unlock");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let counter: u64 = redis.get("waiting:contention:counter").await.expect("get");
    assert_eq!(counter, 16 * 15);
}

#[tokio::test]
async fn a_foreign_lock_with_an_absurd_pttl_still_honours_the_deadline() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "waiting:absurd-ttl";
    // About 290 million years: far past anything an Instant can hold.
    let _: () = redis
        .hset(name, "00000000-0000-4000-8000-000000000000:1", 1)
        .await
        .expect("hset");
    let _: () = redis::cmd("PEXPIRE")
        .arg(name)
        .arg(9_000_000_000_000_000_000_i64 / 1_000)
        .query_async(&mut redis)
        .await
        .expect("pexpire");
    let started = Instant::now();
    let got = client
        .lock(name)
        .try_lock_for(Duration::from_millis(200))
        .await
        .expect("try_lock_for");
    assert!(got.is_none());
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let _: () = redis.del(name).await.expect("del");
    let _: () = redis
        .publish(format!("{CHANNEL_PREFIX}{{{name}}}"), "0")
        .await
        .expect("publish");
}

/// A burst of 10,000 `lock()` calls on one client, each on a name of its own held by another
/// client (issue 38; the 100,000 case is the benchmark's, `scripts/bench.sh --only burst`): every
/// one subscribes, none fails, and every one acquires once the names are released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_waiters_fails_none_from_its_own_load() {
    const WAITERS: usize = 10_000;
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let waiters = client(&server).await;
    let names: Vec<String> = (0..WAITERS).map(|i| format!("burst:{{{i}}}")).collect();
    for chunk in names.chunks(1000) {
        let mut pipe = redis::pipe();
        for name in chunk {
            let _ = pipe
                .hset(name, "00000000-0000-4000-8000-000000000000:1", 1)
                .ignore()
                .pexpire(name, 60_000)
                .ignore();
        }
        let () = pipe.query_async(&mut redis).await.expect("holds");
    }
    let acquired = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let lock = waiters.lock(name.as_str());
            let acquired = acquired.clone();
            tokio::spawn(async move {
                let guard = lock.lock().await?;
                let _ = acquired.fetch_add(1, Ordering::Relaxed);
                guard.unlock().await
            })
        })
        .collect();
    let parked = eventually(Duration::from_secs(60), async || {
        waiters.stats().subscribed_channels >= WAITERS
    })
    .await;
    assert!(parked, "every waiter subscribed: {:?}", waiters.stats());
    for chunk in names.chunks(1000) {
        let mut pipe = redis::pipe();
        for name in chunk {
            // The name holds a `{`: its channel is the prefix and the name (docs/protocol.md §1.4).
            let _ = pipe
                .del(name)
                .ignore()
                .publish(format!("{CHANNEL_PREFIX}{name}"), 0)
                .ignore();
        }
        let () = pipe.query_async(&mut redis).await.expect("releases");
    }
    let mut failed = Vec::new();
    for task in tasks {
        if let Err(e) = task.await.expect("a waiter's task") {
            failed.push(e.to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{} failed, e.g. {:?}",
        failed.len(),
        failed.first()
    );
    assert_eq!(acquired.load(Ordering::Relaxed), WAITERS as u64);
}
