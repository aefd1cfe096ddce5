//! The group lock (Redisson's faster multi-lock, `redisson.getMultiLock(group, values)`,
//! docs/protocol.md §8.9) across the sides: rlock's `client.group_lock(group, values)` and the
//! emulated Java client's on one group and values (rlock encodes the values with its default
//! codec, Kryo5; the emulator is given the hashes Redisson computed on the JVM for the same
//! strings, [`JAVA_KEYS`]). An unlock of one side wakes the other's waiter within the wake limit,
//! on a single server and (the matrix) in a cluster; and under mixed contention a non-atomic
//! counter stays exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use redis::AsyncCommands;
use rlock_redisson::{GroupGuard, GroupLock, Owner};
use rlock_tests::redisson::{JAVA_KEYS, JavaGroupLock, ThreadId, lock_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::support::{Latencies, Party, Side, Site, Topology, WAKE_LIMIT, woken};

const NAME: &str = "interop:group";

/// The values, as both sides' code names them.
const VALUES: [&str; 2] = ["orders", "héllo"];

/// The values' hashes as Redisson computed them for `Kryo5Codec` on the JVM.
fn java_hashes() -> Vec<&'static str> {
    let hashes: Vec<&str> = VALUES
        .iter()
        .map(|value| {
            let key = format!("String:{value}");
            JAVA_KEYS
                .iter()
                .find(|java| java.codec == "Kryo5Codec" && java.key == key)
                .expect("a Kryo5 string the JVM hashed")
                .hash
        })
        .collect();
    hashes
}

/// A group lock of either side, for one thread (an rlock owner of that id).
enum PartyGroup {
    Java(JavaGroupLock, ThreadId),
    Rlock(GroupLock),
}

/// A hold of either side.
enum GroupHold {
    Java(JavaGroupLock, ThreadId),
    Rlock(GroupGuard),
}

impl PartyGroup {
    fn of(party: &Party, thread: ThreadId) -> Self {
        match party {
            Party::Java(java) => Self::Java(java.get_multi_lock(NAME, &java_hashes()), thread),
            Party::Rlock(client) => Self::Rlock(
                client
                    .group_lock(NAME, VALUES)
                    .expect("strings encode")
                    .with_owner(Owner::from_id(thread)),
            ),
        }
    }

    async fn lock(self) -> GroupHold {
        match self {
            Self::Java(lock, thread) => {
                lock.lock(thread, None).await.expect("java locks");
                GroupHold::Java(lock, thread)
            }
            Self::Rlock(lock) => GroupHold::Rlock(lock.lock().await.expect("rlock locks")),
        }
    }

    fn spawn_lock(self) -> JoinHandle<(Instant, GroupHold)> {
        tokio::spawn(async move {
            let hold = self.lock().await;
            (Instant::now(), hold)
        })
    }
}

impl GroupHold {
    async fn release(self) {
        match self {
            Self::Java(lock, thread) => {
                assert_eq!(lock.unlock(thread).await.expect("java unlocks"), Some(1));
            }
            Self::Rlock(guard) => guard.unlock().await.expect("rlock unlocks"),
        }
    }
}

/// `holder` takes the group's values and unlocks while `waiter` waits (the holds' lease is the
/// watchdog's 30 s): the waiter holds every value within the wake limit, three rounds.
async fn unlock_wakes_the_other_side(topology: Topology, holder: Side, waiter: Side) {
    let site = Site::start(topology);
    let holder = site.party(holder).await;
    let waiter = site.party(waiter).await;
    let mut redis = site.redis(NAME).await;
    let mut latencies = Latencies::default();
    for _ in 0..3 {
        let held = PartyGroup::of(&holder, 1).lock().await;
        let waiting = PartyGroup::of(&waiter, 2).spawn_lock();
        let _ = redis.wait_parked(&lock_channel(NAME), 1).await;
        let pttl = redis.pttl(NAME).await;
        assert!(
            pttl > 29_000,
            "only a message could wake the waiter (pttl {pttl})"
        );

        let unlocked_at = Instant::now();
        held.release().await;
        let (acquired_at, hold) = woken(waiting).await;
        latencies.record(unlocked_at, acquired_at);
        let hash = redis.hash(NAME).await;
        for value in java_hashes() {
            assert_eq!(hash.get(value), Some(&waiter.field(2)), "{hash:?}");
        }
        hold.release().await;
    }
    latencies.check(
        &format!(
            "group lock unlock wakes waiter, {} -> {} ({})",
            holder.side(),
            waiter.side(),
            site.label()
        ),
        WAKE_LIMIT,
    );
    assert!(
        !redis.exists(NAME).await,
        "the last unlock freed every value"
    );
}

mod single {
    crate::support::directions!(super::unlock_wakes_the_other_side, super::Topology::Single);
}

mod cluster {
    crate::support::directions!(
        #[ignore = "the cluster matrix: scripts/interop-matrix.sh"]
        super::unlock_wakes_the_other_side,
        super::Topology::Cluster
    );
}

/// Two Java clients and two rlock clients, two workers each, every worker taking the group lock 25
/// times and incrementing a counter with a separate GET and SET inside: any overlap loses an
/// increment, and none may be inside with another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_stays_exact_under_mixed_contention() {
    const ITERATIONS: usize = 25;
    let site = Site::start(Topology::Single);
    let parties = [
        site.party(Side::Java).await,
        site.party(Side::Java).await,
        site.party(Side::Rlock).await,
        site.party(Side::Rlock).await,
    ];
    let redis = site.redis(NAME).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for party in &parties {
        for thread in 1..=2 {
            let party = party.clone();
            let mut conn = redis.conn.clone();
            let inside = inside.clone();
            workers.push(tokio::spawn(async move {
                for _ in 0..ITERATIONS {
                    let hold = PartyGroup::of(&party, thread).lock().await;
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two inside");
                    let count: Option<u64> = conn.get("interop:group:counter").await.expect("GET");
                    let () = conn
                        .set("interop:group:counter", count.unwrap_or(0) + 1)
                        .await
                        .expect("SET");
                    let _ = inside.fetch_sub(1, Ordering::SeqCst);
                    hold.release().await;
                }
            }));
        }
    }
    for worker in workers {
        worker.await.expect("a worker finishes");
    }
    let mut conn = redis.conn.clone();
    let count: u64 = conn.get("interop:group:counter").await.expect("GET");
    assert_eq!(count, (parties.len() * 2 * ITERATIONS) as u64);
}

/// The cluster case of the default suite (both directions: `scripts/interop-matrix.sh`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_unlock_wakes_rlock_in_a_cluster() {
    unlock_wakes_the_other_side(Topology::Cluster, Side::Java, Side::Rlock).await;
}
