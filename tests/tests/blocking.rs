//! The blocking facade, from plain threads.

use std::time::{Duration, Instant};

use rlock::{Error, Owner, blocking};
use rlock_tests::RedisServer;

#[test]
fn blocking_locks_exclude_and_hand_off_between_threads() {
    let server = RedisServer::start();
    let client = blocking::Client::connect(server.url()).expect("connect");
    let lock = client.lock("blocking:handoff");
    let guard = lock.lock().expect("lock");
    assert!(lock.is_locked().expect("is_locked"));

    let other = client.lock("blocking:handoff");
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let guard = other.lock().expect("waiter locks");
        let waited = started.elapsed();
        guard.unlock().expect("waiter unlocks");
        waited
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        client
            .lock("blocking:handoff")
            .try_lock()
            .expect("try_lock")
            .is_none()
    );
    drop(guard); // a blocking guard releases before drop returns
    let waited = waiter.join().expect("waiter thread");
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
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
    assert_eq!(lock.hold_count(owner).expect("hold_count"), 2);
    assert!(lock.is_held_by(owner).expect("is_held_by"));
    assert!(matches!(
        lock.unlock(Owner::new()),
        Err(Error::NotOwner { .. })
    ));
    inner.unlock().expect("unlock");
    outer.unlock().expect("unlock");
    assert_eq!(lock.hold_count(owner).expect("hold_count"), 0);
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
