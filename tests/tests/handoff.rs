//! The local wait queue and bounded local hand-off (issue 13), on a real server: what a hand-off
//! writes (and does not publish), the bound, the kinds that hand off, fencing tokens, the watchdog
//! and lease-lost signal of the new owner, re-entry, lost leases, cancellation, and a client that
//! does not hand off (as Java) getting its turn.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock_redisson::{Client, Guard};
use rlock_tests::RedisServer;
use rlock_tests::harness::{client_with, command_calls, eventually, exists, pause_clients, raw};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A client whose hand-off streaks may last a minute (by default they end 10 ms after the lock came
/// from Redis), so that whether a release hands off does not depend on how fast this machine runs
/// the test. (Found under load: a test that spent over 10 ms queueing its waiter saw a real release.)
async fn client(server: &RedisServer) -> Client {
    client_with(server, |config| {
        config.local_handoff_window = Duration::from_secs(60);
    })
    .await
}

/// Calls of `command` (lower case) so far, script-internal calls included.
async fn calls(redis: &mut MultiplexedConnection, command: &str) -> u64 {
    command_calls(redis)
        .await
        .get(command)
        .copied()
        .unwrap_or(0)
}

/// Waits until `count` acquisitions of `client` queue locally.
async fn queued(client: &Client, count: usize) {
    assert!(
        eventually(Duration::from_secs(5), async || client
            .stats()
            .queued_waiters
            == count)
        .await,
        "{count} waiters queued, saw {}",
        client.stats().queued_waiters
    );
}

/// A task that takes `lock` with `take`, reports the guard's field, and holds until told to release.
struct Holder<T: std::fmt::Debug + Send + 'static> {
    acquired: oneshot::Receiver<(String, T)>,
    release: oneshot::Sender<()>,
    task: JoinHandle<Guard<T>>,
}

/// `lock.lock()`, owning the lock handle (for a task of its own).
async fn locking<K: rlock_redisson::kind::LockKind>(
    lock: rlock_redisson::Lock<K>,
) -> rlock_redisson::Result<Guard<K::Token>> {
    lock.lock().await
}

/// A fixed lease: a hold that Redis must be told of, so it is passed by script, never freely.
const FIXED: Duration = Duration::from_secs(30);

/// `lock.lock_with_lease(FIXED)`, owning the lock handle.
async fn locking_for_a_lease<K: rlock_redisson::kind::LockKind>(
    lock: rlock_redisson::Lock<K>,
) -> rlock_redisson::Result<Guard<K::Token>> {
    lock.lock_with_lease(FIXED).await
}

fn spawn_holder<T, F>(take: F) -> Holder<T>
where
    T: std::fmt::Debug + Send + Clone + 'static,
    F: Future<Output = rlock_redisson::Result<Guard<T>>> + Send + 'static,
{
    let (acquired_tx, acquired) = oneshot::channel();
    let (release, release_rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        let guard = take.await.expect("acquires");
        let _ = acquired_tx.send((guard.field().to_owned(), guard.token().clone()));
        let _ = release_rx.await;
        guard
    });
    Holder {
        acquired,
        release,
        task,
    }
}

impl<T: std::fmt::Debug + Send + 'static> Holder<T> {
    async fn acquired(&mut self) -> (String, T) {
        tokio::time::timeout(Duration::from_secs(5), &mut self.acquired)
            .await
            .expect("acquired in time")
            .expect("the holder reports")
    }

    /// Lets the task end and returns its guard.
    async fn guard(self) -> Guard<T> {
        let _ = self.release.send(());
        self.task.await.expect("holder task")
    }
}

/// One hand-off by script between two tasks of `client` on `name`.
async fn pass_once(client: &Client, name: &str) {
    let first = client.lock(name).lock().await.expect("first locks");
    let next = spawn_holder(locking_for_a_lease(client.lock(name)));
    queued(client, 1).await;
    first.unlock().await.expect("first unlocks");
    next.guard().await.unlock().await.expect("next unlocks");
}

async fn hash(redis: &mut MultiplexedConnection, name: &str) -> HashMap<String, String> {
    redis.hgetall(name).await.expect("HGETALL")
}

#[tokio::test]
async fn a_release_passes_the_lock_to_a_fixed_lease_waiter_in_one_script_without_a_publish() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:one";
    // Once first, so that the scripts are loaded (a first `NOSCRIPT` counts as a call).
    pass_once(&client, name).await;
    let first = client.lock(name).lock().await.expect("first locks");
    let mut next = spawn_holder(locking_for_a_lease(client.lock(name)));
    queued(&client, 1).await;
    let (evalsha, publish) = (
        calls(&mut redis, "evalsha").await,
        calls(&mut redis, "publish").await,
    );

    first.unlock().await.expect("first unlocks");
    let (field, ()) = next.acquired().await;
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(field.clone(), "1".to_owned())]),
        "the next owner's field replaced the first's, once"
    );
    let pttl: i64 = redis.pttl(name).await.expect("PTTL");
    assert!(pttl > 25_000, "the waiter's lease was applied: {pttl}");
    assert_eq!(
        calls(&mut redis, "evalsha").await - evalsha,
        1,
        "one script: the hand-off; the waiter sent no try"
    );
    assert_eq!(calls(&mut redis, "publish").await, publish, "no publish");
    let stats = client.stats();
    assert_eq!((stats.local_handoffs, stats.free_handoffs), (2, 0));

    let guard = next.guard().await;
    assert_eq!(guard.hold_count().await.expect("hold count"), 1);
    guard.unlock().await.expect("next unlocks");
    assert!(!exists(&mut redis, name).await);
    assert_eq!(calls(&mut redis, "publish").await, publish + 1);
}

#[tokio::test]
async fn the_new_owner_is_renewed_and_told_when_its_lease_is_lost() {
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.watchdog_timeout = Duration::from_millis(600);
    })
    .await;
    let mut redis = raw(&server).await;
    let name = "handoff:watchdog";
    let first = client.lock(name).lock().await.expect("first locks");
    let mut next = spawn_holder(locking(client.lock(name)));
    queued(&client, 1).await;
    first.unlock().await.expect("first unlocks");
    let _ = next.acquired().await;
    let guard = next.guard().await;

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pttl: i64 = redis.pttl(name).await.expect("PTTL");
    assert!(pttl > 0, "renewed past two and a half leases: {pttl}");
    assert!(!guard.is_lease_lost());
    let _: () = redis.del(name).await.expect("DEL");
    tokio::time::timeout(Duration::from_secs(2), guard.lease_lost())
        .await
        .expect("the lease-lost signal fires");
}

