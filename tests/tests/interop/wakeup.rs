//! Wake-ups across the sides, for every lock kind: a waiter of one side owns the lock within
//! milliseconds of the other side's unlock or force-unlock, although the lock's PTTL (30 s) would
//! have let it sleep on. The waiter is the holder's contender ([`InteropKind::contender`]): a writer waits
//! for a reader. A spin-lock waiter hears nothing (its kind publishes nothing, §8.1): it must own
//! the lock within one back-off delay instead ([`InteropKind::wake_limit`]).

use tokio::time::Instant;

use crate::support::{
    InteropKind, Latencies, Party, Redis, Side, Site, Topology, Unlocked, every_kind, woken,
};

const NAME: &str = "interop:wake";

/// How many hand-offs a wake-up scenario times for `kind`: fewer for the spin lock, each of whose
/// rounds waits for the poller to reach its slowest back-off.
pub(crate) fn rounds(kind: InteropKind) -> usize {
    if kind == InteropKind::SPIN { 3 } else { 10 }
}

/// `holder` unlocks while `waiter` waits for the lock; the waiter owns it within milliseconds.
async fn unlock_wakes_the_waiter(
    kind: InteropKind,
    topology: Topology,
    holder: Side,
    waiter: Side,
) {
    let site = Site::start(topology);
    let holder = site.party(holder).await;
    let waiter = site.party(waiter).await;
    let mut redis = site.redis(NAME).await;
    let rounds = rounds(kind);
    wake_rounds(
        kind,
        &holder,
        &waiter,
        &mut redis,
        NAME,
        site.label(),
        rounds,
    )
    .await;
}

/// `rounds` times: `holder` takes the `kind` lock `name` without a lease, `waiter` waits for it as
/// its contender (the PTTL is 30 s), `holder` unlocks and the waiter must own the lock within the
/// kind's wake limit. `redis` observes the node that owns `name`; `setup` names the topology in the
/// timing report.
pub(crate) async fn wake_rounds(
    kind: InteropKind,
    holder: &Party,
    waiter: &Party,
    redis: &mut Redis,
    name: &str,
    setup: &str,
    rounds: usize,
) {
    let contender = kind.contender();
    let mut latencies = Latencies::default();
    for _ in 0..rounds {
        let hold = holder.get(kind, name).lock(1).await;
        let waiting = waiter.get(contender, name).spawn_lock(2);
        redis.wait_waiting(contender, name, &waiter.field(2)).await;
        let pttl = redis.pttl(name).await;
        assert!(
            pttl > 29_000,
            "the waiter could only be woken by a message or its poll (pttl {pttl})"
        );

        let unlocked_at = Instant::now();
        hold.release().await;
        let (acquired_at, hold) = woken(waiting).await;
        latencies.record(unlocked_at, acquired_at);
        assert_eq!(redis.hash(name).await, contender.holds(&waiter.field(2), 1));
        hold.release().await;
    }
    latencies.check(
        &format!(
            "{kind} unlock wakes waiter, {} -> {} ({setup})",
            holder.side(),
            waiter.side()
        ),
        kind.wake_limit(),
    );
}

/// `forcer` holds the lock and force-unlocks it (through another lock object) while `waiter`
/// waits: the waiter owns it within milliseconds, the forced holder stops renewing, and its late
/// unlock is refused without touching the new holder.
async fn force_unlock_wakes_the_waiter(
    kind: InteropKind,
    topology: Topology,
    forcer: Side,
    waiter: Side,
) {
    let site = Site::start(topology);
    let forcer = site.party(forcer).await;
    let waiter = site.party(waiter).await;
    let name = "interop:force";
    let mut redis = site.redis(name).await;
    let contender = kind.contender();
    let mut latencies = Latencies::default();
    for _ in 0..rounds(kind) {
        let forced = forcer.get(kind, name).lock(1).await;
        assert!(forcer.is_renewing(name));
        let waiting = waiter.get(contender, name).spawn_lock(2);
        redis.wait_waiting(contender, name, &waiter.field(2)).await;

        let forced_at = Instant::now();
        assert!(
            forcer.get(kind, name).force_unlock().await,
            "the lock existed"
        );
        let (acquired_at, hold) = woken(waiting).await;
        latencies.record(forced_at, acquired_at);
        let held = contender.holds(&waiter.field(2), 1);
        assert_eq!(redis.hash(name).await, held);

        assert!(!forcer.is_renewing(name), "force unlock stops renewal");
        assert_ne!(
            forced.is_lease_lost(),
            Some(false),
            "rlock tells the guard at once"
        );
        assert_eq!(forced.unlock().await, Unlocked::NotOwner);
        assert_eq!(redis.hash(name).await, held);
        hold.release().await;
    }
    latencies.check(
        &format!(
            "{kind} force unlock wakes waiter, {} -> {} ({})",
            forcer.side(),
            waiter.side(),
            site.label()
        ),
        kind.wake_limit(),
    );
}

every_kind!(matrix: unlock_wakes_the_waiter, force_unlock_wakes_the_waiter);
