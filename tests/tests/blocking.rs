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
    assert_eq!(lock.owner(), None, "bound to no owner");
    assert_eq!(lock.current_owner(), Some(Owner::thread()));
    assert_eq!(outer.owner(), Owner::thread());
    assert_eq!(lock.hold_count().expect("hold_count"), 3);
    assert!(lock.is_held_by_current().expect("is_held_by"));

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
            elsewhere.is_held_by_current().expect("is_held_by"),
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

/// One blocking round: connect, lock, check from the async side that it is held, read and write the
/// protected data through the same client, unlock.
fn blocking_round(url: &str, name: &str) -> u64 {
    let client = blocking::Client::connect(url).expect("connect");
    let lock = client.lock(name);
    let guard = lock.lock().expect("lock");
    assert!(lock.is_held_by_current().expect("held"));
    let counter: u64 = client
        .query(rlock_redisson::redis::cmd("INCR").arg(format!("{name}:counter")))
        .expect("INCR through the lock's client");
    guard.unlock().expect("unlock");
    client.close().expect("close");
    counter
}

/// Where an async application runs blocking code on a current-thread runtime: `spawn_blocking`
/// works, even while an async task of that runtime holds the lock the call waits for (the runtime
/// keeps running, and the task releases it); the runtime's own thread, its `block_on` and its tasks,
/// is refused with an error that says what to do, before anything is sent, as blocking it would
/// stop that task.
#[tokio::test]
async fn the_blocking_api_works_from_a_current_thread_runtime() {
    let server = RedisServer::start();
    let url = server.url();
    let counted = tokio::task::spawn_blocking({
        let url = url.clone();
        move || blocking_round(&url, "blocking:current:spawned")
    })
    .await
    .expect("spawn_blocking");
    assert_eq!(counted, 1);

    let name = "blocking:current:held";
    let holder = rlock_tests::harness::client(&server).await;
    let held = holder.lock(name).lock().await.expect("async lock");
    let client = tokio::task::spawn_blocking({
        let url = url.clone();
        move || blocking::Client::connect(&url).expect("connect")
    })
    .await
    .expect("spawn_blocking");
    let waiter = tokio::task::spawn_blocking({
        let lock = client.lock(name);
        move || {
            let guard = lock
                .try_lock_for(Duration::from_secs(20))
                .expect("try_lock_for");
            let got = guard.is_some();
            drop(guard);
            got
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.unlock()
        .await
        .expect("the async task releases on the running runtime");
    assert!(waiter.await.expect("waiter"), "the waiter got the lock");

    let refused = |outcome: rlock_redisson::Result<bool>, on: &str| match outcome {
        Err(e @ Error::BlockingInAsyncContext) => {
            assert!(!e.is_transient());
            assert!(e.to_string().contains("spawn_blocking"), "{on}: {e}");
        }
        other => panic!("{on}: expected BlockingInAsyncContext, got {other:?}"),
    };
    let types_before = type_calls(&server);
    refused(client.lock(name).is_locked(), "the runtime's block_on");
    assert_eq!(type_calls(&server), types_before, "nothing was sent");
    let lock = client.lock(name);
    let in_task = tokio::spawn(async move { lock.try_lock().map(|guard| guard.is_some()) });
    refused(in_task.await.expect("task"), "a task of the runtime");
    refused(
        blocking::Client::connect(&url).map(|_| true),
        "a connect on the runtime's thread",
    );
    drop(client);
}

/// How many `TYPE` commands (`is_locked`'s) the server has run.
fn type_calls(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client().get_connection().expect("connect"))
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_type:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().expect("a count"))
}

/// On a multi-threaded runtime: from `spawn_blocking`, and from its only worker (through
/// `block_in_place`, which moves the worker's other tasks to a new thread: here the async holder
/// whose release the blocking call waits for).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn the_blocking_api_works_from_a_multi_threaded_runtime() {
    let server = RedisServer::start();
    let url = server.url();
    let counted = tokio::task::spawn_blocking({
        let url = url.clone();
        move || blocking_round(&url, "blocking:multi-rt:spawned")
    })
    .await
    .expect("spawn_blocking");
    assert_eq!(counted, 1);

    let name = "blocking:multi-rt:worker";
    let holder = rlock_tests::harness::client(&server).await;
    let held = holder
        .lock(name)
        .lock_with_lease(Duration::from_secs(20))
        .await
        .expect("async lock");
    let releasing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        held.unlock().await.expect("async unlock");
    });
    let client = blocking::Client::connect(&url).expect("connect on the worker");
    let started = Instant::now();
    let guard = client.lock(name).lock().expect("lock on the worker");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the async holder released while the worker blocked: {:?}",
        started.elapsed()
    );
    guard.unlock().expect("unlock");
    releasing.await.expect("the holder's task");
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
    assert!(multi.is_held_by_current().expect("held"));
    let elsewhere = multi.clone();
    let refused = std::thread::spawn(move || {
        (
            elsewhere.try_lock().expect("try").is_none(),
            elsewhere.is_held_by_current().expect("held"),
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

/// The blocking guard has the async guard's methods: its name, owner, field, token, hold count, and
/// a wait for the lease's loss.
#[test]
fn the_blocking_guard_is_as_capable_as_the_async_one() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let lock = client.lock("blocking:guard");
    let guard = lock
        .lock_with_lease(Duration::from_millis(300))
        .expect("lock");
    assert_eq!(guard.name(), "blocking:guard");
    assert_eq!(guard.owner(), Owner::thread());
    assert!(
        guard.field().starts_with(client.node_id()),
        "{}",
        guard.field()
    );
    assert_eq!(*guard.token(), ());
    assert_eq!(guard.hold_count().expect("hold_count"), 1);
    let started = Instant::now();
    guard.lease_lost().expect("lease_lost");
    assert!(guard.is_lease_lost());
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "returned when the 300 ms lease ran out: {:?}",
        started.elapsed()
    );
    // The guard counts its lease from when the acquire was sent, a little before Redis started the
    // key's expiry: the key may outlive the guard's estimate by a round trip, and an unlock in
    // between still releases it (`Ok`, as documented). Once Redis dropped it, the unlock says so.
    let deadline = Instant::now() + Duration::from_secs(2);
    while lock.is_locked().expect("is_locked") {
        assert!(
            Instant::now() < deadline,
            "the 300 ms lease never ran out in Redis"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(matches!(guard.unlock(), Err(Error::LeaseLost { .. })));

    let fenced = client.fenced_lock("blocking:guard:fenced");
    let first = *fenced.lock().expect("lock").token();
    let second = fenced.lock().expect("lock");
    assert!(*second.token() > first);
}

/// Blocking handles used from async tasks act as each task's own owner, even where tasks take turns
/// on one thread (here a current-thread runtime's, where the calls that block are refused but the
/// owner a handle acts as is still read), rather than as the thread's.
#[tokio::test]
async fn tasks_sharing_a_thread_are_different_owners() {
    let server = RedisServer::start();
    let client = tokio::task::spawn_blocking({
        let url = server.url();
        move || blocking::Client::connect(&url).expect("connect")
    })
    .await
    .expect("spawn_blocking");
    let owner_in_a_task = || {
        let lock = client.lock("blocking:task-owners");
        tokio::spawn(async move {
            (
                lock.current_owner().expect("an owner"),
                std::thread::current().id(),
            )
        })
    };
    let (first, first_thread) = owner_in_a_task().await.expect("task");
    let (second, second_thread) = owner_in_a_task().await.expect("task");
    assert_eq!(first_thread, second_thread, "one thread runs both tasks");
    assert_ne!(first, second, "each task is its own owner");
    drop(client);
}

/// Blocking calls from async tasks: each task is an owner of its own, so tasks exclude each other
/// rather than re-enter each other's holds (here on a multi-threaded runtime's one worker, through
/// `block_in_place`).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn blocking_calls_from_tasks_exclude_each_other() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn({
        let lock = client.lock("blocking:tasks");
        async move {
            let guard = lock.try_lock().expect("try_lock").expect("free");
            held_tx.send(()).expect("tell");
            done_rx.await.expect("told to release");
            guard.unlock().expect("unlock");
        }
    });
    held_rx.await.expect("held");
    let other = tokio::spawn({
        let lock = client.lock("blocking:tasks");
        async move { lock.try_lock().expect("try_lock").is_none() }
    });
    assert!(
        other.await.expect("task"),
        "another task on the same thread is excluded"
    );
    done_tx.send(()).expect("release");
    holder.await.expect("holder");
}

/// The group lock and the objects of a map's entries, from plain threads: a thread's holds exclude
/// another thread's, and the entry's lock is Java's name.
#[test]
fn blocking_group_and_entry_locks_exclude_between_threads() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let group = client
        .group_lock("blocking:group", ["a", "b"])
        .expect("strings encode");
    let guard = group.lock().expect("lock");
    assert!(group.is_locked().expect("is_locked"));
    let other = client
        .group_lock("blocking:group", ["b", "c"])
        .expect("strings encode");
    let refused = std::thread::spawn(move || other.try_lock().expect("try_lock").is_none());
    assert!(refused.join().expect("prober thread"), "b is held");
    guard.unlock().expect("unlock");
    assert!(!group.is_locked().expect("is_locked"));

    let entry = client.map("orders").lock(42i64).expect("a long encodes");
    assert_eq!(entry.name(), "{orders}:VQXPsX8R0Nuk4PCULzvfjg:lock");
    let held = entry.lock().expect("lock");
    let prober = client.map("orders").lock(42i64).expect("a long encodes");
    let refused = std::thread::spawn(move || prober.try_lock().expect("try_lock").is_none());
    assert!(refused.join().expect("prober thread"), "the entry is held");
    held.unlock().expect("unlock");
}
