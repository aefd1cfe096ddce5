//! What the scenarios share: a [`Party`] is a client of either side (the Redisson emulator or
//! rlock) behind one interface, so that every scenario is written once and run in both directions;
//! [`Party::get`] hands out a [`PartyLock`] of any [`InteropKind`], so that the scenarios every
//! lock kind shares are written once and run for each kind; a [`Site`] runs them on one server or
//! in a cluster ([`Topology`]); [`Redis`] and [`Listener`] observe the server directly.
//!
//! A kind is described, and its objects made, by its [`ObjectKind`] impl in the emulator module of
//! that kind (`rlock_tests::redisson`); its line in [`rlock_tests::lock_kinds!`] runs the generic
//! scenarios for it ([`every_kind!`], and [`InteropKind::all`] for the scenarios that loop over the
//! kinds within one test). An [`InteropKind`] constant names it in the scenarios of its own, which
//! go into a module of their own. A kind that is another's with a different acquire (the non-reentrant locks) names that one
//! as its [`InteropKind::twin`], whose channels and messages it shares.
//!
//! The synchronizers (semaphores, count-down latch) have their own parties: [`synchronizers`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock_redisson::kind::LockKind;
use rlock_redisson::{Owner, ShardedPubSub};
use rlock_tests::RedisServer;
use rlock_tests::harness;
use rlock_tests::redisson::{
    FairKind, FencedKind, JavaClient, JavaConfig, JavaError, JavaObject, KINDS, MissingUnlock,
    NonReentrantFairKind, NonReentrantKind, ObjectKind, Polling, ReadKind, RedissonVersion,
    ReentrantKind, RlockObject, SpinKind, ThreadId, WriteKind,
};
use rlock_tests::topology::Cluster;
use rlock_tests::{java_object, rlock_object};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub(crate) mod synchronizers;

pub(crate) use synchronizers::{
    PartyExpirable, PartyLatch, PartySemaphore, Permits, SemaphoreKind, both_semaphores,
};

/// The Redisson version scenarios use unless they say otherwise: HEAD.
pub(crate) const JAVA_VERSION: RedissonVersion = RedissonVersion::V4;

/// How soon a waiter must own the lock after the other side released it. Typical figures are a
/// millisecond or two; the margin is for a loaded 2-core machine.
pub(crate) const WAKE_LIMIT: Duration = Duration::from_millis(50);

/// How long a scenario waits for a waiter that should already be awake: far below the 30 s PTTL
/// it would otherwise sleep out, so a lost wake-up fails fast.
const WOKEN_LIMIT: Duration = Duration::from_secs(5);

/// The result of a waiter task that should own the lock now (or very soon).
pub(crate) async fn woken<T>(waiting: JoinHandle<T>) -> T {
    tokio::time::timeout(WOKEN_LIMIT, waiting)
        .await
        .expect("the waiter was not woken (it would sleep out the PTTL)")
        .expect("waiter task")
}

/// Which implementation a party runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// The Redisson wire emulator.
    Java,
    /// rlock.
    Rlock,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Java => "java",
            Self::Rlock => "rlock",
        })
    }
}

