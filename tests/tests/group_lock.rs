//! The group lock (Redisson's `RedissonFasterMultiLock`, docs/protocol.md §8.9) against a real
//! Redis and the emulated Java client: the hash after every operation, field by field; renewal by
//! rlock's watchdog; exclusion and wake-ups both ways; value sets that overlap; cancel safety and a
//! lost acquire reply.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock_redisson::{Client, Codec, Error, GroupLock, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{self, epoch_ms, eventually};
use rlock_tests::proxy::{FaultProxy, Match};
use rlock_tests::redisson::{JavaClient, JavaGroupLock, RedissonVersion};

/// Redisson's `Hash.hash128toBase64` of the UTF-8 bytes (a `StringCodec` value), computed with
/// Redisson's own HighwayHash class.
const HASH_42: &str = "RE0IojEvPTY8Dofe3IkBNA";
const HASH_ORDERS: &str = "fkpb4qUHoaX1lP+lHM7glg";
const HASH_EMPTY: &str = "t6rZwibGo2uy1OSmNVe8pg";

/// How soon a waiter must wake after the release it waits for: far below the holder's lease.
const WAKE_LIMIT: Duration = Duration::from_secs(2);

/// A client whose values are encoded as Java's `StringCodec` encodes them, so that the hashes are
/// the goldens above.
async fn string_client(server: &RedisServer) -> Client {
    harness::client_with(server, |config| config.codec = Codec::String).await
}

fn group(client: &Client, name: &str, values: &[&str]) -> GroupLock {
    client
        .group_lock(name, values.iter().copied())
        .expect("string values encode")
}

async fn hash(redis: &mut MultiplexedConnection, name: &str) -> BTreeMap<String, String> {
    redis.hgetall(name).await.expect("HGETALL")
}

async fn pttl(redis: &mut MultiplexedConnection, name: &str) -> i64 {
    redis.pttl(name).await.expect("PTTL")
}

/// An emulated Redisson 4.7 client.
async fn java(server: &RedisServer) -> JavaClient {
    JavaClient::connect(&server.url(), RedissonVersion::V4)
        .await
        .expect("java connects")
}

/// The group lock `name` of `hashes`, taken by a Java thread (1) with a 30 s lease.
async fn held_by_java(server: &RedisServer, name: &str, hashes: &[&str]) -> JavaGroupLock {
    let held = java(server).await.get_multi_lock(name, hashes);
    held.lock(1, Some(Duration::from_secs(30)))
        .await
        .expect("java locks");
    held
}

/// Waits until one client (a waiter) listens on the group's channel.
async fn until_subscribed(redis: &mut MultiplexedConnection, name: &str) {
    let subscribed = eventually(Duration::from_secs(5), async || {
        harness::lock_channel_subscribers(redis, name).await == 1
    })
    .await;
    assert!(subscribed, "a waiter subscribes to {name}'s channel");
}

