//! rlock's local hand-off (lock cohorting, README) next to an emulated Redisson client on the same
//! lock: rlock's tasks pass the lock among themselves without releasing it (freely: no command,
//! Redis keeping the streak's first hold), in bounded streaks, and a Java waiter still gets its
//! turn. Traced with `MONITOR` ([`Tracer`]), script by script:
//!
//! - while a Java waiter waits, rlock never hands off more than `local_handoff_limit` times in a
//!   row, nor for longer than `local_handoff_window` (and one more hold): then the lock is released
//!   for real, its unlock message wakes the Java waiter, and the Java waiter races rlock's queue
//!   head, which waited for the same message (each real release is one such race);
//! - an unlock by Java wakes rlock's queue head alone, which then hands the lock on to the tasks
//!   queued behind it, in their order, and the last one's release unlocks the head's field.

use std::pin::pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use rlock_tests::redisson::lock_channel;
use rlock_tests::{RedisServer, harness};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::golden::{
    JAVA_FIELD, JAVA_THREAD, Trace, Tracer, assert_same_trace, node_of, owner, script_of, trace,
};
use crate::support::{Party, PartyLock, Redis, Side};
use crate::wire::lock_expected;

const NAME: &str = "interop:hand-off";
/// A non-atomic counter (`GET`, then `SET`) that every holder increments.
const COUNTER: &str = "interop:hand-off:counter";
/// rlock tasks contending for the lock.
const TASKS: u64 = 4;
/// How many times the Java waiter waits for the lock while rlock's tasks loop on it.
const JAVA_TURNS: usize = 10;
/// How many real releases a Java waiter may need at most. Each is a race between the Java waiter and
/// rlock's queue head, which both heard its message, and nothing makes it deterministic: the Java
/// waiter won about 40 % of them on an idle 2-core machine, 14 % with a fault scenario running
/// alongside. At 14 %, losing 100 in a row has odds of 3·10⁻⁷.
const MAX_RACES: usize = 100;
/// The longest a critical section here takes (a `GET` and a `SET` on loopback), with the round trips
/// of the hand-off and the unlock around it and the margin a loaded 2-core machine needs.
const HOLD_BOUND: Duration = Duration::from_millis(20);

/// A critical section: no one else inside (`inside`), and the counter incremented with a `GET` and
/// a `SET`, which another holder's increment in between would make come out short.
async fn critical(inside: &AtomicUsize, conn: &mut MultiplexedConnection) {
    assert_eq!(
        inside.fetch_add(1, Ordering::SeqCst),
        0,
        "two holders at once"
    );
    let value: Option<u64> = conn.get(COUNTER).await.expect("GET");
    let _: () = conn
        .set(COUNTER, value.unwrap_or(0) + 1)
        .await
        .expect("SET");
    let _ = inside.fetch_sub(1, Ordering::SeqCst);
}

/// What a script of the trace did to the lock (a hand-off between rlock's tasks runs none).
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// A real release, whose message woke the waiters.
    Release,
    /// The Java waiter's acquisition.
    JavaAcquired,
    /// A try of the Java waiter that found the lock held.
    JavaTried,
    /// Anything else (an acquire by rlock's head).
    Other,
}

fn step(script: &[String]) -> Step {
    let runs = |prefix: &str| script.iter().any(|c| c.starts_with(prefix));
    if runs("publish ") {
        Step::Release
    } else if runs(&format!("hincrby {NAME} {JAVA_FIELD} 1")) {
        Step::JavaAcquired
    } else if runs(&format!("hexists {NAME} {JAVA_FIELD}")) {
        Step::JavaTried
    } else {
        Step::Other
    }
}

