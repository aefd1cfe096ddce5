//! Lost replies, script by script, in every topology: a fault proxy forwards a script to Redis and
//! then cuts the connection before its reply reaches rlock, so the script ran and its caller never
//! heard. Afterwards Redis must hold exactly what one application of the call leaves (no hold counted
//! twice, no stray field, queue entry or permit), and the caller must have got success or a typed
//! error: for what rlock reconciles (acquires are undone, unlocks re-sent under their latch) a
//! `Timeout`/`Backend` error or success; for counters nothing can reconcile (a semaphore's permits,
//! a latch's count) `OutcomeUnknown`, with the count applied once, never twice.
//!
//! The non-reentrant kinds (`non_reentrant.*`, `non_reentrant_fair.*`) run their twins' scripts but
//! for the acquire, which refuses a re-entry: a refused re-entry whose reply is lost is undone like
//! any acquire (`*.refused_reentry`), and the undo must leave the owner's single hold as it was.
//!
//! The local hand-off between two tasks of one client (`*.hand_off`) is re-sent under its latch, as
//! an unlock is: the re-send replays the first outcome, and the waiter gets the lock from it. A
//! hand-off whose reply is only late, to a waiter dropped meanwhile, is in
//! `a_waiter_dropped_while_handed_the_lock_passes_it_on`.
//!
//! A request can also be lost *before* it runs, its connection cut: its caller cannot tell that
//! from a lost reply. The `*_that_never_ran_*` tests order what follows so that an undo of an
//! owner's field runs after that owner took the lock by itself, the interleaving a frozen server
//! once produced at random (a hand-off's undo deleted its waiter's own hold).
//!
//! The default suite runs the representative cases of every topology (`representative_*`, among
//! them the regression test of the cluster client's own re-send: an acquire that ran twice);
//! `scripts/lost-replies.sh` runs every script of every kind in every topology (the ignored
//! `every_script_*` tests).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::kind::{FairQueue, LockKind};
use rlock_redisson::{Client, Error, Guard, Lock, Owner};
use rlock_tests::harness::eventually;
use rlock_tests::harness::raw_blocking;
use rlock_tests::history::monitor::{FENCED_HAND_OFF, LOCK_HAND_OFF, WRITE_HAND_OFF};
use rlock_tests::history::{local_hand_offs, script_sha1};
use rlock_tests::proxied::{Deployment, Proxied};
use rlock_tests::proxy::Match;

/// A deployment behind proxies and a client of it.
struct Ctx {
    proxied: Proxied,
    client: Client,
}

/// The client's settings: prompt retries, so a re-sent unlock does not wait a second; and a local
/// hand-off streak that may last a minute (default 10 ms), so that whether a release hands off
/// does not depend on how fast this machine runs the test.
fn quick(config: &mut rlock_redisson::Config) {
    config.command_timeout = Duration::from_millis(1000);
    config.replicas_sync_timeout = Duration::from_millis(300);
    config.retry_delay = Duration::from_millis(50);
    config.retry_max_delay = Duration::from_millis(100);
    config.local_handoff_window = Duration::from_secs(60);
}

impl Ctx {
    async fn start(deployment: Deployment) -> Self {
        let proxied = tokio::task::spawn_blocking(move || Proxied::start(deployment))
            .await
            .expect("the deployment starts");
        let client = Self::client_of(&proxied, |_| {}).await;
        Self { proxied, client }
    }

    async fn client_of(
        proxied: &Proxied,
        tweak: impl FnOnce(&mut rlock_redisson::Config),
    ) -> Client {
        let mut config = proxied.config();
        quick(&mut config);
        tweak(&mut config);
        Client::with_config(config).await.expect("client connects")
    }

    /// Arms the loss of the reply of the next script call that names `name` (as a key or an
    /// argument), or of the `nth` one.
    fn lose_script_reply(&self, name: &str, nth: usize) -> Armed<'_> {
        self.lose_reply(name, Match::command("EVALSHA").with_arg(name), nth)
    }

    /// Arms the loss of the reply of the next call of `script` (its source) on `name`: a script
    /// told apart by its SHA1, whatever else names the lock meanwhile (renewals).
    fn lose_reply_of(&self, script: &str, name: &str) -> Armed<'_> {
        let matching = Match::command("EVALSHA")
            .with_arg(script_sha1(script))
            .with_arg(name);
        self.lose_reply(name, matching, 1)
    }

    fn lose_reply(&self, name: &str, matching: Match, nth: usize) -> Armed<'_> {
        let proxy = self.proxied.proxy_of(name);
        let before = proxy.lost_replies();
        proxy.lose_reply(matching, nth);
        Armed { proxy, before }
    }

    /// A direct connection (around the proxy) to the master of `name`.
    async fn master(&self, name: &str) -> redis::aio::MultiplexedConnection {
        self.proxied
            .master_of(name)
            .client()
            .get_multiplexed_async_connection()
            .await
            .expect("direct connection")
    }

    /// Every key of `name` on its master, rendered by type: a hash as its sorted values, a string
    /// as itself, a sorted set or list by size. Unlock latches (which replay a re-sent unlock) are
    /// left out.
    async fn state(&self, name: &str) -> BTreeMap<String, String> {
        let mut redis = self.master(name).await;
        let keys: Vec<String> = redis.keys(format!("*{name}*")).await.expect("KEYS");
        let mut state = BTreeMap::new();
        for key in keys {
            if key.starts_with("redisson_unlock_latch") {
                continue;
            }
            let kind: String = redis::cmd("TYPE")
                .arg(&key)
                .query_async(&mut redis)
                .await
                .expect("TYPE");
            let rendered = match kind.as_str() {
                "hash" => {
                    let mut values: Vec<String> = redis.hvals(&key).await.expect("HVALS");
                    values.sort();
                    format!("hash{values:?}")
                }
                "string" => redis.get(&key).await.expect("GET"),
                "zset" => format!(
                    "zset({})",
                    redis.zcard::<_, u64>(&key).await.expect("ZCARD")
                ),
                "list" => format!("list({})", redis.llen::<_, u64>(&key).await.expect("LLEN")),
                other => other.to_owned(),
            };
            let _ = state.insert(key, rendered);
        }
        state
    }

    /// Waits for the state of `name` to become `expected` (keys and renderings, as
    /// [`Ctx::state`]); panics with the state seen if it does not within 5 s.
    async fn settles(&self, name: &str, expected: &[(&str, &str)]) {
        let expected: BTreeMap<String, String> = expected
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let settled = eventually(Duration::from_secs(5), async || {
            self.state(name).await == expected
        })
        .await;
        assert!(
            settled,
            "{:?} {name}: expected {expected:?}, Redis holds {:?}",
            self.proxied.deployment,
            self.state(name).await
        );
    }
}

