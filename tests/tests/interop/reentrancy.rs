//! Reentrancy and ownership across the sides: for every kind that re-enters, each side's holds
//! live in its own field with its own count and partial unlocks re-apply the holder's lease; for
//! every kind, neither side can release the other's holds.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::RedisServer;
use rlock_tests::redisson::suffix_name;

use crate::support::{
    InteropKind, Listener, Party, Redis, Side, Site, Topology, Unlocked, every_kind, woken,
};

/// Both sides use thread / owner id 7: the fields still differ by client id.
const THREAD: u64 = 7;

/// `first` re-enters with a lease while `second` waits (as the contender of `first`'s kind);
/// `first`'s partial unlocks re-apply its lease; its last unlock hands over to `second`, which
/// re-enters with the watchdog and whose partial unlock re-applies the watchdog lease.
async fn holds_coexist_over_time(kind: InteropKind, topology: Topology, first: Side, second: Side) {
    let site = Site::start(topology);
    let a = site.party(first).await;
    let b = site.party(second).await;
    let name = "interop:reentrant";
    let mut redis = site.redis(name).await;
    let lease = Duration::from_secs(5);
    let contender = kind.contender();
    let (a_field, b_field) = (a.field(THREAD), b.field(THREAD));

    let a1 = a.get(kind, name).lock_with_lease(THREAD, lease).await;
    let a2 = a.get(kind, name).lock_with_lease(THREAD, lease).await;
    assert_eq!(redis.hash(name).await, kind.holds(&a_field, 2));
    assert!(
        b.get(contender, name)
            .try_lock(THREAD, Duration::ZERO, None)
            .await
            .is_none()
    );
    assert_eq!(redis.hash(name).await, kind.holds(&a_field, 2));

    let b_waiting = b.get(contender, name).spawn_lock(THREAD);
    redis.wait_waiting(contender, name, &b_field).await;
    let a3 = a.get(kind, name).lock_with_lease(THREAD, lease).await;
    assert_eq!(redis.hash(name).await, kind.holds(&a_field, 3));

    let _: () = redis.conn.pexpire(name, 3_000).await.expect("PEXPIRE");
    a3.release().await;
    assert_eq!(redis.hash(name).await, kind.holds(&a_field, 2));
    let after = redis.pttl(name).await;
    let expected = if kind == InteropKind::READ {
        // A read unlock gives the lock the PTTL of the longest-lived read hold left (§7.3 step
        // 6): the second, taken with the 5 s lease a moment ago. Both count down together.
        let second = format!("{}:rwlock_timeout:2", suffix_name(name, &a_field));
        let left = redis.pttl(&second).await;
        left..=left + 100
    } else {
        4_500..=5_000
    };
    assert!(
        expected.contains(&after),
        "a partial unlock re-applies the 5 s lease (pttl 3000 -> {after}, expected {expected:?})"
    );
    a2.release().await;
    assert_eq!(redis.hash(name).await, kind.holds(&a_field, 1));
    assert!(!b_waiting.is_finished(), "still held once");

    a1.release().await;
    let (_, b1) = woken(b_waiting).await;
    assert_eq!(redis.hash(name).await, contender.holds(&b_field, 1));
    let b2 = b.get(contender, name).lock(THREAD).await;
    let b3 = b.get(contender, name).lock(THREAD).await;
    assert_eq!(redis.hash(name).await, contender.holds(&b_field, 3));
    let a_lock = a.get(kind, name);
    let denied = a_lock
        .try_lock(THREAD, Duration::from_millis(50), Some(lease))
        .await;
    assert!(denied.is_none());

    let _: () = redis.conn.pexpire(name, 10_000).await.expect("PEXPIRE");
    b3.release().await;
    assert_eq!(redis.hash(name).await, contender.holds(&b_field, 2));
    let pttl = redis.pttl(name).await;
    assert!(
        pttl > 29_000,
        "a partial unlock re-applies the watchdog lease (pttl {pttl})"
    );
    b2.release().await;
    b1.release().await;
    assert!(!redis.exists(name).await);
}

/// `intruder` tries to release `holder`'s holds (two, or one of a kind that refuses re-entries;
/// with the holder's thread number and another): refused, the hash, its TTL and the channels
/// untouched; the holder then unlocks normally (and publishes what its kind publishes), and the
/// intruder's unlock of the lock that is gone gets what the kind answers there.
async fn the_other_side_cannot_unlock(kind: InteropKind, holder: Side, intruder: Side) {
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let intruder = Party::connect(intruder, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let name = "interop:owner";

    let count = if kind.is_reentrant() { 2 } else { 1 };
    let mut holds = Vec::new();
    for _ in 0..count {
        holds.push(holder.get(kind, name).lock(3).await);
    }
    let _: () = redis.conn.pexpire(name, 20_000).await.expect("PEXPIRE");
    let before = redis.hash(name).await;
    assert_eq!(before, kind.holds(&holder.field(3), count));
    for thread in [3, 4] {
        let outcome = intruder.get(kind, name).unlock_as(thread).await;
        assert_eq!(outcome, Unlocked::NotOwner, "thread {thread} owns nothing");
    }
    assert_eq!(redis.hash(name).await, before);
    let pttl = redis.pttl(name).await;
    assert!(pttl <= 20_000, "no lease was re-applied (pttl {pttl})");
    assert_eq!(messages.drain(Duration::from_millis(100)).await, vec![]);

    for hold in holds.into_iter().rev() {
        hold.release().await;
    }
    let heard = messages.drain(Duration::from_millis(100)).await;
    assert_eq!(heard, Vec::from_iter(kind.release_message(name)));

    let (outcome, message) = kind.missing_unlock(name);
    // rlock's fair unlock of a missing lock reports a lost hold where Java's succeeds (README).
    let outcome = match intruder.side() {
        Side::Rlock => Unlocked::NotOwner,
        Side::Java => outcome,
    };
    assert_eq!(intruder.get(kind, name).unlock_as(3).await, outcome);
    assert!(!redis.exists(name).await);
    let heard = messages.drain(Duration::from_millis(100)).await;
    assert_eq!(heard, Vec::from_iter(message));
}

every_kind!(reentrant matrix: holds_coexist_over_time);
every_kind!(both_directions: the_other_side_cannot_unlock);
