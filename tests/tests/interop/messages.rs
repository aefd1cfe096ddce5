//! Raw messages on a lock channel (docs/protocol.md §3.2, §11.4–§11.5): a waiter retries on an
//! integer `0` (one waiter per client) or `1` (every waiter), ignores everything else without harm,
//! and a wake-up is only a hint: the lock must really be free. Both sides' waiters behave the same,
//! for the `RLock` and the non-reentrant lock (its channel and messages).

use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::RedisServer;
use rlock_tests::redisson::lock_channel;
use tokio::time::Instant;

use crate::support::{
    InteropKind, Latencies, Party, Redis, Side, WAKE_LIMIT, every_kind, holds, woken,
};

/// Payloads Java's `Long.valueOf` rejects, or numbers other than 0 and 1: nobody wakes.
const IGNORED: &[&[u8]] = &[
    b"",
    b"2",
    b"-1",
    b"abc",
    b" 0",
    b"0 ",
    b"0.0",
    b"1e0",
    b"0x0",
    b"9223372036854775808",
    b"\xff\xfe",
    b"\0",
];

/// Payloads `Long.valueOf` reads as 0: one waiter per client wakes.
const ZEROES: &[&str] = &["0", "00", "+0", "-0"];

/// A `kind` waiter of `side` on a lock held by a third client: ignored payloads cause no retry; each
/// zero causes exactly one retry, after which the waiter sleeps again (the lock is still held); a
/// silent release goes unnoticed until a `0` arrives, which then hands over within milliseconds.
async fn only_integer_zero_or_one_wakes(kind: InteropKind, side: Side) {
    let server = RedisServer::start();
    let party = Party::connect(side, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = "interop:messages";
    let channel = lock_channel(name);
    redis.hold_foreign(name, 30_000).await;
    let waiting = party.get(kind, name).spawn_lock(2);
    let mut calls = redis.wait_parked(&channel, 1).await;

    for payload in IGNORED {
        redis.publish(&channel, payload).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        redis.settle().await,
        calls,
        "an ignored payload caused a retry"
    );
    for zero in ZEROES {
        redis.publish(&channel, zero.as_bytes()).await;
        let now = redis.scripts_reach(calls + 1).await;
        assert_eq!(now, calls + 1, "{zero:?} wakes exactly one waiter once");
        calls = now;
    }
    assert!(
        !waiting.is_finished(),
        "a message is no permission: the lock is held"
    );

    let _: i64 = redis.conn.del(name).await.expect("DEL");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "nothing told the waiter; its PTTL is 30 s"
    );
    let published_at = Instant::now();
    redis.publish(&channel, b"0").await;
    let (acquired_at, hold) = woken(waiting).await;
    let mut latencies = Latencies::default();
    latencies.record(published_at, acquired_at);
    latencies.check(
        &format!("raw PUBLISH 0 wakes a {side} {kind} waiter"),
        WAKE_LIMIT,
    );
    assert_eq!(redis.hash(name).await, holds([(party.field(2), 1)]));
    hold.release().await;
}

/// Three `kind` waiters of `side` (one client, racing: rlock without its local queue): `1` makes all three
/// retry, `0` only one; on a free lock a `1` lets exactly one of them win while the others go back
/// to sleep.
async fn one_wakes_every_local_waiter(kind: InteropKind, side: Side) {
    let server = RedisServer::start();
    let party = Party::racing(side, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = "interop:wake-all";
    let channel = lock_channel(name);
    redis.hold_foreign(name, 30_000).await;
    let waiters: Vec<_> = (1..=3)
        .map(|t| party.get(kind, name).spawn_lock(t))
        .collect();
    let calls = redis.wait_parked(&channel, 1).await;

    redis.publish(&channel, b"1").await;
    let calls = redis.scripts_reach(calls + 3).await;
    redis.publish(&channel, b"0").await;
    let after = redis.scripts_reach(calls + 1).await;
    assert_eq!(after, calls + 1, "0 wakes one waiter, 1 wakes all three");
    assert!(waiters.iter().all(|w| !w.is_finished()));

    let _: i64 = redis.conn.del(name).await.expect("DEL");
    redis.publish(&channel, b"1").await;
    let _ = redis.scripts_reach(after + 3).await;
    let finished: Vec<usize> = (0..3).filter(|&i| waiters[i].is_finished()).collect();
    assert_eq!(finished.len(), 1, "exactly one waiter won: {finished:?}");
    let winner = u64::try_from(finished[0]).expect("small") + 1;
    assert_eq!(redis.hash(name).await, holds([(party.field(winner), 1)]));
    for waiter in waiters {
        waiter.abort();
    }
}

every_kind!(
    lock_and_twin both_sides: only_integer_zero_or_one_wakes,
    one_wakes_every_local_waiter,
);

/// A known difference (rlock is the safer one): when its subscriber connection drops, rlock
/// re-polls at once and resubscribes, where Java only resubscribes and sleeps out the PTTL. The
/// next Java unlock then wakes rlock within milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rlock_waiter_re_polls_after_its_subscriber_reconnects() {
    let server = RedisServer::start();
    let java = Party::connect(Side::Java, &server).await;
    let rlock = Party::connect(Side::Rlock, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = "interop:reconnect";
    let channel = lock_channel(name);
    let hold = java.lock(name).lock(1).await;
    let waiting = rlock.lock(name).spawn_lock(2);
    let calls = redis.wait_parked(&channel, 1).await;

    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut redis.conn)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1, "rlock's subscriber was the only pub/sub client");
    let _ = redis.scripts_reach(calls + 1).await;
    let _ = redis.wait_parked(&channel, 1).await;

    let unlocked_at = Instant::now();
    hold.release().await;
    let (acquired_at, hold) = woken(waiting).await;
    let mut latencies = Latencies::default();
    latencies.record(unlocked_at, acquired_at);
    latencies.check("java unlock wakes rlock after a resubscribe", WAKE_LIMIT);
    hold.release().await;
}