#[tokio::test]
async fn the_streak_is_bounded_then_the_lock_is_released_and_published() {
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.local_handoff_limit = 2;
        config.local_handoff_window = Duration::from_secs(60);
    })
    .await;
    let mut redis = raw(&server).await;
    let name = "handoff:bound";
    let first = client.lock(name).lock().await.expect("first locks");
    let mut waiters = Vec::new();
    for queued_before in 0..3 {
        queued(&client, queued_before).await;
        waiters.push(spawn_holder(locking(client.lock(name))));
    }
    queued(&client, 3).await;
    let publish = calls(&mut redis, "publish").await;

    first.unlock().await.expect("first unlocks");
    for (i, mut waiter) in waiters.into_iter().enumerate() {
        let _ = waiter.acquired().await;
        let released_for_real = calls(&mut redis, "publish").await - publish;
        // Passed twice, then released and published once; the third waiter took it from Redis.
        assert_eq!(released_for_real, u64::from(i == 2), "before holder {i}");
        waiter.guard().await.unlock().await.expect("unlocks");
    }
    assert_eq!(client.stats().local_handoffs, 2);
    assert_eq!(calls(&mut redis, "publish").await - publish, 2);
}

#[tokio::test]
async fn fenced_hand_offs_take_strictly_increasing_tokens() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "handoff:fenced";
    let tokens = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let lock = client.fenced_lock(name);
            let tokens = tokens.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    let guard = lock.lock().await.expect("locks");
                    tokens.lock().push(*guard.token());
                    tokio::task::yield_now().await;
                    guard.unlock().await.expect("unlocks");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let tokens = tokens.lock().clone();
    assert_eq!(tokens.len(), 40);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens increase in acquisition order: {tokens:?}"
    );
    assert!(client.stats().local_handoffs > 0, "some holds were passed");
    assert_eq!(
        client.fenced_lock(name).token().await.expect("token"),
        *tokens.last().expect("a token")
    );
}

#[tokio::test]
async fn a_writer_passes_the_write_lock_but_not_while_it_also_reads() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:rw";
    let lock = client.read_write_lock(name);
    let first = lock.write().lock().await.expect("first writes");
    let mut second = spawn_holder(locking(client.read_write_lock(name).write()));
    queued(&client, 1).await;
    let publish = calls(&mut redis, "publish").await;
    first.unlock().await.expect("first unlocks");
    let (field, ()) = second.acquired().await;
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([
            ("mode".to_owned(), "write".to_owned()),
            (field, "1".to_owned())
        ])
    );
    assert_eq!(calls(&mut redis, "publish").await, publish, "passed");
    assert_eq!(client.stats().local_handoffs, 1);

    // The second writer also reads (in its own task, as the same owner), then a third writer queues.
    let (release_write, write_released) = oneshot::channel::<()>();
    let (release_read, read_released) = oneshot::channel::<()>();
    let second_write = second.guard().await;
    let owner = second_write.owner();
    let reading = tokio::spawn({
        let lock = client.read_write_lock(name).read().with_owner(owner);
        async move {
            let read = lock.lock().await.expect("the writer reads too");
            let _ = write_released.await;
            second_write.unlock().await.expect("write unlocks");
            let _ = read_released.await;
            read.unlock().await.expect("read unlocks");
        }
    });
    assert!(
        eventually(Duration::from_secs(5), async || hash(&mut redis, name)
            .await
            .len()
            == 3)
        .await
    );
    let mut third = spawn_holder(locking(client.read_write_lock(name).write()));
    queued(&client, 1).await;
    let _ = release_write.send(());
    assert!(
        eventually(Duration::from_secs(5), async || {
            let mode: Option<String> = redis.hget(name, "mode").await.expect("HGET");
            mode.as_deref() == Some("read")
        })
        .await,
        "the write unlock left a read lock, not passed"
    );
    assert_eq!(client.stats().local_handoffs, 1, "no second hand-off");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut third.acquired)
            .await
            .is_err(),
        "the third writer waits for the reader"
    );
    let _ = release_read.send(());
    reading.await.expect("reader task");
    let _ = third.acquired().await;
    third.guard().await.unlock().await.expect("third unlocks");
}

#[tokio::test]
async fn re_entry_skips_the_queue_and_only_the_last_release_passes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:reentry";
    let outer = client.lock(name).lock().await.expect("locks");
    let mut next = spawn_holder(locking(client.lock(name)));
    queued(&client, 1).await;
    let same_owner = client.lock(name).with_owner(outer.owner());
    let inner = tokio::time::timeout(Duration::from_secs(1), same_owner.lock())
        .await
        .expect("re-entry does not wait behind the queue")
        .expect("re-enters");
    assert_eq!(inner.hold_count().await.expect("count"), 2);
    inner.unlock().await.expect("inner unlocks");
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut next.acquired)
            .await
            .is_err(),
        "still held once"
    );
    outer.unlock().await.expect("outer unlocks");
    // Taken while the client did not listen on the lock's channel: passed by script.
    let (field, ()) = next.acquired().await;
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(field, "1".to_owned())])
    );
    next.guard().await.unlock().await.expect("unlocks");
}

#[tokio::test]
async fn a_holder_whose_fixed_lease_ran_out_does_not_hold_up_local_waiters() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "handoff:lease";
    let started = Instant::now();
    let expired = client
        .lock(name)
        .lock_with_lease(Duration::from_millis(300))
        .await
        .expect("locks for 300 ms");
    let mut next = spawn_holder(locking(client.lock(name)));
    let _ = next.acquired().await;
    let after = started.elapsed();
    assert!(
        after >= Duration::from_millis(290) && after < Duration::from_secs(2),
        "acquired when the lease ran out: {after:?}"
    );
    assert!(expired.is_lease_lost());
    assert!(matches!(
        expired.unlock().await,
        Err(rlock_redisson::Error::LeaseLost { .. })
    ));
    next.guard().await.unlock().await.expect("unlocks");
}

