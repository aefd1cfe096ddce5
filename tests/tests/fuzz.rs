//! Bad input, property-tested: odd names, odd durations, foreign values at the lock key and garbage
//! on the lock channel. Every call must end in a value or a typed [`rlock_redisson::Error`], nothing may panic
//! (not even in rlock's background tasks), and a failed call must leave Redis exactly as it was
//! (compared by a snapshot of every key's `TYPE`, `DUMP` and `PEXPIRETIME`).
//!
//! Case counts are modest (`RLOCK_FUZZ_CASES`, default 24) so the file runs in seconds.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Mutex, Once};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use redis::aio::MultiplexedConnection;
use rlock_redisson::{Error, Owner, RemainingTtl};
use rlock_tests::RedisServer;
use rlock_tests::harness::{client_with, eventually, raw};

/// Panics on the worker threads of each property's runtime, where rlock's spawned tasks run (tokio
/// would swallow those panics), keyed by the runtime's thread name.
static PANICS: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

/// One Redis, one rlock client and a raw connection, shared by the cases of one property.
struct Env {
    thread_name: &'static str,
    runtime: tokio::runtime::Runtime,
    server: RedisServer,
    client: rlock_redisson::Client,
    redis: MultiplexedConnection,
}

impl Env {
    fn start(thread_name: &'static str) -> Self {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if let Some(name) = std::thread::current().name() {
                    let mut panics = PANICS.lock().unwrap_or_else(|p| p.into_inner());
                    *panics.entry(name.to_owned()).or_default() += 1;
                }
                default(info);
            }));
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(thread_name)
            .enable_all()
            .build()
            .expect("a runtime");
        let server = RedisServer::start();
        let (client, redis) = runtime.block_on(async {
            let client = client_with(&server, |config| {
                config.command_timeout = Duration::from_millis(400);
            })
            .await;
            (client, raw(&server).await)
        });
        Self {
            thread_name,
            runtime,
            server,
            client,
            redis,
        }
    }

    /// Runs `cases()` cases of `strategy` through `check`, failing the test with the shrunk input.
    fn check<S: Strategy>(&self, strategy: S, check: impl AsyncFn(&Self, S::Value) + Sync)
    where
        S::Value: std::fmt::Debug,
    {
        let mut runner = TestRunner::new(Config {
            cases: cases(),
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&strategy, |input| {
            self.block_on(check(self, input));
            Ok(())
        });
        if let Err(failure) = result {
            panic!("{failure}");
        }
        let panics = PANICS.lock().unwrap_or_else(|p| p.into_inner());
        assert_eq!(
            panics.get(self.thread_name).copied().unwrap_or(0),
            0,
            "something panicked in rlock's background tasks"
        );
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn redis(&self) -> MultiplexedConnection {
        self.redis.clone()
    }
}

fn cases() -> u32 {
    std::env::var("RLOCK_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24)
}

/// Every key with its type, serialised value and absolute expiry: equal snapshots mean nothing changed.
async fn snapshot(redis: &mut MultiplexedConnection) -> BTreeMap<Vec<u8>, (String, Vec<u8>, i64)> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("*")
        .query_async(redis)
        .await
        .expect("KEYS");
    let mut snapshot = BTreeMap::new();
    for key in keys {
        let (kind, dump, expires): (String, Vec<u8>, i64) = redis::pipe()
            .cmd("TYPE")
            .arg(&key)
            .cmd("DUMP")
            .arg(&key)
            .cmd("PEXPIRETIME")
            .arg(&key)
            .query_async(redis)
            .await
            .expect("TYPE, DUMP, PEXPIRETIME");
        let _ = snapshot.insert(key, (kind, dump, expires));
    }
    snapshot
}

async fn flush(redis: &mut MultiplexedConnection) {
    let _: () = redis::cmd("FLUSHALL")
        .query_async(redis)
        .await
        .expect("FLUSHALL");
}

/// Waits until Redis holds no key at all (unlock latches are deleted in the background).
async fn assert_empty_soon(redis: &mut MultiplexedConnection, what: &str) {
    let empty = eventually(Duration::from_secs(2), async || {
        snapshot(redis).await.is_empty()
    })
    .await;
    assert!(empty, "{what}: left {:?}", snapshot(redis).await.keys());
}

fn invalid<T>(outcome: &Result<T, Error>) -> bool {
    matches!(outcome, Err(Error::InvalidArgument(_)))
}

fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        any::<String>(),
        "[{}a-z:]{1,12}",
        "\\PC{1,40}",
        "[a-z]{1000,5000}",
    ]
}