/// A kind of Redisson lock object that both sides implement, and the generic scenarios run for.
/// What it looks like on the wire and how its objects are made is its [`ObjectKind`], in the
/// emulator module of that kind; this adds what the scenarios compare with.
#[derive(Clone, Copy)]
pub(crate) struct InteropKind(&'static dyn ObjectKind);

impl InteropKind {
    // The kinds the scenarios name, one per `ObjectKind` impl.
    pub(crate) const REENTRANT: Self = Self(&ReentrantKind);
    pub(crate) const FAIR: Self = Self(&FairKind);
    pub(crate) const SPIN: Self = Self(&SpinKind);
    pub(crate) const FENCED: Self = Self(&FencedKind);
    pub(crate) const READ: Self = Self(&ReadKind);
    pub(crate) const WRITE: Self = Self(&WriteKind);
    pub(crate) const NON_REENTRANT: Self = Self(&NonReentrantKind);
    pub(crate) const NON_REENTRANT_FAIR: Self = Self(&NonReentrantFairKind);

    /// The kind of `object`, for [`every_kind!`]'s cases.
    pub(crate) const fn of(object: &'static dyn ObjectKind) -> Self {
        Self(object)
    }

    /// Every kind, for a scenario that loops over them within one test (as [`every_kind!`]
    /// instantiates the others).
    pub(crate) fn all() -> impl Iterator<Item = Self> {
        KINDS.iter().copied().map(Self)
    }

    /// The suffix of its object per map entry, for the kinds Redisson hands out per entry.
    pub(crate) fn entry_suffix(self) -> Option<&'static str> {
        self.0.entry_suffix()
    }

    /// The kind whose hash, channels, messages and release this one shares, acquiring otherwise:
    /// the reentrant twin of a non-reentrant lock, else the kind itself.
    pub(crate) fn twin(self) -> Self {
        self.0.twin().map_or(self, Self)
    }

    /// Whether an owner that holds the lock can take it again (a second hold, counted).
    pub(crate) fn is_reentrant(self) -> bool {
        self.0.twin().is_none()
    }

    /// The kind that a holder of this kind keeps out, for the scenarios with a holder and someone
    /// who waits for it: a writer for a reader (readers share), else this kind.
    pub(crate) fn contender(self) -> Self {
        self.0.contender().map_or(self, Self)
    }

    /// The hash field of the owner whose client-wide field is `owner` (`<client id>:<thread>`,
    /// [`Party::field`]): the write lock's ends in `:write` (docs/protocol.md §1.2).
    pub(crate) fn field(self, owner: &str) -> String {
        format!("{owner}{}", self.0.field_suffix())
    }

    /// The lock's hash while `owner` alone holds it `count` times: a read-write lock's also has
    /// its `mode` (§7.1).
    pub(crate) fn holds(self, owner: &str, count: u32) -> BTreeMap<String, String> {
        let mut hash = holds([(self.field(owner), count)]);
        if let Some(mode) = self.0.mode() {
            let _ = hash.insert("mode".to_owned(), mode.to_owned());
        }
        hash
    }

    /// The channel that a waiter whose owner field is `owner` sleeps on (§1.4): the lock's, the
    /// fair waiter's own, the read-write lock's; `None` for the spin lock, whose waiters poll.
    pub(crate) fn channel(self, name: &str, owner: &str) -> Option<String> {
        self.twin().0.channel(name, owner)
    }

    /// How a waiter that has no [channel](InteropKind::channel) polls.
    fn polling(self) -> Option<Polling> {
        self.twin().0.polling()
    }

    /// What a holder's last unlock publishes while nobody waits (§2.3, §6.7, §7.3, §7.5, §8.1): the
    /// lock's `0`, the read lock's `0` and the write lock's `1` on the read-write channel; nothing
    /// for the fair lock (it wakes the queue head only) and the spin lock.
    pub(crate) fn release_message(self, name: &str) -> Option<Message> {
        let message = self.twin().0.release_message(name);
        message.map(|(channel, payload)| Message::new(channel, payload))
    }

    /// What an unlock of a lock that does not exist answers (Java HEAD and rlock alike) and
    /// publishes: refused, silently, for the lock kinds (§2.3 step 2); a success for the fair lock
    /// (§6.7 step 3: it would wake a queue head, and there is none); refused, but with the unlock
    /// message of the half, for the read-write lock (§7.3, §7.5 step 2).
    pub(crate) fn missing_unlock(self, name: &str) -> (Unlocked, Option<Message>) {
        match self.twin().0.missing_unlock() {
            MissingUnlock::Refused => (Unlocked::NotOwner, None),
            MissingUnlock::RefusedPublishing => (Unlocked::NotOwner, self.release_message(name)),
            MissingUnlock::Released => (Unlocked::Released, None),
        }
    }

    /// How soon after a release a waiter of this kind owns the lock: [`WAKE_LIMIT`] for the kinds
    /// that publish; a spin-lock waiter hears nothing and only notices at its next try, at most
    /// one back-off delay later.
    pub(crate) fn wake_limit(self) -> Duration {
        WAKE_LIMIT
            + self
                .polling()
                .map_or(Duration::ZERO, |polling| polling.max_delay)
    }
}

/// Kinds are told apart by their interface.
impl PartialEq for InteropKind {
    fn eq(&self, other: &Self) -> bool {
        self.0.interface() == other.0.interface()
    }
}

impl Eq for InteropKind {}

impl fmt::Debug for InteropKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.interface())
    }
}

impl fmt::Display for InteropKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.interface())
    }
}

/// One client of either side.
#[derive(Clone, Debug)]
pub(crate) enum Party {
    Java(JavaClient),
    Rlock(rlock_redisson::Client),
}

impl Party {
    /// A client of `side` with default settings (Java: [`JAVA_VERSION`]).
    pub(crate) async fn connect(side: Side, server: &RedisServer) -> Self {
        Self::connect_with(side, server, None).await
    }

    /// A client of `side` whose waiters all race in Redis, each on its own, as Redisson's threads
    /// do: rlock without its local queue (`Config::local_handoff`), where only the queue's head
    /// tries. For the scenarios about the wake rule itself.
    pub(crate) async fn racing(side: Side, server: &RedisServer) -> Self {
        match side {
            Side::Java => Self::connect(side, server).await,
            Side::Rlock => Self::Rlock(
                harness::client_with(server, |config| config.local_handoff = false).await,
            ),
        }
    }

    /// A client of `side` whose watchdog lease (Java's `lockWatchdogTimeout`, rlock's
    /// `Config.watchdog_timeout`) is `watchdog` instead of 30 s.
    pub(crate) async fn connect_with(
        side: Side,
        server: &RedisServer,
        watchdog: Option<Duration>,
    ) -> Self {
        match side {
            Side::Java => Self::java(server, JAVA_VERSION, watchdog).await,
            Side::Rlock => Self::Rlock(
                harness::client_with(server, |config| {
                    if let Some(watchdog) = watchdog {
                        config.watchdog_timeout = watchdog;
                    }
                })
                .await,
            ),
        }
    }

    /// An emulated Java client of `version`.
    pub(crate) async fn java(
        server: &RedisServer,
        version: RedissonVersion,
        watchdog: Option<Duration>,
    ) -> Self {
        let mut config = JavaConfig::default();
        if let Some(watchdog) = watchdog {
            config.lock_watchdog_timeout = watchdog;
        }
        let client = JavaClient::connect_with(&server.url(), version, config)
            .await
            .expect("emulated java client connects");
        Self::Java(client)
    }

