//! Java interop in a Redis Cluster (docs/protocol.md §2.6, §11.6): lock commands go to the master
//! of the lock's slot, and unlock messages travel on sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`)
//! exactly when Redisson's would (3.22+ on Redis 7). Each test starts a 3-master cluster.

use std::time::Duration;

use rlock_redisson::ShardedPubSub;
use rlock_tests::redisson::{RedissonVersion, lock_channel};
use rlock_tests::topology::Cluster;
use tokio::time::Instant;

use crate::support::{
    InteropKind, JAVA_VERSION, Party, Redis, Side, Site, Topology, both_directions, woken,
};
use crate::wakeup::{rounds, wake_rounds};

/// Java (AUTO: sharded) and rlock (AUTO: sharded) wake each other within milliseconds; while one
/// waits, its channel is a shard channel on the lock's master and no classic channel exists.
async fn sharded_unlocks_wake_the_other_side(holder: Side, waiter: Side) {
    let cluster = Cluster::start(3, 0);
    let name = "interop:cluster";
    let holder = Party::cluster(holder, &cluster, JAVA_VERSION, ShardedPubSub::Auto).await;
    let waiter = Party::cluster(waiter, &cluster, JAVA_VERSION, ShardedPubSub::Auto).await;
    let mut redis = Redis::connect_cluster(cluster.master_of(name), cluster.masters()).await;

    let hold = holder.lock(name).lock(1).await;
    let waiting = waiter.lock(name).spawn_lock(2);
    let _ = redis.wait_parked(&lock_channel(name), 1).await;
    let channel = lock_channel(name).into_bytes();
    assert_eq!(
        redis.shard_channels().await,
        vec![channel],
        "SSUBSCRIBE on the lock's master"
    );
    assert_eq!(classic_channels(&cluster).await, Vec::<Vec<u8>>::new());
    hold.release().await;
    woken(waiting).await.1.release().await;

    let setup = "cluster, sharded";
    let rounds = rounds(InteropKind::REENTRANT);
    wake_rounds(
        InteropKind::REENTRANT,
        &holder,
        &waiter,
        &mut redis,
        name,
        setup,
        rounds,
    )
    .await;
}

both_directions!(sharded_unlocks_wake_the_other_side);

/// The default suite's share of the kind × direction × topology matrix (the rest are the ignored
/// `…::cluster::…` tests of `wakeup` and `reentrancy`): in one cluster, for every kind, a Java
/// unlock wakes an rlock waiter and the reverse, on the channel the kind uses (sharded). A few
/// rounds each: the single-server tests time many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocks_of_every_kind_wake_the_other_side() {
    let site = Site::start(Topology::Cluster);
    let java = site.party(Side::Java).await;
    let rlock = site.party(Side::Rlock).await;
    for kind in InteropKind::all() {
        let name = format!("interop:cluster-{kind}");
        let mut redis = site.redis(&name).await;
        for (holder, waiter) in [(&java, &rlock), (&rlock, &java)] {
            wake_rounds(kind, holder, waiter, &mut redis, &name, site.label(), 3).await;
        }
    }
}

/// Redisson ≤ 3.21 always uses classic `PUBLISH`/`SUBSCRIBE`: with `ShardedPubSub::Off`, rlock
/// matches it and the two wake each other, in both directions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_3_21_and_rlock_with_sharded_pubsub_off() {
    let cluster = Cluster::start(3, 0);
    let name = "interop:cluster-classic";
    let java = Party::cluster(
        Side::Java,
        &cluster,
        RedissonVersion::V3_21,
        ShardedPubSub::Off,
    );
    let java = java.await;
    let rlock = Party::cluster(Side::Rlock, &cluster, JAVA_VERSION, ShardedPubSub::Off).await;
    let mut redis = Redis::connect_cluster(cluster.master_of(name), cluster.masters()).await;

    let hold = java.lock(name).lock(1).await;
    let waiting = rlock.lock(name).spawn_lock(2);
    let _ = redis.wait_parked(&lock_channel(name), 1).await;
    assert_eq!(redis.shard_channels().await, Vec::<Vec<u8>>::new());
    assert_eq!(
        classic_channels(&cluster).await,
        vec![lock_channel(name).into_bytes()]
    );
    hold.release().await;
    woken(waiting).await.1.release().await;

    let setup = "cluster, classic";
    let rounds = rounds(InteropKind::REENTRANT);
    wake_rounds(
        InteropKind::REENTRANT,
        &java,
        &rlock,
        &mut redis,
        name,
        setup,
        rounds,
    )
    .await;
    wake_rounds(
        InteropKind::REENTRANT,
        &rlock,
        &java,
        &mut redis,
        name,
        setup,
        rounds,
    )
    .await;
}

/// What a mismatch costs (a documented configuration requirement, not a bug): rlock on AUTO
/// subscribes with `SSUBSCRIBE`, so the classic `PUBLISH` of a Redisson ≤ 3.21 unlock never
/// reaches it and it only gets the lock when the PTTL it was given runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_rlock_does_not_hear_java_3_21() {
    let cluster = Cluster::start(3, 0);
    let name = "interop:cluster-mismatch";
    let lease = Duration::from_millis(1_500);
    let java = Party::cluster(
        Side::Java,
        &cluster,
        RedissonVersion::V3_21,
        ShardedPubSub::Off,
    );
    let java = java.await;
    let rlock = Party::cluster(Side::Rlock, &cluster, JAVA_VERSION, ShardedPubSub::Auto).await;
    let mut redis = Redis::connect_cluster(cluster.master_of(name), cluster.masters()).await;

    let hold = java.lock(name).lock_with_lease(1, lease).await;
    let expires_at = Instant::now() + lease;
    let waiting = rlock.lock(name).spawn_lock(2);
    let _ = redis.wait_parked(&lock_channel(name), 1).await;
    hold.release().await;
    let (acquired_at, hold) = woken(waiting).await;
    assert!(
        acquired_at + Duration::from_millis(200) >= expires_at,
        "rlock woke {:?} before the PTTL ran out: it heard a classic PUBLISH",
        expires_at - acquired_at
    );
    hold.release().await;
}

/// Classic channels subscribed on any master.
async fn classic_channels(cluster: &Cluster) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for master in cluster.masters() {
        all.extend(Redis::connect(master).await.channels().await);
    }
    all
}