#[tokio::test]
async fn dropped_acquisitions_leave_no_hold_and_no_queue_entry() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:cancel";
    let inside = Arc::new(AtomicBool::new(false));
    let acquired = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..8u64)
        .map(|task| {
            let lock = client.lock(name);
            let (inside, acquired) = (inside.clone(), acquired.clone());
            tokio::spawn(async move {
                for round in 0..40u64 {
                    // Patience from 0 to 3 ms: many acquisitions are dropped while queued, heading
                    // the queue, being passed the lock, or with a try on the wire.
                    let patience = Duration::from_micros((task * 7 + round * 13) % 4 * 1000);
                    let Ok(guard) = tokio::time::timeout(patience, lock.lock()).await else {
                        continue;
                    };
                    let guard = guard.expect("locks");
                    assert!(!inside.swap(true, Ordering::AcqRel), "two holders");
                    let _ = acquired.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    inside.store(false, Ordering::Release);
                    guard.unlock().await.expect("unlocks");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    client.close().await;
    assert!(acquired.load(Ordering::Relaxed) > 0);
    assert!(
        eventually(Duration::from_secs(5), async || {
            !exists(&mut redis, name).await
        })
        .await,
        "no hold left behind: {:?}",
        hash(&mut redis, name).await
    );
    assert_eq!(client.stats().queued_waiters, 0);
    let guard = tokio::time::timeout(Duration::from_secs(1), client.lock(name).lock())
        .await
        .expect("free at once")
        .expect("locks");
    guard.unlock().await.expect("unlocks");
}

/// A client that does not hand off (as a Redisson client) contends with 4 tasks of one that does: it
/// gets the lock again and again, as each streak ends with a real release and a yield. (Against 4
/// tasks racing without hand-off, the same single task waited up to 10 s on this machine.)
#[tokio::test]
async fn a_client_that_does_not_hand_off_gets_its_turn() {
    let server = RedisServer::start();
    let cohort = client(&server).await;
    let remote = client_with(&server, |config| config.local_handoff = false).await;
    let mut redis = raw(&server).await;
    let name = "handoff:remote";
    let counter = format!("{name}:counter");
    let stop = Arc::new(AtomicBool::new(false));
    let local_tasks: Vec<_> = (0..4)
        .map(|_| {
            let lock = cohort.lock(name);
            let (mut redis, counter, stop) = (redis.clone(), counter.clone(), stop.clone());
            tokio::spawn(async move {
                let mut count = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let guard = lock.lock().await.expect("locks");
                    increment(&mut redis, &counter).await;
                    guard.unlock().await.expect("unlocks");
                    count += 1;
                }
                count
            })
        })
        .collect();
    let lock = remote.lock(name);
    let (mut remote_count, mut longest) = (0u64, Duration::ZERO);
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let asked = Instant::now();
        let guard = lock.lock().await.expect("the remote locks");
        longest = longest.max(asked.elapsed());
        increment(&mut redis, &counter).await;
        guard.unlock().await.expect("the remote unlocks");
        remote_count += 1;
    }
    stop.store(true, Ordering::Release);
    let mut local_count = 0;
    for task in local_tasks {
        local_count += task.await.expect("task");
    }
    let total: u64 = redis.get(&counter).await.expect("GET");
    assert_eq!(total, local_count + remote_count, "no lost update");
    assert!(cohort.stats().local_handoffs > 0, "the cohort passed locks");
    assert!(
        remote_count >= 5,
        "the remote client acquired {remote_count} times in 2 s (longest wait {longest:?})"
    );
    assert!(
        longest < Duration::from_secs(2),
        "the remote waited {longest:?} at most"
    );
}

/// `GET` then `SET` of a counter: a lost update if two holders overlap.
async fn increment(redis: &mut MultiplexedConnection, counter: &str) {
    let value: Option<u64> = redis.get(counter).await.expect("GET");
    let _: () = redis
        .set(counter, value.unwrap_or(0) + 1)
        .await
        .expect("SET");
}

#[tokio::test]
async fn with_hand_off_off_every_release_publishes() {
    let server = RedisServer::start();
    let client = client_with(&server, |config| config.local_handoff = false).await;
    let mut redis = raw(&server).await;
    let name = "handoff:off";
    let first = client.lock(name).lock().await.expect("first locks");
    let mut next = spawn_holder(locking(client.lock(name)));
    assert!(
        eventually(Duration::from_secs(5), async || {
            rlock_tests::harness::lock_channel_subscribers(&mut redis, name).await == 1
        })
        .await
    );
    assert_eq!(client.stats().queued_waiters, 0, "nothing queues");
    let publish = calls(&mut redis, "publish").await;
    first.unlock().await.expect("unlocks");
    let _ = next.acquired().await;
    assert_eq!(calls(&mut redis, "publish").await, publish + 1);
    assert_eq!(client.stats().local_handoffs, 0);
    next.guard().await.unlock().await.expect("unlocks");
}

/// Commands Redis ran so far, but for `INFO` (this count's own) and `HGET`: the read with which a
/// streak confirms its first owner's field behind its free hand-offs (a script's own `HGET`s are
/// counted by its `EVALSHA`).
async fn commands(redis: &mut MultiplexedConnection) -> u64 {
    command_calls(redis)
        .await
        .iter()
        .filter(|(command, _)| !matches!(command.as_str(), "info" | "hget"))
        .map(|(_, calls)| calls)
        .sum()
}

/// The first owner of a streak: a hold passed by script, from an opener that took `lock` from
/// Redis, while this client listens on the lock's channel. A hold taken while nobody of the client
/// listened there has no mark of the channel to tell that nobody unlocked the lock meanwhile, so its
/// first hand-off goes by script; this one passes freely.
async fn first_owner<K: rlock_redisson::kind::LockKind<Token = ()>>(
    client: &Client,
    server: &RedisServer,
    lock: rlock_redisson::Lock<K>,
) -> Guard {
    let opener = lock.lock().await.expect("the opener locks");
    let mut first = spawn_holder(locking(lock.clone()));
    queued(client, 1).await;
    let mut redis = raw(server).await;
    assert!(
        rlock_tests::harness::listening_on(&lock, &mut redis).await,
        "the client listens on the lock's channel"
    );
    opener
        .unlock()
        .await
        .expect("the opener passes the lock by script");
    let _ = first.acquired().await;
    first.guard().await
}

/// Waits until Redis confirmed the streak's first owner's field after the last free hand-off
/// (`confirmed_before` confirmations earlier): a lent hold passes on freely once that confirmation
/// is back (or within 10 ms of the last one), so a test that counts free hand-offs waits for it
/// rather than for the clock.
async fn confirmed(client: &Client, confirmed_before: u64) {
    assert!(
        eventually(Duration::from_secs(5), async || client
            .stats()
            .streak_confirmations
            > confirmed_before)
        .await,
        "the streak's first owner was confirmed in Redis"
    );
}

/// A hold lent by a free hand-off: the first owner (see [`first_owner`]) passes `lock` to another
/// task's watchdog hold. Returns the first owner, its field (which Redis keeps) and the lent guard.
async fn lent<K: rlock_redisson::kind::LockKind<Token = ()>>(
    client: &Client,
    server: &RedisServer,
    lock: rlock_redisson::Lock<K>,
) -> (rlock_redisson::Owner, String, Guard) {
    let first = first_owner(client, server, lock.clone()).await;
    let (root, root_field) = (first.owner(), first.field().to_owned());
    let before = client.stats();
    let mut next = spawn_holder(locking(lock));
    queued(client, 1).await;
    first.unlock().await.expect("first unlocks");
    let _ = next.acquired().await;
    assert_eq!(
        client.stats().free_handoffs,
        before.free_handoffs + 1,
        "passed freely"
    );
    confirmed(client, before.streak_confirmations).await;
    (root, root_field, next.guard().await)
}

/// A client whose streaks may last a minute (see [`client`]) and whose watchdog renews every 20 s,
/// so that no renewal falls inside a test's counts of commands.
async fn quiet_client(server: &RedisServer) -> Client {
    client_with(server, |config| {
        config.local_handoff_window = Duration::from_secs(60);
        config.watchdog_timeout = Duration::from_secs(60);
    })
    .await
}

/// A hold lent by a free hand-off is taken up at once while every write the client admits for its
/// wait-forever acquisitions waits for a paused server (issue 38): the take-up sends nothing, and
/// its lease runs from the lend, so it must not queue for an admission behind those writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lent_hold_is_taken_up_while_every_admitted_write_waits_for_redis() {
    const PAUSE: Duration = Duration::from_millis(2_000);
    let server = RedisServer::start();
    // One connection: the client admits 40 wait-forever writes at once.
    let client = client_with(&server, |config| {
        config.pool_size = 1;
        config.local_handoff_window = Duration::from_secs(60);
        config.watchdog_timeout = Duration::from_secs(60);
    })
    .await;
    let lock = client.lock("handoff:admitted");
    let first = first_owner(&client, &server, lock.clone()).await;
    let before = client.stats();
    let mut next = spawn_holder(locking(lock.clone()));
    queued(&client, 1).await;
    let elsewhere = client_with(&server, |_| {}).await;
    let mut held = Vec::new();
    for i in 0..40 {
        held.push(
            elsewhere
                .lock(format!("handoff:admitted:busy:{i}"))
                .lock()
                .await
                .expect("held elsewhere"),
        );
    }
    let mut redis = raw(&server).await;
    let paused = Instant::now();
    pause_clients(&mut redis, PAUSE.as_millis() as u64).await;
    // Sent while Redis is paused: 40 writes that hold every admission until it answers.
    let busy: Vec<_> = (0..40)
        .map(|i| {
            let lock = client.lock(format!("handoff:admitted:busy:{i}"));
            tokio::spawn(async move { lock.lock().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let unlocking = tokio::spawn(first.unlock());
    let _ = next.acquired().await;
    assert!(
        paused.elapsed() < PAUSE,
        "taken up during the pause, not after: {:?}",
        paused.elapsed()
    );
    assert_eq!(
        client.stats().free_handoffs,
        before.free_handoffs + 1,
        "passed freely"
    );
    for task in busy {
        task.abort();
    }
    unlocking
        .await
        .expect("unlock task")
        .expect("first unlocks");
    drop(next.guard().await);
    drop(held);
}

#[tokio::test]
async fn watchdog_holds_pass_with_no_command_and_redis_keeps_the_first_owners_hold() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:free";
    let lock = client.lock(name);
    let first = first_owner(&client, &server, client.lock(name)).await;
    let (root, first_owner) = (first.field().to_owned(), first.owner());
    let mut waiters = Vec::new();
    for queued_before in 0..3 {
        queued(&client, queued_before).await;
        waiters.push(spawn_holder(locking(client.lock(name))));
    }
    queued(&client, 3).await;
    let publish = calls(&mut redis, "publish").await;
    let mut before = commands(&mut redis).await;
    let mut confirmations = client.stats().streak_confirmations;

    first.unlock().await.expect("first unlocks");
    for (i, mut waiter) in waiters.into_iter().enumerate() {
        let (field, ()) = waiter.acquired().await;
        assert_eq!(
            commands(&mut redis).await,
            before,
            "holder {i}: passed with no command but the streak's confirming read"
        );
        assert_eq!(
            hash(&mut redis, name).await,
            HashMap::from([(root.clone(), "1".to_owned())]),
            "holder {i}: Redis keeps the first owner's single hold"
        );
        let guard = waiter.guard().await;
        assert!(lock.is_held_by(guard.owner()).await.expect("is_held_by"));
        assert_eq!(lock.hold_count_of(guard.owner()).await.expect("count"), 1);
        assert_eq!(guard.hold_count().await.expect("count"), 1);
        assert!(!lock.is_held_by(first_owner).await.expect("is_held_by"));
        assert_eq!(lock.hold_count_of(first_owner).await.expect("count"), 0);
        assert!(lock.is_locked().await.expect("is_locked"));
        assert_ne!(field, root, "holder {i} is another owner");
        if i < 2 {
            confirmed(&client, confirmations).await;
            confirmations = client.stats().streak_confirmations;
            // This test's own reads above were commands too.
            before = commands(&mut redis).await;
            guard.unlock().await.expect("unlocks");
        } else {
            let stats = client.stats();
            assert_eq!(
                (
                    stats.local_handoffs,
                    stats.free_handoffs,
                    stats.handoff_streaks
                ),
                (4, 3, 1),
                "the first owner's own hand-off by script, then three free ones"
            );
            assert_eq!(calls(&mut redis, "publish").await, publish, "no publish");
            guard.unlock().await.expect("the last unlocks");
        }
    }
    let exists = exists(&mut redis, name).await;
    assert!(
        !exists,
        "the streak ended with the unlock of the first owner's field"
    );
    assert_eq!(calls(&mut redis, "publish").await, publish + 1);
    assert_eq!(client.stats().renewing_locks, 0);
}

/// While a streak lends the first owner's hold, this client answers for the key before Redis: the
/// first owner's field in Redis is not its own any more.
#[tokio::test]
async fn during_a_streak_the_local_queue_answers_for_the_key_first() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:answers";
    let (root, root_field, holder) = lent(&client, &server, client.lock(name)).await;
    let before = commands(&mut redis).await;

    // The first owner's one-shot try would be a re-entry in Redis: refused here, and so is anyone's.
    let as_root = client.lock(name).with_owner(root);
    assert!(as_root.try_lock().await.expect("try_lock").is_none());
    assert!(client.lock(name).try_lock().await.expect("try").is_none());
    // Nor can the first owner release the hold Redis keeps under its field.
    assert!(matches!(
        client.lock(name).unlock(root).await,
        Err(rlock_redisson::Error::NotOwner { .. })
    ));
    // The holder's re-entry, of any lease, is counted here and leaves Redis alone.
    let as_holder = client.lock(name).with_owner(holder.owner());
    let inner = as_holder.lock().await.expect("re-enters");
    let fixed = as_holder
        .lock_with_lease(Duration::from_millis(200))
        .await
        .expect("re-enters for a lease");
    assert_eq!(holder.hold_count().await.expect("count"), 3);
    assert_eq!(commands(&mut redis).await, before, "all answered locally");
    let pttl: i64 = redis.pttl(name).await.expect("PTTL");
    assert!(
        pttl > 50_000,
        "a fixed-lease re-entry keeps the watchdog lease: {pttl}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!fixed.is_lease_lost(), "the streak's lease, not the 200 ms");
    fixed.unlock().await.expect("unlocks the re-entry");
    inner.unlock().await.expect("unlocks the re-entry");
    assert_eq!(holder.hold_count().await.expect("count"), 1);
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field, "1".to_owned())])
    );

    // The first owner's next acquisition waits its turn behind the holder, then is lent the lock.
    let mut again = spawn_holder(locking(as_root.clone()));
    queued(&client, 1).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut again.acquired)
            .await
            .is_err(),
        "not taken as a re-entry of its field in Redis"
    );
    holder.unlock().await.expect("the holder unlocks");
    let _ = again.acquired().await;
    assert_eq!(client.stats().free_handoffs, 2);
    again.guard().await.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