/// A lost reply about to happen.
struct Armed<'a> {
    proxy: &'a rlock_tests::proxy::FaultProxy,
    before: usize,
}

impl Armed<'_> {
    /// Asserts that the fault fired (so the case tested what it says).
    async fn fired(self) {
        assert!(
            self.proxy
                .wait_lost_replies(self.before + 1, Duration::from_secs(5))
                .await,
            "the reply was lost as arranged"
        );
    }
}

/// An error that says the outcome was reconciled by rlock: the call failed and left nothing behind.
fn reconciled<T: std::fmt::Debug>(result: rlock_redisson::Result<T>, what: &str) {
    match result {
        Err(Error::Timeout { .. } | Error::Backend { .. }) => {}
        other => panic!("{what}: expected a reconciled failure, got {other:?}"),
    }
}

/// The error of a counter whose lost reply nothing can reconcile.
fn outcome_unknown<T: std::fmt::Debug>(result: rlock_redisson::Result<T>, what: &str) {
    match result {
        Err(Error::OutcomeUnknown { .. }) => {}
        other => panic!("{what}: expected OutcomeUnknown, got {other:?}"),
    }
}

type Case = for<'a> fn(&'a Ctx, &'a str) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

macro_rules! cases {
    ($($name:literal => $case:ident,)*) => {
        &[$(($name, |ctx, name| Box::pin($case(ctx, name)))),*]
    };
}

/// Every case: `kind.script` and the function that plays it.
const CASES: &[(&str, Case)] = cases![
    "lock.acquire" => lock_acquire,
    "lock.reentry" => lock_reentry,
    "lock.reentry_after_delete" => lock_reentry_after_delete,
    "lock.undo" => lock_undo,
    "lock.unlock_partial" => lock_unlock_partial,
    "lock.unlock" => lock_unlock,
    "lock.force_unlock" => lock_force_unlock,
    "lock.renew" => lock_renew,
    "lock.hand_off" => lock_hand_off,
    "fair.acquire" => fair_acquire,
    "fair.unlock" => fair_unlock,
    "fair.give_up" => fair_give_up,
    "non_reentrant.acquire" => non_reentrant_acquire,
    "non_reentrant.refused_reentry" => non_reentrant_refused_reentry,
    "non_reentrant.undo" => non_reentrant_undo,
    "non_reentrant.unlock" => non_reentrant_unlock,
    "non_reentrant.hand_off" => non_reentrant_hand_off,
    "non_reentrant_fair.acquire" => non_reentrant_fair_acquire,
    "non_reentrant_fair.refused_reentry" => non_reentrant_fair_refused_reentry,
    "non_reentrant_fair.undo" => non_reentrant_fair_undo,
    "non_reentrant_fair.unlock" => non_reentrant_fair_unlock,
    "non_reentrant_fair.give_up" => non_reentrant_fair_give_up,
    "read.acquire" => read_acquire,
    "read.unlock" => read_unlock,
    "write.acquire" => write_acquire,
    "write.unlock" => write_unlock,
    "write.hand_off" => write_hand_off,
    "fenced.acquire" => fenced_acquire,
    "fenced.hand_off" => fenced_hand_off,
    "spin.acquire" => spin_acquire,
    "spin.unlock" => spin_unlock,
    "semaphore.acquire" => semaphore_acquire,
    "semaphore.release" => semaphore_release,
    "expirable.acquire" => expirable_acquire,
    "expirable.release" => expirable_release,
    "latch.count_down" => latch_count_down,
];

/// The cases the default suite runs in every topology.
const REPRESENTATIVE: &[&str] = &[
    "lock.acquire",
    "lock.unlock",
    "lock.hand_off",
    "fenced.hand_off",
    "semaphore.acquire",
    "non_reentrant.refused_reentry",
    "non_reentrant_fair.refused_reentry",
];

async fn run(deployment: Deployment, only: Option<&[&str]>) {
    let ctx = Ctx::start(deployment).await;
    for (case, play) in CASES {
        if only.is_some_and(|only| !only.contains(case)) {
            continue;
        }
        eprintln!("{deployment:?}: {case}");
        let name = format!("lost:{case}");
        play(&ctx, &name).await;
    }
}

/// The acquire of `lock` whose reply is lost is undone: nothing is left.
async fn acquire_is_undone<K: LockKind>(ctx: &Ctx, name: &str, lock: Lock<K>) {
    let armed = ctx.lose_script_reply(name, 1);
    reconciled(lock.lock().await, "acquire");
    armed.fired().await;
    ctx.settles(name, &[]).await;
}

/// The unlock of `lock` whose reply is lost is re-sent under its latch: released once, nothing left.
async fn unlock_is_resent<K: LockKind>(ctx: &Ctx, name: &str, lock: Lock<K>) {
    let guard = lock.lock().await.expect("lock");
    let armed = ctx.lose_script_reply(name, 1);
    guard
        .unlock()
        .await
        .expect("the unlock is re-sent under its latch");
    armed.fired().await;
    ctx.settles(name, &[]).await;
}

async fn lock_acquire(ctx: &Ctx, name: &str) {
    acquire_is_undone(ctx, name, ctx.client.lock(name)).await;
    // Nothing was left behind: another owner takes it at once.
    let other = ctx.client.lock(name).with_owner(Owner::new());
    let guard = other.try_lock().await.expect("try_lock");
    guard.expect("free").unlock().await.expect("unlock");
}