/// Asserts that `hash` is exactly the fields of `field` holding each of `values` `count` times,
/// their hold ending `lease_ms` after about `sent` (epoch ms).
fn assert_held(
    hash: &BTreeMap<String, String>,
    values: &[&str],
    field: &str,
    count: u32,
    ends_near: u64,
) {
    assert_eq!(
        hash.len(),
        values.len() * 3,
        "three fields a value: {hash:?}"
    );
    for value in values {
        assert_eq!(
            hash.get(*value).map(String::as_str),
            Some(field),
            "{hash:?}"
        );
        let count_field = format!("{value}:{field}:lock_count");
        assert_eq!(hash.get(&count_field), Some(&count.to_string()), "{hash:?}");
        let ends: u64 = hash[&format!("{value}:{field}:expire_time")]
            .parse()
            .expect("an epoch ms");
        assert!(
            ends.abs_diff(ends_near) < 2_000,
            "{value} ends at {ends}, expected about {ends_near}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_hashed_as_redisson_hashes_them() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let lock = group(&client, "g:hashes", &["42", "orders", "", "42"]);
    let mut expected = vec![HASH_42, HASH_ORDERS, HASH_EMPTY];
    expected.sort_unstable();
    assert_eq!(
        lock.value_hashes(),
        expected,
        "hashed, sorted, repeats dropped"
    );
    // Java's `getMultiLock(group, List.of(42L))` with its default `Kryo5Codec` writes other bytes.
    let kryo = harness::client(&server).await;
    let long = kryo
        .group_lock("g:hashes", [42i64])
        .expect("a Long encodes");
    assert_ne!(long.value_hashes(), [HASH_42]);
    assert!(matches!(
        client.group_lock("g:none", Vec::<&str>::new()),
        Err(Error::InvalidArgument(_))
    ));
}

/// Lock, re-entry, partial unlock, unlock: Java's layout, golden field names included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hash_after_lock_reentry_and_unlock() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let lock = group(&client, "g:layout", &["42", "orders"]).with_owner(Owner::new());
    let values = [HASH_42, HASH_ORDERS];

    let lease = Duration::from_secs(30);
    let sent = epoch_ms();
    let first = lock.lock_with_lease(lease).await.expect("lock");
    let field = first.field().to_owned();
    assert_held(
        &hash(&mut redis, "g:layout").await,
        &values,
        &field,
        1,
        sent + 30_000,
    );
    assert!(pttl(&mut redis, "g:layout").await > 29_000);
    assert!(lock.is_locked().await.expect("is_locked"));
    assert!(lock.is_held_by_current().await.expect("is_held_by"));

    let second = lock.try_lock_with_lease(Duration::ZERO, lease).await;
    let second = second.expect("re-entry").expect("the owner re-enters");
    assert_held(
        &hash(&mut redis, "g:layout").await,
        &values,
        &field,
        2,
        sent + 30_000,
    );

    second.unlock().await.expect("partial unlock");
    assert_held(
        &hash(&mut redis, "g:layout").await,
        &values,
        &field,
        1,
        sent + 30_000,
    );
    first.unlock().await.expect("unlock");
    assert!(
        !harness::exists(&mut redis, "g:layout").await,
        "the hash is gone"
    );
    assert!(!lock.is_locked().await.expect("is_locked"));
    assert!(!lock.is_held_by_current().await.expect("is_held_by"));
}

/// A lease ends per value: the hash lives on while another value is held, the ended hold's fields
/// stay until someone takes the value (Java's layout), and its guard's unlock reports the loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_whose_lease_ended_is_taken_by_another_owner() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let long = group(&client, "g:lease", &["orders"]);
    let short = group(&client, "g:lease", &["42"]);
    let kept = long
        .lock_with_lease(Duration::from_secs(30))
        .await
        .expect("lock");
    let lapsed = short
        .lock_with_lease(Duration::from_millis(200))
        .await
        .expect("lock");
    let lapsed_field = lapsed.field().to_owned();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !short.is_locked().await.expect("is_locked"),
        "its lease ended"
    );
    let stale = hash(&mut redis, "g:lease").await;
    assert_eq!(
        stale.get(HASH_42),
        Some(&lapsed_field),
        "Java's fields stay"
    );
    assert_eq!(stale.len(), 6);

    let taker = group(&client, "g:lease", &["42"]);
    let taken = taker.try_lock().await.expect("try_lock").expect("free");
    let after = hash(&mut redis, "g:lease").await;
    assert_eq!(after.get(HASH_42).map(String::as_str), Some(taken.field()));
    assert!(
        after.keys().all(|field| !field.contains(&lapsed_field)),
        "the ended hold's fields are gone: {after:?}"
    );
    assert!(matches!(
        lapsed.unlock().await,
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(
        hash(&mut redis, "g:lease").await,
        after,
        "nothing of the taker's was touched"
    );
    taken.unlock().await.expect("unlock");
    kept.unlock().await.expect("unlock");
    assert!(!harness::exists(&mut redis, "g:lease").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_java_s_values_and_wakes_its_waiter() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let java = java(&server).await;
    let _held = held_by_java(&server, "g:force", &[HASH_42, HASH_ORDERS]).await;
    let waiter = {
        let java = java.clone();
        tokio::spawn(async move {
            let lock = java.get_multi_lock("g:force", &[HASH_ORDERS]);
            lock.lock(2, Some(Duration::from_secs(30)))
                .await
                .expect("java waits");
            std::time::Instant::now()
        })
    };
    until_subscribed(&mut redis, "g:force").await;
    let lock = group(&client, "g:force", &["42", "orders"]);
    let forced = std::time::Instant::now();
    assert!(lock.force_unlock().await.expect("force_unlock"));
    let woke = tokio::time::timeout(WAKE_LIMIT, waiter)
        .await
        .expect("the Java waiter wakes on the message")
        .expect("joins");
    assert!(woke - forced < WAKE_LIMIT);
    let after = hash(&mut redis, "g:force").await;
    assert_eq!(after.get(HASH_ORDERS), Some(&java.lock_name(2)));
    assert!(!after.contains_key(HASH_42), "{after:?}");
    let free = group(&client, "g:force", &["nobody's"]);
    assert!(
        !free.force_unlock().await.expect("force_unlock"),
        "nothing was held"
    );
}

/// Without a lease the watchdog renews every value's `expire_time` and the key's TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_the_values() {
    let server = RedisServer::start();
    let client = harness::client_with(&server, |config| {
        config.codec = Codec::String;
        config.watchdog_timeout = Duration::from_secs(3);
    })
    .await;
    let mut redis = harness::raw(&server).await;
    let lock = group(&client, "g:watchdog", &["42", "orders"]);
    let guard = lock.lock().await.expect("lock");
    let expiry = |hash: &BTreeMap<String, String>, value: &str| -> u64 {
        hash[&format!("{value}:{}:expire_time", guard.field())]
            .parse()
            .expect("epoch ms")
    };
    let before = hash(&mut redis, "g:watchdog").await;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let after = hash(&mut redis, "g:watchdog").await;
    for value in [HASH_42, HASH_ORDERS] {
        assert!(
            expiry(&after, value) >= expiry(&before, value) + 1_000,
            "{value}'s expire_time moved on: {before:?} → {after:?}"
        );
    }
    assert!(
        pttl(&mut redis, "g:watchdog").await > 1_000,
        "the key lives on"
    );
    assert!(!guard.is_lease_lost());
    guard.unlock().await.expect("unlock");
    assert!(!harness::exists(&mut redis, "g:watchdog").await);
}

/// Java holds some of the values; rlock waits, and wakes on Java's unlock message (long before
/// Java's 30 s lease would end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_unlock_wakes_an_rlock_waiter() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let held = held_by_java(&server, "g:j2r", &[HASH_42, HASH_ORDERS]).await;
    let lock = group(&client, "g:j2r", &["orders", ""]);
    assert!(
        lock.try_lock().await.expect("try_lock").is_none(),
        "excluded"
    );
    let waiter = tokio::spawn(async move {
        let guard = lock.lock().await.expect("rlock waits");
        (std::time::Instant::now(), guard)
    });
    until_subscribed(&mut redis, "g:j2r").await;
    let released = std::time::Instant::now();
    assert_eq!(held.unlock(1).await.expect("java unlocks"), Some(1));
    let (woke, guard) = tokio::time::timeout(WAKE_LIMIT, waiter)
        .await
        .expect("rlock wakes on the message")
        .expect("joins");
    assert!(woke - released < WAKE_LIMIT);
    let after = hash(&mut redis, "g:j2r").await;
    assert_eq!(
        after.get(HASH_ORDERS).map(String::as_str),
        Some(guard.field())
    );
    assert_eq!(
        after.get(HASH_EMPTY).map(String::as_str),
        Some(guard.field())
    );
    guard.unlock().await.expect("unlock");
}

