//! The reentrant lock's data layout, reentrancy, TTLs, ownership errors and bad input, against a real
//! redis-server.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Error, Owner, RemainingTtl};
use rlock_tests::RedisServer;
use rlock_tests::harness::{client, client_with, raw};

#[tokio::test]
async fn hash_field_is_node_uuid_colon_owner_id_and_counts_reentry() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let owner = Owner::from_id(57);
    let lock = client.lock("basics:reentry").with_owner(owner);

    let outer = lock.lock().await.expect("lock");
    let node = client.node_id();
    assert!(is_lowercase_uuid_v4(node), "node id {node:?}");
    let field = format!("{node}:57");
    assert_eq!(outer.field(), field);
    let hash: Vec<(String, String)> = redis.hgetall("basics:reentry").await.expect("hgetall");
    assert_eq!(hash, vec![(field.clone(), "1".to_owned())]);

    let inner = lock.lock().await.expect("re-enter");
    let count: String = redis.hget("basics:reentry", &field).await.expect("hget");
    assert_eq!(count, "2");
    assert_eq!(lock.hold_count_of(owner).await.expect("hold_count"), 2);
    assert!(lock.is_held_by(owner).await.expect("is_held_by"));
    assert!(
        !lock
            .is_held_by(Owner::from_id(58))
            .await
            .expect("is_held_by")
    );

    inner.unlock().await.expect("unlock inner");
    let count: String = redis.hget("basics:reentry", &field).await.expect("hget");
    assert_eq!(count, "1");
    outer.unlock().await.expect("unlock outer");
    let exists: bool = redis.exists("basics:reentry").await.expect("exists");
    assert!(!exists);
    assert_eq!(lock.hold_count_of(owner).await.expect("hold_count"), 0);
}

#[tokio::test]
async fn acquisitions_without_an_owner_exclude_each_other() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("basics:fresh-owners");
    let first = lock.lock().await.expect("lock");
    assert!(lock.try_lock().await.expect("try_lock").is_none());
    assert_ne!(first.owner(), Owner::new());
    first.unlock().await.expect("unlock");
    let second = lock
        .try_lock()
        .await
        .expect("try_lock")
        .expect("free again");
    second.unlock().await.expect("unlock");
}

#[tokio::test]
async fn pttl_is_the_lease_or_the_watchdog_timeout() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let lock = client.lock("basics:pttl");
    assert_eq!(
        lock.remaining_ttl().await.expect("ttl"),
        RemainingTtl::NotLocked
    );

    let guard = lock.lock().await.expect("lock");
    let pttl: i64 = redis.pttl("basics:pttl").await.expect("pttl");
    assert!(
        (29_000..=30_000).contains(&pttl),
        "watchdog lease, got {pttl}"
    );
    match lock.remaining_ttl().await.expect("ttl") {
        RemainingTtl::Expires(left) => assert!(left > Duration::from_secs(29)),
        other => panic!("expected an expiry, got {other:?}"),
    }
    guard.unlock().await.expect("unlock");

    let guard = lock
        .lock_with_lease(Duration::from_millis(5_000))
        .await
        .expect("lock with lease");
    let pttl: i64 = redis.pttl("basics:pttl").await.expect("pttl");
    assert!((4_000..=5_000).contains(&pttl), "fixed lease, got {pttl}");
    guard.unlock().await.expect("unlock");

    let _: () = redis.hset("basics:pttl", "foreign", 1).await.expect("hset");
    assert_eq!(
        lock.remaining_ttl().await.expect("ttl"),
        RemainingTtl::NoExpiry
    );
}

#[tokio::test]
async fn a_fixed_lease_expires_by_itself() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("basics:lease-expiry");
    let guard = lock
        .lock_with_lease(Duration::from_millis(200))
        .await
        .expect("lock");
    assert!(!guard.is_lease_lost());
    tokio::time::timeout(Duration::from_secs(2), guard.lease_lost())
        .await
        .expect("lease_lost completes at the lease's end");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!lock.is_locked().await.expect("is_locked"));
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));
}