/// An owner of `lock` holds it once, and its re-entry's reply is lost: the caller gets a reconciled
/// failure, never a hold, and once the undo ran the owner's first hold is all there is, counted
/// once. Returns the owner's handle and its first hold.
async fn reentry_reply_lost<K: LockKind>(
    ctx: &Ctx,
    name: &str,
    lock: Lock<K>,
) -> (Lock<K>, Guard<K::Token>) {
    let lock = lock.with_owner(Owner::new());
    let first = lock.lock().await.expect("first hold");
    let armed = ctx.lose_script_reply(name, 1);
    reconciled(lock.lock().await, "re-entry");
    armed.fired().await;
    ctx.settles(name, &[(name, "hash[\"1\"]")]).await;
    (lock, first)
}

async fn lock_reentry(ctx: &Ctx, name: &str) {
    let (_, first) = reentry_reply_lost(ctx, name, ctx.client.lock(name)).await;
    first.unlock().await.expect("unlock");
    ctx.settles(name, &[]).await;
}

/// Issue 46, case 6: the owner's hold is deleted behind its back (a `DEL` no message tells of), and
/// its next re-entry's reply is lost. The re-entry must not have re-created the field as a re-entry
/// (its undo compares with the owner's count, 1, and could not tell that hold from the one the
/// owner counted): Redis holds nothing once things settle, not a hold nobody counts or renews.
async fn lock_reentry_after_delete(ctx: &Ctx, name: &str) {
    let lock = ctx.client.lock(name).with_owner(Owner::new());
    let first = lock.lock().await.expect("first hold");
    let _: () = ctx.master(name).await.del(name).await.expect("DEL");
    let armed = ctx.lose_script_reply(name, 1);
    reconciled(lock.lock().await, "re-entry");
    armed.fired().await;
    ctx.settles(name, &[]).await;
    // The first guard's hold is gone; its release says so and sends nothing that could matter.
    assert!(first.unlock().await.is_err(), "the first hold was deleted");
    ctx.settles(name, &[]).await;
}

/// The re-entry of a non-reentrant `lock` ran and was refused, changing nothing, but its reply is
/// lost, so rlock cannot tell a refusal from a second hold and undoes it. The undo compares with
/// the count the owner had before (1): it must leave the owner's single hold as it is (neither
/// counted twice nor deleted, and no queue entry for the fair kind). Once replies come through
/// again, the re-entry is refused as such.
async fn refused_reentry_reply_lost<K: LockKind>(ctx: &Ctx, name: &str, lock: Lock<K>) {
    let (lock, first) = reentry_reply_lost(ctx, name, lock).await;
    assert!(!first.is_lease_lost(), "the first hold is intact");
    assert!(lock.is_locked().await.expect("is_locked"), "still held");
    assert_eq!(lock.hold_count().await.expect("hold_count"), 1);
    match lock.try_lock().await {
        Err(Error::ReentryRefused { .. }) => {}
        other => panic!("a re-entry whose reply comes back is refused, got {other:?}"),
    }
    ctx.settles(name, &[(name, "hash[\"1\"]")]).await;
    first.unlock().await.expect("unlock");
    ctx.settles(name, &[]).await;
}

/// The acquire's reply and then its undo's reply are lost: the undo is sent again, and nothing is
/// left.
async fn undo_is_resent<K: LockKind>(ctx: &Ctx, name: &str, lock: Lock<K>) {
    let armed = ctx.lose_script_reply(name, 1);
    let undo = ctx.lose_script_reply(name, 2);
    reconciled(lock.lock().await, "acquire");
    armed.fired().await;
    undo.fired().await;
    ctx.settles(name, &[]).await;
}

async fn lock_undo(ctx: &Ctx, name: &str) {
    undo_is_resent(ctx, name, ctx.client.lock(name)).await;
}

async fn lock_unlock_partial(ctx: &Ctx, name: &str) {
    let lock = ctx.client.lock(name).with_owner(Owner::new());
    let first = lock.lock().await.expect("first hold");
    let second = lock.lock().await.expect("second hold");
    let armed = ctx.lose_script_reply(name, 1);
    second
        .unlock()
        .await
        .expect("the unlock is re-sent under its latch");
    armed.fired().await;
    ctx.settles(name, &[(name, "hash[\"1\"]")]).await;
    first.unlock().await.expect("unlock");
    ctx.settles(name, &[]).await;
}

async fn lock_unlock(ctx: &Ctx, name: &str) {
    unlock_is_resent(ctx, name, ctx.client.lock(name)).await;
}

async fn lock_force_unlock(ctx: &Ctx, name: &str) {
    let lock = ctx.client.lock(name);
    let guard = lock.lock().await.expect("lock");
    let armed = ctx.lose_script_reply(name, 1);
    // Deleting is idempotent: rlock reports the lost reply, Redis holds what one delete leaves.
    reconciled(lock.force_unlock().await, "force-unlock");
    armed.fired().await;
    ctx.settles(name, &[]).await;
    assert!(
        guard.unlock().await.is_err(),
        "the force-unlocked guard no longer holds"
    );
}

async fn lock_renew(ctx: &Ctx, name: &str) {
    let client = Ctx::client_of(&ctx.proxied, |config| {
        config.watchdog_timeout = Duration::from_millis(900);
    })
    .await;
    let guard = client.lock(name).lock().await.expect("lock");
    // The next script naming the lock is a renewal (every 300 ms).
    let armed = ctx.lose_script_reply(name, 1);
    armed.fired().await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!guard.is_lease_lost(), "the renewal was sent again in time");
    ctx.settles(name, &[(name, "hash[\"1\"]")]).await;
    guard.unlock().await.expect("unlock");
    ctx.settles(name, &[]).await;
}

/// A waiter's fixed lease: Redis must be told of it, so a hold passes to that waiter by script (a
/// watchdog waiter of the reentrant and non-reentrant locks is passed it freely, with no script).
const WAITERS_LEASE: Duration = Duration::from_secs(30);

