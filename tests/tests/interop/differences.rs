//! Known differences between rlock and Redisson, pinned down so that they stay deliberate, and a
//! former deviation (the lease a partial unlock by owner re-applies) checked on both sides.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::redisson::{JavaClient, RedissonVersion, lock_channel};
use rlock_tests::{RedisServer, harness};

use crate::support::{Listener, Message, Party, Redis, Side, Unlocked};

/// Known difference: Java's force unlock deletes whatever the key holds (and publishes), rlock
/// refuses a key that is not a lock hash and leaves it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_of_a_key_that_is_not_a_lock() {
    let server = RedisServer::start();
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let java = JavaClient::connect(&server.url(), RedissonVersion::V4)
        .await
        .expect("java client");
    let client = harness::client(&server).await;
    let name = "interop:not-a-lock";
    let _: () = redis.conn.set(name, "payload").await.expect("SET");

    let refused = client.lock(name).force_unlock().await;
    assert!(
        matches!(&refused, Err(rlock_redisson::Error::WrongType { key, .. }) if key == name),
        "{refused:?}"
    );
    let value: String = redis.conn.get(name).await.expect("GET");
    assert_eq!(value, "payload");
    assert_eq!(messages.drain(Duration::from_millis(50)).await, vec![]);

    assert!(
        java.get_lock(name)
            .force_unlock()
            .await
            .expect("java forceUnlock")
    );
    assert!(!redis.exists(name).await);
    assert_eq!(
        messages.next(Duration::from_secs(1)).await,
        Some(Message::new(lock_channel(name), "0"))
    );
}

/// docs/protocol.md §2.1, §11.10: a partial unlock re-applies `internalLockLeaseTime`, i.e. the
/// lease the holds were taken with. Through the lock API (Java `unlock(threadId)`, rlock
/// `Lock::unlock(owner)`) a hold taken with a 5 s lease must keep a TTL of at most 5 s.
async fn partial_unlock_by_owner_re_applies_the_hold_lease(side: Side) {
    let server = RedisServer::start();
    let party = Party::connect(side, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = "interop:owner-unlock-lease";
    let lock = party.lock(name);
    let lease = Duration::from_secs(5);
    let holds = [
        lock.lock_with_lease(7, lease).await,
        lock.lock_with_lease(7, lease).await,
    ];
    let _: () = redis.conn.pexpire(name, 3_000).await.expect("PEXPIRE");
    assert_eq!(lock.unlock_as(7).await, Unlocked::Released);
    let pttl = redis.pttl(name).await;
    assert!(
        (4_500..=5_000).contains(&pttl),
        "{side}: a partial unlock of 5 s holds re-applied {pttl} ms"
    );
    drop(holds);
}

mod partial_unlock_by_owner_re_applies_the_hold_lease {
    use crate::support::Side;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn java() {
        super::partial_unlock_by_owner_re_applies_the_hold_lease(Side::Java).await;
    }

    /// rlock once re-applied `Config::watchdog_timeout` here, so a leased, un-renewed hold could
    /// outlive its lease by up to 25 s if its holder then died.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rlock() {
        super::partial_unlock_by_owner_re_applies_the_hold_lease(Side::Rlock).await;
    }
}