    /// A client of `side` in cluster mode: Java of `version` (its AUTO mode picks sharded pub/sub
    /// from 3.22 on), rlock with `sharded`.
    pub(crate) async fn cluster(
        side: Side,
        cluster: &Cluster,
        version: RedissonVersion,
        sharded: ShardedPubSub,
    ) -> Self {
        match side {
            Side::Java => {
                let seeds = cluster.seeds();
                let java = JavaClient::connect_cluster(&seeds, version, JavaConfig::default());
                Self::Java(java.await.expect("emulated java cluster client connects"))
            }
            Side::Rlock => {
                let mut config = cluster.config();
                config.sharded_pubsub = sharded;
                let client = rlock_redisson::Client::with_config(config).await;
                Self::Rlock(client.expect("rlock cluster client connects"))
            }
        }
    }

    /// The emulated Java client behind a Java party.
    pub(crate) fn java_client(&self) -> &JavaClient {
        match self {
            Self::Java(java) => java,
            Self::Rlock(_) => panic!("not a java party"),
        }
    }

    pub(crate) fn side(&self) -> Side {
        match self {
            Self::Java(_) => Side::Java,
            Self::Rlock(_) => Side::Rlock,
        }
    }

    /// The hash field `thread` (Java) or `Owner::from_id(thread)` (rlock) holds under.
    pub(crate) fn field(&self, thread: ThreadId) -> String {
        match self {
            Self::Java(java) => java.lock_name(thread),
            Self::Rlock(client) => format!("{}:{thread}", client.node_id()),
        }
    }

    /// The `kind` object `name` (Java: a new object, as `getLock` and its siblings make).
    pub(crate) fn get(&self, kind: InteropKind, name: &str) -> PartyLock {
        match self {
            Self::Java(java) => PartyLock::Java(kind.0.java(java, name)),
            Self::Rlock(client) => PartyLock::Rlock(kind.0.rlock(client, name)),
        }
    }

    /// The reentrant lock `name`, for the scenarios about the `RLock` alone.
    pub(crate) fn lock(&self, name: &str) -> PartyLock {
        self.get(InteropKind::REENTRANT, name)
    }

    /// Whether this client's watchdog renews something. For Java, lock `name`; rlock only tells
    /// whether it renews any lock, so scenarios use one lock per rlock client.
    pub(crate) fn is_renewing(&self, name: &str) -> bool {
        match self {
            Self::Java(java) => java.is_renewing(name),
            Self::Rlock(client) => client.stats().renewing_locks > 0,
        }
    }
}

/// A lock of either side and any [`InteropKind`]. Threads are Java thread ids, or rlock owner ids.
#[derive(Clone, Debug)]
pub(crate) enum PartyLock {
    Java(JavaObject),
    Rlock(RlockObject),
}

/// An acquisition call, as both sides have them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Acquisition {
    /// Java's `lock()` / `lock(leaseTime)`, rlock's `lock` / `lock_with_lease`: waits without
    /// limit.
    Lock,
    /// Tries for up to the wait: Java's `tryLock(waitTime, leaseTime)`, or with a zero wait and no
    /// lease its `tryLock()`; rlock's `try_lock_for` / `try_lock_with_lease`, or `try_lock`.
    Try(Duration),
}

/// What an acquisition ended in.
#[derive(Debug)]
pub(crate) enum Acquired {
    Held(Hold),
    /// A try that did not get the lock.
    Busy,
    /// A re-entry the kind refuses: Java's `IllegalMonitorStateException`, rlock's
    /// `Error::ReentryRefused`. Nothing changed.
    ReentryRefused,
}

impl Acquired {
    /// The hold of an acquisition that must succeed.
    fn held(self, call: &str) -> Hold {
        match self {
            Self::Held(hold) => hold,
            other => panic!("{call}: {other:?}"),
        }
    }
}

impl PartyLock {
    /// `how` for `thread`, with a lease or the watchdog.
    pub(crate) async fn acquire(
        &self,
        thread: ThreadId,
        how: Acquisition,
        lease: Option<Duration>,
    ) -> Acquired {
        match self {
            Self::Java(object) => {
                let acquired = match (how, lease) {
                    (Acquisition::Lock, None) => java_object!(object, lock => {
                        thrown(lock.lock(thread).await.map(|()| true))
                    }),
                    (Acquisition::Lock, Some(lease)) => java_object!(object, lock => {
                        let locked = lock.lock_with_lease(thread, lease).await;
                        thrown(locked.map(|()| true))
                    }),
                    (Acquisition::Try(Duration::ZERO), None) => java_object!(object, lock => {
                        thrown(lock.try_lock(thread).await)
                    }),
                    (Acquisition::Try(wait), lease) => java_object!(object, lock => {
                        thrown(lock.try_lock_for(thread, wait, lease).await)
                    }),
                };
                match acquired {
                    Ok(true) => Acquired::Held(self.java_hold(thread)),
                    Ok(false) => Acquired::Busy,
                    Err(JavaError::IllegalMonitorState(_)) => Acquired::ReentryRefused,
                    Err(e) => panic!("java {how:?} failed: {e}"),
                }
            }
            Self::Rlock(object) => rlock_object!(object, lock => {
                let lock = owned(lock, thread);
                let guard = match (how, lease) {
                    (Acquisition::Lock, None) => lock.lock().await.map(Some),
                    (Acquisition::Lock, Some(lease)) => lock.lock_with_lease(lease).await.map(Some),
                    (Acquisition::Try(Duration::ZERO), None) => lock.try_lock().await,
                    (Acquisition::Try(wait), None) => lock.try_lock_for(wait).await,
                    (Acquisition::Try(wait), Some(lease)) => {
                        lock.try_lock_with_lease(wait, lease).await
                    }
                };
                match guard {
                    Ok(Some(guard)) => Acquired::Held(Hold::from(guard)),
                    Ok(None) => Acquired::Busy,
                    Err(rlock_redisson::Error::ReentryRefused { .. }) => Acquired::ReentryRefused,
                    Err(e) => panic!("rlock {how:?} failed: {e}"),
                }
            }),
        }
    }