/// Task A of the client holds `lock`, task B waits for it (for [`WAITERS_LEASE`]) in the client's
/// local queue, and A's release hands the lock to B with `script`, whose reply is lost. The hand-off
/// ran (the proxy forwarded it); its re-send under the same latch replays its outcome, so B holds
/// the lock it was passed and A's unlock succeeds. Returns A's token and B's guard.
async fn hand_off_reply_lost<K: LockKind>(
    ctx: &Ctx,
    name: &str,
    script: &str,
    lock: Lock<K>,
) -> (K::Token, Guard<K::Token>)
where
    K::Token: Clone,
{
    let (first, second) = (
        lock.clone().with_owner(Owner::new()),
        lock.with_owner(Owner::new()),
    );
    let held = first.lock().await.expect("A locks");
    let token = held.token().clone();
    let mut waiting = pin!(second.lock_with_lease(WAITERS_LEASE));
    // The acquire joins the local queue before its first await: from now on A's release finds B
    // waiting behind it, and hands off.
    assert!(futures::poll!(&mut waiting).is_pending(), "B waits for A");
    let armed = ctx.lose_reply_of(script, name);
    let (unlocked, acquired) = tokio::join!(
        held.unlock(),
        tokio::time::timeout(Duration::from_secs(5), &mut waiting)
    );
    armed.fired().await;
    unlocked.expect("A's unlock: the re-sent hand-off replayed its outcome");
    let guard = acquired
        .expect("B is passed the lock within seconds")
        .expect("B's acquire");
    (token, guard)
}

/// The lock hash of `name` on its master, field by field.
async fn hash(ctx: &Ctx, name: &str) -> BTreeMap<String, String> {
    ctx.master(name).await.hgetall(name).await.expect("HGETALL")
}

/// `{field: value}`.
fn fields<const N: usize>(entries: [(&str, &str); N]) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .map(|(field, value)| (field.to_owned(), value.to_owned()))
        .collect()
}

/// A's release hands `lock` (the reentrant lock's hand-off script) to B, and its reply is lost.
async fn reentrant_hand_off<K: LockKind<Token = ()>>(ctx: &Ctx, name: &str, lock: Lock<K>) {
    let (_, guard) = hand_off_reply_lost(ctx, name, LOCK_HAND_OFF, lock).await;
    // B's hold, once: nothing of A's, no second count of B's from the re-sent hand-off.
    assert_eq!(hash(ctx, name).await, fields([(guard.field(), "1")]));
    ctx.settles(name, &[(name, "hash[\"1\"]")]).await;
    guard.unlock().await.expect("B unlocks");
    ctx.settles(name, &[]).await;
}

async fn lock_hand_off(ctx: &Ctx, name: &str) {
    reentrant_hand_off(ctx, name, ctx.client.lock(name)).await;
}

async fn fenced_hand_off(ctx: &Ctx, name: &str) {
    let lock = ctx.client.fenced_lock(name);
    let (first, guard) = hand_off_reply_lost(ctx, name, FENCED_HAND_OFF, lock).await;
    let token = *guard.token();
    // The hand-off that ran took B's token; its re-send replayed it and took no other.
    assert_eq!(token, first + 1, "B's token is the lost hand-off's");
    assert_eq!(hash(ctx, name).await, fields([(guard.field(), "1")]));
    let counter = format!("redisson_lock_token:{{{name}}}");
    let latest = token.to_string();
    ctx.settles(
        name,
        &[(name, "hash[\"1\"]"), (counter.as_str(), latest.as_str())],
    )
    .await;
    guard.unlock().await.expect("B unlocks");
    ctx.settles(name, &[(counter.as_str(), latest.as_str())])
        .await;
}

async fn write_hand_off(ctx: &Ctx, name: &str) {
    let lock = ctx.client.read_write_lock(name).write();
    let (_, guard) = hand_off_reply_lost(ctx, name, WRITE_HAND_OFF, lock).await;
    let held = fields([("mode", "write"), (guard.field(), "1")]);
    assert_eq!(hash(ctx, name).await, held);
    ctx.settles(name, &[(name, "hash[\"1\", \"write\"]")]).await;
    guard.unlock().await.expect("B unlocks");
    ctx.settles(name, &[]).await;
}

async fn fair_acquire(ctx: &Ctx, name: &str) {
    acquire_is_undone(ctx, name, ctx.client.fair_lock(name)).await;
}

async fn fair_unlock(ctx: &Ctx, name: &str) {
    unlock_is_resent(ctx, name, ctx.client.fair_lock(name)).await;
}

async fn fair_give_up(ctx: &Ctx, name: &str) {
    give_up_is_reconciled(ctx, name, ctx.client.fair_lock(name)).await;
}

/// A waiter of the fair `lock` queues behind a holder and gives up at its deadline, and its
/// give-up's reply is lost: the waiter leaves no queue entry behind.
async fn give_up_is_reconciled<K: FairQueue>(ctx: &Ctx, name: &str, lock: Lock<K>) {
    let holder = lock.lock().await.expect("lock");
    let waiter = lock.with_owner(Owner::new());
    // The waiter's first try queues it; its give-up at the deadline is the second script.
    let armed = ctx.lose_script_reply(name, 2);
    let waited = waiter.try_lock_for(Duration::from_millis(200)).await;
    armed.fired().await;
    match waited {
        Ok(None) => {}
        other => reconciled(other, "fair give-up"),
    }
    holder.unlock().await.expect("unlock");
    ctx.settles(name, &[]).await;
}

async fn non_reentrant_acquire(ctx: &Ctx, name: &str) {
    acquire_is_undone(ctx, name, ctx.client.non_reentrant_lock(name)).await;
}

async fn non_reentrant_refused_reentry(ctx: &Ctx, name: &str) {
    refused_reentry_reply_lost(ctx, name, ctx.client.non_reentrant_lock(name)).await;
}

async fn non_reentrant_undo(ctx: &Ctx, name: &str) {
    undo_is_resent(ctx, name, ctx.client.non_reentrant_lock(name)).await;
}

