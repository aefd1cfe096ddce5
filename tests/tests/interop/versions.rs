//! One handshake per emulated Redisson version (acquire, re-enter, wake each other, refuse each
//! other's unlocks, latch handling), and Java's `internalLockLeaseTime` rule.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::Owner;
use rlock_tests::redisson::{JavaClient, RedissonVersion, lock_channel};
use rlock_tests::{RedisServer, harness};
use tokio::time::Instant;

use crate::support::{Latencies, Listener, Message, Redis, WAKE_LIMIT, holds, woken};

/// Everything a Java client of `version` and rlock do to each other on one lock, checked on the
/// wire: fields and counts, partial unlocks publishing nothing, full unlocks waking the other side
/// within milliseconds, refused foreign unlocks, each side's latches, and the unlock of a missing
/// lock (which only ≤3.10.5 answers with 1 and a message).
async fn handshake(version: RedissonVersion) {
    let server = RedisServer::start();
    let java = JavaClient::connect(&server.url(), version)
        .await
        .expect("java client");
    let client = harness::client(&server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let mut events = Listener::key_events(&server).await;
    let name = "interop:handshake";
    let channel = lock_channel(name);
    let unlock_message = Some(Message::new(&channel, "0"));
    let jlock = java.get_lock(name);
    let rlock = client.lock(name).with_owner(Owner::from_id(1));
    let rlock_field = format!("{}:1", client.node_id());
    let mut latencies = Latencies::default();

    jlock.lock(1).await.expect("java lock");
    jlock.lock(1).await.expect("java re-enter");
    assert_eq!(redis.hash(name).await, holds([(java.lock_name(1), 2)]));
    assert!(redis.pttl(name).await > 29_000);
    let waiting = tokio::spawn({
        let rlock = rlock.clone();
        async move {
            let guard = rlock.lock().await.expect("rlock lock");
            (Instant::now(), guard)
        }
    });
    let _ = redis.wait_parked(&channel, 1).await;
    assert_eq!(jlock.unlock(1).await.expect("java unlock"), Some(0));
    assert_eq!(redis.hash(name).await, holds([(java.lock_name(1), 1)]));
    assert_eq!(messages.next(Duration::from_millis(100)).await, None);
    let unlocked_at = Instant::now();
    assert_eq!(jlock.unlock(1).await.expect("java unlock"), Some(1));
    let (acquired_at, guard) = woken(waiting).await;
    latencies.record(unlocked_at, acquired_at);
    assert_eq!(messages.next(Duration::from_secs(1)).await, unlock_message);
    assert_eq!(redis.hash(name).await, holds([(rlock_field.clone(), 1)]));

    assert!(!jlock.try_lock(1).await.expect("java tryLock"));
    assert_eq!(jlock.unlock(1).await.expect("java unlock"), None);
    assert_eq!(redis.hash(name).await, holds([(rlock_field.clone(), 1)]));
    let java_waiting = tokio::spawn({
        let jlock = jlock.clone();
        async move {
            jlock.lock(2).await.expect("java lock");
            Instant::now()
        }
    });
    let _ = redis.wait_parked(&channel, 1).await;
    let unlocked_at = Instant::now();
    guard.unlock().await.expect("rlock unlock");
    latencies.record(unlocked_at, woken(java_waiting).await);
    assert_eq!(messages.next(Duration::from_secs(1)).await, unlock_message);
    assert_eq!(redis.hash(name).await, holds([(java.lock_name(2), 1)]));
    assert!(matches!(
        rlock.unlock(Owner::from_id(2)).await,
        Err(rlock_redisson::Error::NotOwner { .. })
    ));
    assert_eq!(jlock.unlock(2).await.expect("java unlock"), Some(1));
    assert_eq!(messages.next(Duration::from_secs(1)).await, unlock_message);
    assert!(!redis.exists(name).await);
    latencies.check(
        &format!("handshake wake-ups with java {version:?}"),
        WAKE_LIMIT,
    );

    // Latches: rlock wrote one (its unlock) and deleted it; Java wrote one per successful unlock
    // (three) from 3.24 on, and deleted them except in 3.52–4.2.
    let written = events
        .drain(Duration::from_millis(200))
        .await
        .into_iter()
        .filter(|m| m.channel == b"__keyevent@0__:set")
        .count();
    let java_latches = if version.has_unlock_latch() { 3 } else { 0 };
    assert_eq!(written, 1 + java_latches, "latches written");
    let left = redis.latch_keys().await;
    if version.deletes_its_latch() || !version.has_unlock_latch() {
        assert_eq!(left, Vec::<String>::new());
    } else {
        assert_eq!(
            left.len(),
            3,
            "java {version:?} leaves its latches: {left:?}"
        );
        for latch in &left {
            let ttl = redis.pttl(latch).await;
            assert!((10_000..=20_000).contains(&ttl), "{latch}: pttl {ttl}");
        }
    }

    let missing = jlock
        .unlock(1)
        .await
        .expect("java unlock of a missing lock");
    let heard = messages.next(Duration::from_millis(100)).await;
    if version == RedissonVersion::V3_10_5 {
        assert_eq!((missing, heard), (Some(1), unlock_message));
    } else {
        assert_eq!((missing, heard), (None, None));
    }
}

macro_rules! handshakes {
    ($($test:ident => $version:ident),* $(,)?) => {
        mod handshake {
            use rlock_tests::redisson::RedissonVersion;
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                super::handshake(RedissonVersion::$version).await;
            }
        )*
        }
    };
}

handshakes! {
    java_3_10_5 => V3_10_5,
    java_3_12 => V3_12,
    java_3_21 => V3_21,
    java_3_23 => V3_23,
    java_3_31 => V3_31,
    java_3_44 => V3_44,
    java_3_52 => V3_52,
    java_head => V4,
}

/// What a Java holder's partial unlock does to the shared lock's TTL: it re-applies the lease the
/// `RLock` object last acquired with; before 3.27.2 a partial unlock also reset that to the
/// watchdog timeout, so the next partial unlock applied 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_partial_unlocks_re_apply_internal_lock_lease_time() {
    let server = RedisServer::start();
    let mut redis = Redis::connect(&server).await;
    let lease = Duration::from_secs(4);
    for (version, second_pttl) in [
        (RedissonVersion::V3_23, 28_500..=30_000),
        (RedissonVersion::V4, 3_500..=4_000),
    ] {
        let java = JavaClient::connect(&server.url(), version)
            .await
            .expect("java client");
        let lock = java.get_lock("interop:internal-lease");
        for _ in 0..3 {
            lock.lock_with_lease(1, lease).await.expect("java lock");
        }
        let _: () = redis
            .conn
            .pexpire(lock.name(), 2_000)
            .await
            .expect("PEXPIRE");
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(0));
        let first = redis.pttl(lock.name()).await;
        assert!(
            (3_500..=4_000).contains(&first),
            "{version:?}: pttl {first}"
        );
        let _: () = redis
            .conn
            .pexpire(lock.name(), 2_000)
            .await
            .expect("PEXPIRE");
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(0));
        let second = redis.pttl(lock.name()).await;
        assert!(second_pttl.contains(&second), "{version:?}: pttl {second}");
        assert_eq!(lock.unlock(1).await.expect("unlock"), Some(1));
    }
}