#[tokio::test]
async fn partial_unlock_reapplies_the_lease() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let lock = client.lock("basics:partial").with_owner(Owner::new());
    let outer = lock
        .lock_with_lease(Duration::from_secs(10))
        .await
        .expect("lock");
    let inner = lock
        .lock_with_lease(Duration::from_secs(10))
        .await
        .expect("re-enter");
    let _: () = redis
        .pexpire("basics:partial", 2_000)
        .await
        .expect("pexpire");
    inner.unlock().await.expect("partial unlock");
    let pttl: i64 = redis.pttl("basics:partial").await.expect("pttl");
    assert!(
        pttl > 9_000,
        "partial unlock re-applies the 10 s lease, got {pttl}"
    );
    outer.unlock().await.expect("unlock");
}

#[tokio::test]
async fn unlocking_a_lock_you_do_not_hold_is_not_owner_and_changes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let lock = client.lock("basics:not-owner");
    let guard = lock.lock().await.expect("lock");
    let before: Vec<(String, String)> = redis.hgetall("basics:not-owner").await.expect("hgetall");
    let pttl_before: i64 = redis.pttl("basics:not-owner").await.expect("pttl");

    let stranger = Owner::new();
    match lock.unlock(stranger).await {
        Err(Error::NotOwner {
            kind, name, field, ..
        }) => {
            assert_eq!((kind, name.as_str()), ("lock", "basics:not-owner"));
            assert_eq!(field, format!("{}:{}", client.node_id(), stranger.id()));
        }
        other => panic!("expected NotOwner, got {other:?}"),
    }
    // Another client (another node id) cannot unlock it either, even with the same owner id.
    let other_client = rlock_tests::harness::client(&server).await;
    let same_id = other_client.lock("basics:not-owner");
    assert!(matches!(
        same_id.unlock(guard.owner()).await,
        Err(Error::NotOwner { .. })
    ));
    let after: Vec<(String, String)> = redis.hgetall("basics:not-owner").await.expect("hgetall");
    let pttl_after: i64 = redis.pttl("basics:not-owner").await.expect("pttl");
    assert_eq!(before, after);
    assert!(pttl_after <= pttl_before, "no PEXPIRE by a failed unlock");
    let latches: Vec<String> = redis.keys("redisson_unlock_latch:*").await.expect("keys");
    assert!(
        latches.is_empty(),
        "a refused unlock leaves no latch: {latches:?}"
    );

    // Unlocking a lock nobody holds is NotOwner too (Redisson ≥ 3.10.6).
    guard.unlock().await.expect("unlock");
    assert!(matches!(
        lock.unlock(stranger).await,
        Err(Error::NotOwner { .. })
    ));
}

#[tokio::test]
async fn unlock_latch_is_removed_after_the_reply() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let lock = client.lock("basics:latch");
    lock.lock()
        .await
        .expect("lock")
        .unlock()
        .await
        .expect("unlock");
    let cleaned = rlock_tests::harness::eventually(Duration::from_secs(2), async || {
        let latches: Vec<String> = redis
            .keys("redisson_unlock_latch:{basics:latch}:*")
            .await
            .expect("keys");
        latches.is_empty()
    })
    .await;
    assert!(cleaned, "the best-effort DEL of the latch ran");
}