#[tokio::test]
async fn a_non_reentrant_lock_passes_freely_and_refuses_the_holders_re_entry() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let name = "handoff:non-reentrant";
    let (_, _, holder) = lent(&client, &server, client.non_reentrant_lock(name)).await;
    let again = client
        .non_reentrant_lock(name)
        .with_owner(holder.owner())
        .lock()
        .await;
    assert!(
        matches!(again, Err(rlock_redisson::Error::ReentryRefused { .. })),
        "{again:?}"
    );
    holder.unlock().await.expect("unlocks");
}

/// A force unlock by another client mid-streak: the holder hears that its lease is lost at once
/// (from the unlock message, not a renewal 20 s later), and the next local waiter takes the lock
/// from Redis.
#[tokio::test]
async fn a_force_unlock_elsewhere_ends_the_streak_and_its_holder_hears_at_once() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let other = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:forced";
    let (_, _, holder) = lent(&client, &server, client.lock(name)).await;
    let mut after = spawn_holder(locking(client.lock(name)));
    queued(&client, 1).await;

    assert!(other.lock(name).force_unlock().await.expect("force unlock"));
    tokio::time::timeout(Duration::from_secs(2), holder.lease_lost())
        .await
        .expect("the holder hears at once");
    let (field, ()) = after.acquired().await;
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(field, "1".to_owned())]),
        "the waiter took the lock from Redis"
    );
    assert!(matches!(
        holder.unlock().await,
        Err(rlock_redisson::Error::LeaseLost { .. })
    ));
    after.guard().await.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// The streak's first owner waits again, for a fixed lease: no script can pass its own field to
