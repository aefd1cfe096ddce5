//! The spin lock across the sides (docs/protocol.md §8.1): its waiters subscribe to nothing and its
//! unlocks publish nothing, so a waiter of one side notices the other side's unlock at its next
//! try, within one back-off delay.

use std::time::Duration;

use rlock_tests::RedisServer;
use tokio::time::Instant;

use crate::support::{
    InteropKind, Latencies, Listener, Party, Redis, Side, both_directions, woken,
};

const NAME: &str = "interop:spin";
const ROUNDS: usize = 3;

/// `holder` unlocks while `poller` polls: nothing is subscribed or published, and the poller owns
/// the lock within its longest back-off delay (plus the usual wake-up margin).
async fn unlock_is_seen_by_the_other_poller(holder: Side, poller: Side) {
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let poller = Party::connect(poller, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let mut latencies = Latencies::default();
    for _ in 0..ROUNDS {
        let hold = holder.get(InteropKind::SPIN, NAME).lock(1).await;
        let polling = poller.get(InteropKind::SPIN, NAME).spawn_lock(2);
        redis
            .wait_waiting(InteropKind::SPIN, NAME, &poller.field(2))
            .await;
        assert_eq!(redis.channels().await, Vec::<Vec<u8>>::new(), "no channel");

        let released_at = Instant::now();
        hold.release().await;
        let (acquired_at, hold) = woken(polling).await;
        latencies.record(released_at, acquired_at);
        assert_eq!(
            redis.hash(NAME).await,
            InteropKind::SPIN.holds(&poller.field(2), 1)
        );
        hold.release().await;
        assert_eq!(messages.drain(Duration::from_millis(50)).await, vec![]);
    }
    latencies.check(
        &format!("RSpinLock poller, {} -> {}", holder.side(), poller.side()),
        InteropKind::SPIN.wake_limit(),
    );
}

both_directions!(unlock_is_seen_by_the_other_poller);
