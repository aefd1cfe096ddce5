//! Names (docs/protocol.md §1.3–§1.5): odd lock names work across the sides, and the lock key, the
//! channel and the latch keys are exactly Redisson's, byte for byte. The expected channels are
//! literals here, not computed by either implementation. For the `RLock` and the non-reentrant
//! lock (its hash and channel).

use std::time::Duration;

use rlock_tests::RedisServer;

use crate::support::{
    InteropKind, Listener, Message, Party, Redis, Side, every_kind, holds, woken,
};

/// Lock names and the channel Redisson derives from each.
const NAMES: &[(&str, &str)] = &[
    ("myLock", "redisson_lock__channel:{myLock}"),
    ("a{b}c", "redisson_lock__channel:a{b}c"),
    ("{orders}:42", "redisson_lock__channel:{orders}:42"),
    ("a{b", "redisson_lock__channel:a{b"),
    ("a}b", "redisson_lock__channel:{a}b}"),
    ("{}", "redisson_lock__channel:{}"),
    ("with space", "redisson_lock__channel:{with space}"),
    ("Schloß:锁:🔒", "redisson_lock__channel:{Schloß:锁:🔒}"),
    ("tab\tnew\nline", "redisson_lock__channel:{tab\tnew\nline}"),
];

/// For each name: `holder` holds, `waiter` waits; the hash is the raw name; the only subscribed
/// channel is the expected one; both unlocks are heard on exactly that channel; every latch key is
/// `redisson_unlock_latch` + the same brace rule + `:<32 hex>`.
async fn names_match_byte_for_byte(kind: InteropKind, holder: Side, waiter: Side) {
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let mut events = Listener::key_events(&server).await;
    let long_name = "x".repeat(1000);
    let long_channel = format!("redisson_lock__channel:{{{long_name}}}");
    let cases = NAMES
        .iter()
        .map(|&(name, channel)| (name, channel))
        .chain([(long_name.as_str(), long_channel.as_str())]);

    for (name, channel) in cases {
        let hold = holder.get(kind, name).lock(1).await;
        assert_eq!(
            redis.hash(name).await,
            holds([(holder.field(1), 1)]),
            "{name:?}"
        );
        let waiting = waiter.get(kind, name).spawn_lock(2);
        let _ = redis.wait_parked(channel, 1).await;
        assert_eq!(
            redis.channels().await,
            vec![channel.as_bytes().to_vec()],
            "{name:?}"
        );

        hold.release().await;
        let (_, hold) = woken(waiting).await;
        assert_eq!(
            redis.hash(name).await,
            holds([(waiter.field(2), 1)]),
            "{name:?}"
        );
        hold.release().await;
        assert!(!redis.exists(name).await, "{name:?}");
        let heard = messages.drain(Duration::from_millis(100)).await;
        let expected = Message::new(channel, "0");
        assert_eq!(heard, vec![expected.clone(), expected], "{name:?}");

        let latch_prefix = channel.replacen("redisson_lock__channel:", "redisson_unlock_latch:", 1);
        let latches: Vec<Vec<u8>> = events
            .drain(Duration::from_millis(50))
            .await
            .into_iter()
            .filter(|m| m.channel == b"__keyevent@0__:set")
            .map(|m| m.payload)
            .collect();
        assert_eq!(latches.len(), 2, "both unlocks wrote a latch ({name:?})");
        for latch in latches {
            let id = latch
                .strip_prefix(format!("{latch_prefix}:").as_bytes())
                .unwrap_or_else(|| {
                    panic!("latch {:?} for {name:?}", String::from_utf8_lossy(&latch))
                });
            assert_eq!(id.len(), 32, "{name:?}");
        }
        let mut check = redis.clone();
        let unsubscribed = rlock_tests::harness::eventually(Duration::from_secs(2), async || {
            check.channels().await.is_empty()
        });
        assert!(unsubscribed.await, "the waiter unsubscribed ({name:?})");
    }
}

every_kind!(lock_and_twin both_directions: names_match_byte_for_byte);