/// rlock holds; Java waits and wakes on rlock's unlock message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rlock_unlock_wakes_a_java_waiter() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let java = java(&server).await;
    let lock = group(&client, "g:r2j", &["42"]);
    let guard = lock.lock().await.expect("rlock locks");
    let contender = java.get_multi_lock("g:r2j", &[HASH_42, HASH_ORDERS]);
    assert!(
        !contender
            .try_lock_for(1, Duration::ZERO, None)
            .await
            .expect("try")
    );
    let waiter = {
        let java = java.clone();
        tokio::spawn(async move {
            let lock = java.get_multi_lock("g:r2j", &[HASH_42, HASH_ORDERS]);
            lock.lock(7, None).await.expect("java waits");
            std::time::Instant::now()
        })
    };
    until_subscribed(&mut redis, "g:r2j").await;
    let released = std::time::Instant::now();
    guard.unlock().await.expect("rlock unlocks");
    let woke = tokio::time::timeout(WAKE_LIMIT, waiter)
        .await
        .expect("Java wakes on the message")
        .expect("joins");
    assert!(woke - released < WAKE_LIMIT);
    assert_eq!(
        hash(&mut redis, "g:r2j").await.get(HASH_42),
        Some(&java.lock_name(7))
    );
    assert!(
        java.get_multi_lock("g:r2j", &[HASH_ORDERS])
            .is_held_by_thread(7)
            .await
            .expect("held")
    );
}