async fn non_reentrant_unlock(ctx: &Ctx, name: &str) {
    unlock_is_resent(ctx, name, ctx.client.non_reentrant_lock(name)).await;
}

async fn non_reentrant_hand_off(ctx: &Ctx, name: &str) {
    reentrant_hand_off(ctx, name, ctx.client.non_reentrant_lock(name)).await;
}

async fn non_reentrant_fair_acquire(ctx: &Ctx, name: &str) {
    acquire_is_undone(ctx, name, ctx.client.non_reentrant_fair_lock(name)).await;
}

async fn non_reentrant_fair_refused_reentry(ctx: &Ctx, name: &str) {
    refused_reentry_reply_lost(ctx, name, ctx.client.non_reentrant_fair_lock(name)).await;
}

async fn non_reentrant_fair_undo(ctx: &Ctx, name: &str) {
    undo_is_resent(ctx, name, ctx.client.non_reentrant_fair_lock(name)).await;
}

async fn non_reentrant_fair_unlock(ctx: &Ctx, name: &str) {
    unlock_is_resent(ctx, name, ctx.client.non_reentrant_fair_lock(name)).await;
}

async fn non_reentrant_fair_give_up(ctx: &Ctx, name: &str) {
    give_up_is_reconciled(ctx, name, ctx.client.non_reentrant_fair_lock(name)).await;
}

async fn read_acquire(ctx: &Ctx, name: &str) {
    acquire_is_undone(ctx, name, ctx.client.read_write_lock(name).read()).await;
}

async fn read_unlock(ctx: &Ctx, name: &str) {
    unlock_is_resent(ctx, name, ctx.client.read_write_lock(name).read()).await;
}

async fn write_acquire(ctx: &Ctx, name: &str) {
    acquire_is_undone(ctx, name, ctx.client.read_write_lock(name).write()).await;
}

async fn write_unlock(ctx: &Ctx, name: &str) {
    unlock_is_resent(ctx, name, ctx.client.read_write_lock(name).write()).await;
}

async fn fenced_acquire(ctx: &Ctx, name: &str) {
    let lock = ctx.client.fenced_lock(name);
    let guard = lock.lock().await.expect("lock");
    let token = *guard.token();
    guard.unlock().await.expect("unlock");
    let counter = format!("redisson_lock_token:{{{name}}}");
    let armed = ctx.lose_script_reply(name, 1);
    reconciled(lock.lock().await, "fenced acquire");
    armed.fired().await;
    // One application took one token: the counter moved by one, not two.
    let next = (token + 1).to_string();
    ctx.settles(name, &[(counter.as_str(), next.as_str())])
        .await;
}

async fn spin_acquire(ctx: &Ctx, name: &str) {
    acquire_is_undone(ctx, name, ctx.client.spin_lock(name)).await;
}

async fn spin_unlock(ctx: &Ctx, name: &str) {
    unlock_is_resent(ctx, name, ctx.client.spin_lock(name)).await;
}

async fn semaphore_acquire(ctx: &Ctx, name: &str) {
    let semaphore = ctx.client.semaphore(name);
    assert!(semaphore.try_set_permits(3).await.expect("set permits"));
    let armed = ctx.lose_script_reply(name, 1);
    outcome_unknown(semaphore.acquire(1).await, "semaphore acquire");
    armed.fired().await;
    // The script ran once: one permit gone, not two.
    ctx.settles(name, &[(name, "2")]).await;
}

async fn semaphore_release(ctx: &Ctx, name: &str) {
    let semaphore = ctx.client.semaphore(name);
    assert!(semaphore.try_set_permits(3).await.expect("set permits"));
    semaphore.acquire(1).await.expect("acquire").forget();
    let armed = ctx.lose_script_reply(name, 1);
    outcome_unknown(semaphore.release(1).await, "semaphore release");
    armed.fired().await;
    ctx.settles(name, &[(name, "3")]).await;
}

async fn expirable_acquire(ctx: &Ctx, name: &str) {
    let semaphore = ctx.client.permit_expirable_semaphore(name);
    assert!(semaphore.try_set_permits(2).await.expect("set permits"));
    let armed = ctx.lose_script_reply(name, 1);
    reconciled(semaphore.acquire().await, "permit acquire");
    armed.fired().await;
    // The permit it may have taken was given back by id: both permits free, none held.
    ctx.settles(name, &[(name, "2")]).await;
}

async fn expirable_release(ctx: &Ctx, name: &str) {
    let semaphore = ctx.client.permit_expirable_semaphore(name);
    assert!(semaphore.try_set_permits(2).await.expect("set permits"));
    let id = semaphore.acquire().await.expect("acquire");
    let armed = ctx.lose_script_reply(name, 1);
    let released = semaphore.release(id).await;
    armed.fired().await;
    if released.is_err() {
        reconciled(released, "permit release");
    }
    ctx.settles(name, &[(name, "2")]).await;
}

async fn latch_count_down(ctx: &Ctx, name: &str) {
    let latch = ctx.client.count_down_latch(name);
    assert!(latch.try_set_count(2).await.expect("set count"));
    let armed = ctx.lose_script_reply(name, 1);
    outcome_unknown(latch.count_down().await, "count-down");
    armed.fired().await;
    // Counted once, not twice.
    ctx.settles(name, &[(name, "1")]).await;
}

#[tokio::test]
async fn representative_single() {
    run(Deployment::Single, Some(REPRESENTATIVE)).await;
}

/// Issue 46, case 6, in the default suite (the matrix runs it in every topology).
#[tokio::test]
async fn a_lost_re_entry_after_a_delete_leaves_no_hold() {
    run(Deployment::Single, Some(&["lock.reentry_after_delete"])).await;
}

#[tokio::test]
async fn representative_master_replica() {
    run(Deployment::MasterReplica, Some(REPRESENTATIVE)).await;
}

#[tokio::test]
async fn representative_sentinel() {
    run(Deployment::Sentinel, Some(REPRESENTATIVE)).await;
}

