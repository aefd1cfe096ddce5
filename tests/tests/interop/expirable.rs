//! What only the permit-expirable semaphore has, across the sides (docs/protocol.md §8.6, §11.15,
//! §11.16): a permit whose lease ran out on one side is counted back in by the other side's next
//! call (a waiting acquire, which sleeps no longer than the nearest expiry, or a count) and its
//! late release is refused; ids taken on one side are released, read and renewed on the other
//! (hex on the APIs, the raw 16 bytes in Redis); both sides read the same leases.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::AsyncCommands;
use rlock_tests::RedisServer;
use rlock_tests::harness::epoch_ms;
use rlock_tests::redisson::new_request_id;
use tokio::time::Instant;

use crate::support::{
    Latencies, Listener, Message, Party, PartyExpirable, Redis, Side, WAKE_LIMIT, both_directions,
    woken,
};

/// A name with its own braces: `suffixName` and `prefixName` keep them (§1.3).
const NAME: &str = "{interop}:expirable";

/// The timeouts sorted set of [`NAME`] (§1.4), literally.
const TIMEOUTS: &str = "{interop}:expirable:timeout";

/// Its channel (§1.4), literally.
const CHANNEL: &str = "redisson_sc:{interop}:expirable";

/// The score of a permit that never expires (§8.6), literally.
const NON_EXPIRING: &str = "922337203685477";

/// A lease that runs out during the scenario.
const SHORT_LEASE: Duration = Duration::from_millis(300);

/// A lease that does not.
const LEASE: Duration = Duration::from_secs(30);

/// How much earlier than the expiry it waited for a waiter may seem to take a permit: expiries are
/// whole epoch milliseconds, and the two clocks are read a moment apart.
const CLOCK_SLACK: Duration = Duration::from_millis(5);

/// How long the message line must stay quiet for everything published to have arrived.
const QUIET: Duration = Duration::from_millis(50);

/// `holder` takes the only permit for [`SHORT_LEASE`]. `taker` cannot have it now, so it waits:
/// it has it when the lease runs out (not before, and within [`WAKE_LIMIT`] after: both sides sleep
/// until the nearest expiry), its acquire having counted the expired permit back in and published
/// the new count `1`. The holder's late release is refused. Then the same with a count: once the
/// lease ran out, the taker's `availablePermits` counts it back in (and publishes `1`).
async fn expired_permits_are_reclaimed_by_the_other_side(holder: Side, taker: Side) {
    let server = RedisServer::start();
    let (holder, taker) = (
        Party::connect(holder, &server).await,
        Party::connect(taker, &server).await,
    );
    let (held, taking) = (holder.expirable(NAME), taker.expirable(NAME));
    assert!(held.try_set_permits(1).await);
    let mut messages = Listener::synchronizer_messages(&server).await;

    let asked_at = Instant::now();
    let lost = held.acquire(Some(SHORT_LEASE)).await;
    let expires_by = Instant::now() + SHORT_LEASE;
    assert_eq!(taking.try_acquire(Duration::ZERO, None).await, None);
    let (taken_at, taken) = woken(taking.spawn_acquire(None)).await;
    assert!(
        taken_at + CLOCK_SLACK >= asked_at + SHORT_LEASE,
        "{} took the permit before its lease ran out",
        taker.side()
    );
    let mut latencies = Latencies::default();
    latencies.record(expires_by, taken_at);
    let what = format!(
        "RPermitExpirableSemaphore expired permit reclaimed by a waiter, {} -> {}",
        holder.side(),
        taker.side()
    );
    latencies.check(&what, WAKE_LIMIT);
    // The reclaim published the new count; so does the release.
    let one_available = Message::new(CHANNEL, "1");
    assert_eq!(messages.drain(QUIET).await, vec![one_available.clone()]);
    assert!(!held.try_release(&lost).await, "the expired permit is gone");
    assert_counts(&[&held, &taking], 0, 1).await;
    taking.release(&taken).await;
    assert_eq!(messages.drain(QUIET).await, vec![one_available.clone()]);

    let lost = held.acquire(Some(SHORT_LEASE)).await;
    tokio::time::sleep(SHORT_LEASE + Duration::from_millis(10)).await;
    assert_eq!(taking.available_permits().await, 1, "counted back in");
    assert_eq!(messages.drain(QUIET).await, vec![one_available]);
    assert!(!held.try_release(&lost).await, "the expired permit is gone");
    assert!(!held.update_lease_time(&lost, LEASE).await);
    assert_counts(&[&held, &taking], 1, 0).await;
}