/// Two handles of one group exclude each other on the values they share, and only on those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_value_sets_exclude_each_other() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let other = string_client(&server).await;
    let ab = group(&client, "g:overlap", &["a", "b"]);
    let guard = ab.lock().await.expect("lock");
    let bc = group(&other, "g:overlap", &["b", "c"]);
    assert!(bc.try_lock().await.expect("try").is_none(), "b is taken");
    assert!(bc.is_locked().await.expect("is_locked"), "b is held");
    let cd = group(&other, "g:overlap", &["c", "d"]);
    let disjoint = cd.try_lock().await.expect("try").expect("c and d are free");
    let waiting =
        tokio::spawn(async move { bc.lock().await.map(|guard| guard.field().to_owned()) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.unlock().await.expect("unlock a, b");
    // c is still taken by `cd`: the waiter goes on waiting until that is released too.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "c is still held");
    disjoint.unlock().await.expect("unlock c, d");
    tokio::time::timeout(WAKE_LIMIT, waiting)
        .await
        .expect("woken by the second release")
        .expect("joins")
        .expect("acquired");
}

/// One owner may hold disjoint value sets of a group, and re-enter one; a set that shares values
/// with one it holds otherwise is refused and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_s_value_sets_must_not_overlap() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let owner = Owner::new();
    let ab = group(&client, "g:owner", &["a", "b"]).with_owner(owner);
    let outer = ab.lock().await.expect("lock");
    let c = group(&client, "g:owner", &["c"]).with_owner(owner);
    let beside = c.lock().await.expect("a disjoint set");
    let inner = ab.lock().await.expect("a re-entry");
    let before = hash(&mut redis, "g:owner").await;
    let bc = group(&client, "g:owner", &["b", "c"]).with_owner(owner);
    assert!(matches!(
        bc.try_lock().await,
        Err(Error::ReentryRefused { .. })
    ));
    assert_eq!(hash(&mut redis, "g:owner").await, before, "nothing changed");
    for guard in [inner, beside, outer] {
        guard.unlock().await.expect("unlock");
    }
    assert!(!harness::exists(&mut redis, "g:owner").await);
}

/// Dropping an acquisition while it waits leaves no field behind, and a later release by the
/// holder frees the hash entirely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_waiting_acquisition_leaves_nothing() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let held = held_by_java(&server, "g:cancel", &[HASH_42]).await;
    let lock = group(&client, "g:cancel", &["42", "orders"]);
    let waiting = tokio::spawn(async move { lock.lock().await.map(drop) });
    until_subscribed(&mut redis, "g:cancel").await;
    waiting.abort();
    assert!(waiting.await.is_err_and(|e| e.is_cancelled()));
    assert_eq!(held.unlock(1).await.expect("java unlocks"), Some(1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !harness::exists(&mut redis, "g:cancel").await,
        "no field of the dropped waiter: {:?}",
        hash(&mut redis, "g:cancel").await
    );
}

/// An acquire whose reply is lost (the script ran; the connection broke before its reply came) is
/// undone: the caller gets an error and Redis is left as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_acquire_reply_is_undone() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut config = rlock_redisson::Config::new(proxy.url());
    config.codec = Codec::String;
    config.command_timeout = Duration::from_millis(1000);
    config.retry_delay = Duration::from_millis(50);
    config.retry_max_delay = Duration::from_millis(100);
    let client = Client::with_config(config).await.expect("client connects");
    let mut redis = harness::raw(&server).await;
    // The scripts are loaded first: the lost reply is the acquire's, which ran, not a `NOSCRIPT`.
    let warm = group(&client, "g:warm", &["42"]);
    warm.lock()
        .await
        .expect("lock")
        .unlock()
        .await
        .expect("unlock");
    let lock = group(&client, "g:lost", &["42", "orders"]);
    let before = proxy.lost_replies();
    proxy.lose_reply(Match::command("EVALSHA").with_arg("g:lost"), 1);
    match lock.try_lock().await {
        Err(Error::Timeout { .. } | Error::Backend { .. }) => {}
        other => panic!("expected a reconciled failure, got {other:?}"),
    }
    assert!(
        proxy
            .wait_lost_replies(before + 1, Duration::from_secs(5))
            .await
    );
    assert!(
        eventually(Duration::from_secs(5), async || {
            !harness::exists(&mut redis, "g:lost").await
        })
        .await,
        "the undo ran: {:?}",
        hash(&mut redis, "g:lost").await
    );
    let guard = lock.try_lock().await.expect("try").expect("free again");
    guard.unlock().await.expect("unlock");
}