/// it, so the streak ends with a real release and it takes the lock from Redis, for its lease.
#[tokio::test]
async fn the_first_owner_waiting_for_a_fixed_lease_takes_the_lock_from_redis() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:root-again";
    let (root, root_field, holder) = lent(&client, &server, client.lock(name)).await;
    let mut again = spawn_holder(locking_for_a_lease(client.lock(name).with_owner(root)));
    queued(&client, 1).await;
    holder.unlock().await.expect("the holder unlocks");
    let (field, ()) = again.acquired().await;
    assert_eq!(field, root_field);
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field, "1".to_owned())]),
        "held once, by the first owner"
    );
    let pttl: i64 = redis.pttl(name).await.expect("PTTL");
    assert!(
        pttl > 0 && pttl <= 30_000,
        "its fixed lease, not the watchdog's 60 s: {pttl}"
    );
    again.guard().await.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// `close()` waits for releases in flight, not for a hold that is still lent (its streak's watch
/// ends with the streak).
#[tokio::test]
async fn close_does_not_wait_for_a_lent_hold() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let name = "handoff:close";
    let (_, _, holder) = lent(&client, &server, client.lock(name)).await;
    tokio::time::timeout(Duration::from_secs(2), client.close())
        .await
        .expect("close returns while the hold is lent");
    holder.unlock().await.expect("unlocks");
}

// What users do to a streak (issue 35): each of these broke mutual exclusion silently while the
// free hand-off decided who held from `root != field` and each kind queued on its own.

/// The streak's first owner, lent the lock back, re-enters and releases the inner hold: its outer
/// hold still holds the lock in Redis, and nobody else takes it.
#[tokio::test]
async fn the_first_owner_lent_the_lock_back_re_enters_and_keeps_it() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let other = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:root-re-enters";
    let (root, root_field, holder) = lent(&client, &server, client.lock(name)).await;
    let as_root = client.lock(name).with_owner(root);
    let mut back = spawn_holder(locking(as_root.clone()));
    queued(&client, 1).await;
    holder
        .unlock()
        .await
        .expect("the holder lends the lock back");
    let _ = back.acquired().await;
    let outer = back.guard().await;
    assert_eq!(client.stats().free_handoffs, 2, "lent back freely");

    let inner = as_root.lock().await.expect("re-enters");
    assert_eq!(outer.hold_count().await.expect("count"), 2);
    inner.unlock().await.expect("releases the inner hold");
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field, "1".to_owned())]),
        "the outer hold still holds the lock in Redis"
    );
    assert!(
        other.lock(name).try_lock().await.expect("try").is_none(),
        "nobody else takes it"
    );
    assert!(!outer.is_lease_lost());
    outer.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// While its hold is lent, the streak's first owner takes the same name through every kind that
/// shares the lock's hash: none of them counts its field in Redis as a re-entry. One-shot tries
/// fail, and an acquisition that waits gets the lock only once the holder released it.
#[tokio::test]
async fn the_first_owner_waits_for_its_lent_hold_through_every_kind_sharing_the_hash() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:root-other-kinds";
    let (root, root_field, holder) = lent(&client, &server, client.lock(name)).await;
    let short = Duration::from_millis(100);
    assert!(
        client
            .spin_lock(name)
            .with_owner(root)
            .try_lock()
            .await
            .expect("spin")
            .is_none()
    );
    assert!(
        client
            .fair_lock(name)
            .with_owner(root)
            .try_lock()
            .await
            .expect("fair")
            .is_none()
    );
    assert!(
        client
            .fenced_lock(name)
            .with_owner(root)
            .try_lock()
            .await
            .expect("fenced")
            .is_none()
    );
    assert!(
        client
            .non_reentrant_lock(name)
            .with_owner(root)
            .try_lock()
            .await
            .expect("non-reentrant: busy, not a refused re-entry")
            .is_none()
    );
    assert!(
        client
            .spin_lock(name)
            .with_owner(root)
            .try_lock_for(short)
            .await
            .expect("spin")
            .is_none(),
        "a spin lock waits its turn"
    );
    assert!(
        client
            .fair_lock(name)
            .with_owner(root)
            .try_lock_for(short)
            .await
            .expect("fair")
            .is_none(),
        "a fair lock waits its turn"
    );
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field.clone(), "1".to_owned())]),
        "nothing was counted in Redis"
    );
    let mut spin = spawn_holder(locking(client.spin_lock(name).with_owner(root)));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut spin.acquired)
            .await
            .is_err(),
        "not while the hold is lent"
    );
    holder.unlock().await.expect("the holder unlocks");
    let (field, ()) = spin.acquired().await;
    assert_eq!(field, root_field);
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field, "1".to_owned())]),
        "taken from Redis, once"
    );
    spin.guard().await.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// The lent holder re-enters through other kinds that share the hash: counted with its hold (a