#[tokio::test]
async fn force_unlock_deletes_whoever_holds_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("basics:force");
    let guard = lock.lock().await.expect("lock");
    assert!(lock.force_unlock().await.expect("force_unlock"));
    assert!(!lock.is_locked().await.expect("is_locked"));
    assert!(!lock.force_unlock().await.expect("force_unlock again"));
    assert!(guard.is_lease_lost(), "the force-unlocked guard knows");
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));
    assert_eq!(client.stats().renewing_locks, 0);
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_changes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;

    let empty = client.lock("");
    assert!(matches!(empty.lock().await, Err(Error::InvalidArgument(_))));
    assert!(matches!(
        empty.try_lock().await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        empty.is_locked().await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        empty.force_unlock().await,
        Err(Error::InvalidArgument(_))
    ));

    let lock = client.lock("basics:bad-input");
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::from_secs(20 * 365 * 24 * 3600),
        Duration::MAX,
    ] {
        assert!(
            matches!(
                lock.lock_with_lease(lease).await,
                Err(Error::InvalidArgument(_))
            ),
            "lease {lease:?}"
        );
        assert!(matches!(
            lock.try_lock_with_lease(Duration::ZERO, lease).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    // An absurdly long wait is simply "forever", not an overflow.
    let guard = lock
        .try_lock_for(Duration::MAX)
        .await
        .expect("wait")
        .expect("free");
    guard.unlock().await.expect("unlock");

    let mut config = rlock_redisson::Config::new(server.url());
    config.watchdog_timeout = Duration::ZERO;
    assert!(matches!(
        rlock_redisson::Client::with_config(config).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(rlock_redisson::Client::connect("not a url").await.is_err());

    // The unlock above deletes its latch in the background: wait for that, then nothing is left.
    client.close().await;
    let keys: Vec<String> = redis.keys("*").await.expect("keys");
    assert!(keys.is_empty(), "nothing was written: {keys:?}");
}

#[tokio::test]
async fn a_non_hash_value_at_the_lock_key_is_wrong_type_and_left_alone() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let _: () = redis.set("basics:string", "precious").await.expect("set");
    let lock = client.lock("basics:string").with_owner(Owner::new());
    let owner = lock.owner().expect("bound");

    assert!(matches!(lock.lock().await, Err(Error::WrongType { .. })));
    assert!(matches!(
        lock.try_lock().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        lock.unlock(owner).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        lock.hold_count_of(owner).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        lock.is_held_by(owner).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        lock.force_unlock().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        lock.is_locked().await,
        Err(Error::WrongType { .. })
    ));

    let value: String = redis.get("basics:string").await.expect("get");
    assert_eq!(value, "precious");
    let ttl: i64 = redis.pttl("basics:string").await.expect("pttl");
    assert_eq!(ttl, -1, "no PEXPIRE was applied");
    assert_eq!(client.stats().renewing_locks, 0);
}

#[tokio::test]
async fn an_odd_hold_count_is_an_unexpected_reply() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let owner = Owner::from_id(7);
    let field = format!("{}:7", client.node_id());
    let _: () = redis
        .hset("basics:odd", &field, "lots")
        .await
        .expect("hset");
    let lock = client.lock("basics:odd");
    assert!(matches!(
        lock.hold_count_of(owner).await,
        Err(Error::UnexpectedReply { .. })
    ));
}

fn is_lowercase_uuid_v4(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && s.chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && groups[2].starts_with('4')
}

/// An unlock goes out on the connection its hold was taken on. When that connection died meanwhile,
/// the unlock is sent again on a new one (under its latch, so it applies once) and frees the lock.
#[tokio::test]
async fn an_unlock_whose_connection_died_is_sent_again_on_a_new_one() {
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.retry_delay = Duration::from_millis(20);
    })
    .await;
    let mut redis = raw(&server).await;
    let lock = client.lock("basics:dead-connection");
    let guard = lock.lock().await.expect("lock");
    // Every connection but this test's own: the client's command connection among them.
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query_async(&mut redis)
        .await
        .expect("client kill");
    assert!(killed >= 1, "killed {killed}");
    guard.unlock().await.expect("the unlock, sent again");
    let exists: bool = redis
        .exists("basics:dead-connection")
        .await
        .expect("exists");
    assert!(!exists, "released");
    let again = lock.lock().await.expect("the client goes on");
    again.unlock().await.expect("unlock");
}