/// The regression test of the cluster client's own re-send after an I/O error: with redis-rs's
/// default retries, the acquire ran twice and left a hold count of 2 behind.
#[tokio::test]
async fn representative_cluster() {
    run(Deployment::Cluster, Some(REPRESENTATIVE)).await;
}

/// With the cluster client's own retries off, rlock still follows `MOVED`: after the lock's slot
/// moved to another master, the next acquire is redirected there, through that master's proxy (the
/// node addresses in the redirect are mapped by `nat_map`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_redirects_are_followed_through_the_proxies() {
    let ctx = Ctx::start(Deployment::Cluster).await;
    let name = "lost:moved";
    let lock = ctx.client.lock(name);
    lock.lock()
        .await
        .expect("lock")
        .unlock()
        .await
        .expect("unlock");
    let cluster = ctx.proxied.cluster().expect("a cluster");
    let from = cluster.master_of(name).port();
    let to = cluster
        .masters()
        .iter()
        .find(|master| master.port() != from)
        .expect("another master");
    let target = ctx
        .proxied
        .proxies()
        .find(|proxy| proxy.upstream() == to.port())
        .expect("the target's proxy");
    let before = target.requests();
    tokio::task::block_in_place(|| cluster.migrate_slot_of(name, to));
    let guard = lock.lock().await.expect("the acquire follows MOVED");
    assert!(
        target.requests() > before,
        "the redirected acquire went through the new master's proxy"
    );
    assert_eq!(ctx.state(name).await.len(), 1, "held on the new master");
    guard.unlock().await.expect("unlock");
    ctx.settles(name, &[]).await;
}

#[tokio::test]
#[ignore = "the full matrix: scripts/lost-replies.sh"]
async fn every_script_single() {
    run(Deployment::Single, None).await;
}

#[tokio::test]
#[ignore = "the full matrix: scripts/lost-replies.sh"]
async fn every_script_master_replica() {
    run(Deployment::MasterReplica, None).await;
}

#[tokio::test]
#[ignore = "the full matrix: scripts/lost-replies.sh"]
async fn every_script_sentinel() {
    run(Deployment::Sentinel, None).await;
}

#[tokio::test]
#[ignore = "the full matrix: scripts/lost-replies.sh"]
async fn every_script_cluster() {
    run(Deployment::Cluster, None).await;
}

/// Not a lost reply but a late one: the hand-off's reply is held back while the waiter it passes
/// the lock to is dropped (its acquisition cancelled while claimed). The hand-off ran, so the
/// dropped waiter's hold is released in its stead: passed on to the next waiter (C, when one
/// queues: a second hand-off), or released for real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_while_handed_the_lock_passes_it_on() {
    let ctx = Ctx::start(Deployment::Single).await;
    for third in [false, true] {
        let name = format!("lost:dropped-while-claimed:{third}");
        let lock = ctx.client.lock(name.as_str());
        let owners: Vec<Lock<_>> = (0..3)
            .map(|_| lock.clone().with_owner(Owner::new()))
            .collect();
        let held = owners[0].lock().await.expect("A locks");
        // The acquires join the local queue before their first await: B heads it, C follows. Both
        // wait for a fixed lease, so the lock passes by script.
        let mut dropped = Box::pin(owners[1].lock_with_lease(WAITERS_LEASE));
        assert!(futures::poll!(&mut dropped).is_pending(), "B waits for A");
        let mut next = pin!(owners[2].lock_with_lease(WAITERS_LEASE));
        if third {
            assert!(futures::poll!(&mut next).is_pending(), "C waits behind B");
        }
        let proxy = ctx.proxied.proxy_of(&name);
        let before = hand_offs(&ctx, &name);
        let requests = proxy.requests();
        proxy.delay_replies(Duration::from_millis(300));
        let (unlocked, ()) = tokio::join!(held.unlock(), async {
            // The hand-off to B went through the proxy (B was claimed before it was sent); its
            // reply is held back.
            let sent = eventually(Duration::from_secs(5), async || proxy.requests() > requests);
            assert!(sent.await, "A's release sends the hand-off");
            drop(dropped);
            proxy.delay_replies(Duration::ZERO);
        });
        unlocked.expect("A's unlock: the hand-off ran");
        if third {
            let guard = tokio::time::timeout(Duration::from_secs(5), &mut next)
                .await
                .expect("C is passed B's hold")
                .expect("C's acquire");
            assert_eq!(hash(&ctx, &name).await, fields([(guard.field(), "1")]));
            guard.unlock().await.expect("C unlocks");
        }
        ctx.settles(&name, &[]).await;
        let passed = hand_offs(&ctx, &name) - before;
        assert_eq!(
            passed,
            1 + u64::from(third),
            "A to B, then B to C if C queued"
        );
    }
}

/// The hand-offs run so far on the master of `name`.
fn hand_offs(ctx: &Ctx, name: &str) -> u64 {
    let master = ctx.proxied.master_of(name);
    tokio::task::block_in_place(|| local_hand_offs(&mut raw_blocking(master)))
}

/// The reentrant lock's undo of an acquire whose reply was lost, as `EVALSHA` names it.
const LOCK_UNDO_ACQUIRE: &str = include_str!("../../crates/core/lua/lock_undo_acquire.lua");

/// The field of `owner` on `client`: `<node id>:<owner id>`.
fn field_of(client: &Client, owner: Owner) -> String {
    format!("{}:{owner}", client.node_id())
}