/// spin or fair re-entry) and never waiting for the root's field in Redis.
#[tokio::test]
async fn the_lent_holder_re_enters_through_other_kinds_sharing_the_hash() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:holder-other-kinds";
    let (_, root_field, holder) = lent(&client, &server, client.lock(name)).await;
    let owner = holder.owner();
    let wait = Duration::from_secs(2);
    let spin = client
        .spin_lock(name)
        .with_owner(owner)
        .try_lock_for(wait)
        .await;
    let spin = spin.expect("spin").expect("a spin re-entry");
    let fair = client
        .fair_lock(name)
        .with_owner(owner)
        .try_lock_for(wait)
        .await;
    let fair = fair.expect("fair").expect("a fair re-entry");
    assert_eq!(holder.hold_count().await.expect("count"), 3);
    let fenced = client.fenced_lock(name).with_owner(owner).try_lock().await;
    assert!(
        matches!(fenced, Err(rlock_redisson::Error::ReentryRefused { .. })),
        "a fenced re-entry needs a token from Redis: refused, not waiting for itself: {fenced:?}"
    );
    fair.unlock().await.expect("unlocks the fair re-entry");
    spin.unlock().await.expect("unlocks the spin re-entry");
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field, "1".to_owned())])
    );
    holder.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// The owner that the hold is lent to has another future waiting through the spin lock, which
/// does not queue locally, since before the lend: that future's next attempt re-enters the lent
/// hold in the streak. Sent to Redis, which holds the root's field, it found its own field gone and
/// took the lent hold for lost (seen in the soak's `re_entries_and_two_futures_of_one_owner::mixed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lent_holders_future_waiting_through_another_kind_re_enters_the_lent_hold() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:lent-holder-spinning";
    let first = first_owner(&client, &server, client.lock(name)).await;
    let root_field = first.field().to_owned();
    let owner = rlock_redisson::Owner::new();
    let mut next = spawn_holder(locking(client.lock(name).with_owner(owner)));
    queued(&client, 1).await;
    // Spins (its attempts find the lock busy) until the hold is lent to its owner.
    let spinning = tokio::spawn({
        let spin = client.spin_lock(name).with_owner(owner);
        async move { spin.try_lock_for(Duration::from_secs(5)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = client.stats();
    first.unlock().await.expect("first lends");
    let _ = next.acquired().await;
    assert_eq!(
        client.stats().free_handoffs,
        before.free_handoffs + 1,
        "lent"
    );
    let spin = spinning
        .await
        .expect("task")
        .expect("spin")
        .expect("re-entered the lent hold");
    let holder = next.guard().await;
    assert!(
        !holder.is_lease_lost(),
        "the lent hold is not taken for lost"
    );
    assert!(!spin.is_lease_lost());
    assert_eq!(holder.hold_count().await.expect("count"), 2);
    spin.unlock().await.expect("unlocks the spin re-entry");
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field, "1".to_owned())]),
        "Redis still holds the root's field for the streak"
    );
    holder.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// Another client force-unlocks through the spin lock (Redisson's is a bare `DEL`) and takes the
/// lock while a hold is lent: the holder is told, and the hold is not handed on to the next local
/// waiter, which waits for the new owner.
#[tokio::test]
async fn a_spin_force_unlock_elsewhere_is_heard_and_not_handed_on() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let other = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:spin-forced";
    let (_, _, holder) = lent(&client, &server, client.lock(name)).await;
    let mut after = spawn_holder(locking(client.lock(name)));
    queued(&client, 1).await;
    assert!(
        other
            .spin_lock(name)
            .force_unlock()
            .await
            .expect("force unlock")
    );
    let theirs = other
        .lock(name)
        .lock()
        .await
        .expect("the other client locks");
    tokio::time::timeout(Duration::from_secs(2), holder.lease_lost())
        .await
        .expect("the holder hears at once");
    assert!(matches!(
        holder.unlock().await,
        Err(rlock_redisson::Error::LeaseLost { .. })
    ));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut after.acquired)
            .await
            .is_err(),
        "the next waiter is not handed a lock another client holds"
    );
    theirs.unlock().await.expect("the other client unlocks");
    let (field, ()) = after.acquired().await;
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(field, "1".to_owned())]),
        "taken from Redis"
    );
    after.guard().await.unlock().await.expect("unlocks");
}

/// An operator's `DEL` (no message at all) while a hold is lent, and another client takes the lock.
/// The holder's release lends the hold on without Redis, but returns only once Redis confirmed the
/// first owner's field after the hand-off: it finds it gone, so the release fails with
/// `LeaseLost`, the next holder, lent a hold that is gone, is told within that round trip, and the
/// lock is not handed on again.
#[tokio::test]
async fn a_silent_delete_is_told_to_every_holder_it_reaches() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let other = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:silent-delete";
    let (_, _, holder) = lent(&client, &server, client.lock(name)).await;
    let mut next = spawn_holder(locking(client.lock(name)));
    queued(&client, 1).await;
    let mut last = spawn_holder(locking(client.lock(name)));
    queued(&client, 2).await;
    let _: () = redis.del(name).await.expect("DEL");
    let theirs = other
        .lock(name)
        .lock()
        .await
        .expect("the other client locks");
    let released = holder.unlock().await;
    assert!(
        matches!(released, Err(rlock_redisson::Error::LeaseLost { .. })),
        "the holder is told by its release: {released:?}"
    );
    if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(200), &mut next.acquired).await {
        let next = next.guard().await;
        assert!(next.is_lease_lost(), "a hold lent after the delete is told");
        assert!(matches!(
            next.unlock().await,
            Err(rlock_redisson::Error::LeaseLost { .. })
        ));
    } else {
        drop(next);
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut last.acquired)
            .await
            .is_err(),
        "not handed on while the other client holds"
    );
    assert_eq!(
        hash(&mut redis, name).await.len(),
        1,
        "the other client's hold alone"
    );
    theirs.unlock().await.expect("the other client unlocks");
    let _ = last.acquired().await;
    last.guard().await.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// Two futures of one owner: one holds a lent hold and releases it while the other locks. Whichever
/// order the two take, the lock is held in Redis while the second one's guard lives.
#[tokio::test]
async fn two_futures_of_one_owner_never_hold_a_released_streak() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let other = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:two-futures";
    for round in 0..20 {
        let (_, _, holder) = lent(&client, &server, client.lock(name)).await;
        let as_holder = client.lock(name).with_owner(holder.owner());
        let (released, second) = tokio::join!(holder.unlock(), as_holder.lock());
        released.expect("the first future unlocks");
        let second = second.expect("the second future locks");
        assert!(
            exists(&mut redis, name).await,
            "round {round}: the second future's hold is in Redis"
        );
        assert!(
            other.lock(name).try_lock().await.expect("try").is_none(),
            "round {round}: nobody else takes it"
        );
        second.unlock().await.expect("unlocks");
        assert!(!exists(&mut redis, name).await, "round {round}");
    }
}

