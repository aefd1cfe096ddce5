//! The unlock latch (docs/protocol.md §2.3, §2.4): a replayed unlock returns the stored result
//! without releasing twice, whichever side's script wrote the latch and whichever replays it; each
//! side's unlock uses a fresh latch and deletes it after the reply; a latch left behind harms
//! nobody.

use std::time::Duration;

use rlock_tests::RedisServer;
use rlock_tests::redisson::{
    RedissonVersion, ThreadId, lock_channel, new_request_id, unlock_latch,
};

use crate::support::{Listener, Message, Party, Redis, Side, both_directions, both_sides, holds};

/// rlock's unlock script, as rlock sends it.
const RLOCK_UNLOCK: &str = include_str!("../../../crates/core/lua/lock_unlock.lua");
const THREAD: ThreadId = 9;

/// rlock's unlock script sent by hand for `field` under `request_id` (as rlock re-sends it after a
/// lost reply), with rlock's default lease (30 s) and latch TTL (20 s).
async fn rlock_unlock_script(
    redis: &mut Redis,
    name: &str,
    field: &str,
    request_id: &str,
) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(RLOCK_UNLOCK)
        .arg(3)
        .arg(name)
        .arg(lock_channel(name))
        .arg(unlock_latch(name, request_id))
        .arg("0")
        .arg(30_000)
        .arg(field)
        .arg("PUBLISH")
        .arg(20_000)
        .query_async(&mut redis.conn)
        .await
        .expect("rlock unlock script")
}

/// One unlock attempt under `request_id` by `party`'s script: rlock's for `field`, or the
/// emulator's `unlock_attempt` (which names its own client's thread `THREAD`; a replay answers
/// from the latch before looking at the owner).
async fn unlock_attempt(
    party: &Party,
    redis: &mut Redis,
    name: &str,
    field: &str,
    request_id: &str,
) -> Option<i64> {
    match party {
        Party::Java(java) => java
            .get_lock(name)
            .unlock_attempt(THREAD, request_id)
            .await
            .expect("java unlock attempt"),
        Party::Rlock(_) => rlock_unlock_script(redis, name, field, request_id).await,
    }
}

