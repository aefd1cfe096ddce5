//! Which owner an acquisition uses (README "Owners and reentrancy"): `Owner::scope` in async code,
//! the calling thread in the blocking API, a fresh owner per acquisition elsewhere; and that these
//! owners exclude Java's threads and are excluded by them.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Owner, blocking};
use rlock_tests::redisson::{JavaClient, RedissonVersion};
use rlock_tests::{RedisServer, harness};

const SHORT: Duration = Duration::from_millis(200);

async fn fields(server: &RedisServer, name: &str) -> Vec<(String, u32)> {
    let mut redis = harness::raw(server).await;
    let mut fields: Vec<(String, u32)> = redis.hgetall(name).await.expect("HGETALL");
    fields.sort();
    fields
}

#[tokio::test]
async fn nested_locks_inside_a_scope_re_enter_as_one_owner() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let lock = client.lock("owners:scope");
    let owner = Owner::new();
    Owner::scope(owner, async {
        assert_eq!(Owner::current(), Some(owner));
        let outer = lock.lock().await.expect("lock");
        // Without a scope this would wait for itself forever; here it re-enters at once.
        let inner = tokio::time::timeout(SHORT, lock.lock())
            .await
            .expect("the nested lock() re-enters without waiting")
            .expect("lock");
        assert_eq!((outer.owner(), inner.owner()), (owner, owner));
        assert_eq!(lock.hold_count().await.expect("hold_count"), 2);
        assert!(lock.is_held_by_current().await.expect("is_held_by"));
        let field = format!("{}:{}", client.node_id(), owner.id());
        assert_eq!(fields(&server, "owners:scope").await, vec![(field, 2)]);

        // The scope does not flow into a spawned task: that one is another owner, excluded.
        let spawned = tokio::spawn({
            let lock = lock.clone();
            async move {
                let current = Owner::current();
                (current, lock.try_lock().await.expect("try_lock").is_none())
            }
        });
        assert_eq!(spawned.await.expect("task"), (None, true));

        inner.unlock().await.expect("unlock");
        assert_eq!(lock.hold_count().await.expect("hold_count"), 1);
        outer.unlock().await.expect("unlock");
    })
    .await;
    assert!(!lock.is_locked().await.expect("is_locked"));
}

#[tokio::test]
async fn an_acquisition_made_outside_a_scope_and_awaited_inside_it_is_the_scopes() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let lock = client.lock("owners:made-outside");
    let owner = Owner::new();
    // The owner is the one current where the future runs, as for any `async fn`.
    let acquiring = lock.lock();
    let guard = Owner::scope(owner, acquiring).await.expect("lock");
    assert_eq!(guard.owner(), owner);
    let field = format!("{}:{}", client.node_id(), owner.id());
    assert_eq!(
        fields(&server, "owners:made-outside").await,
        vec![(field, 1)]
    );
    guard.unlock().await.expect("unlock");
}

#[tokio::test]
async fn outside_a_scope_every_acquisition_is_a_new_owner() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let lock = client.lock("owners:fresh");
    assert_eq!(Owner::current(), None);
    let guard = lock.lock().await.expect("lock");
    assert!(
        lock.try_lock().await.expect("try_lock").is_none(),
        "two acquisitions of one task exclude each other, like a mutex"
    );
    assert!(matches!(
        lock.hold_count().await,
        Err(rlock_redisson::Error::InvalidArgument(_))
    ));
    assert_eq!(
        lock.hold_count_of(guard.owner())
            .await
            .expect("hold_count_of"),
        1
    );
    guard.unlock().await.expect("unlock");
}

/// Java threads and rlock's owners (a scope, a blocking thread) exclude each other both ways, on
/// one lock name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_and_threads_exclude_java_threads_both_ways() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let java = JavaClient::connect(&server.url(), RedissonVersion::V4)
        .await
        .expect("java client");
    let java_lock = java.get_lock("owners:java");
    let lock = client.lock("owners:java");

    // Java thread 7 holds twice; neither a scope nor a blocking thread gets in.
    java_lock.lock(7).await.expect("java lock");
    java_lock.lock(7).await.expect("java re-enters");
    Owner::scope(Owner::new(), async {
        assert!(lock.try_lock_for(SHORT).await.expect("try_lock").is_none());
    })
    .await;
    let url = server.url();
    // A plain thread (the blocking API refuses runtime threads), joined without blocking the runtime.
    let thread = std::thread::spawn(move || {
        let client = blocking::Client::connect(url).expect("blocking client");
        client
            .lock("owners:java")
            .try_lock_for(SHORT)
            .expect("try_lock")
            .is_none()
    });
    let blocked = tokio::task::spawn_blocking(move || thread.join().expect("thread"));
    assert!(blocked.await.expect("join"));
    assert_eq!(java_lock.unlock(7).await.expect("unlock"), Some(0));
    assert_eq!(java_lock.unlock(7).await.expect("unlock"), Some(1));

    // A scope holds twice (one field, count 2); Java waits until both holds are released.
    let owner = Owner::new();
    let (outer, inner) = Owner::scope(owner, async {
        let outer = lock.lock().await.expect("lock");
        let inner = lock.lock().await.expect("re-enters");
        (outer, inner)
    })
    .await;
    let field = format!("{}:{}", client.node_id(), owner.id());
    assert_eq!(fields(&server, "owners:java").await, vec![(field, 2)]);
    assert!(!java_lock.try_lock(8).await.expect("java try_lock"));
    let java_waiter = {
        let java_lock = java.get_lock("owners:java");
        tokio::spawn(async move { java_lock.lock(8).await })
    };
    inner.unlock().await.expect("unlock");
    tokio::time::sleep(SHORT).await;
    assert!(!java_waiter.is_finished(), "one hold remains");
    outer.unlock().await.expect("unlock");
    tokio::time::timeout(Duration::from_secs(5), java_waiter)
        .await
        .expect("java woken by the release")
        .expect("task")
        .expect("java lock");
    assert!(java_lock.is_held_by_thread(8).await.expect("held"));
    assert_eq!(java_lock.unlock(8).await.expect("unlock"), Some(1));
}