/// A local force unlock mid-streak: the holder is told, and the first owner's next acquisition is not
/// a re-entry of its field that Redis may still have had: it holds once, and its unlock frees the lock.
#[tokio::test]
async fn after_a_local_force_unlock_the_first_owner_takes_the_lock_afresh() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:local-force";
    let (root, _, holder) = lent(&client, &server, client.lock(name)).await;
    let (as_root, forcer) = (client.lock(name).with_owner(root), client.lock(name));
    let (forced, again) = tokio::join!(forcer.force_unlock(), as_root.lock());
    assert!(forced.expect("force unlock"));
    assert!(holder.is_lease_lost(), "the holder is told");
    let again = again.expect("the first owner locks again");
    assert_eq!(again.hold_count().await.expect("count"), 1);
    again.unlock().await.expect("unlocks");
    assert!(
        !exists(&mut redis, name).await,
        "nothing of the first owner's is left in Redis"
    );
    drop(holder);
}

/// The server's ids of its subscriber (pub/sub) connections.
async fn subscriber_ids(redis: &mut MultiplexedConnection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(redis)
        .await
        .expect("CLIENT LIST");
    list.lines()
        .filter_map(|line| {
            line.split(' ')
                .next()?
                .strip_prefix("id=")
                .map(str::to_owned)
        })
        .collect()
}

/// A subscriber connection that stops hearing without being reset (black-holed: what a partition
/// or a half-open TCP connection does) is declared dead by its keepalive `PING` (Redisson's
/// `pingConnectionInterval`) and made anew, so that the free hand-offs that relied on it end and
/// its waiters re-try. Without the keepalive the deaf connection stays, and nothing notices.
#[tokio::test]
async fn a_deaf_subscriber_is_declared_dead_by_its_keepalive_and_made_anew() {
    use rlock_tests::proxy::{Direction, FaultProxy};
    let server = RedisServer::start();
    let mut redis = raw(&server).await;
    for keepalive in [true, false] {
        let proxy = FaultProxy::start(server.port());
        let mut config = rlock_redisson::Config::new(proxy.url());
        config.ping_connection_interval = if keepalive {
            Duration::from_millis(200)
        } else {
            Duration::ZERO
        };
        config.command_timeout = Duration::from_millis(300);
        config.connect_timeout = Duration::from_millis(300);
        let client = Client::with_config(config).await.expect("connects");
        let name = format!("handoff:deaf:{keepalive}");
        let holder = client.lock(&name).lock().await.expect("locks");
        let waiter = spawn_holder(locking(client.lock(&name)));
        queued(&client, 1).await;
        assert!(
            eventually(Duration::from_secs(5), async || subscriber_ids(&mut redis)
                .await
                .len()
                == 1)
            .await,
            "the waiter subscribed"
        );
        let before = subscriber_ids(&mut redis).await;
        proxy.black_hole(Direction::ToClient, true);
        tokio::time::sleep(Duration::from_millis(800)).await;
        proxy.black_hole(Direction::ToClient, false);
        let made_anew = eventually(Duration::from_secs(3), async || {
            let now = subscriber_ids(&mut redis).await;
            !now.is_empty() && now != before
        })
        .await;
        assert_eq!(made_anew, keepalive, "keepalive {keepalive}");
        holder.unlock().await.expect("unlocks");
        waiter
            .guard()
            .await
            .unlock()
            .await
            .expect("the waiter got it and unlocks");
        client.close().await;
    }
}

/// `Lock::unlock(owner)` racing the owner's own last release, which lends the lock to a local waiter
/// (a misuse: two releases of one hold, from two threads): one of them releases, the other fails
/// and sends nothing, and the waiter holds a lock that Redis still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_release_racing_a_lending_one_sends_nothing() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let other = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    for round in 0..20 {
        let name = format!("handoff:double-release:{round}");
        let first = first_owner(&client, &server, client.lock(&name)).await;
        let owner = first.owner();
        let mut next = spawn_holder(locking(client.lock(&name)));
        queued(&client, 1).await;
        let lock = client.lock(&name);
        let (by_guard, by_owner) = tokio::join!(
            tokio::spawn(first.unlock()),
            tokio::spawn(async move { lock.unlock(owner).await })
        );
        let outcomes = [by_guard.expect("task"), by_owner.expect("task")];
        assert_eq!(
            outcomes.iter().filter(|outcome| outcome.is_ok()).count(),
            1,
            "round {round}: {outcomes:?}"
        );
        let _ = next.acquired().await;
        let next = next.guard().await;
        assert!(
            exists(&mut redis, &name).await,
            "round {round}: the waiter's lock is held in Redis"
        );
        assert!(
            other.lock(&name).try_lock().await.expect("try").is_none(),
            "round {round}: nobody else takes it"
        );
        assert!(!next.is_lease_lost(), "round {round}");
        next.unlock().await.expect("unlocks");
        assert!(!exists(&mut redis, &name).await, "round {round}");
    }
}

/// The lent holder takes a multi-lock over the lent lock and another one, for a lease: the lent
/// lock keeps the streak's watchdog lease (its key's expiry is the streak's to set, which counts on
/// a whole watchdog lease from its last renewal), the other member gets the multi-lock's.
#[tokio::test]
async fn a_multi_lock_lease_does_not_cut_a_lent_holds_expiry() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let (name, second) = ("handoff:multi", "handoff:multi:second");
    let (_, root_field, holder) = lent(&client, &server, client.lock(name)).await;
    let multi = rlock_redisson::MultiLock::new([client.lock(name), client.lock(second)])
        .with_owner(holder.owner());
    let guard = multi
        .lock_with_lease(Duration::from_millis(500))
        .await
        .expect("the multi-lock locks");
    let lent_ttl: i64 = redis.pttl(name).await.expect("PTTL");
    let second_ttl: i64 = redis.pttl(second).await.expect("PTTL");
    assert!(lent_ttl > 50_000, "the streak's watchdog lease: {lent_ttl}");
    assert!(
        (1..=500).contains(&second_ttl),
        "the multi-lock's lease: {second_ttl}"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(root_field, "1".to_owned())]),
        "the lent lock outlived the multi-lock's lease"
    );
    assert!(!holder.is_lease_lost());
    drop(guard);
    holder.unlock().await.expect("unlocks");
}

