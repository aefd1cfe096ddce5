//! The fair lock across the sides (docs/protocol.md §6): Java and rlock waiters share one FIFO
//! queue, so interleaved they acquire in queue order, and a waiter of either side that gives up
//! leaves the queue and its deadline (§6.6), moving the deadlines behind it up by its wait. The same
//! for the non-reentrant fair lock (§6.9), alone and mixed with the fair lock in one queue.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::RedisServer;
use rlock_tests::redisson::{ThreadId, prefix_name};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::support::{Hold, InteropKind, Party, Redis, Side, both_directions, woken};

const NAME: &str = "interop:fair";
/// How long the waiters that give up wait.
const GIVE_UP_WAIT: Duration = Duration::from_secs(1);

/// The queue and the deadlines of [`NAME`] (§1.4).
struct Queue {
    list: String,
    timeouts: String,
}

impl Queue {
    fn new() -> Self {
        Self {
            list: prefix_name("redisson_lock_queue", NAME),
            timeouts: prefix_name("redisson_lock_timeout", NAME),
        }
    }

    /// The deadline of `field`, if it is queued.
    async fn deadline(&self, redis: &mut Redis, field: &str) -> Option<i64> {
        redis
            .conn
            .zscore(&self.timeouts, field)
            .await
            .expect("ZSCORE")
    }

    /// Asserts that both sides list `expected` as the queue, and that exactly they have deadlines.
    async fn assert_is(&self, redis: &mut Redis, parties: [&Party; 2], expected: &[String]) {
        for party in parties {
            let listed = party.get(InteropKind::FAIR, NAME).queue().await;
            assert_eq!(listed, expected, "the queue as {} lists it", party.side());
        }
        let mut with_deadlines: Vec<String> = redis
            .conn
            .zrange(&self.timeouts, 0, -1)
            .await
            .expect("ZRANGE");
        with_deadlines.sort();
        let mut queued = expected.to_vec();
        queued.sort();
        assert_eq!(with_deadlines, queued, "the waiters with a deadline");
    }

    /// Asserts that nothing of the queue is left.
    async fn assert_gone(&self, redis: &mut Redis) {
        assert!(!redis.exists(&self.list).await, "the queue is gone");
        assert!(
            !redis.exists(&self.timeouts).await,
            "the deadlines are gone"
        );
    }
}

/// The order in which waiters took the lock: each reports its field.
struct Turns {
    order: mpsc::UnboundedSender<String>,
    taken: mpsc::UnboundedReceiver<String>,
}

impl Turns {
    fn new() -> Self {
        let (order, taken) = mpsc::unbounded_channel();
        Self { order, taken }
    }

    /// Releases `hold`, lets every waiter take its turn, and returns their fields in the order
    /// they took the lock.
    async fn after_release(self, hold: Hold, waiters: Vec<JoinHandle<()>>) -> Vec<String> {
        let Self { order, mut taken } = self;
        drop(order);
        hold.release().await;
        for waiter in waiters {
            woken(waiter).await;
        }
        let mut turns = Vec::new();
        while let Some(field) = taken.recv().await {
            turns.push(field);
        }
        turns
    }
}

/// A waiter of `party` that takes the `kind` lock (without a time limit), reports its turn and
/// releases the lock at once; it is queued and asleep when this returns.
async fn queue_waiter(
    party: &Party,
    kind: InteropKind,
    thread: ThreadId,
    redis: &mut Redis,
    turns: &Turns,
) -> JoinHandle<()> {
    let lock = party.get(kind, NAME);
    let field = party.field(thread);
    let order = turns.order.clone();
    let waiter = tokio::spawn({
        let field = field.clone();
        async move {
            let hold = lock.lock(thread).await;
            order.send(field).expect("order");
            hold.release().await;
        }
    });
    redis.wait_waiting(kind, NAME, &field).await;
    waiter
}

/// A waiter of `party` that tries the `kind` lock for [`GIVE_UP_WAIT`] and must give up; it is
/// queued when this returns.
async fn timed_waiter(
    party: &Party,
    kind: InteropKind,
    thread: ThreadId,
    redis: &mut Redis,
    queue: &Queue,
    ahead: usize,
) -> JoinHandle<()> {
    let lock = party.get(kind, NAME);
    let waiter = tokio::spawn(async move {
        let hold = lock.try_lock(thread, GIVE_UP_WAIT, None).await;
        assert!(hold.is_none(), "the lock stays held while it waits");
    });
    let mut check = redis.clone();
    let queued = rlock_tests::harness::eventually(GIVE_UP_WAIT / 2, async || {
        let len: usize = check.conn.llen(&queue.list).await.expect("LLEN");
        len > ahead
    });
    assert!(queued.await, "the timed waiter queued");
    waiter
}