/// A's release hands the lock to B, but the hand-off never runs: the proxy drops it and cuts its
/// connection. Before the hand-off was re-sent under a latch, both owners' holds were undone
/// instead, and B tried in Redis once the undos were done or A's release stopped waiting for them
/// (a command timeout per retry): A's undo freed the lock, B took it by itself, and then the undo
/// of B's field (held back here by three dropped sends, as a frozen server once held it behind a
/// script load) deleted B's own hold, so B worked with the lock free for anyone and its unlock
/// said the lease was lost. Now the re-sent hand-off passes the lock, and nothing undoes B's field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_that_never_ran_leaves_its_waiter_the_hold() {
    let ctx = Ctx::start(Deployment::Single).await;
    // A's release waits no longer than 2 × 100 ms for what reconciles its hand-off.
    let client = Ctx::client_of(&ctx.proxied, |config| {
        config.command_timeout = Duration::from_millis(100);
        config.retry_attempts = 1;
    })
    .await;
    let name = "never-ran:hand-off";
    let proxy = ctx.proxied.proxy_of(name);
    let lock = client.lock(name);
    let (a, b) = (Owner::new(), Owner::new());
    let b_field = field_of(&client, b);
    let held = lock.clone().with_owner(a).lock().await.expect("A locks");
    let waiter = lock.clone().with_owner(b);
    let mut waiting = pin!(waiter.lock_with_lease(WAITERS_LEASE));
    assert!(futures::poll!(&mut waiting).is_pending(), "B waits for A");
    proxy.drop_request(
        Match::command("EVALSHA").with_arg(script_sha1(LOCK_HAND_OFF)),
        1,
    );
    // An undo's re-sends back off 50, 100, 200 ms: the third runs well after 200 ms.
    for _ in 0..3 {
        proxy.drop_request(
            Match::command("EVALSHA")
                .with_arg(script_sha1(LOCK_UNDO_ACQUIRE))
                .with_arg(&b_field),
            1,
        );
    }
    let (unlocked, acquired) = tokio::join!(
        held.unlock(),
        tokio::time::timeout(Duration::from_secs(5), &mut waiting)
    );
    let guard = acquired.expect("B acquires").expect("B's acquire");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        hash(&ctx, name).await,
        fields([(b_field.as_str(), "1")]),
        "B's hold while B holds the lock"
    );
    unlocked.expect("A's unlock: the re-sent hand-off ran");
    assert_eq!(
        proxy.dropped_requests(),
        1,
        "the hand-off alone was dropped"
    );
    assert!(!guard.is_lease_lost());
    guard.unlock().await.expect("B unlocks its own hold");
    assert!(hash(&ctx, name).await.is_empty());
}

/// An owner's acquire never runs (dropped, its connection cut): its caller gets an error, and the
/// undo of what it may have done is sent after it; the first send dies with the connection, the
/// re-send is dropped too, so the undo is still in flight when the same owner (a scope, a blocking
/// thread, a `with_owner` handle) tries again at once. That second acquire must not be the hold the
/// late undo takes away: it waits until the undo has run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_that_never_ran_is_undone_before_its_owner_tries_again() {
    let ctx = Ctx::start(Deployment::Single).await;
    let name = "never-ran:acquire";
    let proxy = ctx.proxied.proxy_of(name);
    let owner = Owner::new();
    let field = field_of(&ctx.client, owner);
    let lock = ctx.client.lock(name).with_owner(owner);
    proxy.drop_request(Match::command("EVALSHA").with_arg(name).with_arg(&field), 1);
    proxy.drop_request(
        Match::command("EVALSHA")
            .with_arg(script_sha1(LOCK_UNDO_ACQUIRE))
            .with_arg(&field),
        1,
    );
    let failed = lock.lock().await;
    assert!(
        matches!(failed, Err(Error::Timeout { .. } | Error::Backend { .. })),
        "the dropped acquire fails: {failed:?}"
    );
    let guard = lock.lock().await.expect("the owner's second acquire");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        hash(&ctx, name).await,
        fields([(field.as_str(), "1")]),
        "the owner's hold while it holds the lock"
    );
    assert_eq!(
        proxy.dropped_requests(),
        2,
        "the acquire and an undo were dropped"
    );
    assert!(!guard.is_lease_lost());
    guard
        .unlock()
        .await
        .expect("the owner unlocks its own hold");
    assert!(hash(&ctx, name).await.is_empty());
}

/// The reentrant lock's unlock, as `EVALSHA` names it.
const LOCK_UNLOCK: &str = include_str!("../../crates/core/lua/lock_unlock.lua");

/// An owner's unlock never runs, however often it is re-sent (the proxy drops every send and cuts
/// its connection), so the unlock fails. The same owner then locks again: it must not find its old
/// hold and re-enter it (a count of 2 that its next unlock leaves at 1, held by nobody until the
/// lease runs out). The unlock goes on in the background under its latch and the owner's acquire
/// waits for it, so the owner ends with one hold, its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_that_never_ran_is_settled_before_its_owner_locks_again() {
    let ctx = Ctx::start(Deployment::Single).await;
    let client = Ctx::client_of(&ctx.proxied, |config| config.retry_attempts = 2).await;
    let name = "never-ran:unlock";
    let proxy = ctx.proxied.proxy_of(name);
    let owner = Owner::new();
    let field = field_of(&client, owner);
    let lock = client.lock(name).with_owner(owner);
    let guard = lock.lock().await.expect("the owner locks");
    // The first send and both re-sends.
    for _ in 0..3 {
        proxy.drop_request(
            Match::command("EVALSHA")
                .with_arg(script_sha1(LOCK_UNLOCK))
                .with_arg(&field),
            1,
        );
    }
    let failed = guard.unlock().await;
    assert!(
        matches!(failed, Err(Error::Timeout { .. } | Error::Backend { .. })),
        "every send of the unlock was dropped: {failed:?}"
    );
    assert_eq!(proxy.dropped_requests(), 3);
    let guard = lock.lock().await.expect("the owner locks again");
    assert_eq!(
        hash(&ctx, name).await,
        fields([(field.as_str(), "1")]),
        "one hold, the new one"
    );
    guard.unlock().await.expect("the owner unlocks");
    assert!(hash(&ctx, name).await.is_empty());
}

const LOCK_RENEW: &str = include_str!("../../crates/core/lua/lock_renew.lua");

