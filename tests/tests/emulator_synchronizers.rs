//! The Redisson emulator's synchronizers (`rlock_tests::redisson`: `RSemaphore`,
//! `RPermitExpirableSemaphore`, `RCountDownLatch`, docs/protocol.md §8.5–§8.7) against a real
//! Redis, Java against Java: what Redis holds (keys, raw permit ids, scores) and what travels on
//! the channels (names and payloads byte for byte), permits never exceeded under contention, and
//! waiters on one client woken by another client's release or count-down within [`WAKE_LIMIT`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock_tests::RedisServer;
use rlock_tests::harness::{epoch_ms, raw};
use rlock_tests::redisson::{
    JavaClient, NON_EXPIRING_SCORE, RedissonVersion, count_down_latch_channel, semaphore_channel,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How soon a waiter must be through after another client released (typically a millisecond or
/// two; the margin is for a loaded 2-core machine).
const WAKE_LIMIT: Duration = Duration::from_millis(50);

/// How long a test waits for something that should happen at once.
const SOON: Duration = Duration::from_secs(5);

/// How long a test listens for a message that must not come.
const QUIET: Duration = Duration::from_millis(100);

/// A HEAD client.
async fn java(server: &RedisServer) -> JavaClient {
    java_of(server, RedissonVersion::V4).await
}

/// A client of `version`.
async fn java_of(server: &RedisServer, version: RedissonVersion) -> JavaClient {
    JavaClient::connect(&server.url(), version)
        .await
        .expect("emulated client connects")
}

/// How many connections subscribe `channel` (`PUBSUB NUMSUB`).
async fn subscribers(redis: &mut MultiplexedConnection, channel: &str) -> i64 {
    let (_, count): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(redis)
        .await
        .expect("PUBSUB NUMSUB");
    count
}

/// Waits until `count` connections subscribe `channel`, then a little longer, so that the
/// waiters behind them have tried once more and sleep on their latch.
async fn until_subscribed(redis: &mut MultiplexedConnection, channel: &str, count: i64) {
    let deadline = Instant::now() + SOON;
    while subscribers(redis, channel).await < count {
        assert!(Instant::now() < deadline, "nobody subscribed {channel}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// When a spawned waiter got through; it must [`SOON`].
async fn woken(waiter: JoinHandle<Instant>) -> Instant {
    tokio::time::timeout(SOON, waiter)
        .await
        .expect("the waiter was woken")
        .expect("waiter task")
}

/// Asserts that `woke` came within [`WAKE_LIMIT`] of `released`.
fn assert_prompt(released: Instant, woke: Instant) {
    let latency = woke.saturating_duration_since(released);
    assert!(latency < WAKE_LIMIT, "woken after {latency:?}");
}

/// Every message published on the server (`PSUBSCRIBE *`), as channel and payload bytes.
struct Listener {
    messages: mpsc::UnboundedReceiver<(Vec<u8>, Vec<u8>)>,
    task: JoinHandle<()>,
}

impl Listener {
    /// Listens from now on (the subscription is confirmed on return).
    async fn start(server: &RedisServer) -> Self {
        let mut pubsub = server.client().get_async_pubsub().await.expect("pubsub");
        pubsub.psubscribe("*").await.expect("PSUBSCRIBE");
        let (sender, messages) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut stream = pubsub.into_on_message();
            while let Some(message) = stream.next().await {
                let channel: Vec<u8> = message.get_channel().expect("channel name");
                let payload = message.get_payload_bytes().to_vec();
                if sender.send((channel, payload)).is_err() {
                    return;
                }
            }
        });
        Self { messages, task }
    }

    /// Asserts that the next message is `payload` on `channel`, byte for byte.
    async fn expect(&mut self, channel: &str, payload: &str) {
        let message = tokio::time::timeout(SOON, self.messages.recv())
            .await
            .expect("a message comes")
            .expect("listener runs");
        let expected = (channel.as_bytes().to_vec(), payload.as_bytes().to_vec());
        assert_eq!(message, expected, "{:?}", lossy(&message));
    }

    /// Asserts that no message comes for [`QUIET`].
    async fn assert_quiet(&mut self) {
        let message = tokio::time::timeout(QUIET, self.messages.recv()).await;
        assert!(message.is_err(), "unexpected message {message:?}");
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lossy((channel, payload): &(Vec<u8>, Vec<u8>)) -> (String, String) {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (text(channel), text(payload))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ===== RSemaphore (§8.5) =====

/// Eight tasks on four clients share two permits, with both waiting calls: never more than two
/// hold at once, and every permit comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_permits_are_never_exceeded() {
    const PERMITS: usize = 2;
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(java(&server).await);
    }
    let setup = clients[0].get_semaphore("sem:contended");
    assert!(setup.try_set_permits(2).await.expect("trySetPermits"));
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().cycle().take(8).enumerate() {
        let semaphore = client.get_semaphore("sem:contended");
        let (holding, most) = (holding.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..5 {
                if (i + round) % 2 == 0 {
                    semaphore.acquire(1).await.expect("acquire");
                } else {
                    let taken = semaphore
                        .try_acquire_for(1, SOON)
                        .await
                        .expect("tryAcquire");
                    assert!(taken, "tryAcquire(wait) timed out");
                }
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _ = holding.fetch_sub(1, Ordering::SeqCst);
                semaphore.release(1).await.expect("release");
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(SOON, task)
            .await
            .expect("no waiter stalls")
            .expect("task");
    }
    assert_eq!(most.load(Ordering::SeqCst), PERMITS);
    assert_eq!(setup.available_permits().await.expect("GET"), 2);
}

/// A waiter in `acquire` and one in `tryAcquire(wait)` on one client are each through within
/// [`WAKE_LIMIT`] of another client's `release`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_release_wakes_a_waiter_on_another_client() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let (a, b) = (java(&server).await, java(&server).await);
    let releaser = a.get_semaphore("sem:wake");
    assert!(releaser.try_set_permits(0).await.expect("trySetPermits"));
    for timed in [false, true] {
        let semaphore = b.get_semaphore("sem:wake");
        let waiter = tokio::spawn(async move {
            if timed {
                let taken = semaphore
                    .try_acquire_for(1, SOON)
                    .await
                    .expect("tryAcquire");
                assert!(taken);
            } else {
                semaphore.acquire(1).await.expect("acquire");
            }
            Instant::now()
        });
        until_subscribed(&mut redis, releaser.channel(), 1).await;
        let released = Instant::now();
        releaser.release(1).await.expect("release");
        assert_prompt(released, woken(waiter).await);
    }
    assert_eq!(releaser.available_permits().await.expect("GET"), 0);
}

/// A release of 2 carries the new count 2, which wakes both waiters of one client
/// (`min(subscribers, 2)`); the lock rule would ignore it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_message_wakes_as_many_local_waiters_as_it_counts() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let (a, b) = (java(&server).await, java(&server).await);
    let releaser = a.get_semaphore("sem:many");
    assert!(releaser.try_set_permits(0).await.expect("trySetPermits"));
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let semaphore = b.get_semaphore("sem:many");
            tokio::spawn(async move {
                semaphore.acquire(1).await.expect("acquire");
                Instant::now()
            })
        })
        .collect();
    // Both share one entry, so one subscription.
    until_subscribed(&mut redis, releaser.channel(), 1).await;
    let mut listener = Listener::start(&server).await;
    let released = Instant::now();
    releaser.release(2).await.expect("release");
    listener.expect(releaser.channel(), "2").await;
    for waiter in waiters {
        assert_prompt(released, woken(waiter).await);
    }
    assert_eq!(subscribers(&mut redis, releaser.channel()).await, 0);
}

/// Key and channel names byte for byte, the values written (integers, no decimal point) and
/// what every call publishes: the new count, or nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_keys_and_messages_are_javas() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let java = java(&server).await;
    let mut listener = Listener::start(&server).await;
    let semaphore = java.get_semaphore("sem");
    assert_eq!(semaphore.channel(), "redisson_sc:{sem}");
    assert_eq!(semaphore_channel("a{b}c"), "redisson_sc:a{b}c");
    assert_eq!(java.get_semaphore("a{b}c").channel(), "redisson_sc:a{b}c");

    assert!(semaphore.try_set_permits(2).await.expect("trySetPermits"));
    listener.expect("redisson_sc:{sem}", "2").await;
    assert!(!semaphore.try_set_permits(5).await.expect("trySetPermits"));
    assert!(semaphore.try_acquire(2).await.expect("tryAcquire"));
    assert!(!semaphore.try_acquire(1).await.expect("tryAcquire"));
    assert!(semaphore.try_acquire(0).await.expect("0 permits"));
    listener.assert_quiet().await;
    semaphore.release(3).await.expect("release");
    listener.expect("redisson_sc:{sem}", "3").await;
    semaphore.add_permits(-4).await.expect("addPermits");
    listener.expect("redisson_sc:{sem}", "-1").await;
    semaphore.add_permits(6).await.expect("addPermits");
    listener.expect("redisson_sc:{sem}", "5").await;
    let raw: Vec<u8> = redis.get("sem").await.expect("GET");
    assert_eq!(raw, b"5");
    assert!(
        semaphore
            .release_if_exists(1)
            .await
            .expect("releaseIfExists")
    );
    listener.expect("redisson_sc:{sem}", "6").await;
    assert_eq!(semaphore.drain_permits().await.expect("drain"), 6);
    assert_eq!(semaphore.available_permits().await.expect("GET"), 0);
    let raw: Vec<u8> = redis.get("sem").await.expect("GET");
    assert_eq!(raw, b"0");
    listener.assert_quiet().await;

    let missing = java.get_semaphore("sem:missing");
    assert!(!missing.release_if_exists(1).await.expect("releaseIfExists"));
    assert_eq!(missing.drain_permits().await.expect("drain"), 0);
    assert_eq!(missing.available_permits().await.expect("GET"), 0);
    let exists: bool = redis.exists("sem:missing").await.expect("EXISTS");
    assert!(!exists);
    let ttl = Duration::from_secs(10);
    let expiring = java.get_semaphore("sem:ttl");
    assert!(
        expiring
            .try_set_permits_with_ttl(4, ttl)
            .await
            .expect("set")
    );
    listener.expect("redisson_sc:{sem:ttl}", "4").await;
    let pttl: i64 = redis.pttl("sem:ttl").await.expect("PTTL");
    assert!((9_000..=10_000).contains(&pttl), "{pttl}");
    listener.assert_quiet().await;
}

/// ≤3.21 publishes with a literal `publish` and sends no publish command; 3.22+ passes it as the
/// last argument (`MONITOR` shows both); the message is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publish_command_is_an_argument_from_3_22() {
    let server = RedisServer::start();
    for (version, argument) in [(RedissonVersion::V3_21, false), (RedissonVersion::V4, true)] {
        let java = java_of(&server, version).await;
        let semaphore = java.get_semaphore("sem:publish");
        let monitor = server.client().get_async_monitor().await.expect("MONITOR");
        let mut lines = monitor.into_on_message::<String>();
        semaphore.release(1).await.expect("release");
        let (mut script_call, mut published) = (None, None);
        while script_call.is_none() || published.is_none() {
            let line = tokio::time::timeout(SOON, lines.next())
                .await
                .expect("MONITOR shows the release")
                .expect("MONITOR stream");
            if line.contains("\"redisson_sc:{sem:publish}\"") {
                if line.contains(" lua] ") {
                    published = Some(line);
                } else {
                    script_call = Some(line);
                }
            }
        }
        let (script_call, published) = (
            script_call.unwrap_or_default(),
            published.unwrap_or_default(),
        );
        assert_eq!(
            script_call.ends_with("\"1\" \"PUBLISH\""),
            argument,
            "{version:?}: {script_call}"
        );
        let command = if argument { "PUBLISH" } else { "publish" };
        let expected = format!("\"{command}\" \"redisson_sc:{{sem:publish}}\"");
        assert!(published.contains(&expected), "{version:?}: {published}");
    }
}