/// rlock's tasks loop on one lock (default hand-off settings) while, `JAVA_TURNS` times, a Java
/// client waits for it, holds it and releases it. Mutual exclusion holds throughout (the counter is
/// exact), hand-offs happen (counted by the client: they run no command), no more than the limit
/// per real release, and while the Java client waits, a real release comes at least once per window
/// and one more hold (MONITOR's clock), and each one wakes the Java waiter, which tries. It wins one
/// of those races within [`MAX_RACES`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rlock_streaks_are_bounded_and_a_java_waiter_gets_its_turn() {
    let server = RedisServer::start();
    let defaults = rlock_redisson::Config::new(server.url());
    let (limit, window) = (defaults.local_handoff_limit, defaults.local_handoff_window);
    let rlock = Party::connect(Side::Rlock, &server).await;
    let java = Party::connect(Side::Java, &server).await;
    let mut tracer = Tracer::start(&server, &[NAME]).await;
    tracer.alias(java.field(JAVA_THREAD).as_bytes(), JAVA_FIELD);
    let conn = harness::raw(&server).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let rlock_holds = Arc::new(AtomicU64::new(0));

    tracer.mark("rlock alone").await;
    let tasks: Vec<JoinHandle<()>> = (1..=TASKS)
        .map(|thread| {
            let (lock, mut conn) = (rlock.lock(NAME), conn.clone());
            let (inside, stop, holds) = (inside.clone(), stop.clone(), rlock_holds.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let hold = lock.lock(thread).await;
                    critical(&inside, &mut conn).await;
                    let _ = holds.fetch_add(1, Ordering::SeqCst);
                    hold.release().await;
                }
            })
        })
        .collect();
    let busy = harness::eventually(Duration::from_secs(5), async || {
        rlock_holds.load(Ordering::SeqCst) >= 100
    });
    assert!(busy.await, "rlock's tasks take the lock in turn");

    // A real release happens at least once per streak: the window and one more hold.
    let race_every = window + HOLD_BOUND;
    let wait_bound = race_every * MAX_RACES as u32;
    let (java_lock, mut java_conn) = (java.lock(NAME), conn.clone());
    let mut waits = Vec::new();
    for turn in 1..=JAVA_TURNS {
        tracer.mark(&format!("java waits {turn}")).await;
        let started = Instant::now();
        let hold = tokio::time::timeout(wait_bound * 2, java_lock.lock(JAVA_THREAD))
            .await
            .expect("the Java waiter is not starved (PTTL 30 s)");
        waits.push(started.elapsed());
        tracer.mark(&format!("java holds {turn}")).await;
        critical(&inside, &mut java_conn).await;
        hold.release().await;
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("rlock's tasks stop")
            .expect("an rlock task failed");
    }
    let (trace, _) = tracer.finish_timed(&node_of(&rlock)).await;

    let mut redis = Redis::connect(&server).await;
    let counter: u64 = redis.conn.get(COUNTER).await.expect("GET counter");
    let holds = rlock_holds.load(Ordering::SeqCst) + JAVA_TURNS as u64;
    assert_eq!(counter, holds, "every increment happened under exclusion");
    assert!(!redis.exists(NAME).await, "the lock is free at the end");

    let steps: Vec<(&str, f64, Step)> = trace
        .iter()
        .flat_map(|(phase, scripts)| {
            let phase = phase.as_str();
            scripts.iter().map(move |(at, s)| (phase, *at, step(s)))
        })
        .collect();
    let Party::Rlock(client) = &rlock else {
        unreachable!("an rlock party")
    };
    let hand_offs = client.stats().local_handoffs;
    let releases = steps.iter().filter(|(.., s)| *s == Step::Release).count() as u64;
    let java_waits: Vec<JavaWait> = (1..=JAVA_TURNS)
        .map(|turn| {
            let waiting = format!("java waits {turn}");
            let during: Vec<(f64, &Step)> = steps
                .iter()
                .filter(|(phase, ..)| *phase == waiting)
                .map(|(_, at, s)| (*at, s))
                .collect();
            JavaWait::of(turn, &during)
        })
        .collect();
    let races: Vec<usize> = java_waits.iter().map(|wait| wait.races).collect();
    let gaps: Vec<Duration> = java_waits.iter().map(|wait| wait.longest_gap).collect();
    eprintln!(
        "interop hand-off: {hand_offs} hand-offs, {releases} real releases (limit {limit} per \
         release); Java waits {waits:?}, races until won (real releases) {races:?}, longest time \
         without a release {gaps:?}"
    );
    assert!(hand_offs > 0, "rlock's tasks handed the lock off");
    // Every streak ends with one real release, the last one's at the end included.
    assert!(
        hand_offs <= u64::from(limit) * releases,
        "{hand_offs} hand-offs for {releases} real releases, limit {limit} per streak"
    );
    for (turn, wait) in java_waits.iter().enumerate() {
        // Every real release's message woke the Java waiter, which tried: it lost every race
        // before the one it won (none if the lock was free when it came).
        assert!(
            wait.tried + 1 >= wait.races,
            "turn {}: {} real releases, the Java waiter tried {} times",
            turn + 1,
            wait.races,
            wait.tried
        );
        assert!(
            wait.longest_gap <= race_every,
            "turn {}: {:?} without a real release while Java waited, bound {race_every:?} (the \
             window and one more hold)",
            turn + 1,
            wait.longest_gap
        );
    }
    assert!(
        races.iter().all(|&races| races <= MAX_RACES),
        "a Java waiter needed more than {MAX_RACES} races: {races:?}"
    );
    let slowest = waits.iter().max().copied().unwrap_or_default();
    assert!(
        slowest <= wait_bound,
        "a Java waiter waited {slowest:?}, bound {wait_bound:?} ({MAX_RACES} streaks of at most \
         {race_every:?})"
    );
}

/// One wait of the Java waiter, from its first try to its acquire, as the trace shows it.
struct JavaWait {
    /// Real releases, each a race the Java waiter lost but the last (none if it found the lock
    /// free).
    races: usize,
    /// Its tries that found the lock held.
    tried: usize,
    /// The longest time it had no chance: from its first try to the first real release, or
    /// between two.
    longest_gap: Duration,
}

