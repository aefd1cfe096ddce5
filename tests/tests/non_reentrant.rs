//! The non-reentrant locks (Redisson 4.4+'s `RNonReentrantLock` and `RNonReentrantFairLock`)
//! against a real Redis: a re-entry is refused with a typed error from every acquisition form, in
//! one round trip and without a change in Redis; anyone else waits as for the reentrant twin, and
//! the twins on one name are one lock.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Error, LockGuard, Owner, blocking};
use rlock_tests::RedisServer;
use rlock_tests::harness::{self, eventually};

const LEASE: Duration = Duration::from_secs(20);
const WAIT: Duration = Duration::from_millis(300);

/// The hold count of every field of `name`'s hash.
async fn fields(redis: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<(String, u32)> {
    redis.hgetall(name).await.expect("HGETALL")
}

/// Asserts that `refused` is the typed re-entry error for `name`, whose message names the lock and
/// its kind.
fn assert_refused<T: std::fmt::Debug>(refused: rlock_redisson::Result<T>, name: &str, form: &str) {
    match refused {
        Err(e @ Error::ReentryRefused { .. }) => {
            let Error::ReentryRefused {
                kind,
                name: refused,
                ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(refused, name, "{form}");
            assert!(kind.starts_with("non-reentrant"), "{form}: {kind}");
            assert!(
                e.to_string().contains(&format!("{kind} {name:?}")),
                "{form}: {e}"
            );
        }
        other => panic!("{form}: expected ReentryRefused, got {other:?}"),
    }
}

/// Every acquisition form, by the owner of a scope that already holds `lock`: each refused, each in
/// one script call, and the hash unchanged (one field, count 1).
async fn every_form_is_refused<K: rlock_redisson::kind::LockKind<Token = ()>>(
    server: &RedisServer,
    lock: rlock_redisson::Lock<K>,
) {
    let mut redis = harness::raw(server).await;
    let name = lock.name().to_owned();
    Owner::scope(Owner::new(), async {
        let guard = lock.lock().await.expect("the first acquisition");
        let held = fields(&mut redis, &name).await;
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].1, 1);
        let forms: [(&str, rlock_redisson::Result<Option<LockGuard>>); 5] = [
            ("lock", lock.lock().await.map(Some)),
            (
                "lock_with_lease",
                lock.lock_with_lease(LEASE).await.map(Some),
            ),
            ("try_lock", lock.try_lock().await),
            ("try_lock_for", lock.try_lock_for(WAIT).await),
            (
                "try_lock_with_lease",
                lock.try_lock_with_lease(WAIT, LEASE).await,
            ),
        ];
        for (form, refused) in forms {
            assert_refused(refused, &name, form);
        }
        // One round trip each: the script refused it, nothing waited or retried.
        let before = harness::evalsha_calls(&mut redis).await;
        assert_refused(lock.try_lock_for(LEASE).await, &name, "try_lock_for(20 s)");
        assert_eq!(harness::evalsha_calls(&mut redis).await - before, 1);
        assert_eq!(fields(&mut redis, &name).await, held, "nothing changed");
        assert_eq!(lock.hold_count().await.expect("hold_count"), 1);
        guard.unlock().await.expect("unlock");
    })
    .await;
    assert!(
        !lock.is_locked().await.expect("is_locked"),
        "one unlock frees it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_is_refused_from_every_acquisition_form() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    every_form_is_refused(&server, client.non_reentrant_lock("nr:forms")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_reentry_is_refused_from_every_acquisition_form() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    every_form_is_refused(&server, client.non_reentrant_fair_lock("nr:fair-forms")).await;
}

/// A refused fair re-entry never joins the queue, and leaves the waiters already in it in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_fair_reentry_never_queues() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let owner = Owner::new();
    let lock = client.non_reentrant_fair_lock("nr:fair-queue");
    let guard = lock.clone().with_owner(owner).lock().await.expect("lock");
    let waiter = {
        let lock = harness::client(&server)
            .await
            .non_reentrant_fair_lock("nr:fair-queue");
        tokio::spawn(async move { lock.lock().await.expect("the waiter acquires") })
    };
    let queued = eventually(Duration::from_secs(5), async || {
        lock.queue().await.expect("queue").len() == 1
    })
    .await;
    assert!(queued, "the other owner queued");
    let before = lock.queue().await.expect("queue");
    assert_refused(
        lock.clone().with_owner(owner).lock().await,
        lock.name(),
        "lock",
    );
    assert_eq!(
        lock.queue().await.expect("queue"),
        before,
        "the queue is as it was"
    );
    let deadlines: usize = redis
        .zcard("redisson_lock_timeout:{nr:fair-queue}")
        .await
        .expect("ZCARD");
    assert_eq!(deadlines, 1, "no deadline for the refused owner");
    guard.unlock().await.expect("unlock");
    let taken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the queued waiter was woken")
        .expect("waiter task");
    taken.unlock().await.expect("unlock");
    assert!(lock.queue().await.expect("queue").is_empty());
}