/// Java's quirks, pinned down: `isHeldByThread` never looks at the first value, and `forceUnlock`
/// fails on a value nobody holds after freeing the ones before it; rlock's checks every value and
/// skips what nobody holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_s_quirks_and_rlock_s_differences() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let java = java(&server).await;
    // Sorted, the first value is HASH_42's: Java holds only the second one.
    let second = java.get_multi_lock("g:quirks", &[HASH_ORDERS]);
    second
        .lock(1, Some(Duration::from_secs(10)))
        .await
        .expect("java locks");
    let both = java.get_multi_lock("g:quirks", &[HASH_42, HASH_ORDERS]);
    assert!(
        both.is_held_by_thread(1).await.expect("java asks"),
        "Java skips the first value"
    );
    assert!(
        both.is_locked().await.expect("java asks"),
        "one value is held"
    );
    // Java's renewal stops at a value the thread does not hold; it renews one it holds.
    assert!(!both.renew(1).await.expect("renew"));
    let before: u64 = redis
        .hget(
            "g:quirks",
            format!("{HASH_ORDERS}:{}:expire_time", java.lock_name(1)),
        )
        .await
        .expect("HGET");
    assert!(second.renew(1).await.expect("renew"));
    let after: u64 = redis
        .hget(
            "g:quirks",
            format!("{HASH_ORDERS}:{}:expire_time", java.lock_name(1)),
        )
        .await
        .expect("HGET");
    assert!(
        after >= before + 15_000,
        "a 10 s lease renewed to the 30 s watchdog timeout"
    );
    assert_eq!(second.name(), "g:quirks");
    assert!(
        both.force_unlock().await.is_err(),
        "Java fails on the value nobody holds"
    );
    // ... after freeing HASH_42 (nothing) it failed at once: HASH_ORDERS is still held.
    assert!(hash(&mut redis, "g:quirks").await.contains_key(HASH_ORDERS));
    let rlock_both = group(&client, "g:quirks", &["42", "orders"]);
    assert!(rlock_both.force_unlock().await.expect("rlock skips it"));
    assert!(!harness::exists(&mut redis, "g:quirks").await);
}

/// A lock named after the group shares the group's channel (docs/protocol.md §8.9): when its
/// waiter subscribed first, Java's group unlock (`0`, "wake one") still wakes the group's waiter
/// too, rather than leaving it asleep until the lease it was given ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_named_after_the_group_leaves_no_group_waiter_asleep() {
    let server = RedisServer::start();
    let client = string_client(&server).await;
    let mut redis = harness::raw(&server).await;
    let held = held_by_java(&server, "g:shared", &[HASH_42]).await;

    // The lock `g:shared` is busy while the group's hash exists: its waiter subscribes first.
    let plain = client.lock("g:shared");
    let plain_waiter = tokio::spawn(async move { plain.lock().await.expect("lock waits") });
    until_subscribed(&mut redis, "g:shared").await;
    let lock = group(&client, "g:shared", &["42"]);
    let group_waiter = tokio::spawn(async move { lock.lock().await.expect("group waits") });
    // Both wait on the channel (one subscription: the same client).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!group_waiter.is_finished() && !plain_waiter.is_finished());

    assert_eq!(held.unlock(1).await.expect("java unlocks"), Some(1));
    let guard = tokio::time::timeout(WAKE_LIMIT, group_waiter)
        .await
        .expect("the group's waiter wakes on the message")
        .expect("joins");
    guard.unlock().await.expect("unlock");
    let plain = tokio::time::timeout(WAKE_LIMIT, plain_waiter)
        .await
        .expect("the lock's waiter wakes too")
        .expect("joins");
    plain.unlock().await.expect("unlock");
}

/// An unlock whose reply is lost is re-sent under the same unlock latch and applies once: of an
/// owner's two holds, one is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_unlock_reply_applies_once() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut config = rlock_redisson::Config::new(proxy.url());
    config.codec = Codec::String;
    config.command_timeout = Duration::from_millis(1000);
    config.retry_delay = Duration::from_millis(50);
    config.retry_max_delay = Duration::from_millis(100);
    let client = Client::with_config(config).await.expect("client connects");
    let mut redis = harness::raw(&server).await;
    let lock = group(&client, "g:unlocked", &["42"]).with_owner(Owner::from_id(7));
    let first = lock.lock().await.expect("lock");
    let second = lock.lock().await.expect("re-enter");
    let count = format!("{HASH_42}:{}:lock_count", first.field());
    assert_eq!(
        hash(&mut redis, "g:unlocked")
            .await
            .get(&count)
            .map(String::as_str),
        Some("2")
    );

    let before = proxy.lost_replies();
    proxy.lose_reply(Match::command("EVALSHA").with_arg("g:unlocked"), 1);
    second
        .unlock()
        .await
        .expect("the re-send settles the unlock");
    assert!(proxy.lost_replies() > before, "the unlock's reply was lost");
    assert_eq!(
        hash(&mut redis, "g:unlocked")
            .await
            .get(&count)
            .map(String::as_str),
        Some("1"),
        "one hold is left"
    );
    first.unlock().await.expect("unlock");
    assert!(!harness::exists(&mut redis, "g:unlocked").await);
}