    /// Waits for the lock without a lease (the watchdog keeps it).
    pub(crate) async fn lock(&self, thread: ThreadId) -> Hold {
        let acquired = self.acquire(thread, Acquisition::Lock, None).await;
        acquired.held("lock()")
    }

    /// Waits for the lock, for a hold that expires after `lease`.
    pub(crate) async fn lock_with_lease(&self, thread: ThreadId, lease: Duration) -> Hold {
        let acquired = self.acquire(thread, Acquisition::Lock, Some(lease)).await;
        acquired.held("lock(leaseTime)")
    }

    /// Tries for up to `wait` (zero: once), with a lease or the watchdog.
    pub(crate) async fn try_lock(
        &self,
        thread: ThreadId,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Option<Hold> {
        match self.acquire(thread, Acquisition::Try(wait), lease).await {
            Acquired::Held(hold) => Some(hold),
            Acquired::Busy => None,
            Acquired::ReentryRefused => panic!("tryLock: re-entry refused"),
        }
    }

    /// [`PartyLock::lock`] on a task; the task returns when it got the lock and the hold.
    pub(crate) fn spawn_lock(&self, thread: ThreadId) -> JoinHandle<(Instant, Hold)> {
        let lock = self.clone();
        tokio::spawn(async move {
            let hold = lock.lock(thread).await;
            (Instant::now(), hold)
        })
    }

    /// Releases one hold of `thread` through the lock API rather than a hold: Java's
    /// `unlock(threadId)`, rlock's `Lock::unlock(owner)`.
    pub(crate) async fn unlock_as(&self, thread: ThreadId) -> Unlocked {
        match self {
            Self::Java(object) => {
                java_unlocked(java_object!(object, lock => lock.unlock(thread).await))
            }
            Self::Rlock(object) => rlock_unlocked(
                rlock_object!(object, lock => lock.unlock(Owner::from_id(thread)).await),
            ),
        }
    }

    /// Deletes the lock whoever holds it; whether it existed.
    pub(crate) async fn force_unlock(&self) -> bool {
        match self {
            Self::Java(object) => {
                java_object!(object, lock => lock.force_unlock().await).expect("java forceUnlock")
            }
            Self::Rlock(object) => rlock_object!(object, lock => lock.force_unlock().await)
                .expect("rlock force_unlock"),
        }
    }

    /// The fair lock's queue, head first, as each side's API lists it (Java: `LRANGE` of the
    /// queue; rlock: `FairLock::queue`).
    pub(crate) async fn queue(&self) -> Vec<String> {
        let waiters = match self {
            Self::Java(JavaObject::Fair(lock)) => return lock.queue().await.expect("java queue"),
            Self::Java(JavaObject::NonReentrantFair(lock)) => {
                return lock.queue().await.expect("java queue");
            }
            Self::Rlock(RlockObject::Fair(lock)) => lock.queue().await,
            Self::Rlock(RlockObject::NonReentrantFair(lock)) => lock.queue().await,
            _ => panic!("not a fair lock"),
        };
        let waiters = waiters.expect("rlock queue");
        waiters.into_iter().map(|waiter| waiter.field).collect()
    }

    /// Waits for the fenced lock; the hold and its token (Java: `lockAndGetToken()`; rlock: the
    /// guard's).
    pub(crate) async fn lock_with_token(&self, thread: ThreadId) -> (Hold, u64) {
        match self {
            Self::Java(JavaObject::Fenced(lock)) => {
                let token = lock.lock_and_get_token(thread).await.expect("java token");
                let token = token.try_into().expect("a positive token");
                (self.java_hold(thread), token)
            }
            Self::Rlock(RlockObject::Fenced(lock)) => {
                let guard = owned(lock, thread).lock().await.expect("rlock lock");
                let token = *guard.token();
                (Hold::from(guard), token)
            }
            _ => panic!("not a fenced lock"),
        }
    }

    /// The fenced lock's latest token (Java: `getToken()`; rlock: `FencedLock::token`).
    pub(crate) async fn token(&self) -> u64 {
        match self {
            Self::Java(JavaObject::Fenced(lock)) => {
                let token = lock.get_token().await.expect("java getToken");
                token.try_into().expect("a token is never negative")
            }
            Self::Rlock(RlockObject::Fenced(lock)) => lock.token().await.expect("rlock token"),
            _ => panic!("not a fenced lock"),
        }
    }

    fn java_hold(&self, thread: ThreadId) -> Hold {
        Hold::Java {
            lock: self.clone(),
            thread,
        }
    }
}

/// A Java acquisition's outcome with what it throws as a [`JavaError`] (the non-reentrant objects'
/// own error; the others' `RedisError`s are never the refusal).
fn thrown<T, E: Into<JavaError>>(result: Result<T, E>) -> Result<T, JavaError> {
    result.map_err(Into::into)
}

fn owned<K: LockKind>(lock: &rlock_redisson::Lock<K>, thread: ThreadId) -> rlock_redisson::Lock<K> {
    lock.clone().with_owner(Owner::from_id(thread))
}

/// The outcome of an unlock, in the terms both sides share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// One hold was released (Java: reply 0 or 1; rlock: `Ok`).
    Released,
    /// Refused, nothing changed: Java's nil reply (`IllegalMonitorStateException`), rlock's
    /// `Error::NotOwner` or, from a guard, `Error::LeaseLost`.
    NotOwner,
}