#[test]
fn any_name_locks_and_unlocks_cleanly_or_is_rejected_without_a_trace() {
    let env = Env::start("fuzz-names");
    env.check(names(), async |env, name| {
        let mut redis = env.redis();
        flush(&mut redis).await;
        let lock = env.client.lock(name.as_str());
        if name.is_empty() {
            assert!(invalid(&lock.try_lock().await));
            assert!(invalid(&lock.lock().await));
            assert!(invalid(&lock.is_locked().await));
            assert!(invalid(&lock.remaining_ttl().await));
            assert!(invalid(&lock.unlock(Owner::new()).await));
            assert!(invalid(&lock.force_unlock().await));
            assert!(snapshot(&mut redis).await.is_empty(), "nothing sent");
            return;
        }
        let guard = lock.try_lock().await.expect("try_lock").expect("free");
        assert!(lock.is_locked().await.expect("is_locked"));
        assert_eq!(guard.hold_count().await.expect("hold_count"), 1);
        assert!(matches!(
            lock.remaining_ttl().await.expect("remaining_ttl"),
            RemainingTtl::Expires(_)
        ));
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg(&name)
            .query_async(&mut redis)
            .await
            .expect("HKEYS");
        assert_eq!(fields, [guard.field()], "the lock hash is at the raw name");
        assert!(lock.try_lock().await.expect("try_lock").is_none());
        guard.unlock().await.expect("unlock");
        assert!(!lock.is_locked().await.expect("is_locked"));
        assert!(!lock.force_unlock().await.expect("force_unlock"));
        assert_empty_soon(&mut redis, "after unlock").await;
    });
}

fn durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        (0u64..1_000_000).prop_map(Duration::from_nanos),
        (1_000_000u64..5_000_000_000).prop_map(Duration::from_nanos),
        any::<u64>().prop_map(Duration::from_millis),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (0u64..3).prop_map(|d| Duration::from_secs(10 * 365 * 24 * 3600 - 1 + d)),
    ]
}

/// What rlock promises for leases: 1 ms to ten years.
fn valid_lease(lease: Duration) -> bool {
    lease >= Duration::from_millis(1) && lease <= Duration::from_secs(10 * 365 * 24 * 3600)
}

#[test]
fn any_lease_is_honoured_or_rejected_before_anything_is_sent() {
    let env = Env::start("fuzz-leases");
    let waits = prop_oneof![
        Just(Duration::ZERO),
        (0u64..30_000_000).prop_map(Duration::from_nanos),
    ];
    env.check((durations(), waits), async |env, (lease, wait)| {
        let mut redis = env.redis();
        flush(&mut redis).await;
        let lock = env.client.lock("fuzz:lease");
        let outcome = lock.try_lock_with_lease(wait, lease).await;
        if !valid_lease(lease) {
            assert!(
                matches!(outcome, Err(Error::InvalidArgument(_))),
                "{outcome:?}"
            );
            assert!(
                matches!(
                    lock.lock_with_lease(lease).await,
                    Err(Error::InvalidArgument(_))
                ),
                "lock_with_lease({lease:?})"
            );
            assert!(snapshot(&mut redis).await.is_empty(), "nothing sent");
            return;
        }
        let guard = outcome.expect("a valid lease").expect("the lock is free");
        let pttl: i64 = redis::cmd("PTTL")
            .arg("fuzz:lease")
            .query_async(&mut redis)
            .await
            .expect("PTTL");
        // -2: a lease of a few ms may already have run out.
        assert!(
            pttl == -2 || (pttl > 0 && pttl as u128 <= lease.as_millis()),
            "PTTL {pttl} for lease {lease:?}"
        );
        match guard.unlock().await {
            Ok(()) => {}
            Err(Error::LeaseLost { .. }) => assert!(lease < Duration::from_secs(1)),
            Err(e) => panic!("unlock: {e}"),
        }
        assert_empty_soon(&mut redis, "after unlock").await;
    });
}

