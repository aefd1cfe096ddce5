//! The count-down latch across the sides (docs/protocol.md §8.7, §11.4, §11.7): the last count-down
//! of one side opens the other side's waiters within [`WAKE_LIMIT`] (the earlier ones do not); a
//! new count closes the latch again for them; a delete publishes the closing `1`; both sides read
//! the same count all along. Messages and subscriptions are on
//! `redisson_countdownlatch__channel__{N}` (for a name that has braces of its own).

use std::time::Duration;

use rlock_tests::RedisServer;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::support::{
    Latencies, Listener, Message, Party, PartyLatch, Redis, Side, WAKE_LIMIT, both_directions,
    woken,
};

/// A name with its own braces: the channel wraps it in another pair all the same (§1.4).
const NAME: &str = "{interop}:count-down";

/// Its channel, literally: waiters of both sides must subscribe exactly this.
const CHANNEL: &str = "redisson_countdownlatch__channel__{{interop}:count-down}";

/// Openings each scenario times.
const ROUNDS: usize = 5;

/// How long a waiter that must keep waiting is watched.
const STILL_WAITING: Duration = Duration::from_millis(100);

/// The two sides' latch objects of one scenario and what they share.
struct Latches {
    /// The side that sets the count and counts down.
    counter: PartyLatch,
    /// The side whose waiters wait.
    waiter: PartyLatch,
    redis: Redis,
    messages: Listener,
    /// Up while the scenario runs.
    _server: RedisServer,
    _parties: [Party; 2],
}

impl Latches {
    async fn start(counter: Side, waiter: Side) -> Self {
        let server = RedisServer::start();
        let parties = [
            Party::connect(counter, &server).await,
            Party::connect(waiter, &server).await,
        ];
        Self {
            counter: parties[0].count_down_latch(NAME),
            waiter: parties[1].count_down_latch(NAME),
            redis: Redis::connect(&server).await,
            messages: Listener::synchronizer_messages(&server).await,
            _server: server,
            _parties: parties,
        }
    }

    /// Asserts that both sides read `count`.
    async fn assert_count(&self, count: u64) {
        assert_eq!(self.counter.count().await, count, "the counter's side");
        assert_eq!(self.waiter.count().await, count, "the waiter's side");
    }

    /// Asserts that exactly `payloads` were published on the latch's channel since the last call.
    async fn assert_heard(&mut self, payloads: &[&str]) {
        let expected: Vec<Message> = payloads
            .iter()
            .map(|payload| Message::new(CHANNEL, payload))
            .collect();
        assert_eq!(
            self.messages.drain(Duration::from_millis(50)).await,
            expected
        );
    }

    /// A waiter of the waiter's side, once it is subscribed and asleep.
    async fn parked_waiter(&mut self) -> JoinHandle<Instant> {
        let waiting = self.waiter.spawn_await();
        let _ = self.redis.wait_parked(CHANNEL, 1).await;
        waiting
    }
}

/// Asserts that `waiting` is still waiting [`STILL_WAITING`] from now.
async fn assert_still_waiting(waiting: &JoinHandle<Instant>, what: &str) {
    tokio::time::sleep(STILL_WAITING).await;
    assert!(!waiting.is_finished(), "{what}");
}

/// [`ROUNDS`] times: `counter` sets a count of 2 (publishing `1`), two waiters of `waiter` (one
/// client) wait; the first count-down leaves them waiting, the second (publishing `0`) opens both
/// within [`WAKE_LIMIT`]. Both sides read 2, 1, 0.
async fn the_last_count_down_opens_the_other_side(counter: Side, waiter: Side) {
    let mut latches = Latches::start(counter, waiter).await;
    let mut latencies = Latencies::default();
    for _ in 0..ROUNDS {
        assert!(latches.counter.try_set_count(2).await);
        latches.assert_count(2).await;
        let first = latches.parked_waiter().await;
        let second = latches.parked_waiter().await;
        latches.counter.count_down().await;
        latches.assert_count(1).await;
        assert_still_waiting(&second, "opened before the count reached zero").await;

        let opened_at = Instant::now();
        latches.counter.count_down().await;
        for waiting in [first, second] {
            latencies.record(opened_at, woken(waiting).await);
        }
        latches.assert_count(0).await;
        latches.assert_heard(&["1", "0"]).await;
    }
    latencies.check(
        &format!("RCountDownLatch opens waiters, {counter} -> {waiter}"),
        WAKE_LIMIT,
    );
}

/// `counter` opens a latch `waiter` waits on and at once sets a new count (publishing `0`, then
/// `1`): a waiter the waiter's side starts right after (its client may just have heard the latch
/// open) waits again, and a `trySetCount` of the waiter's side is refused while the count exists;
/// the next opening lets it through within [`WAKE_LIMIT`]. Then the counter's delete of a count
/// the waiter's side waits on publishes `1` too (a second delete publishes nothing), and once a
/// count is set and counted down again, that waiter is through.
async fn new_counts_and_deletes_close_the_latch(counter: Side, waiter: Side) {
    let mut latches = Latches::start(counter, waiter).await;
    assert!(latches.counter.try_set_count(1).await);
    let first = latches.parked_waiter().await;
    latches.counter.count_down().await;
    assert!(latches.counter.try_set_count(1).await);
    let second = latches.parked_waiter().await;
    assert_still_waiting(&second, "the new count did not close the latch again").await;
    latches.assert_count(1).await;
    assert!(!latches.waiter.try_set_count(5).await, "the count exists");
    latches.assert_count(1).await;
    let opened_at = Instant::now();
    latches.counter.count_down().await;
    let mut latencies = Latencies::default();
    latencies.record(opened_at, woken(second).await);
    // The first waiter went through at the first opening, or (had it read the new count) now.
    let _ = woken(first).await;
    latches.assert_heard(&["1", "0", "1", "0"]).await;
    latencies.check(
        &format!("RCountDownLatch reopened, {counter} -> {waiter}"),
        WAKE_LIMIT,
    );

    assert!(latches.counter.try_set_count(2).await);
    let third = latches.parked_waiter().await;
    latches.counter.count_down().await;
    assert!(latches.counter.delete().await);
    assert!(!latches.counter.delete().await);
    latches.assert_heard(&["1", "1"]).await;
    latches.assert_count(0).await;
    assert!(latches.counter.try_set_count(1).await);
    latches.counter.count_down().await;
    let _ = woken(third).await;
    latches.assert_heard(&["1", "0"]).await;
}

both_directions!(
    the_last_count_down_opens_the_other_side,
    new_counts_and_deletes_close_the_latch
);