fn java_unlocked(reply: redis::RedisResult<Option<i64>>) -> Unlocked {
    match reply.expect("java unlock") {
        Some(0 | 1) => Unlocked::Released,
        None => Unlocked::NotOwner,
        Some(other) => panic!("java unlock replied {other}"),
    }
}

fn rlock_unlocked(result: rlock_redisson::Result<()>) -> Unlocked {
    match result {
        Ok(()) => Unlocked::Released,
        Err(rlock_redisson::Error::NotOwner { .. } | rlock_redisson::Error::LeaseLost { .. }) => {
            Unlocked::NotOwner
        }
        Err(e) => panic!("rlock unlock failed: {e}"),
    }
}

/// One hold of either side.
#[derive(Debug)]
#[must_use = "a hold should be released or deliberately dropped"]
pub(crate) enum Hold {
    /// A Java thread's hold, through the (Java) lock object that took it.
    Java { lock: PartyLock, thread: ThreadId },
    /// An rlock guard of every kind but the fenced lock.
    Rlock(rlock_redisson::LockGuard),
    /// An rlock fenced lock's guard.
    RlockFenced(rlock_redisson::FencedGuard),
}

impl From<rlock_redisson::LockGuard> for Hold {
    fn from(guard: rlock_redisson::LockGuard) -> Self {
        Self::Rlock(guard)
    }
}

impl From<rlock_redisson::FencedGuard> for Hold {
    fn from(guard: rlock_redisson::FencedGuard) -> Self {
        Self::RlockFenced(guard)
    }
}

impl Hold {
    /// Releases the hold and reports what happened.
    pub(crate) async fn unlock(self) -> Unlocked {
        match self {
            Self::Java { lock, thread } => lock.unlock_as(thread).await,
            Self::Rlock(guard) => rlock_unlocked(guard.unlock().await),
            Self::RlockFenced(guard) => rlock_unlocked(guard.unlock().await),
        }
    }

    /// Whether an rlock guard knows its lease was lost; `None` for a Java hold, which cannot tell.
    pub(crate) fn is_lease_lost(&self) -> Option<bool> {
        match self {
            Self::Java { .. } => None,
            Self::Rlock(guard) => Some(guard.is_lease_lost()),
            Self::RlockFenced(guard) => Some(guard.is_lease_lost()),
        }
    }

    /// Releases the hold, which must still be held.
    pub(crate) async fn release(self) {
        assert_eq!(
            self.unlock().await,
            Unlocked::Released,
            "release a held lock"
        );
    }
}

/// Instantiates `scenario(a: Side, b: Side)` in both directions: `java_to_rlock` gives the Java side
/// the first role (holder, writer, forcer...) and rlock the second, `rlock_to_java` the reverse.
macro_rules! both_directions {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            $crate::support::directions!(super::$scenario);
        }
    )*};
}

/// The tests `java_to_rlock` and `rlock_to_java` of [`both_directions!`]: `scenario(args…, a, b)`,
/// with the attributes given first (e.g. `#[ignore]`).
macro_rules! directions {
    ($(#[$attr:meta])* $scenario:path $(, $arg:expr)*) => {
        use $crate::support::Side;

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn java_to_rlock() {
            $scenario($($arg,)* Side::Java, Side::Rlock).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])*
        async fn rlock_to_java() {
            $scenario($($arg,)* Side::Rlock, Side::Java).await;
        }
    };
}

/// Instantiates `scenario(side: Side)` once per side.
macro_rules! both_sides {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use crate::support::Side;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn java() {
                super::$scenario(Side::Java).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rlock() {
                super::$scenario(Side::Rlock).await;
            }
        }
    )*};
}