/// The streak's watch looks at Redis again after its subscriber connection was interrupted (a
/// message may have been lost meanwhile): a lent hold deleted silently while the connection was
/// down is found gone, and its holder is told, rather than at the next renewal.
#[tokio::test]
async fn a_streak_looks_at_redis_again_after_its_subscriber_reconnects() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:reconnect";
    let (_, _, holder) = lent(&client, &server, client.lock(name)).await;
    let _: () = redis.del(name).await.expect("DEL");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut redis)
        .await
        .expect("CLIENT KILL");
    tokio::time::timeout(Duration::from_secs(5), holder.lease_lost())
        .await
        .expect("the holder is told once the channel is live again");
    assert!(matches!(
        holder.unlock().await,
        Err(rlock_redisson::Error::LeaseLost { .. })
    ));
}

/// The key of a lent hold is overwritten by a value of another type, and its channel carries a
/// message: the streak's look at Redis fails (`WRONGTYPE`), and a look that fails ends the streak
/// as lost, with its holder told, instead of leaving the watch silently.
#[tokio::test]
async fn a_streak_whose_look_at_redis_fails_ends_and_tells_its_holder() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:unreadable";
    let (_, _, holder) = lent(&client, &server, client.lock(name)).await;
    let _: () = redis.set(name, "not a lock").await.expect("SET");
    let channel = rlock_tests::redisson::lock_channel(name);
    let _: i64 = redis.publish(&channel, "0").await.expect("PUBLISH");
    tokio::time::timeout(Duration::from_secs(5), holder.lease_lost())
        .await
        .expect("the holder is told");
    let _: () = redis.del(name).await.expect("DEL");
    drop(holder);
}

/// Two futures of one owner both wait for the lock, the second for a fixed lease: once the first
/// has held and released it, nothing is handed from the owner to itself (a hand-off script that
/// replaced a field by itself deleted the lock), and the second future's hold is in Redis.
#[tokio::test]
async fn nothing_is_handed_from_an_owner_to_itself() {
    let server = RedisServer::start();
    let (client, other) = (client(&server).await, client(&server).await);
    let mut redis = raw(&server).await;
    let name = "handoff:same-owner";
    let blocker = client.lock(name).lock().await.expect("the blocker locks");
    let mine = client.lock(name).with_owner(rlock_redisson::Owner::new());
    let mut first = spawn_holder(locking(mine.clone()));
    queued(&client, 1).await;
    let mut second = spawn_holder(locking_for_a_lease(mine));
    queued(&client, 2).await;
    blocker.unlock().await.expect("the blocker unlocks");
    let (field, ()) = first.acquired().await;
    first
        .guard()
        .await
        .unlock()
        .await
        .expect("the first future unlocks");
    let (second_field, ()) = second.acquired().await;
    assert_eq!(second_field, field, "one owner");
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(field, "1".to_owned())]),
        "the second future's hold is in Redis"
    );
    assert!(other.lock(name).try_lock().await.expect("try").is_none());
    second.guard().await.unlock().await.expect("unlocks");
    assert!(!exists(&mut redis, name).await);
}

/// A re-entry's release finds the owner's field gone from Redis (a delete nobody heard): the
/// owner's outer hold is told at once, and is not lent on to the next local waiter, which takes
/// the lock from Redis.
#[tokio::test]
async fn a_release_that_finds_the_field_gone_tells_the_outer_hold_which_is_not_lent_on() {
    let server = RedisServer::start();
    let client = quiet_client(&server).await;
    let mut redis = raw(&server).await;
    let name = "handoff:found-gone";
    let outer = first_owner(&client, &server, client.lock(name)).await;
    let inner = client
        .lock(name)
        .with_owner(outer.owner())
        .lock()
        .await
        .expect("re-enters");
    let mut next = spawn_holder(locking(client.lock(name)));
    queued(&client, 1).await;
    let _: () = redis.del(name).await.expect("DEL");
    assert!(matches!(
        inner.unlock().await,
        Err(rlock_redisson::Error::LeaseLost { .. })
    ));
    assert!(outer.is_lease_lost(), "the outer hold is told at once");
    assert!(matches!(
        outer.unlock().await,
        Err(rlock_redisson::Error::LeaseLost { .. })
    ));
    let (field, ()) = next.acquired().await;
    assert_eq!(
        hash(&mut redis, name).await,
        HashMap::from([(field, "1".to_owned())]),
        "taken from Redis"
    );
    assert_eq!(client.stats().free_handoffs, 0, "nothing was lent");
    next.guard().await.unlock().await.expect("unlocks");
}

/// A fair acquisition of one owner waits in the fair lock's queue in Redis while another future of
/// the owner takes the lock through the spin lock; the fair one then acquires as a re-entry. Its
/// queue entry does not stay behind: the re-entry's own script takes it out (docs/protocol.md §6.4
/// step 3), so it is gone as the acquisition returns, whenever the other future releases (the
/// suite once saw an entry left when that release came before the engine looked at the owner's
/// count), and another owner's fair acquisition takes the free lock at once instead of waiting
/// for the stale entry's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_that_acquires_as_a_re_entry_leaves_the_queue() {
    let server = RedisServer::start();
    let client = client_with(&server, |config| {
        config.fair_lock_wait_timeout = Duration::from_secs(5);
    })
    .await;
    let other = client_with(&server, |_| {}).await;
    let mut redis = raw(&server).await;
    let name = "handoff:fair-re-entry";
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let blocker = other.lock(name).lock().await.expect("the blocker locks");
    let owner = rlock_redisson::Owner::new();
    let fair = tokio::spawn({
        let lock = client.fair_lock(name).with_owner(owner);
        async move { lock.try_lock_for(Duration::from_secs(3)).await }
    });
    assert!(
        eventually(Duration::from_secs(5), async || {
            let queued: usize = redis.llen(&queue).await.expect("LLEN");
            queued == 1
        })
        .await,
        "the fair waiter queued in Redis"
    );
    let spin = tokio::spawn({
        let lock = client.spin_lock(name).with_owner(owner);
        async move { lock.lock().await }
    });
    blocker.unlock().await.expect("the blocker unlocks");
    let spin = spin.await.expect("task").expect("the spin lock acquires");
    let fair = fair.await.expect("task").expect("fair try");
    let fair = fair.expect("the fair waiter acquires, as a re-entry");
    let queued: usize = redis.llen(&queue).await.expect("LLEN");
    assert_eq!(queued, 0, "the re-entry left the queue in its script");
    let timeouts: usize = redis
        .zcard(format!("redisson_lock_timeout:{{{name}}}"))
        .await
        .expect("ZCARD");
    assert_eq!(timeouts, 0, "and its deadline");
    assert_eq!(fair.hold_count().await.expect("count"), 2);
    spin.unlock().await.expect("unlocks");
    fair.unlock().await.expect("unlocks");
    let started = Instant::now();
    let theirs = other
        .fair_lock(name)
        .try_lock_for(Duration::from_secs(2))
        .await
        .expect("try");
    assert!(theirs.is_some(), "the free lock is taken");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "at once, not after a stale deadline"
    );
}
