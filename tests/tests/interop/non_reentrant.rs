//! The non-reentrant locks across the sides (docs/protocol.md §8.8, §6.9): a holder's re-entry is
//! refused on both sides (Java's `IllegalMonitorStateException`, rlock's `Error::ReentryRefused`)
//! by every acquisition form, changing nothing in Redis and never joining the fair queue; and a
//! non-reentrant lock and its reentrant twin on one name are one lock, across the sides and within
//! one client. (The generic scenarios run them too; the shared fair queue is `fair`'s.)

use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::RedisServer;
use rlock_tests::redisson::{ThreadId, prefix_name};
use tokio::time::Instant;

use crate::support::{
    Acquired, Acquisition, InteropKind, Latencies, Listener, Party, Redis, Side, WAKE_LIMIT,
    every_kind, woken,
};

const NAME: &str = "interop:non-reentrant";

/// Every acquisition form, with its lease: `lock()`, `lock(leaseTime)`, `tryLock()`, and
/// `tryLock(waitTime)` with the watchdog and with a lease.
fn every_form() -> [(Acquisition, Option<Duration>); 5] {
    let (wait, lease) = (Duration::from_millis(200), Some(Duration::from_secs(5)));
    [
        (Acquisition::Lock, None),
        (Acquisition::Lock, lease),
        (Acquisition::Try(Duration::ZERO), None),
        (Acquisition::Try(wait), None),
        (Acquisition::Try(wait), lease),
    ]
}

/// Asserts that `party`'s acquisition `how` (with `lease`) of the `kind` lock [`NAME`] for
/// `thread` is refused as a re-entry (through a new object).
async fn assert_refused(
    party: &Party,
    kind: InteropKind,
    thread: ThreadId,
    how: Acquisition,
    lease: Option<Duration>,
) {
    let lock = party.get(kind, NAME);
    let outcome = lock.acquire(thread, how, lease).await;
    assert!(
        matches!(outcome, Acquired::ReentryRefused),
        "{} {kind} {how:?} with lease {lease:?}: {outcome:?}",
        party.side()
    );
}

/// The fair queue of [`NAME`] and the waiters with a deadline (both empty for a lock without
/// one).
async fn queued(redis: &mut Redis) -> (Vec<String>, Vec<String>) {
    let list = prefix_name("redisson_lock_queue", NAME);
    let timeouts = prefix_name("redisson_lock_timeout", NAME);
    let queue = redis.conn.lrange(list, 0, -1).await.expect("LRANGE");
    let deadlines = redis.conn.zrange(timeouts, 0, -1).await.expect("ZRANGE");
    (queue, deadlines)
}

/// `holder` holds the `kind` lock while a `waiter` of the other side waits for it (queued, for a
/// fair lock). Every acquisition form of the holder's owner is refused, through a new object each
/// time: the hash keeps its one field and count 1, its PTTL is not renewed, the queue keeps the
/// waiter alone, nothing is published. The holder's release wakes the waiter, whose own re-entry is
/// refused in turn.
async fn a_reentry_is_refused(kind: InteropKind, holder: Side, waiter: Side) {
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let mut redis = Redis::connect(&server).await;
    let hold = holder.get(kind, NAME).lock(1).await;
    let waiting = waiter.get(kind, NAME).spawn_lock(2);
    redis.wait_waiting(kind, NAME, &waiter.field(2)).await;
    let queue = queued(&mut redis).await;
    if kind == InteropKind::NON_REENTRANT_FAIR {
        let fields = vec![waiter.field(2)];
        assert_eq!(queue, (fields.clone(), fields), "the waiter queued");
    }
    let _: () = redis.conn.pexpire(NAME, 20_000).await.expect("PEXPIRE");
    let mut messages = Listener::unlock_messages(&server).await;

    for (how, lease) in every_form() {
        assert_refused(&holder, kind, 1, how, lease).await;
    }
    assert_eq!(redis.hash(NAME).await, kind.holds(&holder.field(1), 1));
    let pttl = redis.pttl(NAME).await;
    assert!(pttl <= 20_000, "no lease was re-applied (pttl {pttl})");
    assert_eq!(queued(&mut redis).await, queue, "a refusal never queues");
    assert_eq!(messages.drain(Duration::from_millis(100)).await, vec![]);
    assert!(!waiting.is_finished(), "still held");

    hold.release().await;
    let (_, hold) = woken(waiting).await;
    assert_eq!(redis.hash(NAME).await, kind.holds(&waiter.field(2), 1));
    assert_refused(&waiter, kind, 2, Acquisition::Lock, None).await;
    assert_eq!(queued(&mut redis).await, (vec![], vec![]));
    hold.release().await;
    assert!(!redis.exists(NAME).await);
}

/// The non-reentrant `kind` and its reentrant twin are one lock: for every pair of the two (the
/// holder's kind, the waiter's), with `a` holding and a waiter of `b` or of `a`'s own client, the
/// holder keeps the other out, the holder's owner is refused the non-reentrant lock whichever kind
/// it holds by, and the release wakes the waiter within [`WAKE_LIMIT`].
async fn twins_are_one_lock(kind: InteropKind, a: Side, b: Side) {
    let server = RedisServer::start();
    let a = Party::connect(a, &server).await;
    let b = Party::connect(b, &server).await;
    let mut redis = Redis::connect(&server).await;
    let twin = kind.twin();
    let mut latencies = Latencies::default();
    for waiter in [&b, &a] {
        for (held, waited) in [(kind, twin), (twin, kind), (kind, kind)] {
            let hold = a.get(held, NAME).lock(1).await;
            assert_refused(&a, kind, 1, Acquisition::Try(Duration::ZERO), None).await;
            let other = waiter.get(waited, NAME);
            assert!(other.try_lock(3, Duration::ZERO, None).await.is_none());
            let waiting = other.spawn_lock(2);
            redis.wait_waiting(waited, NAME, &waiter.field(2)).await;

            let released_at = Instant::now();
            hold.release().await;
            let (acquired_at, hold) = woken(waiting).await;
            latencies.record(released_at, acquired_at);
            assert_eq!(redis.hash(NAME).await, waited.holds(&waiter.field(2), 1));
            hold.release().await;
            assert!(!redis.exists(NAME).await);
        }
    }
    let what = format!(
        "{kind} and {twin} wake each other, {} -> {} and {} -> {}",
        a.side(),
        b.side(),
        a.side(),
        a.side()
    );
    latencies.check(&what, WAKE_LIMIT);
}

every_kind!(non_reentrant both_directions: a_reentry_is_refused, twins_are_one_lock);