/// `writer`'s script releases two holds under two request ids; `replayer`'s script re-sends both:
/// it gets the stored 0 and 1 back, nothing is decremented or published twice.
async fn replays_return_the_stored_result(writer: Side, replayer: Side) {
    let server = RedisServer::start();
    let writer = Party::connect(writer, &server).await;
    let replayer = Party::connect(replayer, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let name = "interop:latch";
    let held = [
        writer.lock(name).lock(THREAD).await,
        writer.lock(name).lock(THREAD).await,
    ];
    let field = writer.field(THREAD);
    let (first, second) = (new_request_id(), new_request_id());

    assert_eq!(
        unlock_attempt(&writer, &mut redis, name, &field, &first).await,
        Some(0)
    );
    assert_eq!(redis.hash(name).await, holds([(field.clone(), 1)]));
    let latch = unlock_latch(name, &first);
    let stored: Option<String> = redis::cmd("GET")
        .arg(&latch)
        .query_async(&mut redis.conn)
        .await
        .expect("GET latch");
    assert_eq!(stored.as_deref(), Some("0"));
    let ttl = redis.pttl(&latch).await;
    assert!(
        (10_000..=20_000).contains(&ttl),
        "the latch outlives retries (pttl {ttl})"
    );

    assert_eq!(
        unlock_attempt(&replayer, &mut redis, name, &field, &first).await,
        Some(0)
    );
    assert_eq!(
        redis.hash(name).await,
        holds([(field.clone(), 1)]),
        "not decremented twice"
    );

    assert_eq!(
        unlock_attempt(&writer, &mut redis, name, &field, &second).await,
        Some(1)
    );
    assert!(!redis.exists(name).await);
    let heard = messages.next(Duration::from_secs(1)).await;
    assert_eq!(heard, Some(Message::new(lock_channel(name), "0")));

    assert_eq!(
        unlock_attempt(&replayer, &mut redis, name, &field, &second).await,
        Some(1)
    );
    assert_eq!(
        unlock_attempt(&replayer, &mut redis, name, &field, &first).await,
        Some(0)
    );
    assert!(!redis.exists(name).await);
    assert_eq!(
        messages.drain(Duration::from_millis(100)).await,
        vec![],
        "published once"
    );

    // Without its latch the same attempt is an unlock by a non-owner: the answers above were replays.
    let _: i64 = redis::cmd("DEL")
        .arg(unlock_latch(name, &second))
        .query_async(&mut redis.conn)
        .await
        .expect("DEL latch");
    assert_eq!(
        unlock_attempt(&replayer, &mut redis, name, &field, &second).await,
        None
    );
    drop(held);
}

both_directions!(replays_return_the_stored_result);

/// Each unlock of `side` writes its own latch `redisson_unlock_latch:{N}:<32 hex>` and deletes it
/// after the reply.
async fn every_unlock_writes_and_deletes_a_fresh_latch(side: Side) {
    let server = RedisServer::start();
    let party = Party::connect(side, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut events = Listener::key_events(&server).await;
    let name = "interop:latch-life";
    let outer = party.lock(name).lock(1).await;
    let inner = party.lock(name).lock(1).await;
    inner.release().await;
    outer.release().await;

    let seen = events.drain(Duration::from_millis(300)).await;
    let keys = |event: &str| -> Vec<String> {
        let channel = format!("__keyevent@0__:{event}");
        seen.iter()
            .filter(|m| m.channel == channel.as_bytes())
            .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
            .filter(|key| key.starts_with("redisson_unlock_latch:"))
            .collect()
    };
    let written = keys("set");
    assert_eq!(written.len(), 2, "one latch per unlock: {written:?}");
    assert_ne!(written[0], written[1], "a fresh request id per unlock");
    let prefix = unlock_latch(name, "");
    for key in &written {
        let id = key.strip_prefix(&prefix).expect("latch key prefix");
        assert!(
            id.len() == 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "request id {id:?} is 32 lower-case hex"
        );
    }
    let mut deleted = keys("del");
    deleted.sort();
    let mut expected = written;
    expected.sort();
    assert_eq!(deleted, expected, "each latch is deleted after its reply");
    assert_eq!(redis.latch_keys().await, Vec::<String>::new());
}

both_sides!(every_unlock_writes_and_deletes_a_fresh_latch);

/// `leaver` leaves a latch behind (Java 3.52–4.2 always does: its `DEL` misses; for rlock a lost
/// `DEL` is simulated), then `other` locks, re-enters and unlocks the same name as usual; the
/// stale latch is neither used nor removed.
async fn a_stale_latch_is_harmless(leaver: Side, other: Side) {
    let server = RedisServer::start();
    let leaver = match leaver {
        Side::Java => Party::java(&server, RedissonVersion::V3_52, None).await,
        Side::Rlock => Party::connect(Side::Rlock, &server).await,
    };
    let other = Party::connect(other, &server).await;
    let mut redis = Redis::connect(&server).await;
    let mut messages = Listener::unlock_messages(&server).await;
    let name = "interop:stale-latch";

    let hold = leaver.lock(name).lock(1).await;
    match &leaver {
        Party::Java(_) => hold.release().await,
        Party::Rlock(_) => {
            let id = new_request_id();
            let field = leaver.field(1);
            assert_eq!(
                rlock_unlock_script(&mut redis, name, &field, &id).await,
                Some(1)
            );
            drop(hold); // its own unlock now finds nothing to release
        }
    }
    let stale = redis.latch_keys().await;
    assert_eq!(stale.len(), 1, "one latch left behind: {stale:?}");
    assert!(redis.pttl(&stale[0]).await > 10_000);
    assert_eq!(
        messages
            .next(Duration::from_secs(1))
            .await
            .map(|m| m.payload),
        Some(b"0".to_vec())
    );

    let outer = other.lock(name).lock(2).await;
    let inner = other.lock(name).lock(2).await;
    assert_eq!(redis.hash(name).await, holds([(other.field(2), 2)]));
    inner.release().await;
    assert_eq!(redis.hash(name).await, holds([(other.field(2), 1)]));
    outer.release().await;
    assert!(!redis.exists(name).await);
    assert_eq!(
        messages.next(Duration::from_secs(1)).await,
        Some(Message::new(lock_channel(name), "0"))
    );
    let mut check = redis.clone();
    let settled = rlock_tests::harness::eventually(Duration::from_secs(1), async || {
        check.latch_keys().await == stale
    });
    assert!(settled.await, "only the stale latch remains, untouched");
}

both_directions!(a_stale_latch_is_harmless);
