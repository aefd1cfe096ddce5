//! Name mapping (`Config::name_mapper`, Redisson's `nameMapper`, docs/protocol.md §9.1): every kind
//! works under the mapped name, keys and channels alike, so rlock with `NameMapper::prefix("app:")`
//! and a Java service whose `NameMapper` prepends `app:` exclude each other and wake each other,
//! while a Java service without the mapper uses other keys and does not exclude rlock at all.
//!
//! A mapping Java client is the Redisson emulator used on the mapped name ([`JAVA_PREFIX`] in front
//! of every name), which is what Redisson does with the name it is given before deriving anything
//! (`getRawName()`). The expected keys and channels are literals.

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock_redisson::{AnyLock, Client, Error, MultiLock, NameMapper};
use rlock_tests::harness::exists;
use rlock_tests::redisson::{JavaClient, RedissonVersion};
use rlock_tests::{RedisServer, harness};

/// What the Java service's `NameMapper.map` prepends, and rlock's prefix mapper too.
const JAVA_PREFIX: &str = "app:";
/// The Java thread of every Java hold.
const THREAD: u64 = 7;
/// How soon a woken waiter must be through: far below the 30 s lease a missed wake-up would cost.
const WAKE_LIMIT: Duration = Duration::from_secs(2);

/// An rlock client mapping names with `NameMapper::prefix("app:")`.
async fn mapping_client(server: &RedisServer) -> Client {
    harness::client_with(server, |config| {
        config.name_mapper = Some(NameMapper::prefix(JAVA_PREFIX));
    })
    .await
}

/// A private server (kept until the test ends), an rlock client that maps, a Java client, and a
/// plain connection.
async fn sides() -> (RedisServer, Client, JavaClient, MultiplexedConnection) {
    let server = RedisServer::start();
    let client = mapping_client(&server).await;
    let java = JavaClient::connect(&server.url(), RedissonVersion::V4)
        .await
        .expect("emulated java client connects");
    let redis = harness::raw(&server).await;
    (server, client, java, redis)
}

/// The name a mapping Java client gives Redis for `name`.
fn java_mapped(name: &str) -> String {
    format!("{JAVA_PREFIX}{name}")
}

