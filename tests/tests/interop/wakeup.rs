//! Wake-ups across the sides, for every lock kind: a waiter of one side owns the lock within
//! milliseconds of the other side's unlock or force-unlock, although the lock's PTTL (30 s) would
//! have let it sleep on.

use rlock_tests::RedisServer;
use tokio::time::Instant;

use crate::support::{
    Kind, Latencies, Party, Redis, Side, Unlocked, WAKE_LIMIT, every_kind, holds, woken,
};

const ROUNDS: usize = 10;

/// `holder` unlocks while `waiter` sleeps on the lock; the waiter owns it within milliseconds.
async fn unlock_wakes_the_waiter(kind: Kind, holder: Side, waiter: Side) {
    let server = RedisServer::start();
    let holder = Party::connect(holder, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let mut redis = Redis::connect(&server).await;
    wake_rounds(
        kind,
        &holder,
        &waiter,
        &mut redis,
        "interop:wake",
        "single server",
    )
    .await;
}

/// `ROUNDS` times: `holder` takes the `kind` lock `name` without a lease, `waiter` sleeps on it (the
/// PTTL is 30 s), `holder` unlocks and the waiter must own the lock within [`WAKE_LIMIT`]. `redis`
/// observes the node that owns `name`; `setup` names the topology in the timing report.
pub(crate) async fn wake_rounds(
    kind: Kind,
    holder: &Party,
    waiter: &Party,
    redis: &mut Redis,
    name: &str,
    setup: &str,
) {
    let mut latencies = Latencies::default();
    for _ in 0..ROUNDS {
        let hold = holder.get(kind, name).lock(1).await;
        let waiting = waiter.get(kind, name).spawn_lock(2);
        let _ = redis.wait_parked(&kind.channel(name), 1).await;
        let pttl = redis.pttl(name).await;
        assert!(
            pttl > 29_000,
            "the waiter could only be woken by a message (pttl {pttl})"
        );

        let unlocked_at = Instant::now();
        hold.release().await;
        let (acquired_at, hold) = woken(waiting).await;
        latencies.record(unlocked_at, acquired_at);
        assert_eq!(redis.hash(name).await, holds([(waiter.field(2), 1)]));
        hold.release().await;
    }
    latencies.check(
        &format!(
            "{kind} unlock wakes waiter, {} -> {} ({setup})",
            holder.side(),
            waiter.side()
        ),
        WAKE_LIMIT,
    );
}

/// `forcer` holds the lock and force-unlocks it (through another lock object) while `waiter`
/// sleeps: the waiter owns it within milliseconds, the forced holder stops renewing, and its late
/// unlock is refused without touching the new holder.
async fn force_unlock_wakes_the_waiter(kind: Kind, forcer: Side, waiter: Side) {
    let server = RedisServer::start();
    let forcer = Party::connect(forcer, &server).await;
    let waiter = Party::connect(waiter, &server).await;
    let mut redis = Redis::connect(&server).await;
    let name = "interop:force";
    let mut latencies = Latencies::default();
    for _ in 0..ROUNDS {
        let forced = forcer.get(kind, name).lock(1).await;
        assert!(forcer.is_renewing(name));
        let waiting = waiter.get(kind, name).spawn_lock(2);
        let _ = redis.wait_parked(&kind.channel(name), 1).await;

        let forced_at = Instant::now();
        assert!(
            forcer.get(kind, name).force_unlock().await,
            "the lock existed"
        );
        let (acquired_at, hold) = woken(waiting).await;
        latencies.record(forced_at, acquired_at);
        assert_eq!(redis.hash(name).await, holds([(waiter.field(2), 1)]));

        assert!(!forcer.is_renewing(name), "force unlock stops renewal");
        if let crate::support::Hold::Rlock(guard) = &forced {
            assert!(guard.is_lease_lost(), "rlock tells the guard at once");
        }
        assert_eq!(forced.unlock().await, Unlocked::NotOwner);
        assert_eq!(redis.hash(name).await, holds([(waiter.field(2), 1)]));
        hold.release().await;
    }
    latencies.check(
        &format!(
            "{kind} force unlock wakes waiter, {} -> {}",
            forcer.side(),
            waiter.side()
        ),
        WAKE_LIMIT,
    );
}

every_kind!(both_directions: unlock_wakes_the_waiter, force_unlock_wakes_the_waiter);