/// Every emulated version runs every synchronizer script (the ≤3.21 literal `publish` puts the
/// permit ids of an acquire one argument earlier) with the same data and messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_runs_the_synchronizers_alike() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let mut listener = Listener::start(&server).await;
    for version in RedissonVersion::ALL {
        let java = java_of(&server, version).await;
        let name = format!("sync:{version:?}");
        let semaphore = java.get_semaphore(&name);
        semaphore.release(2).await.expect("release");
        listener.expect(semaphore.channel(), "2").await;

        let expirable = java.get_permit_expirable_semaphore(format!("{name}:pes"));
        assert!(expirable.try_set_permits(2).await.expect("trySetPermits"));
        listener.expect(expirable.channel(), "2").await;
        let ids = expirable.acquire_many(2, None).await.expect("acquire");
        let members: Vec<Vec<u8>> = redis
            .zrange(expirable.timeout_name(), 0, -1)
            .await
            .expect("ZRANGE");
        let mut stored: Vec<String> = members.iter().map(|member| hex(member)).collect();
        let mut expected = ids.clone();
        stored.sort();
        expected.sort();
        assert_eq!(stored, expected, "{version:?}");
        assert_eq!(expirable.try_release_many(&ids).await.expect("ids"), 2);
        listener.expect(expirable.channel(), "2").await;

        let latch = java.get_count_down_latch(format!("{name}:cdl"));
        assert!(latch.try_set_count(1).await.expect("trySetCount"));
        listener.expect(latch.channel(), "1").await;
        latch.count_down().await.expect("countDown");
        listener.expect(latch.channel(), "0").await;
    }
}

