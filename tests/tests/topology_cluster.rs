//! rlock on a real local Redis Cluster (3 masters, 3 replicas): sharded pub/sub exactly as Redisson
//! uses it, wake-ups, per-slot watchdog batches, replica sync, and a slot migration mid-wait.

use std::time::Duration;

use redis::Commands;
use rlock_redisson::{Client, ShardedPubSub};
use rlock_tests::harness::raw_blocking;
use rlock_tests::harness::{acquired_after, eventually, spawn_waiter};
use rlock_tests::topology::Cluster;
use tokio::time::Instant;

/// Calls of `command` on every master, from `INFO commandstats`.
fn calls_on_masters(cluster: &Cluster, command: &str) -> u64 {
    cluster
        .masters()
        .iter()
        .map(|master| {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut raw_blocking(master))
                .expect("INFO commandstats");
            info.lines()
                .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
                .and_then(|rest| rest.split(',').next()?.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

fn shard_subscribers(cluster: &Cluster, channel: &str) -> i64 {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(&mut raw_blocking(cluster.master_of(channel)))
        .expect("PUBSUB SHARDNUMSUB");
    counts.first().map_or(0, |(_, n)| *n)
}

async fn cluster_client(
    cluster: &Cluster,
    tweak: impl FnOnce(&mut rlock_redisson::Config),
) -> Client {
    let mut config = cluster.config();
    tweak(&mut config);
    Client::with_config(config).await.expect("cluster client")
}

/// Holds `name` with `holder`, parks a waiter of `waiter` on it, unlocks, and returns how long after
/// the unlock the waiter had it.
async fn hand_off(
    holder: &Client,
    waiter: &Client,
    name: &str,
    subscribed: impl Fn() -> bool,
) -> Duration {
    let guard = holder.lock(name).lock().await.expect("holder locks");
    let waiting = spawn_waiter(waiter.lock(name));
    assert!(
        eventually(Duration::from_secs(10), async || subscribed()).await,
        "the waiter subscribed"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    guard.unlock().await.expect("holder unlocks");
    let (after, guard) = acquired_after(waiting, Instant::now(), Duration::from_secs(10)).await;
    guard.unlock().await.expect("waiter unlocks");
    after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_locks_wake_over_sharded_pubsub() {
    let cluster = Cluster::start(3, 1);
    let holder = cluster_client(&cluster, |_| {}).await;
    let waiter = cluster_client(&cluster, |_| {}).await;
    assert!(
        holder.sharded_pubsub(),
        "AUTO picks sharded pub/sub on Redis 7"
    );

    let spublish_before = calls_on_masters(&cluster, "spublish");
    let publish_before = calls_on_masters(&cluster, "publish");
    let mut delays = Vec::new();
    for name in ["cluster:a", "cluster:b", "cluster:{tag}c", "cluster:d"] {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let channel = if name.contains('{') {
            format!("redisson_lock__channel:{name}")
        } else {
            channel
        };
        delays.push(
            hand_off(&holder, &waiter, name, || {
                shard_subscribers(&cluster, &channel) == 1
            })
            .await,
        );
    }
    eprintln!("cluster hand-offs after unlock: {delays:?}");
    assert!(
        delays.iter().all(|d| *d < Duration::from_millis(500)),
        "{delays:?}"
    );
    assert!(
        calls_on_masters(&cluster, "spublish") >= spublish_before + 4,
        "unlocks use SPUBLISH"
    );
    assert_eq!(
        calls_on_masters(&cluster, "publish"),
        publish_before,
        "and never PUBLISH"
    );
    assert!(
        calls_on_masters(&cluster, "ssubscribe") >= 4,
        "waiters use SSUBSCRIBE"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_pubsub_off_uses_classic_publish() {
    let cluster = Cluster::start(3, 0);
    let off = |config: &mut rlock_redisson::Config| config.sharded_pubsub = ShardedPubSub::Off;
    let holder = cluster_client(&cluster, off).await;
    let waiter = cluster_client(&cluster, off).await;
    assert!(!holder.sharded_pubsub());
    let channel = "redisson_lock__channel:{cluster:off}";
    let numsub = || {
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut raw_blocking(cluster.master_of(channel)))
            .expect("PUBSUB NUMSUB");
        counts.first().is_some_and(|(_, n)| *n == 1)
    };
    let delay = hand_off(&holder, &waiter, "cluster:off", numsub).await;
    assert!(delay < Duration::from_millis(500), "{delay:?}");
    assert_eq!(calls_on_masters(&cluster, "spublish"), 0);
    assert!(calls_on_masters(&cluster, "publish") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_locks_in_every_slot() {
    let cluster = Cluster::start(3, 1);
    let client = cluster_client(&cluster, |config| {
        config.watchdog_timeout = Duration::from_millis(900)
    })
    .await;
    let names: Vec<String> = (0..30).map(|i| format!("cluster:watchdog:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name.as_str()).lock().await.expect("lock"));
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    for name in &names {
        let pttl: i64 = raw_blocking(cluster.master_of(name))
            .pttl(name)
            .expect("pttl");
        assert!(pttl > 0, "{name} renewed on its own master (pttl {pttl})");
    }
    assert!(guards.iter().all(|g| !g.is_lease_lost()));
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }
    assert_eq!(client.stats().renewing_locks, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migration_during_a_wait_does_not_lose_the_waiter() {
    let cluster = Cluster::start(3, 0);
    let holder = cluster_client(&cluster, |_| {}).await;
    let waiter = cluster_client(&cluster, |_| {}).await;
    let name = "cluster:migrating";
    let channel = "redisson_lock__channel:{cluster:migrating}";
    let guard = holder.lock(name).lock().await.expect("holder locks");
    let waiting = spawn_waiter(waiter.lock(name));
    assert!(
        eventually(Duration::from_secs(10), async || shard_subscribers(
            &cluster, channel
        ) == 1)
        .await
    );

    let from = cluster.master_of(name).port();
    let to = cluster
        .masters()
        .iter()
        .find(|m| m.port() != from)
        .expect("another master");
    cluster.migrate_slot_of(name, to);
    assert_eq!(cluster.master_of(name).port(), to.port());
    // The holder's hold moved with the slot; its waiter follows the channel to the new owner.
    assert!(
        eventually(Duration::from_secs(15), async || shard_subscribers(
            &cluster, channel
        ) == 1)
        .await,
        "the waiter's sharded subscription moved to the slot's new master"
    );
    guard
        .unlock()
        .await
        .expect("holder unlocks on the new master");
    let (after, guard) = acquired_after(waiting, Instant::now(), Duration::from_secs(10)).await;
    eprintln!("acquired {after:?} after the unlock that followed the migration");
    assert!(after < Duration::from_secs(3));
    guard.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_lock_writes_wait_for_replicas_and_roll_back_without_them() {
    let cluster = Cluster::start(3, 1);
    let client = cluster_client(&cluster, |config| {
        config.replicas_sync_timeout = Duration::from_millis(200);
        config.retry_attempts = 1;
        config.retry_delay = Duration::from_millis(50);
        config.retry_max_delay = Duration::from_millis(100);
    })
    .await;
    let name = "cluster:wait";
    client
        .lock(name)
        .lock()
        .await
        .expect("lock")
        .unlock()
        .await
        .expect("unlock");
    assert!(
        calls_on_masters(&cluster, "wait") >= 2,
        "acquire and unlock were followed by WAIT"
    );

    // Freeze the replica of the lock's master: WAIT sees no acknowledgement.
    let master = cluster.master_of(name).port();
    let replica = cluster.nodes[3..]
        .iter()
        .find(|replica| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut raw_blocking(replica))
                .expect("INFO replication");
            info.contains(&format!("master_port:{master}"))
        })
        .expect("the master's replica");
    replica.pause();
    let outcome = client.lock(name).try_lock().await;
    replica.resume();
    assert!(
        matches!(
            outcome,
            Err(rlock_redisson::Error::NoSyncedReplicas { replicas: 1, .. })
        ),
        "{outcome:?}"
    );
    assert!(
        eventually(Duration::from_secs(5), async || !raw_blocking(
            cluster.master_of(name)
        )
        .exists::<_, bool>(name)
        .expect("exists"))
        .await,
        "the unacknowledged acquire was undone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_on_many_locks_in_many_slots_all_wake_promptly() {
    let cluster = Cluster::start(3, 0);
    let holder = cluster_client(&cluster, |_| {}).await;
    let waiter = cluster_client(&cluster, |_| {}).await;
    // Parked together, so their sharded subscriptions go out in the same batch.
    let names: Vec<String> = (0..12).map(|i| format!("cluster:many:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(
            holder
                .lock(name.as_str())
                .lock()
                .await
                .expect("holder locks"),
        );
    }
    let waiting: Vec<_> = names
        .iter()
        .map(|name| spawn_waiter(waiter.lock(name.as_str())))
        .collect();
    let all_subscribed = eventually(Duration::from_secs(5), async || {
        names.iter().all(|name| {
            shard_subscribers(&cluster, &format!("redisson_lock__channel:{{{name}}}")) == 1
        })
    })
    .await;
    assert!(
        all_subscribed,
        "every channel is subscribed on its own slot's master"
    );
    let released = Instant::now();
    for guard in guards {
        guard.unlock().await.expect("holder unlocks");
    }
    for waiting in waiting {
        let (after, guard) = acquired_after(waiting, released, Duration::from_secs(10)).await;
        assert!(
            after < Duration::from_secs(1),
            "woken {after:?} after the unlocks"
        );
        guard.unlock().await.expect("unlock");
    }
}

/// The family on a cluster: every kind's scripts stay in one slot (their keys and channels share the
/// lock's hash tag), waiters wake over sharded pub/sub (a fair waiter on its own channel, readers on
/// the read-write lock's), and the watchdog renews read holds with their timeout keys per slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_works_on_a_cluster_with_sharded_pubsub() {
    let cluster = Cluster::start(3, 0);
    let watchdog = Duration::from_millis(900);
    let holder = cluster_client(&cluster, |config| config.watchdog_timeout = watchdog).await;
    let waiter = cluster_client(&cluster, |_| {}).await;
    assert!(holder.sharded_pubsub());
    let woken = |since: Instant| since.elapsed() < Duration::from_secs(2);

    // Fair: the waiter listens on its own sharded channel and is woken by the unlock.
    let fair = holder.fair_lock("family:fair").lock().await.expect("fair");
    let started = Instant::now();
    let waiting = tokio::spawn({
        let lock = waiter.fair_lock("family:fair");
        async move { lock.lock().await.expect("fair waiter") }
    });
    let queued = eventually(Duration::from_secs(5), async || {
        !waiter
            .fair_lock("family:fair")
            .queue()
            .await
            .expect("queue")
            .is_empty()
    })
    .await;
    assert!(queued, "the waiter queued");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let unlocked = Instant::now();
    fair.unlock().await.expect("unlock");
    let next = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the fair waiter is woken")
        .expect("task");
    assert!(woken(unlocked), "{:?} after the unlock", unlocked.elapsed());
    next.unlock().await.expect("unlock");
    assert!(started.elapsed() < Duration::from_secs(5));

    // Read-write: readers renewed past three watchdog timeouts, a writer woken after them.
    let rw = holder.read_write_lock("family:rw");
    let (a, b) = (
        rw.read().lock().await.expect("read"),
        rw.read().lock().await.expect("read"),
    );
    let writing = tokio::spawn({
        let write = waiter.read_write_lock("family:rw").write();
        async move { write.lock().await.expect("writer") }
    });
    tokio::time::sleep(watchdog * 3).await;
    assert!(
        !a.is_lease_lost() && !b.is_lease_lost(),
        "read holds renewed"
    );
    assert!(!writing.is_finished());
    a.unlock().await.expect("unlock");
    let unlocked = Instant::now();
    b.unlock().await.expect("unlock");
    let w = tokio::time::timeout(Duration::from_secs(5), writing)
        .await
        .expect("the writer is woken")
        .expect("task");
    assert!(woken(unlocked));
    w.unlock().await.expect("unlock");

    // Fenced and spin: tokens increase, and a spin lock polls its way in.
    let first = holder
        .fenced_lock("family:fenced")
        .lock()
        .await
        .expect("fenced");
    let token = *first.token();
    first.unlock().await.expect("unlock");
    let second = waiter
        .fenced_lock("family:fenced")
        .lock()
        .await
        .expect("fenced");
    assert!(*second.token() > token);
    second.unlock().await.expect("unlock");
    let spin = holder
        .spin_lock("family:spin")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .expect("spin");
    let polled = waiter
        .spin_lock("family:spin")
        .lock()
        .await
        .expect("spin waiter");
    assert!(
        spin.is_lease_lost(),
        "the poller got in once the lease ran out"
    );
    polled.unlock().await.expect("unlock");
}
