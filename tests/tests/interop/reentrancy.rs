//! Reentrancy and ownership across the sides, for every lock kind: each side's holds live in its
//! own field with its own count, partial unlocks re-apply the holder's lease, and neither side can
//! release the other's holds.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::RedisServer;

use crate::support::{Kind, Listener, Party, Redis, Side, Unlocked, every_kind, holds, woken};

/// Both sides use thread / owner id 7: the fields still differ by client id.
const THREAD: u64 = 7;

/// `first` re-enters with a lease while `second` waits; `first`'s partial unlocks re-apply its
/// lease; its last unlock hands over to `second`, which re-enters with the watchdog and whose
/// partial unlock re-applies the watchdog lease.
async fn holds_coexist_over_time(kind: Kind, first: Side, second: Side) {
    let server = RedisServer::start();
    let a = Party::connect(first, &server).await;
    let b = Party::connect(second, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = "interop:reentrant";
    let lease = Duration::from_secs(5);

    let a1 = a.get(kind, name).lock_with_lease(THREAD, lease).await;
    let a2 = a.get(kind, name).lock_with_lease(THREAD, lease).await;
    assert_eq!(redis.hash(name).await, holds([(a.field(THREAD), 2)]));
    assert!(
        b.get(kind, name)
            .try_lock(THREAD, Duration::ZERO, None)
            .await
            .is_none()
    );
    assert_eq!(redis.hash(name).await, holds([(a.field(THREAD), 2)]));

    let b_waiting = b.get(kind, name).spawn_lock(THREAD);
    let _ = redis.wait_parked(&kind.channel(name), 1).await;
    let a3 = a.get(kind, name).lock_with_lease(THREAD, lease).await;
    assert_eq!(redis.hash(name).await, holds([(a.field(THREAD), 3)]));

    let _: () = redis.conn.pexpire(name, 3_000).await.expect("PEXPIRE");
    a3.release().await;
    assert_eq!(redis.hash(name).await, holds([(a.field(THREAD), 2)]));
    let after = redis.pttl(name).await;
    assert!(
        (4_500..=5_000).contains(&after),
        "a partial unlock re-applies the 5 s lease (pttl 3000 -> {after})"
    );
    a2.release().await;
    assert_eq!(redis.hash(name).await, holds([(a.field(THREAD), 1)]));
    assert!(!b_waiting.is_finished(), "still held once");

    a1.release().await;
    let (_, b1) = woken(b_waiting).await;
    assert_eq!(redis.hash(name).await, holds([(b.field(THREAD), 1)]));
    let b2 = b.get(kind, name).lock(THREAD).await;
    let b3 = b.get(kind, name).lock(THREAD).await;
    assert_eq!(redis.hash(name).await, holds([(b.field(THREAD), 3)]));
    let a_lock = a.get(kind, name);
    let denied = a_lock
        .try_lock(THREAD, Duration::from_millis(50), Some(lease))
        .await;
    assert!(denied.is_none());

    let _: () = redis.conn.pexpire(name, 10_000).await.expect("PEXPIRE");
    b3.release().await;
    assert_eq!(redis.hash(name).await, holds([(b.field(THREAD), 2)]));
    let pttl = redis.pttl(name).await;
    assert!(
        pttl > 29_000,
        "a partial unlock re-applies the watchdog lease (pttl {pttl})"
    );
    b2.release().await;
    b1.release().await;
    assert!(!redis.exists(name).await);
}

/// `intruder` tries to release `holder`'s holds (with the holder's thread number and another):
/// refused, the hash, its TTL and the channel untouched; the holder then unlocks normally.
async fn the_other_side_cannot_unlock(kind: Kind, holder: Side, intruder: Side) {
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let intruder = Party::connect(intruder, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let name = "interop:owner";

    let h1 = holder.get(kind, name).lock(3).await;
    let h2 = holder.get(kind, name).lock(3).await;
    let _: () = redis.conn.pexpire(name, 20_000).await.expect("PEXPIRE");
    let before = redis.hash(name).await;
    assert_eq!(before, holds([(holder.field(3), 2)]));
    for thread in [3, 4] {
        let outcome = intruder.get(kind, name).unlock_as(thread).await;
        assert_eq!(outcome, Unlocked::NotOwner, "thread {thread} owns nothing");
    }
    assert_eq!(redis.hash(name).await, before);
    let pttl = redis.pttl(name).await;
    assert!(pttl <= 20_000, "no lease was re-applied (pttl {pttl})");
    assert_eq!(messages.drain(Duration::from_millis(100)).await, vec![]);

    h2.release().await;
    h1.release().await;
    let heard = messages.next(Duration::from_secs(1)).await;
    assert_eq!(heard.map(|m| m.payload), Some(b"0".to_vec()));

    let outcome = intruder.get(kind, name).unlock_as(3).await;
    assert_eq!(outcome, Unlocked::NotOwner, "nothing to unlock");
    assert!(!redis.exists(name).await);
    assert_eq!(messages.drain(Duration::from_millis(100)).await, vec![]);
}

every_kind!(both_directions: holds_coexist_over_time, the_other_side_cannot_unlock);