// ===== RPermitExpirableSemaphore (§8.6) =====

/// Permit ids are 32 lower-case hex characters, stored as their 16 raw bytes with the expiry (or
/// the non-expiring score) in `{N}:timeout`; the lease calls read and move those scores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_ids_are_stored_as_16_raw_bytes() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let java = java(&server).await;
    let semaphore = java.get_permit_expirable_semaphore("pes");
    assert_eq!(semaphore.timeout_name(), "{pes}:timeout");
    assert_eq!(semaphore.channel(), "redisson_sc:{pes}");
    let braced = java.get_permit_expirable_semaphore("a{b}c");
    assert_eq!(braced.timeout_name(), "a{b}c:timeout");
    assert!(semaphore.try_set_permits(3).await.expect("trySetPermits"));

    let lease = Duration::from_secs(60);
    let before = epoch_ms();
    let leased = semaphore.acquire(Some(lease)).await.expect("acquire");
    let kept = semaphore.acquire(None).await.expect("acquire");
    for id in [&leased, &kept] {
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    }
    let members: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGE")
        .arg("{pes}:timeout")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut redis)
        .await
        .expect("ZRANGE");
    assert!(members.iter().all(|(member, _)| member.len() == 16));
    let ids: Vec<String> = members.iter().map(|(member, _)| hex(member)).collect();
    assert_eq!(ids, [leased.clone(), kept.clone()]);
    let expiry: u64 = members[0].1.parse().expect("integral score");
    assert!((before + 60_000..=epoch_ms() + 60_000).contains(&expiry));
    assert_eq!(members[1].1, NON_EXPIRING_SCORE);

    let remaining = semaphore.lease_time(&leased).await.expect("lease");
    assert!(remaining.is_some_and(|ms| (59_000..=60_000).contains(&ms)));
    assert_eq!(semaphore.lease_time(&kept).await.expect("lease"), Some(-1));
    let unknown = "00".repeat(16);
    assert_eq!(semaphore.lease_time(&unknown).await.expect("lease"), None);
    let longer = Duration::from_secs(120);
    assert!(
        semaphore
            .update_lease_time(&leased, longer)
            .await
            .expect("update")
    );
    assert!(
        !semaphore
            .update_lease_time(&unknown, longer)
            .await
            .expect("update")
    );
    let remaining = semaphore.lease_time(&leased).await.expect("lease");
    assert!(remaining.is_some_and(|ms| (119_000..=120_000).contains(&ms)));

    assert_eq!(semaphore.available_permits().await.expect("available"), 1);
    assert_eq!(semaphore.acquired_permits().await.expect("acquired"), 2);
    assert_eq!(semaphore.permits().await.expect("permits"), 3);
    semaphore.release(&leased).await.expect("release");
    assert!(semaphore.release(&leased).await.is_err(), "released twice");
    assert!(semaphore.try_release(&kept).await.expect("tryRelease"));
    assert_eq!(semaphore.available_permits().await.expect("available"), 3);
    let raw: Vec<u8> = redis.get("pes").await.expect("GET");
    assert_eq!(raw, b"3");
}