/// A server with a party of `a` and one of `b`, an observer, and `a`'s hold (thread 1) of the
/// `kind` lock.
async fn held_by(kind: InteropKind, a: Side, b: Side) -> (RedisServer, [Party; 2], Redis, Hold) {
    let server = RedisServer::start();
    let a = Party::connect(a, &server).await;
    let b = Party::connect(b, &server).await;
    let redis = Redis::connect(&server).await;
    let hold = a.get(kind, NAME).lock(1).await;
    (server, [a, b], redis, hold)
}

async fn waiters_acquire_in_queue_order(a: Side, b: Side) {
    in_queue_order(InteropKind::FAIR, [InteropKind::FAIR; 4], a, b).await;
}

/// A non-reentrant fair holder, and waiters of both fair kinds (non-reentrant or not) and both
/// sides, alternating: one queue, one order.
async fn both_fair_kinds_share_one_queue(a: Side, b: Side) {
    let (fair, non_reentrant) = (InteropKind::FAIR, InteropKind::NON_REENTRANT_FAIR);
    let waiters = [fair, non_reentrant, non_reentrant, fair];
    in_queue_order(non_reentrant, waiters, a, b).await;
}

/// `a` holds the `holder` kind; waiters of both sides queue alternately (a, b, a, b), of the
/// `waiters` kinds in turn; both sides' `queue()` list them in that order; when `a` releases,
/// each waiter in turn (woken alone, on its own channel) takes the lock and releases it, in queue
/// order.
async fn in_queue_order(holder: InteropKind, waiters: [InteropKind; 4], a: Side, b: Side) {
    let (_server, [a, b], mut redis, hold) = held_by(holder, a, b).await;
    let queue = Queue::new();

    let turns = Turns::new();
    let mut expected = Vec::new();
    let mut queued = Vec::new();
    let parties = [(&a, 2), (&b, 2), (&a, 3), (&b, 3)];
    for ((party, thread), kind) in parties.into_iter().zip(waiters) {
        queued.push(queue_waiter(party, kind, thread, &mut redis, &turns).await);
        expected.push(party.field(thread));
    }
    let waiters = queued;
    queue.assert_is(&mut redis, [&a, &b], &expected).await;

    let taken = turns.after_release(hold, waiters).await;
    assert_eq!(taken, expected, "the waiters acquired in queue order");
    queue.assert_gone(&mut redis).await;
    assert!(!redis.exists(NAME).await);
}

async fn give_ups_leave_no_entry(a: Side, b: Side) {
    give_ups_of(InteropKind::FAIR, a, b).await;
}

async fn non_reentrant_give_ups_leave_no_entry(a: Side, b: Side) {
    give_ups_of(InteropKind::NON_REENTRANT_FAIR, a, b).await;
}

/// `a` holds the `kind` lock. A timed waiter of `b` queues between two waiters of `a` and gives
/// up: it leaves the queue and the deadlines, and the deadline of the waiter behind it moves up by
/// its wait. Then a timed waiter of `a` does the same in front of a waiter of `b`. The waiters
/// left acquire in order, and nothing of the queue remains.
async fn give_ups_of(kind: InteropKind, a: Side, b: Side) {
    let (_server, [a, b], mut redis, hold) = held_by(kind, a, b).await;
    let queue = Queue::new();
    let turns = Turns::new();
    let wait_ms = i64::try_from(GIVE_UP_WAIT.as_millis()).expect("ms");

    let mut waiters = vec![queue_waiter(&a, kind, 2, &mut redis, &turns).await];
    let mut expected = vec![a.field(2)];
    for (quitter, behind) in [(&b, &a), (&a, &b)] {
        let ahead = expected.len();
        let giving_up = timed_waiter(quitter, kind, 5, &mut redis, &queue, ahead).await;
        waiters.push(queue_waiter(behind, kind, 3, &mut redis, &turns).await);
        let field = behind.field(3);
        let deadline = queue.deadline(&mut redis, &field).await;
        woken(giving_up).await;
        expected.push(field.clone());
        queue.assert_is(&mut redis, [&a, &b], &expected).await;
        assert_eq!(
            queue.deadline(&mut redis, &field).await,
            deadline.map(|deadline| deadline - wait_ms),
            "{}'s give-up moves the deadline behind it up by its wait",
            quitter.side()
        );
    }

    let taken = turns.after_release(hold, waiters).await;
    assert_eq!(taken, expected, "the waiters left acquired in queue order");
    queue.assert_gone(&mut redis).await;
}

both_directions!(
    waiters_acquire_in_queue_order,
    both_fair_kinds_share_one_queue,
    give_ups_leave_no_entry,
    non_reentrant_give_ups_leave_no_entry,
);
