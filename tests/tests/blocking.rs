//! The blocking facade, from plain threads.

use std::time::{Duration, Instant};

use rlock_redisson::{Error, Owner, blocking};
use rlock_tests::RedisServer;

#[test]
fn blocking_locks_exclude_and_hand_off_between_threads() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let lock = client.lock("blocking:handoff");
    let guard = lock.lock().expect("lock");
    assert!(lock.is_locked().expect("is_locked"));

    let other = client.lock("blocking:handoff");
    // Timed from before the spawn: a thread that starts late on a loaded machine must not shorten
    // the wait that the held guard imposes.
    let started = Instant::now();
    let waiter = std::thread::spawn(move || {
        let guard = other.lock().expect("waiter locks");
        let waited = started.elapsed();
        guard.unlock().expect("waiter unlocks");
        waited
    });
    std::thread::sleep(Duration::from_millis(200));
    // Another thread is another owner: excluded. (This thread would re-enter; see below.)
    let prober = client.lock("blocking:handoff");
    let refused = std::thread::spawn(move || prober.try_lock().expect("try_lock").is_none());
    assert!(refused.join().expect("prober thread"));
    drop(guard); // a blocking guard releases before drop returns
    let waited = waiter.join().expect("waiter thread");
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert!(!lock.is_locked().expect("is_locked"));
}

/// Java's `lock.lock(); lock.lock();` on one thread: the blocking API re-enters by thread, while the
/// same handle used from another thread is excluded.
#[test]
fn nested_locks_on_one_thread_re_enter_and_other_threads_are_excluded() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let lock = client.lock("blocking:nested");
    let outer = lock.lock().expect("lock");
    let inner = lock
        .try_lock_for(Duration::from_millis(500))
        .expect("try_lock_for")
        .expect("the same thread re-enters at once");
    let nested = lock.lock().expect("a nested lock() re-enters");
    assert_eq!(lock.owner(), Owner::thread());
    assert_eq!(outer.owner(), Some(Owner::thread()));
    assert_eq!(lock.hold_count().expect("hold_count"), 3);
    assert!(lock.is_held_by_current_thread().expect("is_held_by"));

    // One hash field (this thread's), counting the three holds.
    let mut redis = server.client().get_connection().expect("redis");
    let fields: Vec<(String, u32)> = redis::cmd("HGETALL")
        .arg("blocking:nested")
        .query(&mut redis)
        .expect("HGETALL");
    let field = format!("{}:{}", client.as_async().node_id(), Owner::thread().id());
    assert_eq!(fields, vec![(field, 3)]);

    // The same handle, cloned into another thread: another owner, excluded, and its own count is 0.
    let elsewhere = lock.clone();
    let (refused, count, held) = std::thread::spawn(move || {
        let refused = elsewhere.try_lock().expect("try_lock").is_none();
        (
            refused,
            elsewhere.hold_count().expect("hold_count"),
            elsewhere.is_held_by_current_thread().expect("is_held_by"),
        )
    })
    .join()
    .expect("other thread");
    assert!(
        refused,
        "another thread must not re-enter this thread's holds"
    );
    assert_eq!((count, held), (0, false));

    nested.unlock().expect("unlock");
    inner.unlock().expect("unlock");
    assert_eq!(lock.hold_count().expect("hold_count"), 1);
    outer.unlock().expect("unlock");
    assert!(!lock.is_locked().expect("is_locked"));
}

#[test]
fn blocking_reentrancy_and_errors() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let owner = Owner::new();
    let lock = client.lock("blocking:reentry").with_owner(owner);
    let outer = lock.lock_with_lease(Duration::from_secs(10)).expect("lock");
    let inner = lock.try_lock().expect("try_lock").expect("re-enters");
    assert_eq!(lock.hold_count_of(owner).expect("hold_count"), 2);
    assert!(lock.is_held_by(owner).expect("is_held_by"));
    assert!(matches!(
        lock.unlock(Owner::new()),
        Err(Error::NotOwner { .. })
    ));
    inner.unlock().expect("unlock");
    outer.unlock().expect("unlock");
    assert_eq!(lock.hold_count_of(owner).expect("hold_count"), 0);
    assert!(!lock.force_unlock().expect("force_unlock"));
}

#[tokio::test]
async fn the_blocking_api_refuses_to_run_inside_a_runtime() {
    let server = RedisServer::start();
    assert!(matches!(
        blocking::Client::connect(server.url()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn blocking_synchronizers_work_across_threads() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let semaphore = client.semaphore("blocking:sem");
    assert!(semaphore.try_set_permits(1).expect("set"));
    let permit = semaphore.acquire(1).expect("acquire");
    let waiter = {
        let semaphore = semaphore.clone();
        std::thread::spawn(move || semaphore.acquire(1).expect("waits").permits())
    };
    std::thread::sleep(Duration::from_millis(100));
    drop(permit); // gives back before drop returns
    assert_eq!(waiter.join().expect("waiter"), 1);
    assert_eq!(
        semaphore.available_permits().expect("available"),
        1,
        "its guard gave it back"
    );

    let expirable = client.permit_expirable_semaphore("blocking:pes");
    assert!(expirable.try_set_permits(1).expect("set"));
    let id = expirable
        .acquire_with_lease(Duration::from_secs(5))
        .expect("acquire");
    assert!(expirable.try_acquire().expect("try").is_none());
    expirable.release(id).expect("release");

    let latch = client.count_down_latch("blocking:latch");
    assert!(latch.try_set_count(1).expect("set"));
    let awaiting = {
        let latch = latch.clone();
        std::thread::spawn(move || latch.await_for(Duration::from_secs(5)).expect("await"))
    };
    std::thread::sleep(Duration::from_millis(50));
    latch.count_down().expect("count down");
    assert!(awaiting.join().expect("awaiting"));
}

#[test]
fn a_blocking_multi_lock_spans_clients_and_belongs_to_the_calling_thread() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let first = blocking::Client::connect(one.url()).expect("connect");
    let second = blocking::Client::connect(two.url()).expect("connect");
    let multi = blocking::MultiLock::new([
        blocking::AnyLock::from(first.lock("blocking:multi:a")),
        second.fenced_lock("blocking:multi:b").into(),
    ]);
    let guard = multi.lock().expect("lock");
    assert!(multi.is_held_by_current_thread().expect("held"));
    let elsewhere = multi.clone();
    let refused = std::thread::spawn(move || {
        (
            elsewhere.try_lock().expect("try").is_none(),
            elsewhere.is_held_by_current_thread().expect("held"),
        )
    });
    assert_eq!(refused.join().expect("thread"), (true, false));
    guard.unlock().expect("unlock");
    assert!(
        !first
            .lock("blocking:multi:a")
            .is_locked()
            .expect("is_locked")
    );
    assert!(
        !second
            .lock("blocking:multi:b")
            .is_locked()
            .expect("is_locked")
    );
    assert!(matches!(
        blocking::MultiLock::new(Vec::<blocking::AnyLock>::new()).try_lock(),
        Err(Error::InvalidArgument(_))
    ));
}