/// An expired permit stays in the set until the next call that looks: a waiter on another client
/// sleeps only until its expiry (no message comes), then its acquire reclaims it (publishing the
/// new count) and takes it. A late release of it returns false but counts it back in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_permits_are_reclaimed_by_the_next_acquire() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let (a, b) = (java(&server).await, java(&server).await);
    let holder = a.get_permit_expirable_semaphore("pes:expiry");
    assert!(holder.try_set_permits(1).await.expect("trySetPermits"));
    let lease = Duration::from_millis(150);
    let expired = holder.acquire(Some(lease)).await.expect("acquire");
    let expires = Instant::now() + lease;
    let mut listener = Listener::start(&server).await;

    let other = b.get_permit_expirable_semaphore("pes:expiry");
    let id = other
        .try_acquire(SOON, Some(Duration::from_secs(30)))
        .await
        .expect("tryAcquire")
        .expect("the expired permit is taken");
    let late = Instant::now().saturating_duration_since(expires);
    assert!(late < WAKE_LIMIT, "acquired {late:?} after the expiry");
    listener.expect("redisson_sc:{pes:expiry}", "1").await;
    let members: Vec<Vec<u8>> = redis
        .zrange("{pes:expiry}:timeout", 0, -1)
        .await
        .expect("ZRANGE");
    let stored: Vec<String> = members.iter().map(|member| hex(member)).collect();
    assert_eq!(stored, [id.as_str()]);
    assert_eq!(holder.lease_time(&expired).await.expect("lease"), None);
    assert!(!holder.try_release(&expired).await.expect("tryRelease"));

    // A permit that expired but was not reclaimed yet: released late, it still counts.
    let short = holder
        .try_acquire(Duration::ZERO, None)
        .await
        .expect("tryAcquire");
    assert_eq!(short, None, "the only permit is taken");
    other.release(&id).await.expect("release");
    listener.expect("redisson_sc:{pes:expiry}", "1").await;
    let brief = holder
        .acquire(Some(Duration::from_millis(20)))
        .await
        .expect("acquire");
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(!holder.try_release(&brief).await.expect("tryRelease"));
    listener.expect("redisson_sc:{pes:expiry}", "1").await;
    assert_eq!(holder.available_permits().await.expect("available"), 1);
}