/// `acquirer` takes a permit with a [`LEASE`] and one that never expires. In Redis they are the
/// raw bytes of the hex ids, scored with the expiry and with `922337203685477`. `releaser` reads
/// both leases as the acquirer does, renews the first (the acquirer reads the new lease), releases
/// it (neither side can release it again), and releases the other together with two more the
/// acquirer took at once. An id nobody took is unknown to both.
async fn permit_ids_cross_the_sides(acquirer: Side, releaser: Side) {
    let server = RedisServer::start();
    let (acquirer, releaser) = (
        Party::connect(acquirer, &server).await,
        Party::connect(releaser, &server).await,
    );
    let mut redis = Redis::connect(&server).await;
    let (a, b) = (acquirer.expirable(NAME), releaser.expirable(NAME));
    assert!(a.try_set_permits(4).await);
    let leased = a.acquire(Some(LEASE)).await;
    let forever = a.acquire(None).await;

    let stored: BTreeMap<Vec<u8>, String> = redis
        .conn
        .zrange_withscores(TIMEOUTS, 0, -1)
        .await
        .expect("ZRANGE");
    let (leased_bytes, forever_bytes) = (hex_bytes(&leased), hex_bytes(&forever));
    let ids: Vec<&Vec<u8>> = stored.keys().collect();
    let mut expected = vec![&leased_bytes, &forever_bytes];
    expected.sort();
    assert_eq!(ids, expected, "the raw 16 bytes of the hex ids");
    assert_eq!(stored[&forever_bytes], NON_EXPIRING);
    let expiry: u64 = stored[&leased_bytes].parse().expect("an integral score");
    let lease_ms = u64::try_from(LEASE.as_millis()).expect("ms");
    let now = epoch_ms();
    assert!(
        (now + lease_ms - 1_000..=now + lease_ms).contains(&expiry),
        "expiry {expiry} is now ({now}) + the lease"
    );

    for semaphore in [&a, &b] {
        assert_eq!(semaphore.lease_time(&forever).await, Some(-1));
        assert_lease(semaphore, &leased, LEASE).await;
    }
    assert!(b.update_lease_time(&leased, 2 * LEASE).await);
    assert_lease(&a, &leased, 2 * LEASE).await;

    let unknown = new_request_id();
    for semaphore in [&a, &b] {
        assert_eq!(semaphore.lease_time(&unknown).await, None);
        assert!(!semaphore.update_lease_time(&unknown, LEASE).await);
        assert!(!semaphore.try_release(&unknown).await);
    }

    b.release(&leased).await;
    for semaphore in [&a, &b] {
        assert!(!semaphore.try_release(&leased).await, "released already");
    }
    let mut rest = a.acquire_many(2, Some(LEASE)).await;
    rest.push(forever);
    assert_eq!(b.try_release_many(&rest).await, 3);
    assert_counts(&[&a, &b], 4, 0).await;
}

both_directions!(
    expired_permits_are_reclaimed_by_the_other_side,
    permit_ids_cross_the_sides
);

/// Every one of `semaphores` counts `available` and `acquired` permits.
async fn assert_counts(semaphores: &[&PartyExpirable], available: i64, acquired: i64) {
    for semaphore in semaphores {
        assert_eq!(semaphore.available_permits().await, available);
        assert_eq!(semaphore.acquired_permits().await, acquired);
    }
}

/// `semaphore` reads permit `id`'s lease as at most `lease`, and less than a second shorter.
async fn assert_lease(semaphore: &PartyExpirable, id: &str, lease: Duration) {
    let lease = i64::try_from(lease.as_millis()).expect("ms");
    let left = semaphore.lease_time(id).await.expect("a held permit");
    assert!(
        (lease - 1_000..=lease).contains(&left),
        "{left} ms left of {lease}"
    );
}

/// The bytes of an id written in hex.
fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex"))
        .collect()
}
