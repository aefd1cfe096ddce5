//! The read-write lock across the sides (docs/protocol.md §7): readers of both sides hold it
//! together while writers of both sides are kept out, the last reader's unlock (`0`) wakes a writer
//! of the other side, and a write unlock (`1`, wake all) wakes the readers of both sides at once.

use std::collections::BTreeMap;
use std::time::Duration;

use rlock_tests::RedisServer;
use rlock_tests::redisson::prefix_name;
use tokio::time::Instant;

use crate::support::{
    InteropKind, Latencies, Listener, Message, Party, Redis, Side, WAKE_LIMIT, both_directions,
    woken,
};

const NAME: &str = "interop:rw";

/// The hash while the readers `owners` (owner fields) each hold one read lock.
fn readers(owners: [String; 2]) -> BTreeMap<String, String> {
    let mut hash = InteropKind::READ.holds(&owners[0], 1);
    hash.extend(InteropKind::READ.holds(&owners[1], 1));
    hash
}

/// Readers of `a` and `b` share the lock; writers of both sides are refused; a writer of `a` waits
/// for them, `a`'s reader leaves without waking it, `b`'s last reader wakes it. Readers of both
/// sides then wait for that writer, and its unlock publishes `1` and wakes both at once.
async fn readers_share_and_writers_exclude(a: Side, b: Side) {
    let server = RedisServer::start();
    let a = Party::connect(a, &server).await;
    let b = Party::connect(b, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let channel = prefix_name("redisson_rwlock", NAME);
    let mut latencies = Latencies::default();

    let a_read = a.get(InteropKind::READ, NAME).lock(1).await;
    let b_read = b.get(InteropKind::READ, NAME).lock(1).await;
    assert_eq!(redis.hash(NAME).await, readers([a.field(1), b.field(1)]));
    for party in [&a, &b] {
        let writer = party.get(InteropKind::WRITE, NAME);
        let refused = writer.try_lock(2, Duration::ZERO, None).await;
        assert!(refused.is_none(), "{}'s writer is kept out", party.side());
    }
    let writer = a.get(InteropKind::WRITE, NAME).spawn_lock(2);
    redis
        .wait_waiting(InteropKind::WRITE, NAME, &a.field(2))
        .await;
    a_read.release().await;
    assert_eq!(
        redis.hash(NAME).await,
        InteropKind::READ.holds(&b.field(1), 1)
    );
    assert_eq!(messages.drain(Duration::from_millis(100)).await, vec![]);
    assert!(!writer.is_finished(), "a reader still holds the lock");

    let released_at = Instant::now();
    b_read.release().await;
    let (acquired_at, write) = woken(writer).await;
    latencies.record(released_at, acquired_at);
    assert_eq!(
        redis.hash(NAME).await,
        InteropKind::WRITE.holds(&a.field(2), 1)
    );
    assert_eq!(
        messages.drain(Duration::from_millis(100)).await,
        vec![Message::new(&channel, "0")]
    );

    let waiting = [
        a.get(InteropKind::READ, NAME).spawn_lock(3),
        b.get(InteropKind::READ, NAME).spawn_lock(3),
    ];
    // One subscription per client: its local entry serves all its waiters (§3.1).
    let _ = redis.wait_parked(&channel, 2).await;
    let released_at = Instant::now();
    write.release().await;
    let mut holds = Vec::new();
    for reader in waiting {
        let (acquired_at, hold) = woken(reader).await;
        latencies.record(released_at, acquired_at);
        holds.push(hold);
    }
    assert_eq!(redis.hash(NAME).await, readers([a.field(3), b.field(3)]));
    assert_eq!(
        messages.drain(Duration::from_millis(100)).await,
        vec![Message::new(&channel, "1")]
    );
    for hold in holds {
        hold.release().await;
    }
    assert!(!redis.exists(NAME).await);
    latencies.check(
        &format!("RReadWriteLock hand-offs, {} <-> {}", a.side(), b.side()),
        WAKE_LIMIT,
    );
}

both_directions!(readers_share_and_writers_exclude);