/// A streak of free hand-offs rests on the first owner's hash being known held: its last confirmed
/// renewal (or acquire) sent less than two thirds of the lease ago, on the clock at the hand-off. A
/// holds a hold passed to it by script while the client listened on the lock's channel (so it may
/// pass freely) and B waits behind it. Released at once, A's hold passes freely; released once
/// every renewal of it since was lost on the way (its request dropped, its connection cut) for over
/// two thirds of the 1.5 s lease, it passes by script, which checks that Redis still has the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_renewal_sends_the_hand_off_to_the_script() {
    let ctx = Ctx::start(Deployment::Single).await;
    let client = Ctx::client_of(&ctx.proxied, |config| {
        config.watchdog_timeout = Duration::from_millis(1500);
    })
    .await;
    for unconfirmed in [false, true] {
        let name = format!("unconfirmed-renewal:{unconfirmed}");
        let lock = client.lock(name.as_str());
        let [opener, a, b] = [(); 3].map(|()| lock.clone().with_owner(Owner::new()));
        let opened = opener.lock().await.expect("the opener locks");
        // The acquires join the local queue before their first await: A heads it, B follows.
        let mut a_waits = Box::pin(a.lock());
        assert!(futures::poll!(&mut a_waits).is_pending(), "A waits");
        let mut b_waits = Box::pin(b.lock());
        assert!(futures::poll!(&mut b_waits).is_pending(), "B waits");
        let mut master = ctx.master(&name).await;
        assert!(
            rlock_tests::harness::listening_on(&lock, &mut master).await,
            "the client listens on the lock's channel"
        );
        opened
            .unlock()
            .await
            .expect("the opener passes the lock by script");
        let held = tokio::time::timeout(Duration::from_secs(5), a_waits)
            .await
            .expect("A is passed the lock")
            .expect("A's acquire");
        let before = client.stats();
        if unconfirmed {
            let proxy = ctx.proxied.proxy_of(&name);
            // Renewals are retried every 50 ms after a failure: enough drops for every one until
            // well after A's release.
            for _ in 0..100 {
                proxy.drop_request(
                    Match::command("EVALSHA").with_arg(script_sha1(LOCK_RENEW)),
                    1,
                );
            }
            // Past two thirds of the lease, short of the lease itself.
            tokio::time::sleep(Duration::from_millis(1150)).await;
            assert!(!held.is_lease_lost(), "A's hold is not yet known lost");
            assert!(proxy.dropped_requests() > 0, "A's renewals were dropped");
        }
        held.unlock().await.expect("A releases");
        let guard = tokio::time::timeout(Duration::from_secs(5), b_waits)
            .await
            .expect("B is passed the lock")
            .expect("B's acquire");
        let after = client.stats();
        let (passed, free) = (
            after.local_handoffs - before.local_handoffs,
            after.free_handoffs - before.free_handoffs,
        );
        assert_eq!(passed, 1, "A passed the lock to B");
        assert_eq!(
            free,
            u64::from(!unconfirmed),
            "freely only while surely held"
        );
        // Lent, Redis keeps A's field; passed by script, B's.
        let a_field = field_of(&client, a.owner().expect("a bound owner"));
        let in_redis = if unconfirmed { guard.field() } else { &a_field };
        assert_eq!(hash(&ctx, &name).await, fields([(in_redis, "1")]));
        guard.unlock().await.expect("B unlocks");
        ctx.settles(&name, &[]).await;
    }
}

/// Runs a script on `server` that keeps it busy for `busy` (past `busy-reply-threshold`, set here
/// to 20 ms, every other client's command is refused with `BUSY`).
async fn keep_busy(server: redis::Client, busy: Duration) {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(busy * 2));
    let mut redis = server
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("direct connection");
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg("20")
        .query_async(&mut redis)
        .await
        .expect("CONFIG SET busy-reply-threshold");
    let spin = "local start = redis.call('TIME') \
                local stop = (start[1] * 1000000 + start[2]) + tonumber(ARGV[1]) \
                repeat local now = redis.call('TIME') until now[1] * 1000000 + now[2] >= stop \
                return 1";
    let _: i64 = redis::cmd("EVAL")
        .arg(spin)
        .arg(0)
        .arg(busy.as_micros().to_string())
        .query_async(&mut redis)
        .await
        .expect("the busy script runs");
}

/// A hand-off whose reply is lost, then whose re-send Redis refuses (`BUSY`: a script runs past the
/// busy threshold): the refusal changed nothing, but says nothing of the first send, which ran and
/// passed the lock. So the release goes on re-sending until a reply tells the outcome, and B holds
/// the lock once, by the hand-off. Taking the refusal for "did not run" sent B back to Redis, where
/// its own acquire counted a second hold on top of the one passed to it, which then outlived B's
/// unlock (the soak's `hand_off_replies_lost_cluster` once saw both).
#[tokio::test]
async fn a_hand_off_whose_reply_was_lost_and_whose_re_send_was_refused_passes_once() {
    let ctx = Ctx::start(Deployment::Single).await;
    // Re-sends 200 to 400 ms apart: the first falls in the second that Redis is kept busy.
    let client = Ctx::client_of(&ctx.proxied, |config| {
        config.retry_delay = Duration::from_millis(400);
        config.retry_max_delay = Duration::from_millis(400);
    })
    .await;
    let name = "hand-off-re-send-refused";
    let lock = client.lock(name);
    let (first, second) = (
        lock.clone().with_owner(Owner::new()),
        lock.with_owner(Owner::new()),
    );
    let held = first.lock().await.expect("A locks");
    let mut waiting = pin!(second.lock_with_lease(WAITERS_LEASE));
    assert!(futures::poll!(&mut waiting).is_pending(), "B waits for A");
    let armed = ctx.lose_reply_of(LOCK_HAND_OFF, name);
    let busy = async {
        armed.fired().await;
        keep_busy(ctx.proxied.master_of(name).client(), Duration::from_secs(1)).await;
    };
    let (_, acquired, ()) = tokio::join!(
        held.unlock(),
        tokio::time::timeout(Duration::from_secs(10), &mut waiting),
        busy
    );
    let guard = acquired
        .expect("B is passed the lock within seconds")
        .expect("B's acquire");
    // B's hold, once: nothing of A's, no second count of B's own.
    assert_eq!(hash(&ctx, name).await, fields([(guard.field(), "1")]));
    guard.unlock().await.expect("B unlocks");
    ctx.settles(name, &[]).await;
}