/// Outside a scope every acquisition is its own owner: a second one waits (it is not a re-entry),
/// and is woken by the unlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_owner_waits_and_is_woken() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let lock = client.non_reentrant_lock("nr:waits");
    let guard = lock.lock().await.expect("lock");
    assert!(
        lock.try_lock_for(WAIT)
            .await
            .expect("try_lock_for")
            .is_none()
    );
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await.expect("the waiter acquires") })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = tokio::time::Instant::now();
    guard.unlock().await.expect("unlock");
    let taken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken, not polling the 30 s lease out")
        .expect("waiter task");
    assert!(released.elapsed() < Duration::from_secs(5));
    taken.unlock().await.expect("unlock");
}

/// The non-reentrant lock is the reentrant lock's hash: each excludes the other and wakes the other's
/// waiters; the fair twins share one queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twins_on_one_name_are_one_lock() {
    let server = RedisServer::start();
    let (a, b) = (
        harness::client(&server).await,
        harness::client(&server).await,
    );
    let reentrant = a.lock("nr:twins").lock().await.expect("lock");
    let non_reentrant = b.non_reentrant_lock("nr:twins");
    assert!(non_reentrant.try_lock().await.expect("try_lock").is_none());
    let waiting = tokio::spawn(async move { non_reentrant.lock().await.expect("acquires") });
    tokio::time::sleep(Duration::from_millis(100)).await;
    reentrant.unlock().await.expect("unlock");
    let guard = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the reentrant unlock woke the non-reentrant waiter")
        .expect("waiter task");
    assert!(a.lock("nr:twins").try_lock().await.expect("try").is_none());
    guard.unlock().await.expect("unlock");

    let fair = a
        .fair_lock("nr:fair-twins")
        .lock()
        .await
        .expect("fair lock");
    let non_reentrant_fair = b.non_reentrant_fair_lock("nr:fair-twins");
    let waiting = {
        let lock = non_reentrant_fair.clone();
        tokio::spawn(async move { lock.lock().await.expect("acquires") })
    };
    let queued = eventually(Duration::from_secs(5), async || {
        a.fair_lock("nr:fair-twins")
            .queue()
            .await
            .expect("queue")
            .len()
            == 1
    })
    .await;
    assert!(
        queued,
        "the non-reentrant waiter is in the fair lock's queue"
    );
    fair.unlock().await.expect("unlock");
    let guard = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken as the queue's head")
        .expect("waiter task");
    guard.unlock().await.expect("unlock");
}

/// Dropping a waiting acquisition leaves no hold and no queue entry behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_wait_leaves_nothing_behind() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let held = [
        client.non_reentrant_lock("nr:drop").try_lock().await,
        client
            .non_reentrant_fair_lock("nr:drop-fair")
            .try_lock()
            .await,
    ]
    .map(|guard| guard.expect("try_lock").expect("free"));
    let waits = [
        tokio::time::timeout(WAIT, client.non_reentrant_lock("nr:drop").lock()).await,
        tokio::time::timeout(WAIT, client.non_reentrant_fair_lock("nr:drop-fair").lock()).await,
    ];
    assert!(waits.iter().all(Result::is_err), "both waited");
    let settled = eventually(Duration::from_secs(5), async || {
        let queued: usize = redis
            .llen("redisson_lock_queue:{nr:drop-fair}")
            .await
            .expect("LLEN");
        queued == 0
    })
    .await;
    assert!(settled, "the dropped fair waiter left the queue");
    for name in ["nr:drop", "nr:drop-fair"] {
        assert_eq!(
            fields(&mut redis, name).await.len(),
            1,
            "{name}: the first hold only"
        );
    }
    drop(held);
}