/// Runs the Java waiter `wait` in a task until it subscribes `channel`, then `release` (rlock's),
/// and returns what the waiter returned: it must wake within [`WAKE_LIMIT`], so on that channel.
async fn java_woken_on<T: Send + 'static>(
    redis: &mut MultiplexedConnection,
    channel: &str,
    wait: impl Future<Output = redis::RedisResult<T>> + Send + 'static,
    release: impl Future<Output = rlock_redisson::Result<()>>,
) -> T {
    let waiter = tokio::spawn(wait);
    let subscribed = harness::eventually(Duration::from_secs(5), async || {
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(redis)
            .await
            .expect("PUBSUB NUMSUB");
        counts.first().is_some_and(|(_, n)| *n == 1)
    })
    .await;
    assert!(subscribed, "the Java waiter subscribed {channel}");
    release.await.expect("rlock releases");
    tokio::time::timeout(WAKE_LIMIT, waiter)
        .await
        .expect("the Java waiter woke at once")
        .expect("no panic")
        .expect("the Java waiter's call")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_lock_excludes_and_wakes_a_java_client_that_maps_alike() {
    let (_server, client, java, mut redis) = sides().await;

    let lock = client.lock("nm:orders");
    assert_eq!(lock.name(), "app:nm:orders");
    let guard = lock.lock().await.expect("rlock acquires");
    let fields: Vec<String> = redis.hkeys("app:nm:orders").await.expect("HKEYS");
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert!(!exists(&mut redis, "nm:orders").await);

    let java_lock = java.get_lock(java_mapped("nm:orders"));
    assert_eq!(
        java_lock.channel(),
        "redisson_lock__channel:{app:nm:orders}"
    );
    assert!(!java_lock.try_lock(THREAD).await.expect("java tryLock"));
    // A Java waiter sleeps on the mapped name's channel, and rlock's unlock wakes it there.
    let waiter = java_lock.clone();
    java_woken_on(
        &mut redis,
        "redisson_lock__channel:{app:nm:orders}",
        async move { waiter.lock(THREAD).await },
        guard.unlock(),
    )
    .await;
    assert!(java_lock.is_held_by_thread(THREAD).await.expect("held"));

    // The other way round: rlock waits on the same channel, and Java's unlock wakes it.
    assert!(lock.try_lock().await.expect("rlock tryLock").is_none());
    let waiting = harness::park_subscribed_waiter(lock.clone(), &mut redis).await;
    let unlocked = tokio::time::Instant::now();
    assert_eq!(
        java_lock.unlock(THREAD).await.expect("java unlock"),
        Some(1)
    );
    let (after, guard) = harness::acquired_after(waiting, unlocked, WAKE_LIMIT).await;
    println!("rlock woke {after:?} after the Java unlock");
    guard.unlock().await.expect("rlock unlock");
    assert!(!exists(&mut redis, "app:nm:orders").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_client_without_the_mapper_holds_the_same_names_at_the_same_time() {
    let (_server, client, java, mut redis) = sides().await;

    let lock = client.lock("nm:plain");
    let guard = lock.lock().await.expect("rlock acquires");
    let java_lock = java.get_lock("nm:plain");
    assert!(
        java_lock.try_lock(THREAD).await.expect("java tryLock"),
        "the unmapped Java lock is another key: both hold at once"
    );
    assert!(exists(&mut redis, "app:nm:plain").await && exists(&mut redis, "nm:plain").await);

    let rw = client.read_write_lock("nm:plain-rw");
    let write = rw.write().lock().await.expect("rlock write lock");
    let java_rw = java.get_read_write_lock("nm:plain-rw");
    assert!(
        java_rw
            .write_lock()
            .try_lock(THREAD)
            .await
            .expect("java write"),
        "two writers at once"
    );

    let semaphore = client.semaphore("nm:plain-sem");
    assert!(semaphore.try_set_permits(1).await.expect("set permits"));
    let java_semaphore = java.get_semaphore("nm:plain-sem");
    assert!(
        java_semaphore.try_set_permits(1).await.expect("java set"),
        "the Java side sets up a semaphore of its own"
    );
    let permit = semaphore.acquire(1).await.expect("rlock acquire");
    assert!(
        java_semaphore.try_acquire(1).await.expect("java acquire"),
        "one permit each: two holders of a one-permit semaphore"
    );

    permit.release().await.expect("rlock release");
    write.unlock().await.expect("rlock write unlock");
    guard.unlock().await.expect("rlock unlock");
    // Java's holds are untouched by rlock's releases.
    assert!(java_lock.is_locked().await.expect("java isLocked"));
    assert!(
        java_rw
            .write_lock()
            .is_locked()
            .await
            .expect("java isLocked")
    );
    assert_eq!(java_semaphore.available_permits().await.expect("java"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_excludes_a_java_client_that_maps_alike() {
    let (_server, client, java, mut redis) = sides().await;

    let rw = client.read_write_lock("nm:rw");
    assert_eq!(rw.name(), "app:nm:rw");
    let read = rw.read().lock().await.expect("rlock read lock");
    let mode: Option<String> = redis.hget("app:nm:rw", "mode").await.expect("HGET");
    assert_eq!(mode.as_deref(), Some("read"));
    let java_rw = java.get_read_write_lock(java_mapped("nm:rw"));
    assert_eq!(java_rw.channel(), "redisson_rwlock:{app:nm:rw}");
    assert!(
        java_rw
            .read_lock()
            .try_lock(THREAD)
            .await
            .expect("java read"),
        "readers share"
    );
    assert!(
        !java_rw
            .write_lock()
            .try_lock(THREAD + 1)
            .await
            .expect("java write"),
        "the Java writer is kept out by rlock's reader"
    );
    // 0: released, and the hash stays, still read-held by rlock.
    assert_eq!(
        java_rw
            .read_lock()
            .unlock(THREAD)
            .await
            .expect("java read unlock"),
        Some(0)
    );
    // A Java writer waits on the mapped name's channel; rlock's release wakes it.
    let writer = java_rw.write_lock();
    java_woken_on(
        &mut redis,
        "redisson_rwlock:{app:nm:rw}",
        async move { writer.lock(THREAD + 1).await },
        read.unlock(),
    )
    .await;
    assert!(
        rw.read().try_lock().await.expect("rlock read").is_none(),
        "rlock's reader is kept out by the Java writer"
    );
    assert_eq!(
        java_rw
            .write_lock()
            .unlock(THREAD + 1)
            .await
            .expect("unlock"),
        Some(1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_and_latch_are_shared_with_a_java_client_that_maps_alike() {
    let (_server, client, java, mut redis) = sides().await;

    let semaphore = client.semaphore("nm:sem");
    assert_eq!(semaphore.name(), "app:nm:sem");
    assert!(semaphore.try_set_permits(1).await.expect("set permits"));
    let permits: i64 = redis.get("app:nm:sem").await.expect("GET");
    assert_eq!(permits, 1);
    let java_semaphore = java.get_semaphore(java_mapped("nm:sem"));
    assert_eq!(java_semaphore.channel(), "redisson_sc:{app:nm:sem}");
    assert!(!java_semaphore.try_set_permits(5).await.expect("java set"));
    let permit = semaphore.acquire(1).await.expect("rlock acquire");
    assert!(
        !java_semaphore
            .try_acquire(1)
            .await
            .expect("java tryAcquire")
    );
    let waiter = java_semaphore.clone();
    java_woken_on(
        &mut redis,
        "redisson_sc:{app:nm:sem}",
        async move { waiter.acquire(1).await },
        permit.release(),
    )
    .await;
    assert!(semaphore.try_acquire(1).await.expect("rlock try").is_none());

    let latch = client.count_down_latch("nm:latch");
    assert!(latch.try_set_count(1).await.expect("set count"));
    let java_latch = java.get_count_down_latch(java_mapped("nm:latch"));
    assert_eq!(
        java_latch.channel(),
        "redisson_countdownlatch__channel__{app:nm:latch}"
    );
    assert_eq!(java_latch.count().await.expect("java count"), 1);
    let opened = java_woken_on(
        &mut redis,
        "redisson_countdownlatch__channel__{app:nm:latch}",
        async move { java_latch.await_for(Duration::from_secs(10)).await },
        latch.count_down(),
    )
    .await;
    assert!(opened, "the latch opened");
    assert!(!exists(&mut redis, "app:nm:latch").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_derives_its_keys_from_the_mapped_name() {
    let server = RedisServer::start();
    let client = mapping_client(&server).await;
    let mut redis = harness::raw(&server).await;

    let fair = client.fair_lock("nm:fair");
    let fenced = client.fenced_lock("nm:fenced");
    let spin = client.spin_lock("nm:spin");
    let expirable = client.permit_expirable_semaphore("nm:exp");
    assert_eq!(fair.name(), "app:nm:fair");
    assert_eq!(spin.name(), "app:nm:spin");
    assert_eq!(expirable.name(), "app:nm:exp");

    let fenced_guard = fenced.lock().await.expect("fenced lock");
    let token: u64 = redis
        .get("redisson_lock_token:{app:nm:fenced}")
        .await
        .expect("GET");
    assert_eq!(*fenced_guard.token(), token);
    fenced_guard.unlock().await.expect("unlock");

    // Members of a multi-lock are mapped handles; the multi-lock adds no mapping of its own.
    let both = MultiLock::new([AnyLock::from(fair.clone()), spin.clone().into()]);
    assert_eq!(both.names(), ["app:nm:fair", "app:nm:spin"]);
    let guard = both.lock().await.expect("multi lock");
    assert!(exists(&mut redis, "app:nm:fair").await && exists(&mut redis, "app:nm:spin").await);
    // A fair waiter queues under the mapped name.
    let waiting = tokio::spawn({
        let fair = fair.clone();
        async move { fair.lock().await }
    });
    let queued = harness::eventually(Duration::from_secs(5), async || {
        let queued: i64 = redis
            .llen("redisson_lock_queue:{app:nm:fair}")
            .await
            .expect("LLEN");
        queued == 1
    })
    .await;
    assert!(queued, "the fair waiter queued under the mapped name");
    guard.unlock().await.expect("multi unlock");
    let fair_guard = tokio::time::timeout(WAKE_LIMIT, waiting)
        .await
        .expect("the fair waiter woke")
        .expect("no panic")
        .expect("fair lock");
    fair_guard.unlock().await.expect("unlock");

    assert!(expirable.try_set_permits(1).await.expect("set permits"));
    let _permit = expirable
        .acquire_with_lease(Duration::from_secs(10))
        .await
        .expect("acquire");
    assert_eq!(expirable.acquired_permits().await.expect("acquired"), 1);
    let expiring: i64 = redis.zcard("{app:nm:exp}:timeout").await.expect("ZCARD");
    assert_eq!(expiring, 1);

    // The non-reentrant kinds take the mapping through the same seam as their twins.
    let single = client.non_reentrant_lock("nm:single");
    let single_fair = client.non_reentrant_fair_lock("nm:single-fair");
    assert_eq!(single.name(), "app:nm:single");
    assert_eq!(single_fair.name(), "app:nm:single-fair");
    let held = (
        single.lock().await.expect("non-reentrant lock"),
        single_fair.lock().await.expect("non-reentrant fair lock"),
    );
    assert!(exists(&mut redis, "app:nm:single").await);
    assert!(exists(&mut redis, "app:nm:single-fair").await);
    held.0.unlock().await.expect("unlock");
    held.1.unlock().await.expect("unlock");

    for unmapped in [
        "nm:fair",
        "nm:fenced",
        "nm:spin",
        "nm:exp",
        "nm:single",
        "nm:single-fair",
    ] {
        assert!(!exists(&mut redis, unmapped).await, "{unmapped}");
    }
    let keys: Vec<String> = redis.keys("*nm:*").await.expect("KEYS");
    assert!(
        keys.iter().all(|key| key.contains("app:nm:")),
        "every key is under the mapped names: {keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_names_are_refused_with_or_without_mapping() {
    let server = RedisServer::start();
    let prefixed = mapping_client(&server).await;
    let blank = harness::client_with(&server, |config| {
        config.name_mapper = Some(NameMapper::new(|_| String::new()));
    })
    .await;
    let mut redis = harness::raw(&server).await;
    // An empty name is not mapped: refused as without a mapper, not made the key `app:`.
    let empty = prefixed.lock("");
    assert_eq!(empty.name(), "");
    assert!(matches!(empty.lock().await, Err(Error::InvalidArgument(_))));
    // A name mapped to "" is refused too.
    let blanked = blank.semaphore("nm:blank");
    assert_eq!(blanked.name(), "");
    assert!(matches!(
        blanked.try_set_permits(1).await,
        Err(Error::InvalidArgument(_))
    ));
    let keys: Vec<String> = redis.keys("*").await.expect("KEYS");
    assert!(keys.is_empty(), "nothing written: {keys:?}");
}

#[test]
fn the_blocking_facade_maps_as_the_async_client() {
    let server = RedisServer::start();
    let mut config = rlock_redisson::Config::new(server.url());
    config.name_mapper = Some(NameMapper::prefix(JAVA_PREFIX));
    let client = rlock_redisson::blocking::Client::with_config(config).expect("connects");
    let lock = client.lock("nm:blocking");
    assert_eq!(lock.name(), "app:nm:blocking");
    let guard = lock.lock().expect("lock");
    let mut redis = server.client().get_connection().expect("raw connection");
    let held: bool = redis::Commands::exists(&mut redis, "app:nm:blocking").expect("EXISTS");
    assert!(held);
    guard.unlock().expect("unlock");
    let latch = client.count_down_latch("nm:blocking-latch");
    assert_eq!(latch.name(), "app:nm:blocking-latch");
    assert!(latch.try_set_count(1).expect("set count"));
    let count: u64 = redis::Commands::get(&mut redis, "app:nm:blocking-latch").expect("GET");
    assert_eq!(count, 1);
}