#[test]
fn any_wait_on_a_held_lock_ends_in_time_and_any_config_is_checked() {
    let env = Env::start("fuzz-waits");
    let waits = prop_oneof![
        Just(Duration::ZERO),
        (0u64..1_000_000).prop_map(Duration::from_nanos),
        (1u64..40).prop_map(Duration::from_millis),
    ];
    env.check(
        (waits, durations(), durations()),
        async |env, (wait, watchdog, timeout)| {
            let mut redis = env.redis();
            flush(&mut redis).await;
            let _: () = redis::cmd("HSET")
                .arg("fuzz:held")
                .arg("00000000-0000-4000-8000-000000000000:1")
                .arg(1)
                .query_async(&mut redis)
                .await
                .expect("HSET");
            let _: () = redis::cmd("PEXPIRE")
                .arg("fuzz:held")
                .arg(60_000)
                .query_async(&mut redis)
                .await
                .expect("PEXPIRE");
            let before = snapshot(&mut redis).await;
            let started = tokio::time::Instant::now();
            let got = env
                .client
                .lock("fuzz:held")
                .try_lock_for(wait)
                .await
                .expect("try_lock_for");
            assert!(got.is_none(), "held by someone else");
            let took = started.elapsed();
            assert!(
                took < wait + Duration::from_millis(500),
                "a {wait:?} wait took {took:?}"
            );
            assert_eq!(
                snapshot(&mut redis).await,
                before,
                "a failed wait changes nothing"
            );

            let mut config = rlock_redisson::Config::new(env.server.url());
            config.watchdog_timeout = watchdog;
            config.command_timeout = timeout;
            let valid = watchdog >= Duration::from_millis(30)
                && valid_lease(watchdog)
                && !timeout.is_zero();
            match rlock_redisson::Client::with_config(config).await {
                Err(Error::InvalidArgument(_)) => {
                    assert!(!valid, "{watchdog:?}/{timeout:?} rejected")
                }
                // A command timeout shorter than a round trip may fail the connect's PING.
                Err(Error::Timeout { .. }) => assert!(timeout < Duration::from_millis(10)),
                Err(e) => panic!("unexpected error: {e}"),
                Ok(client) => {
                    assert!(valid, "{watchdog:?}/{timeout:?} accepted");
                    assert_eq!(client.config().watchdog_timeout, watchdog);
                }
            }
        },
    );
}

/// A value that is not rlock's, stored at the lock key.
#[derive(Clone, Debug)]
enum Foreign {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(f64, Vec<u8>)>),
    Stream(Vec<(String, Vec<u8>)>),
    /// A hash with someone else's hold, possibly without an expiry.
    OthersHold(String),
    /// A hash in which this client's owner has a count that is not a number.
    GarbageCount(String),
}

impl Foreign {
    fn is_hash(&self) -> bool {
        matches!(self, Self::OthersHold(_) | Self::GarbageCount(_))
    }

    fn store(&self, name: &str, field_of_ours: &str) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        let _ = match self {
            Self::String(value) => pipe.cmd("SET").arg(name).arg(value),
            Self::List(items) => pipe.cmd("RPUSH").arg(name).arg(items),
            Self::Set(items) => pipe.cmd("SADD").arg(name).arg(items),
            Self::ZSet(items) => {
                let cmd = pipe.cmd("ZADD").arg(name);
                for (score, member) in items {
                    let _ = cmd.arg(score).arg(member);
                }
                cmd
            }
            Self::Stream(entries) => {
                let cmd = pipe.cmd("XADD").arg(name).arg("*");
                for (field, value) in entries {
                    let _ = cmd.arg(field).arg(value);
                }
                cmd
            }
            Self::OthersHold(count) => pipe
                .cmd("HSET")
                .arg(name)
                .arg("00000000-0000-4000-8000-000000000000:1")
                .arg(count),
            Self::GarbageCount(count) => pipe.cmd("HSET").arg(name).arg(field_of_ours).arg(count),
        };
        pipe
    }
}