/// Instantiates a scenario written over an [`InteropKind`] once per kind of
/// [`rlock_tests::lock_kinds!`] ([`rlock_tests::kind_matrix!`]), as module `<scenario>::<kind>`:
/// - `every_kind!(one_test: scenario)` for `scenario(kind: InteropKind)`: the test
///   `<scenario>::<kind>`;
/// - `every_kind!(both_directions: scenario)` for `scenario(kind: InteropKind, a: Side, b: Side)`:
///   the tests `<scenario>::<kind>::java_to_rlock` and `…::rlock_to_java` (see
///   [`both_directions!`]);
/// - `every_kind!(both_sides: scenario)` for `scenario(kind: InteropKind, side: Side)`: the tests
///   `<scenario>::<kind>::java` and `…::rlock` (see [`both_sides!`]);
/// - `every_kind!(matrix: scenario)` for `scenario(kind: InteropKind, topology: Topology, a: Side,
///   b: Side)`: those two tests on a single server, and the same in a cluster as
///   `<scenario>::<kind>::cluster::…`, ignored by default (`scripts/interop-matrix.sh` runs them).
///
/// A word before the shape skips kinds, each with its reason: `exclusive` the read lock, whose
/// holders share (for the scenarios where everyone excludes everyone); `reentrant` the
/// non-reentrant locks (for the scenarios that re-enter; they are also the kinds every emulated
/// Redisson version has); `exclusive reentrant` both. `non_reentrant` runs it for the
/// non-reentrant locks alone, and `lock_and_twin` for the `RLock` and the non-reentrant lock, which
/// share its hash, channel, messages and watchdog (for the scenarios about those). A new kind runs
/// in every scenario its words do not skip.
macro_rules! every_kind {
    (exclusive reentrant $shape:ident: $($scenario:ident),* $(,)?) => {
        $crate::support::every_kind!(@skip {
            read: "its holders share: here everyone excludes everyone",
            non_reentrant: "it refuses re-entries: the scenario re-enters",
            non_reentrant_fair: "it refuses re-entries: the scenario re-enters",
        } $shape: $($scenario),*);
    };
    (exclusive $shape:ident: $($scenario:ident),* $(,)?) => {
        $crate::support::every_kind!(@skip {
            read: "its holders share: here everyone excludes everyone",
        } $shape: $($scenario),*);
    };
    (entry $shape:ident: $($scenario:ident),* $(,)?) => {
        $crate::support::every_kind!(@skip {
            spin: "Redisson hands out no spin lock per map entry",
            fenced: "Redisson hands out no fenced lock per map entry",
            non_reentrant: "Redisson hands out no non-reentrant lock per map entry",
            non_reentrant_fair: "Redisson hands out no non-reentrant fair lock per map entry",
        } $shape: $($scenario),*);
    };
    (non_reentrant $shape:ident: $($scenario:ident),* $(,)?) => {
        $crate::support::every_kind!(@skip {
            lock: "it re-enters: the scenario is about refused re-entries",
            fair: "it re-enters: the scenario is about refused re-entries",
            spin: "it re-enters: the scenario is about refused re-entries",
            fenced: "it re-enters: the scenario is about refused re-entries",
            read: "it re-enters: the scenario is about refused re-entries",
            write: "it re-enters: the scenario is about refused re-entries",
        } $shape: $($scenario),*);
    };
    (lock_and_twin $shape:ident: $($scenario:ident),* $(,)?) => {
        $crate::support::every_kind!(@skip {
            fair: "not the `RLock`'s hash, channel, messages and watchdog",
            spin: "not the `RLock`'s hash, channel, messages and watchdog",
            fenced: "not the `RLock`'s hash, channel, messages and watchdog",
            read: "not the `RLock`'s hash, channel, messages and watchdog",
            write: "not the `RLock`'s hash, channel, messages and watchdog",
            non_reentrant_fair: "not the `RLock`'s hash, channel, messages and watchdog",
        } $shape: $($scenario),*);
    };
    (reentrant $shape:ident: $($scenario:ident),* $(,)?) => {
        $crate::support::every_kind!(@skip {
            non_reentrant: "it refuses re-entries: the scenario re-enters",
            non_reentrant_fair: "it refuses re-entries: the scenario re-enters",
        } $shape: $($scenario),*);
    };
    ($shape:ident: $($scenario:ident),* $(,)?) => {$(
        rlock_tests::kind_matrix! { $scenario => $crate::support::every_kind!(@case $shape) }
    )*};
    (@skip $skip:tt $shape:ident: $($scenario:ident),*) => {$(
        rlock_tests::kind_matrix! {
            $scenario => $crate::support::every_kind!(@case $shape),
            skip $skip,
        }
    )*};
    // A kind's case ([`rlock_tests::kind_matrix!`]): the shape, named after the kind.
    ($scenario:ident (@case $shape:ident) [] $name:ident: $variant:ident($object:path)) => {
        $crate::support::every_kind!(
            @$shape $name, $crate::support::InteropKind::of(&$object), $scenario
        );
    };
    (@one_test $name:ident, $kind:expr, $scenario:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::$scenario($kind).await;
        }
    };
    (@both_sides $name:ident, $kind:expr, $scenario:ident) => {
        mod $name {
            use $crate::support::Side;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn java() {
                super::super::$scenario($kind, Side::Java).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rlock() {
                super::super::$scenario($kind, Side::Rlock).await;
            }
        }
    };
    (@both_directions $name:ident, $kind:expr, $scenario:ident) => {
        mod $name {
            $crate::support::directions!(super::super::$scenario, $kind);
        }
    };
    (@matrix $name:ident, $kind:expr, $scenario:ident) => {
        mod $name {
            $crate::support::directions!(
                super::super::$scenario,
                $kind,
                $crate::support::Topology::Single
            );

            mod cluster {
                $crate::support::directions!(
                    #[ignore = "the cluster matrix: scripts/interop-matrix.sh"]
                    super::super::super::$scenario,
                    $kind,
                    $crate::support::Topology::Cluster
                );
            }
        }
    };
}

pub(crate) use {both_directions, both_sides, directions, every_kind};

// ===== topologies =====

/// Where a scenario's parties meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Topology {
    /// One server.
    Single,
    /// A 3-master Redis Cluster; both sides pick sharded pub/sub as Redisson HEAD does (AUTO).
    Cluster,
}

/// The servers of a [`Topology`], up while this lives.
pub(crate) enum Site {
    Single(RedisServer),
    Cluster(Cluster),
}

impl Site {
    pub(crate) fn start(topology: Topology) -> Self {
        match topology {
            Topology::Single => Self::Single(RedisServer::start()),
            Topology::Cluster => Self::Cluster(Cluster::start(3, 0)),
        }
    }

    /// A client of `side` with default settings (Java: [`JAVA_VERSION`]).
    pub(crate) async fn party(&self, side: Side) -> Party {
        match self {
            Self::Single(server) => Party::connect(side, server).await,
            Self::Cluster(cluster) => {
                Party::cluster(side, cluster, JAVA_VERSION, ShardedPubSub::Auto).await
            }
        }
    }

    /// An observer of the node that owns `name` (in a cluster, counting subscribers on every
    /// master).
    pub(crate) async fn redis(&self, name: &str) -> Redis {
        match self {
            Self::Single(server) => Redis::connect(server).await,
            Self::Cluster(cluster) => {
                Redis::connect_cluster(cluster.master_of(name), cluster.masters()).await
            }
        }
    }