impl JavaWait {
    /// The wait of turn `turn` from the steps of its phase, with the times they ran at.
    fn of(turn: usize, during: &[(f64, &Step)]) -> Self {
        let java = |(_, s): &&(f64, &Step)| matches!(s, Step::JavaTried | Step::JavaAcquired);
        let first = during.iter().position(|s| java(&s));
        let acquired = during.iter().position(|(_, s)| **s == Step::JavaAcquired);
        let (Some(first), Some(acquired)) = (first, acquired) else {
            panic!("turn {turn}: Java's acquire traced");
        };
        let waited = &during[first..=acquired];
        let count = |step: Step| waited.iter().filter(|(_, s)| **s == step).count();
        let chances: Vec<f64> = std::iter::once(waited[0].0)
            .chain(
                waited
                    .iter()
                    .filter(|(_, s)| **s == Step::Release)
                    .map(|(at, _)| *at),
            )
            .collect();
        let longest_gap = chances
            .windows(2)
            .map(|pair| Duration::from_secs_f64((pair[1] - pair[0]).max(0.0)))
            .max()
            .unwrap_or_default();
        Self {
            races: count(Step::Release),
            tried: count(Step::JavaTried),
            longest_gap,
        }
    }
}

/// Starts thread `thread`'s acquisition of `lock` on a task, returning once it is in rlock's local
/// queue (the acquire joins it before its first await), and releases the hold once acquired, noting
/// its turn in `order`.
async fn queue_up(lock: PartyLock, thread: u64, order: Arc<Mutex<Vec<u64>>>) -> JoinHandle<()> {
    let (joined, queued) = oneshot::channel();
    let task = tokio::spawn(async move {
        let mut acquiring = pin!(lock.lock(thread));
        let first = futures::poll!(&mut acquiring);
        let _ = joined.send(());
        let hold = match first {
            Poll::Ready(hold) => hold,
            Poll::Pending => acquiring.await,
        };
        order.lock().expect("order").push(thread);
        hold.release().await;
    });
    queued.await.expect("the task joined the queue");
    task
}

/// A Java client holds the lock while rlock's tasks queue for it (only the first, the queue's
/// head, tries in Redis). Java's unlock wakes that head alone; once it holds, the lock passes from
/// task to task in their queue order with no command at all, and the last task releases it for
/// real: the unlock of the head's field, which Redis kept all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_unlock_wakes_rlocks_head_which_hands_off_in_queue_order() {
    let server = RedisServer::start();
    // A streak may last a minute (default 10 ms): every release hands off however slow this run is.
    let rlock = Party::Rlock(
        harness::client_with(&server, |config| {
            config.local_handoff_window = Duration::from_secs(60);
        })
        .await,
    );
    let java = Party::connect(Side::Java, &server).await;
    let mut tracer = Tracer::start(&server, &[NAME]).await;
    tracer.alias(java.field(JAVA_THREAD).as_bytes(), JAVA_FIELD);
    let java_hold = java.lock(NAME).lock(JAVA_THREAD).await;
    let (mut tasks, order) = (Vec::new(), Arc::new(Mutex::new(Vec::new())));
    for thread in 1..=TASKS {
        tasks.push(queue_up(rlock.lock(NAME), thread, order.clone()).await);
    }
    // The head tried, subscribed and sleeps; the others wait behind it without a try.
    let _ = tracer.redis().wait_parked(&lock_channel(NAME), 1).await;

    tracer.mark("java unlocks").await;
    java_hold.release().await;
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("every queued task acquires")
            .expect("an rlock task failed");
    }
    let (mut actual, _) = tracer.finish(&node_of(&rlock)).await;
    // The streak's confirmations of the first owner's field behind its free hand-offs (one read
    // at a time, standing for every hand-off before it: how many depends on timing).
    let confirmation = vec![format!("hget {NAME} {}", owner(1))];
    let mut confirmations = 0;
    for (_, scripts) in &mut actual {
        let before = scripts.len();
        scripts.retain(|script| *script != confirmation);
        confirmations += before - scripts.len();
    }
    assert!(confirmations >= 1, "the streak confirmed its first owner");

    assert_eq!(
        *order.lock().expect("order"),
        (1..=TASKS).collect::<Vec<_>>(),
        "queue order"
    );
    let own: Trace = lock_expected(NAME, Side::Rlock);
    let scripts = vec![
        script_of(&own, "full unlock", JAVA_FIELD),
        script_of(&own, "acquire", &owner(1)),
        script_of(&own, "full unlock", &owner(1)),
    ];
    assert_same_trace(
        "rlock after java",
        &actual,
        &trace(vec![("java unlocks", scripts)]),
    );
}