fn foreign_values() -> impl Strategy<Value = (Foreign, Option<u32>)> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..64);
    let items = || proptest::collection::vec(bytes(), 1..5);
    let value = prop_oneof![
        bytes().prop_map(Foreign::String),
        items().prop_map(Foreign::List),
        items().prop_map(Foreign::Set),
        proptest::collection::vec((-1e9f64..1e9, bytes()), 1..5).prop_map(Foreign::ZSet),
        proptest::collection::vec(("[a-z]{1,8}", bytes()), 1..4).prop_map(Foreign::Stream),
        "[0-9]{1,3}|\\PC{0,8}".prop_map(Foreign::OthersHold),
        "[a-z ]{1,8}|1e3|0x10|9{30}".prop_map(Foreign::GarbageCount),
    ];
    (value, proptest::option::of(10_000u32..100_000))
}

/// The operations a user can call on a lock.
#[derive(Clone, Copy, Debug)]
enum Op {
    Lock,
    TryLock,
    TryLockFor,
    TryLockWithLease,
    Unlock,
    ForceUnlock,
    IsLocked,
    IsHeldBy,
    HoldCount,
    RemainingTtl,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        Just(Op::Lock),
        Just(Op::TryLock),
        Just(Op::TryLockFor),
        Just(Op::TryLockWithLease),
        Just(Op::Unlock),
        Just(Op::ForceUnlock),
        Just(Op::IsLocked),
        Just(Op::IsHeldBy),
        Just(Op::HoldCount),
        Just(Op::RemainingTtl),
    ];
    proptest::collection::vec(op, 1..6)
}

/// Runs `op` and describes the outcome; `Err` only for errors.
async fn run(lock: &rlock_redisson::Lock, owner: Owner, op: Op) -> Result<String, Error> {
    let short = Duration::from_millis(20);
    let acquired =
        |guard: Option<rlock_redisson::LockGuard>| format!("acquired: {}", guard.is_some());
    Ok(match op {
        // `lock()` waits forever for a foreign hold: it is only called on non-hash values.
        Op::Lock => acquired(Some(lock.lock().await?)),
        Op::TryLock => acquired(lock.try_lock().await?),
        Op::TryLockFor => acquired(lock.try_lock_for(short).await?),
        Op::TryLockWithLease => acquired(lock.try_lock_with_lease(short, short * 100).await?),
        Op::Unlock => format!("{:?}", lock.unlock(owner).await?),
        Op::ForceUnlock => format!("{:?}", lock.force_unlock().await?),
        Op::IsLocked => format!("{:?}", lock.is_locked().await?),
        Op::IsHeldBy => format!("{:?}", lock.is_held_by(owner).await?),
        Op::HoldCount => format!("{:?}", lock.hold_count_of(owner).await?),
        Op::RemainingTtl => format!("{:?}", lock.remaining_ttl().await?),
    })
}

/// What `op` must return on a lock key holding `value`.
fn expected(value: &Foreign, op: Op, outcome: &Result<String, Error>) -> bool {
    let acquires = matches!(
        op,
        Op::Lock | Op::TryLock | Op::TryLockFor | Op::TryLockWithLease
    );
    match (value, outcome) {
        // EXISTS and PTTL work on any type.
        (_, Ok(_)) if matches!(op, Op::IsLocked | Op::RemainingTtl) => true,
        (Foreign::OthersHold(_), Ok(reply)) => match op {
            Op::IsHeldBy => reply == "false",
            Op::HoldCount => reply == "0",
            _ => reply == "acquired: false",
        },
        (Foreign::OthersHold(_), Err(Error::NotOwner { .. })) => matches!(op, Op::Unlock),
        (Foreign::GarbageCount(_), Ok(reply)) => matches!(op, Op::IsHeldBy) && reply == "true",
        (Foreign::GarbageCount(_), Err(Error::UnexpectedReply { .. })) => {
            matches!(op, Op::HoldCount)
        }
        // Redis refuses to increment or decrement a count that is not a number.
        (Foreign::GarbageCount(_), Err(Error::Backend { source, .. })) => {
            (acquires || matches!(op, Op::Unlock)) && source.to_string().contains("not an integer")
        }
        (_, Err(Error::WrongType { key, .. })) => !value.is_hash() && key == "fuzz:foreign",
        _ => false,
    }
}