    /// The topology, for timing reports.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Single(_) => "single server",
            Self::Cluster(_) => "cluster, sharded",
        }
    }
}

// ===== observing Redis =====

/// A plain connection for looking at (and poking) the server behind both sides' backs. In a
/// cluster it talks to one node, and counts subscribers on every master.
#[derive(Clone)]
pub(crate) struct Redis {
    pub(crate) conn: MultiplexedConnection,
    /// Where channel subscribers are counted (classic subscriptions live on any node).
    pubsub_nodes: Vec<MultiplexedConnection>,
}

impl Redis {
    pub(crate) async fn connect(server: &RedisServer) -> Self {
        let conn = harness::raw(server).await;
        Self {
            pubsub_nodes: vec![conn.clone()],
            conn,
        }
    }

    /// A connection to `node` that counts subscribers on all of `masters`.
    pub(crate) async fn connect_cluster(node: &RedisServer, masters: &[RedisServer]) -> Self {
        let mut pubsub_nodes = Vec::new();
        for master in masters {
            pubsub_nodes.push(harness::raw(master).await);
        }
        Self {
            conn: harness::raw(node).await,
            pubsub_nodes,
        }
    }

    /// `HGETALL name`, sorted.
    pub(crate) async fn hash(&mut self, name: &str) -> BTreeMap<String, String> {
        self.conn.hgetall(name).await.expect("HGETALL")
    }

    pub(crate) async fn exists(&mut self, name: &str) -> bool {
        self.conn.exists(name).await.expect("EXISTS")
    }

    pub(crate) async fn pttl(&mut self, key: &str) -> i64 {
        self.conn.pttl(key).await.expect("PTTL")
    }

    /// The unlock latch keys that exist right now.
    pub(crate) async fn latch_keys(&mut self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .conn
            .keys("redisson_unlock_latch:*")
            .await
            .expect("KEYS");
        keys.sort();
        keys
    }

    /// `PUBSUB CHANNELS`: every channel with a (non-pattern) subscriber, sorted, as raw bytes.
    pub(crate) async fn channels(&mut self) -> Vec<Vec<u8>> {
        let mut channels: Vec<Vec<u8>> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .query_async(&mut self.conn)
            .await
            .expect("PUBSUB CHANNELS");
        channels.sort();
        channels
    }

    /// `PUBSUB SHARDCHANNELS`: every channel with a sharded subscriber, sorted, as raw bytes.
    pub(crate) async fn shard_channels(&mut self) -> Vec<Vec<u8>> {
        let mut channels: Vec<Vec<u8>> = redis::cmd("PUBSUB")
            .arg("SHARDCHANNELS")
            .query_async(&mut self.conn)
            .await
            .expect("PUBSUB SHARDCHANNELS");
        channels.sort();
        channels
    }

    /// Subscribers of `channel`: `PUBSUB NUMSUB` plus `PUBSUB SHARDNUMSUB`, over all nodes.
    pub(crate) async fn subscribers(&mut self, channel: &str) -> i64 {
        let mut total = 0;
        for node in &mut self.pubsub_nodes {
            for kind in ["NUMSUB", "SHARDNUMSUB"] {
                let counts: Vec<(Vec<u8>, i64)> = redis::cmd("PUBSUB")
                    .arg(kind)
                    .arg(channel)
                    .query_async(node)
                    .await
                    .expect("PUBSUB NUMSUB");
                total += counts.first().map_or(0, |(_, n)| *n);
            }
        }
        total
    }

    /// `PUBLISH channel payload`.
    pub(crate) async fn publish(&mut self, channel: &str, payload: &[u8]) {
        let _: i64 = self.conn.publish(channel, payload).await.expect("PUBLISH");
    }

    /// How many scripts (`EVAL` + `EVALSHA`) the server ran so far: each is one acquire attempt
    /// while only waiters are active.
    pub(crate) async fn script_calls(&mut self) -> u64 {
        let calls = harness::command_calls(&mut self.conn).await;
        calls.get("eval").copied().unwrap_or(0) + calls.get("evalsha").copied().unwrap_or(0)
    }

    /// Waits until no script has run for 100 ms (every waiter is asleep) and returns the count.
    pub(crate) async fn settle(&mut self) -> u64 {
        let mut last = self.script_calls().await;
        for _ in 0..60 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.script_calls().await;
            if now == last {
                return now;
            }
            last = now;
        }
        panic!("scripts kept running: some waiter is busy-polling");
    }

    /// Waits until at least `count` scripts ran, then until they stop; returns the settled count.
    pub(crate) async fn scripts_reach(&mut self, count: u64) -> u64 {
        let mut check = self.clone();
        let reached = harness::eventually(Duration::from_secs(2), async || {
            check.script_calls().await >= count
        });
        assert!(
            reached.await,
            "fewer than {count} scripts ran: no retry followed"
        );
        self.settle().await
    }

    /// Waits until `channel` has at least `count` subscribers and the waiters went to sleep.
    pub(crate) async fn wait_parked(&mut self, channel: &str, count: i64) -> u64 {
        let mut redis = self.clone();
        let subscribed = harness::eventually(Duration::from_secs(5), async || {
            redis.subscribers(channel).await >= count
        })
        .await;
        assert!(subscribed, "no waiter subscribed to {channel}");
        self.settle().await
    }

    /// Waits until a `kind` waiter whose owner field is `owner` waits for `name`: subscribed and
    /// asleep, or, for the spin lock, polling at its slowest back-off.
    pub(crate) async fn wait_waiting(&mut self, kind: InteropKind, name: &str, owner: &str) {
        let Some(channel) = kind.channel(name, owner) else {
            let polling = kind
                .polling()
                .expect("a kind whose waiters hear nothing polls");
            let polls = self.script_calls().await + polling.tries_to_max_delay;
            let mut redis = self.clone();
            let polling = harness::eventually(Duration::from_secs(5), async || {
                redis.script_calls().await >= polls
            });
            assert!(polling.await, "the spin-lock waiter does not poll");
            return;
        };
        let _ = self.wait_parked(&channel, 1).await;
    }

    /// Holds `name` as a third client would: a hash with a foreign field and a long PEXPIRE.
    pub(crate) async fn hold_foreign(&mut self, name: &str, ttl_ms: i64) {
        let field = "00000000-0000-4000-8000-000000000000:1";
        let _: () = self.conn.hset(name, field, 1).await.expect("HSET");
        let _: () = self.conn.pexpire(name, ttl_ms).await.expect("PEXPIRE");
    }
}