/// A key that holds something else: `WRONGTYPE` stays [`Error::WrongType`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_value_is_a_wrong_type() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let () = redis.set("nr:string", "x").await.expect("SET");
    let refused = client.non_reentrant_lock("nr:string").try_lock().await;
    assert!(
        matches!(refused, Err(Error::WrongType { .. })),
        "{refused:?}"
    );
}

/// A blocking thread that holds `lock` is refused a second hold; another thread waits.
fn blocking_thread_is_the_owner<K: rlock_redisson::kind::LockKind<Token = ()>>(
    lock: &blocking::Lock<K>,
) {
    let name = lock.name().to_owned();
    let guard = lock.lock().expect("lock");
    assert_refused(lock.lock(), &name, "lock");
    assert_refused(lock.try_lock_for(WAIT), &name, "try_lock_for");
    let other = lock.clone();
    let waited = std::thread::spawn(move || other.try_lock_for(WAIT).expect("try").is_none());
    assert!(waited.join().expect("thread"), "another thread waits");
    guard.unlock().expect("unlock");
}

/// The blocking facade: each thread is an owner.
#[test]
fn blocking_threads_are_owners() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    blocking_thread_is_the_owner(&client.non_reentrant_lock("nr:blocking"));
    blocking_thread_is_the_owner(&client.non_reentrant_fair_lock("nr:blocking-fair"));
}

/// One owner's two acquisitions at once, the second cancelled in flight (or its reply lost): the
/// second is refused or undone, and its undo never takes the hold the first one got, as the owner's
/// attempts on a non-reentrant lock run one at a time.
async fn concurrent_attempts_of_one_owner_keep_the_hold<K>(lock: rlock_redisson::Lock<K>)
where
    K: rlock_redisson::kind::LockKind<Token = ()>,
{
    let server_name = lock.name().to_owned();
    let lock = lock.with_owner(Owner::new());
    for round in 0..40 {
        let (held, _) = tokio::join!(
            lock.lock(),
            tokio::time::timeout(Duration::from_micros(1), lock.try_lock())
        );
        let held = held.expect("the first acquisition");
        // The cancelled attempt's undo, if any, has run before the owner acts on the lock again.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            lock.hold_count().await.expect("hold_count"),
            1,
            "round {round}: {server_name} still held once"
        );
        assert!(!held.is_lease_lost());
        held.unlock().await.expect("unlock");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_concurrent_attempts_never_undo_its_hold() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    concurrent_attempts_of_one_owner_keep_the_hold(client.non_reentrant_lock("nr:concurrent"))
        .await;
    concurrent_attempts_of_one_owner_keep_the_hold(
        client.non_reentrant_fair_lock("nr:concurrent-fair"),
    )
    .await;
}

/// A dropped guard releases in the background; the same owner's next acquisition waits for that
/// release rather than being refused as a re-entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_is_released_before_its_owner_acquires_again() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    drop_and_lock_again(client.non_reentrant_lock("nr:drop-again")).await;
    drop_and_lock_again(client.non_reentrant_fair_lock("nr:drop-again-queue")).await;
}

/// One owner locks `lock` 50 times, dropping each guard at once.
async fn drop_and_lock_again<K: rlock_redisson::kind::LockKind>(lock: rlock_redisson::Lock<K>) {
    let lock = lock.with_owner(Owner::new());
    for round in 0..50 {
        drop(
            lock.lock()
                .await
                .unwrap_or_else(|e| panic!("round {round}: {e}")),
        );
    }
}
