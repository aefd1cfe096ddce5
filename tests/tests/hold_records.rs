//! One record per hold (issue 46): what an unfired `lease_lost()` proves when one owner nests and
//! mixes holds. Each test is a way users write code that broke the promise without any fault: a
//! re-entry after the hold was deleted, a fixed-lease hold inside a watchdog hold, a shorter lease
//! inside a longer one, a guard replaced in a slot after its hold expired, and renewal of one
//! client's owners of one key.
//!
//! None of them sleeps for a time that depends on the machine's speed: where a lease must run out,
//! the test waits (bounded) for Redis to say the key is gone, or checks the key's TTL.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::kind::LockKind;
use rlock_redisson::{Client, Guard, Lock, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{self, client_with, raw};

/// Long enough never to run out in a test unless the test makes it.
const LONG: Duration = Duration::from_secs(30);
/// A short lease, run out on purpose.
const SHORT: Duration = Duration::from_millis(300);

/// A client whose watchdog renews often, so that the renewal's verdicts come within a test.
async fn quick_watchdog(server: &RedisServer) -> Client {
    client_with(server, |config| {
        config.watchdog_timeout = Duration::from_millis(900);
        config.retry_delay = Duration::from_millis(50);
        config.retry_max_delay = Duration::from_millis(100);
    })
    .await
}

/// Waits (at most ten leases) until `key` is gone from Redis.
async fn until_gone(redis: &mut redis::aio::MultiplexedConnection, key: &str) {
    let gone = harness::eventually(SHORT * 10, async || {
        !redis.exists::<_, bool>(key).await.expect("EXISTS")
    })
    .await;
    assert!(gone, "{key} expires by itself");
}

/// Asserts that every one of `keys` stays in Redis for three watchdog timeouts of `client` (a key
/// nobody renews would be gone by then).
async fn stay_held(client: &Client, redis: &mut redis::aio::MultiplexedConnection, keys: &[&str]) {
    let deadline = tokio::time::Instant::now() + client.config().watchdog_timeout * 3;
    while tokio::time::Instant::now() < deadline {
        for key in keys {
            let pttl: i64 = redis.pttl(key).await.expect("PTTL");
            assert!(pttl > 0, "{key} stays held (PTTL {pttl})");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Case 1: A holds; the hold is deleted behind A's back (another client's force unlock, then that
/// client takes and releases the lock); A acquires again as the same owner. Redis created A's field
/// afresh: the outer guard's hold is gone, and it is told at once, not at the next renewal.
async fn a_re_entry_after_a_delete_tells_the_outer_guard<K: LockKind>(
    lock_a: impl Fn() -> Lock<K>,
    lock_b: impl Fn() -> Lock<K>,
) where
    K::Token: std::fmt::Debug,
{
    let owner = Owner::new();
    let outer = lock_a().with_owner(owner).lock().await.expect("outer lock");
    assert!(lock_b().force_unlock().await.expect("force unlock"));
    let b = lock_b().lock().await.expect("B takes the freed lock");
    b.unlock().await.expect("B releases");
    let inner = lock_a().with_owner(owner).lock().await.expect("A again");
    assert!(
        outer.is_lease_lost(),
        "the outer guard is told that its hold was deleted as soon as the re-entry finds it gone"
    );
    assert!(!inner.is_lease_lost(), "the new hold is a hold of its own");
    inner.unlock().await.expect("the new hold releases");
    // The new hold's release freed the key: another client takes it; the outer guard had said so.
    let c = lock_b().try_lock().await.expect("try_lock");
    assert!(c.is_some(), "the key is free after A's only real hold");
    assert!(
        outer.unlock().await.is_err(),
        "the outer guard's hold is gone"
    );
    drop(c);
}

macro_rules! re_entry_after_delete {
    ($($test:ident: |$client:ident, $name:ident| $make:expr;)+) => {$(
        #[tokio::test]
        async fn $test() {
            let server = RedisServer::start();
            let a = harness::client(&server).await;
            let b = harness::client(&server).await;
            let $name = concat!("records:deleted:", stringify!($test));
            a_re_entry_after_a_delete_tells_the_outer_guard(
                || { let $client = &a; $make },
                || { let $client = &b; $make },
            )
            .await;
        }
    )+};
}

re_entry_after_delete! {
    a_deleted_hold_re_entered_is_new_lock: |client, name| client.lock(name);
    a_deleted_hold_re_entered_is_new_fair: |client, name| client.fair_lock(name);
    a_deleted_hold_re_entered_is_new_spin: |client, name| client.spin_lock(name);
    a_deleted_hold_re_entered_is_new_fenced: |client, name| client.fenced_lock(name);
    a_deleted_hold_re_entered_is_new_write: |client, name| client.read_write_lock(name).write();
    a_deleted_hold_re_entered_is_new_non_reentrant: |client, name| client.non_reentrant_lock(name);
}

/// Case 1 with a read lock: the re-created read hold tells the outer reader, and a writer of
/// another client does get in once the new reader left.
#[tokio::test]
async fn a_read_re_entry_after_a_force_unlock_tells_the_outer_reader() {
    let server = RedisServer::start();
    let a = harness::client(&server).await;
    let b = harness::client(&server).await;
    let name = "records:deleted:read";
    let owner = Owner::new();
    let outer = a
        .read_write_lock(name)
        .read()
        .with_owner(owner)
        .lock()
        .await
        .expect("read");
    assert!(
        b.read_write_lock(name)
            .read()
            .force_unlock()
            .await
            .expect("force unlock")
    );
    let inner = a
        .read_write_lock(name)
        .read()
        .with_owner(owner)
        .lock()
        .await
        .expect("read again");
    assert!(outer.is_lease_lost(), "the outer reader is told");
    inner.unlock().await.expect("unlock");
    let writer = b
        .read_write_lock(name)
        .write()
        .try_lock()
        .await
        .expect("try_lock");
    assert!(writer.is_some(), "the writer gets in: nobody reads");
}

/// Case 2: a fixed-lease hold inside a watchdog hold, released, must not end the outer hold's
/// renewal: the key stays alive past the watchdog timeout.
#[tokio::test]
async fn a_fixed_lease_unlock_keeps_the_outer_watchdog_hold_renewed() {
    let server = RedisServer::start();
    let client = quick_watchdog(&server).await;
    let mut redis = raw(&server).await;
    let name = "records:mixed";
    let lock = client.lock(name).with_owner(Owner::new());
    let outer = lock.lock().await.expect("lock");
    let inner = lock
        .lock_with_lease(SHORT)
        .await
        .expect("re-enter with a lease");
    let pttl: i64 = redis.pttl(name).await.expect("PTTL");
    assert!(
        pttl > SHORT.as_millis() as i64,
        "the key keeps the outer hold's watchdog lease, not the inner's 300 ms (PTTL {pttl})"
    );
    inner.unlock().await.expect("partial unlock");
    assert_eq!(
        client.stats().renewing_locks,
        1,
        "the outer hold is still renewed"
    );
    // Three watchdog timeouts: an unrenewed key would be gone by then.
    stay_held(&client, &mut redis, &[name]).await;
    assert!(!outer.is_lease_lost());
    outer.unlock().await.expect("the outer hold releases");
}

/// Case 2 with the write lock and the fair lock: the same rule for every kind that re-enters.
#[tokio::test]
async fn a_fixed_lease_unlock_keeps_the_outer_hold_of_a_write_and_a_fair_lock() {
    let server = RedisServer::start();
    let client = quick_watchdog(&server).await;
    let mut redis = raw(&server).await;
    let owner = Owner::new();
    let write = client
        .read_write_lock("records:mixed:write")
        .write()
        .with_owner(owner);
    let fair = client.fair_lock("records:mixed:fair").with_owner(owner);
    let outer_write = write.lock().await.expect("write");
    let outer_fair = fair.lock().await.expect("fair");
    write
        .lock_with_lease(SHORT)
        .await
        .expect("write again")
        .unlock()
        .await
        .expect("unlock");
    fair.lock_with_lease(SHORT)
        .await
        .expect("fair again")
        .unlock()
        .await
        .expect("unlock");
    assert_eq!(client.stats().renewing_locks, 2);
    let keys = ["records:mixed:write", "records:mixed:fair"];
    stay_held(&client, &mut redis, &keys).await;
    assert!(!outer_write.is_lease_lost() && !outer_fair.is_lease_lost());
}

/// Case 2, the slot pattern: a guard kept in a slot whose hold expired is replaced by a new hold of
/// the same owner; dropping the old guard after the new acquisition must leave the new hold alone.
#[tokio::test]
async fn a_replaced_guard_dropped_late_leaves_the_new_hold_alone() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let other = harness::client(&server).await;
    let mut redis = raw(&server).await;
    let name = "records:slot";
    let lock = client.lock(name).with_owner(Owner::new());
    let mut slot: Option<Guard> = Some(lock.lock_with_lease(SHORT).await.expect("first"));
    until_gone(&mut redis, name).await;
    let new = lock.lock().await.expect("again");
    // The old guard is dropped only now, as `slot = Some(new)` does.
    let old = slot.replace(new);
    drop(old);
    client.close().await;
    assert!(
        harness::exists(&mut redis, name).await,
        "the new hold is still in Redis"
    );
    assert!(
        other
            .lock(name)
            .try_lock()
            .await
            .expect("try_lock")
            .is_none(),
        "nobody else gets in"
    );
    let new = slot.take().expect("the new guard");
    assert!(!new.is_lease_lost());
    new.unlock().await.expect("the new hold releases");
    assert!(!harness::exists(&mut redis, name).await);
}

/// Case 3: fixed leases on both holds: the inner, shorter one does not shorten the key below what
/// the outer one was promised, on acquire or on its partial unlock.
#[tokio::test]
async fn a_shorter_inner_lease_does_not_shorten_the_outer_one() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = raw(&server).await;
    let name = "records:leases";
    let lock = client.lock(name).with_owner(Owner::new());
    let outer = lock.lock_with_lease(LONG).await.expect("outer");
    let inner = lock.lock_with_lease(SHORT).await.expect("inner");
    let pttl: i64 = redis.pttl(name).await.expect("PTTL");
    assert!(
        pttl > (LONG - Duration::from_secs(5)).as_millis() as i64,
        "the re-entry kept the outer lease (PTTL {pttl})"
    );
    inner.unlock().await.expect("partial unlock");
    let pttl: i64 = redis.pttl(name).await.expect("PTTL");
    assert!(
        pttl > (LONG - Duration::from_secs(5)).as_millis() as i64
            && pttl <= LONG.as_millis() as i64,
        "the partial unlock re-applies what the outer hold has left (PTTL {pttl})"
    );
    // An inner watchdog hold of a short watchdog: its unlock re-applies the outer's time too.
    let watched = quick_watchdog(&server).await;
    let lock = watched
        .lock("records:leases:watchdog")
        .with_owner(Owner::new());
    let outer_fixed = lock.lock_with_lease(LONG).await.expect("outer");
    lock.lock()
        .await
        .expect("inner")
        .unlock()
        .await
        .expect("partial unlock");
    let pttl: i64 = redis.pttl("records:leases:watchdog").await.expect("PTTL");
    assert!(
        pttl > (LONG - Duration::from_secs(5)).as_millis() as i64,
        "the outer fixed lease is what is left (PTTL {pttl})"
    );
    assert_eq!(
        watched.stats().renewing_locks,
        0,
        "nothing is renewed any more"
    );
    assert!(!outer.is_lease_lost() && !outer_fixed.is_lease_lost());
}

/// Case 5: the watchdog renews per owner. A plain lock held by A is force-unlocked and re-taken by
/// B of the same client: the renewal declares A lost and keeps B's hold.
#[tokio::test]
async fn renewal_is_per_owner_a_force_unlocked_owner_is_told_and_the_new_one_renewed() {
    let server = RedisServer::start();
    let client = quick_watchdog(&server).await;
    let other = harness::client(&server).await;
    let mut redis = raw(&server).await;
    let name = "records:renewal";
    let a = client
        .lock(name)
        .with_owner(Owner::new())
        .lock()
        .await
        .expect("A");
    assert!(other.lock(name).force_unlock().await.expect("force unlock"));
    let b = client
        .lock(name)
        .with_owner(Owner::new())
        .try_lock()
        .await
        .expect("try_lock")
        .expect("B takes the freed lock");
    let told = tokio::time::timeout(client.config().watchdog_timeout * 2, a.lease_lost()).await;
    assert!(told.is_ok(), "A is told by the renewal");
    // B's hold is renewed.
    stay_held(&client, &mut redis, &[name]).await;
    assert!(
        !b.is_lease_lost(),
        "B, who holds the key, is not declared lost"
    );
    b.unlock().await.expect("B releases");
}

/// Case 5 with the group lock: A's values are force-unlocked and taken by B of the same client; the
/// renewal of B's hold does not keep A's guard from being told.
#[tokio::test]
async fn renewal_is_per_owner_for_a_group_lock() {
    let server = RedisServer::start();
    let client = quick_watchdog(&server).await;
    let other = harness::client(&server).await;
    let name = "records:group";
    let values = ["v1", "v2"];
    let a = client
        .group_lock(name, values)
        .expect("group")
        .with_owner(Owner::new())
        .lock()
        .await
        .expect("A");
    assert!(
        other
            .group_lock(name, values)
            .expect("group")
            .force_unlock()
            .await
            .expect("force unlock")
    );
    let b = client
        .group_lock(name, values)
        .expect("group")
        .with_owner(Owner::new())
        .try_lock()
        .await
        .expect("try_lock")
        .expect("B takes the freed values");
    let told = tokio::time::timeout(client.config().watchdog_timeout * 2, a.lease_lost()).await;
    assert!(told.is_ok(), "A is told by the renewal");
    assert!(!b.is_lease_lost());
    b.unlock().await.expect("B releases");
}

/// Re-enters `outer`'s hold through `inner` (another kind of the same name, bound to the same owner),
/// then releases the outer guard first and the inner one last.
async fn released_outer_first<K: LockKind>(outer: Guard, inner: Lock<K>) {
    let inner = inner.lock().await.expect("re-enter through another kind");
    outer.unlock().await.expect("the lock guard releases first");
    inner.unlock().await.expect("then the other kind's");
}

/// Case 4: holds of one owner through two kinds of one hash, released outer-first: the last release
/// goes through the other kind, and a local waiter on the first kind's queue still gets the lock.
#[tokio::test]
async fn holds_through_two_kinds_released_outer_first_strand_no_local_waiter() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let other = harness::client(&server).await;
    for (name, through_fenced) in [
        ("records:kinds:spin", false),
        ("records:kinds:fenced", true),
    ] {
        let owner = Owner::new();
        let outer = client
            .lock(name)
            .with_owner(owner)
            .lock()
            .await
            .expect("lock");
        let waiter = {
            let lock = client.lock(name).with_owner(Owner::new());
            tokio::spawn(async move { lock.lock().await.map(|guard| guard.owner()) })
        };
        // The waiter queues behind the holder before the holds are released.
        let queued = harness::eventually(Duration::from_secs(5), async || {
            client.stats().queued_waiters == 1
        })
        .await;
        assert!(queued, "the waiter waits in the lock's local queue");
        if through_fenced {
            released_outer_first(outer, client.fenced_lock(name).with_owner(owner)).await;
        } else {
            released_outer_first(outer, client.spin_lock(name).with_owner(owner)).await;
        }
        let acquired = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(
            matches!(acquired, Ok(Ok(Ok(_)))),
            "{name}: the local waiter acquires once the owner's last hold is gone ({acquired:?})"
        );
        let _ = other.lock(name).force_unlock().await;
    }
}

/// Case 6's sibling, two futures of one owner: one re-enters while the other releases, and the
/// re-entry's reply is lost (the server frozen past the command timeout). The release was sent
/// behind the re-entry: once the server runs again, the re-entry ran, then the release, and the
/// re-entry's undo found the count back at what the owner had before it and left the re-entry's
/// hold in place, counted by nobody, for the watchdog's whole lease (30 s). A release now waits
/// for the owner's attempts on the wire to be answered (and their undos to run): the key is
/// gone once the release returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_beside_a_lost_re_entry_of_the_same_owner_leaves_no_hold() {
    let server = std::sync::Arc::new(RedisServer::start());
    let client = client_with(&server, |config| {
        config.command_timeout = Duration::from_millis(250);
        config.retry_delay = Duration::from_millis(50);
        config.retry_max_delay = Duration::from_millis(100);
    })
    .await;
    let mut redis = raw(&server).await;
    let name = "records:release-beside-a-lost-re-entry";
    let lock = client.lock(name).with_owner(Owner::new());
    let held = lock.lock().await.expect("the first future holds");
    server.pause();
    let re_entry = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.map(drop) }
    });
    // The re-entry is sent well within its command timeout: the release goes out behind it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let release = tokio::spawn(held.unlock());
    let outcome = re_entry.await.expect("the re-entry's task");
    assert!(
        outcome.is_err(),
        "the frozen server answered nothing: {outcome:?}"
    );
    server.resume();
    release
        .await
        .expect("the release's task")
        .expect("the release returns once the server answers");
    let gone = harness::eventually(Duration::from_secs(2), async || {
        !redis.exists::<_, bool>(name).await.expect("EXISTS")
    })
    .await;
    let left: std::collections::BTreeMap<String, String> =
        redis.hgetall(name).await.expect("HGETALL");
    assert!(gone, "no hold is left behind, counted by nobody: {left:?}");
}