/// A `tryRelease` on one client wakes a `tryAcquire(wait)` waiter on another within
/// [`WAKE_LIMIT`] (the held permit never expires, so only the message can wake it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_release_wakes_a_waiter_on_another_client() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let (a, b) = (java(&server).await, java(&server).await);
    let holder = a.get_permit_expirable_semaphore("pes:wake");
    assert!(holder.try_set_permits(1).await.expect("trySetPermits"));
    let held = holder.acquire(None).await.expect("acquire");
    let other = b.get_permit_expirable_semaphore("pes:wake");
    let waiter = tokio::spawn(async move {
        let id = other.try_acquire(SOON, None).await.expect("tryAcquire");
        assert!(id.is_some(), "tryAcquire(wait) timed out");
        Instant::now()
    });
    until_subscribed(&mut redis, holder.channel(), 1).await;
    let released = Instant::now();
    assert!(holder.try_release(&held).await.expect("tryRelease"));
    assert_prompt(released, woken(waiter).await);
}

/// The list release is all or nothing and publishes how many it released; `setPermits` and
/// `addPermits` publish the target and the amount added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_counts_and_list_release() {
    let server = RedisServer::start();
    let java = java(&server).await;
    let semaphore = java.get_permit_expirable_semaphore("pes:counts");
    let channel = "redisson_sc:{pes:counts}";
    let mut listener = Listener::start(&server).await;
    semaphore.set_permits(4).await.expect("setPermits");
    listener.expect(channel, "4").await;
    let ids = semaphore.acquire_many(3, None).await.expect("acquire");
    assert_eq!(ids.len(), 3);
    semaphore
        .set_permits(4)
        .await
        .expect("setPermits (unchanged)");
    listener.assert_quiet().await;
    semaphore.set_permits(6).await.expect("setPermits");
    listener.expect(channel, "6").await;
    assert_eq!(semaphore.available_permits().await.expect("available"), 3);
    semaphore.add_permits(2).await.expect("addPermits");
    listener.expect(channel, "2").await;
    semaphore.add_permits(-1).await.expect("addPermits");
    listener.assert_quiet().await;
    assert_eq!(semaphore.permits().await.expect("permits"), 7);

    let unknown = "ff".repeat(16);
    let with_unknown = [ids[0].clone(), unknown];
    let released = semaphore.try_release_many(&with_unknown).await;
    assert_eq!(released.expect("tryRelease(ids)"), 0);
    assert_eq!(semaphore.acquired_permits().await.expect("acquired"), 3);
    listener.assert_quiet().await;
    assert_eq!(semaphore.try_release_many(&ids[..2]).await.expect("ids"), 2);
    listener.expect(channel, "2").await;
    assert_eq!(semaphore.acquired_permits().await.expect("acquired"), 1);
    assert_eq!(semaphore.available_permits().await.expect("available"), 6);
    assert!(!semaphore.try_set_permits(1).await.expect("trySetPermits"));
}