/// `{field: count}`, for comparing with [`Redis::hash`].
pub(crate) fn holds<const N: usize>(entries: [(String, u32); N]) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .map(|(field, count)| (field, count.to_string()))
        .collect()
}

/// A message seen by a [`Listener`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Message {
    /// The channel, byte for byte (for key events: the event, e.g. `__keyevent@0__:set`).
    pub(crate) channel: Vec<u8>,
    /// The payload (for key events: the key).
    pub(crate) payload: Vec<u8>,
}

impl Message {
    pub(crate) fn new(channel: impl AsRef<[u8]>, payload: impl AsRef<[u8]>) -> Self {
        Self {
            channel: channel.as_ref().to_vec(),
            payload: payload.as_ref().to_vec(),
        }
    }
}

/// A raw pattern subscriber that records what it hears.
pub(crate) struct Listener {
    messages: mpsc::UnboundedReceiver<Message>,
    task: JoinHandle<()>,
}

impl Listener {
    /// Hears every message on every lock and read-write lock channel (`PSUBSCRIBE
    /// redisson_lock__channel* redisson_rwlock*`).
    pub(crate) async fn unlock_messages(server: &RedisServer) -> Self {
        Self::psubscribe(server, &["redisson_lock__channel*", "redisson_rwlock*"]).await
    }

    /// Hears every message on every semaphore and count-down latch channel (`PSUBSCRIBE
    /// redisson_sc:* redisson_countdownlatch__channel__*`).
    pub(crate) async fn synchronizer_messages(server: &RedisServer) -> Self {
        Self::psubscribe(
            server,
            &["redisson_sc:*", "redisson_countdownlatch__channel__*"],
        )
        .await
    }

    /// Hears `set` and `del` key events (keyspace notifications `E$g`): the channel is the event,
    /// the payload the key.
    pub(crate) async fn key_events(server: &RedisServer) -> Self {
        let mut redis = Redis::connect(server).await;
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("E$g")
            .query_async(&mut redis.conn)
            .await
            .expect("CONFIG SET notify-keyspace-events");
        Self::psubscribe(server, &["__keyevent@0__:*"]).await
    }

    async fn psubscribe(server: &RedisServer, patterns: &[&str]) -> Self {
        let mut pubsub = server
            .client()
            .get_async_pubsub()
            .await
            .expect("pub/sub connection");
        pubsub.psubscribe(patterns).await.expect("PSUBSCRIBE");
        let (tx, messages) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut stream = pubsub.into_on_message();
            while let Some(message) = futures::StreamExt::next(&mut stream).await {
                let channel = message.get_channel::<Vec<u8>>().unwrap_or_default();
                let payload = message.get_payload_bytes().to_vec();
                if tx.send(Message { channel, payload }).is_err() {
                    return;
                }
            }
        });
        Self { messages, task }
    }

    /// The next message, if one arrives within `limit`.
    pub(crate) async fn next(&mut self, limit: Duration) -> Option<Message> {
        tokio::time::timeout(limit, self.messages.recv())
            .await
            .ok()
            .flatten()
    }

    /// Everything that arrives until the line has been quiet for `quiet`.
    pub(crate) async fn drain(&mut self, quiet: Duration) -> Vec<Message> {
        let mut seen = Vec::new();
        while let Some(message) = self.next(quiet).await {
            seen.push(message);
        }
        seen
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ===== timing =====

/// Wake-up latencies of one scenario, reported on stderr (`--nocapture` shows them).
#[derive(Debug, Default)]
pub(crate) struct Latencies(Vec<Duration>);

impl Latencies {
    /// Records `to - from` (zero if `to` came first).
    pub(crate) fn record(&mut self, from: Instant, to: Instant) {
        self.0.push(to.saturating_duration_since(from));
    }

    /// Prints min / median / max and asserts every sample is under `limit`.
    pub(crate) fn check(mut self, what: &str, limit: Duration) {
        self.0.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (Some(min), Some(max)) = (self.0.first().copied(), self.0.last().copied()) else {
            panic!("no samples for {what}");
        };
        let median = self.0[self.0.len() / 2];
        eprintln!(
            "interop timing: {what}: n={} min {:.2} ms, median {:.2} ms, max {:.2} ms",
            self.0.len(),
            ms(min),
            ms(median),
            ms(max)
        );
        assert!(
            max < limit,
            "{what}: slowest wake-up {max:?} exceeds {limit:?} (all: {:?})",
            self.0
        );
    }
}