#[test]
fn a_foreign_value_at_the_lock_key_is_a_typed_error_and_left_untouched() {
    let env = Env::start("fuzz-foreign");
    env.check(
        (foreign_values(), ops()),
        async |env, ((value, ttl), ops)| {
            let mut redis = env.redis();
            flush(&mut redis).await;
            let name = "fuzz:foreign";
            let owner = Owner::from_id(7);
            let field = format!("{}:7", env.client.node_id());
            let mut store = value.store(name, &field);
            if let Some(ttl) = ttl {
                let _ = store.cmd("PEXPIRE").arg(name).arg(ttl);
            }
            let _: () = store
                .query_async(&mut redis)
                .await
                .expect("store the value");
            let before = snapshot(&mut redis).await;
            let lock = env.client.lock(name).with_owner(owner);
            for op in ops {
                // On a hash, `lock()` would wait for the foreign hold forever and `force_unlock()` would
                // (rightly) delete it: bounded and read-only counterparts stand in for them.
                let op = match op {
                    Op::Lock if value.is_hash() => Op::TryLockFor,
                    Op::ForceUnlock if value.is_hash() => Op::RemainingTtl,
                    op => op,
                };
                let outcome = run(&lock, owner, op).await;
                assert!(
                    expected(&value, op, &outcome),
                    "{op:?} on {value:?}: {outcome:?}"
                );
                // `Backend` keeps Redis' own message, which does not name the lock.
                if let Err(e) = &outcome
                    && !matches!(e, Error::Backend { .. })
                {
                    assert!(
                        e.to_string().contains(name),
                        "the error names the lock: {e}"
                    );
                }
            }
            assert_eq!(snapshot(&mut redis).await, before, "nothing changed");
            assert_eq!(env.client.stats().renewing_locks, 0);
        },
    );
}

fn payloads() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let special = prop_oneof![
        Just(b"0".to_vec()),
        Just(b"1".to_vec()),
        Just(b"+0".to_vec()),
        Just(b"-1".to_vec()),
        Just(b" 0".to_vec()),
        Just(b"00".to_vec()),
        Just(b"99999999999999999999999".to_vec()),
        Just(vec![0xff, 0xfe, 0x00]),
    ];
    let payload = prop_oneof![
        special,
        proptest::collection::vec(any::<u8>(), 0..32),
        "\\PC{0,16}".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 4096..8192),
    ];
    proptest::collection::vec(payload, 1..20)
}

#[test]
fn garbage_on_the_lock_channel_breaks_nothing() {
    let env = Env::start("fuzz-channel");
    env.check(payloads(), async |env, payloads| {
        let mut redis = env.redis();
        flush(&mut redis).await;
        let name = "fuzz:channel";
        let channel = "redisson_lock__channel:{fuzz:channel}";
        let _: () = redis::pipe()
            .cmd("HSET")
            .arg(name)
            .arg("00000000-0000-4000-8000-000000000000:1")
            .arg(1)
            .cmd("PEXPIRE")
            .arg(name)
            .arg(30_000)
            .query_async(&mut redis)
            .await
            .expect("a foreign hold");
        let lock = env.client.lock(name);
        let mut waiter = tokio::spawn(async move { lock.lock().await });
        let subscribed = eventually(Duration::from_secs(5), async || {
            env.client.stats().subscribed_channels == 1
        })
        .await;
        assert!(subscribed);
        let before = snapshot(&mut redis).await;
        for payload in &payloads {
            let _: i64 = redis::cmd("PUBLISH")
                .arg(channel)
                .arg(payload)
                .query_async(&mut redis)
                .await
                .expect("PUBLISH");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "the foreign hold still stands");
        assert_eq!(
            snapshot(&mut redis).await,
            before,
            "garbage changed nothing"
        );
        // The subscriber still works: a real unlock wakes the waiter at once, not after the PTTL.
        let _: () = redis::pipe()
            .cmd("DEL")
            .arg(name)
            .cmd("PUBLISH")
            .arg(channel)
            .arg("0")
            .query_async(&mut redis)
            .await
            .expect("unlock");
        let guard = tokio::time::timeout(Duration::from_secs(2), &mut waiter)
            .await
            .expect("woken by the unlock message")
            .expect("no panic")
            .expect("acquired");
        guard.unlock().await.expect("unlock");
        assert_eq!(env.client.stats().subscribed_channels, 0);
    });
}