// ===== RCountDownLatch (§8.7) =====

/// `await` and `await(timeout)` waiters on one client open within [`WAKE_LIMIT`] of another
/// client's count-down to zero; the count-downs before it publish nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_to_zero_opens_waiters_on_another_client() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let (a, b) = (java(&server).await, java(&server).await);
    let counter = a.get_count_down_latch("cdl:open");
    assert!(counter.try_set_count(2).await.expect("trySetCount"));
    let waiters: Vec<_> = [false, true]
        .into_iter()
        .map(|timed| {
            let latch = b.get_count_down_latch("cdl:open");
            tokio::spawn(async move {
                if timed {
                    assert!(latch.await_for(SOON).await.expect("await(timeout)"));
                } else {
                    latch.await_zero().await.expect("await");
                }
                Instant::now()
            })
        })
        .collect();
    until_subscribed(&mut redis, counter.channel(), 1).await;
    let mut listener = Listener::start(&server).await;
    counter.count_down().await.expect("countDown");
    listener.assert_quiet().await;
    assert_eq!(counter.count().await.expect("getCount"), 1);
    assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
    let released = Instant::now();
    counter.count_down().await.expect("countDown");
    for waiter in waiters {
        assert_prompt(released, woken(waiter).await);
    }
    listener.expect(counter.channel(), "0").await;
    let exists: bool = redis.exists("cdl:open").await.expect("EXISTS");
    assert!(!exists, "the key goes at zero");
    assert!(
        b.get_count_down_latch("cdl:open")
            .await_for(Duration::ZERO)
            .await
            .expect("await")
    );
}

/// The channel always gets braces; `trySetCount` and `delete` publish `1`; a count-down of a
/// missing latch publishes nothing and leaves no key; `await(timeout)` gives up, and numbers
/// other than `0` do not open its latch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_down_latch_keys_and_messages_are_javas() {
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    let java = java(&server).await;
    let mut listener = Listener::start(&server).await;
    let latch = java.get_count_down_latch("cdl");
    assert_eq!(latch.channel(), "redisson_countdownlatch__channel__{cdl}");
    assert_eq!(
        count_down_latch_channel("a{b}c"),
        "redisson_countdownlatch__channel__{a{b}c}"
    );
    assert_eq!(latch.count().await.expect("getCount"), 0);
    latch.count_down().await.expect("countDown");
    let exists: bool = redis.exists("cdl").await.expect("EXISTS");
    assert!(!exists);
    listener.assert_quiet().await;

    assert!(latch.try_set_count(3).await.expect("trySetCount"));
    listener.expect(latch.channel(), "1").await;
    assert!(!latch.try_set_count(5).await.expect("trySetCount"));
    let raw: Vec<u8> = redis.get("cdl").await.expect("GET");
    assert_eq!(raw, b"3");
    let waiting = tokio::spawn({
        let latch = latch.clone();
        async move { latch.await_for(Duration::from_millis(300)).await }
    });
    until_subscribed(&mut redis, latch.channel(), 1).await;
    let _: i64 = redis.publish(latch.channel(), "5").await.expect("PUBLISH");
    listener.expect(latch.channel(), "5").await;
    let timed_out = tokio::time::timeout(SOON, waiting)
        .await
        .expect("await(timeout) returns")
        .expect("task");
    assert!(
        !timed_out.expect("await(timeout)"),
        "gave up at its timeout"
    );

    assert!(latch.delete().await.expect("delete"));
    listener.expect(latch.channel(), "1").await;
    assert!(!latch.delete().await.expect("delete"));
    listener.assert_quiet().await;
}
