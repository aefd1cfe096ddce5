//! Small helpers shared by the integration tests: clients with tweaked configs, raw connections,
//! command counters read from `INFO commandstats`, and the wall clock in epoch ms.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;

use crate::RedisServer;

/// An rlock client on `server` with the default configuration.
pub async fn client(server: &RedisServer) -> rlock_redisson::Client {
    client_with(server, |_| {}).await
}

/// An rlock client on `server` whose configuration `tweak` adjusted first.
pub async fn client_with(
    server: &RedisServer,
    tweak: impl FnOnce(&mut rlock_redisson::Config),
) -> rlock_redisson::Client {
    let mut config = rlock_redisson::Config::new(server.url());
    tweak(&mut config);
    rlock_redisson::Client::with_config(config)
        .await
        .expect("rlock client connects")
}

/// An rlock client on `server` whose requests time out after 100 ms (and retry within 200 ms), for
/// tests that make replies late on purpose.
pub async fn fast_timeouts(server: &RedisServer) -> rlock_redisson::Client {
    client_with(server, |config| {
        config.command_timeout = Duration::from_millis(100);
        config.retry_delay = Duration::from_millis(100);
        config.retry_max_delay = Duration::from_millis(200);
    })
    .await
}

/// `CLIENT PAUSE ms ALL`: every client's commands wait that long (replies come late, scripts run late).
pub async fn pause_clients(redis: &mut redis::aio::MultiplexedConnection, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("ALL")
        .query_async(redis)
        .await
        .expect("CLIENT PAUSE");
}

/// `CLIENT KILL TYPE pubsub`: cuts every subscriber connection; returns how many there were.
pub async fn kill_subscribers(redis: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(redis)
        .await
        .expect("CLIENT KILL")
}

/// A plain multiplexed connection for inspecting and poking at Redis directly.
pub async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

/// A plain blocking connection to `server` with short timeouts (2 s to connect, 5 s to read), for
/// setup, inspection and faults from threads.
pub fn raw_blocking(server: &RedisServer) -> redis::Connection {
    let conn = server
        .client()
        .get_connection_with_timeout(Duration::from_secs(2))
        .expect("blocking connection");
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    conn
}

/// Whether `key` exists (`EXISTS`).
pub async fn exists(redis: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    redis.exists(key).await.expect("EXISTS")
}

/// The wall clock in epoch ms (Java's `System.currentTimeMillis()`): the clock of expirable permits'
/// expiries and fair-lock deadlines, the scripts' `now`.
pub fn epoch_ms() -> u64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(since_epoch.as_millis()).expect("epoch ms fit a u64")
}

/// Calls per command name (lower case, e.g. `evalsha`, `publish`) from `INFO commandstats`.
pub async fn command_calls(conn: &mut redis::aio::MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// Polls `check` every 5 ms until it returns true or `limit` passes; returns whether it did.
pub async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let until = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Calls of `EVALSHA` so far (every rlock script call is one).
pub async fn evalsha_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_calls(conn)
        .await
        .get("evalsha")
        .copied()
        .unwrap_or(0)
}

/// Subscribers of `name`'s unlock channel on a server (`PUBSUB NUMSUB`).
pub async fn lock_channel_subscribers(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> i64 {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .query_async(conn)
        .await
        .expect("PUBSUB NUMSUB");
    counts.first().map_or(0, |(_, n)| *n)
}

/// Whether the client of `lock`, one of whose tasks waits for it, listens on its unlock channel
/// within 5 s, on both sides: the server counts the client's one subscription (`PUBSUB NUMSUB`),
/// and the client has read the server's confirmation. A hold may pass freely only once the
/// client's side is live too; the server's count alone comes a little earlier.
pub async fn listening_on<K: rlock_redisson::kind::LockKind>(
    lock: &rlock_redisson::Lock<K>,
    server: &mut redis::aio::MultiplexedConnection,
) -> bool {
    let counted = eventually(Duration::from_secs(5), async || {
        lock_channel_subscribers(server, lock.name()).await == 1
    })
    .await;
    // Shares the waiter's subscription (nothing more is sent), only to see it confirmed.
    let listener = lock.listen("").expect("a lock with a channel");
    let confirmed = tokio::time::timeout(Duration::from_secs(5), listener.confirmed())
        .await
        .is_ok();
    counted && confirmed && listener.is_live()
}

/// A task waiting for `lock`; it yields when it acquired, and the guard.
pub fn spawn_waiter(
    lock: rlock_redisson::Lock,
) -> tokio::task::JoinHandle<(tokio::time::Instant, rlock_redisson::LockGuard)> {
    tokio::spawn(async move {
        let guard = lock.lock().await.expect("the waiter acquires");
        (tokio::time::Instant::now(), guard)
    })
}

/// Awaits a [`spawn_waiter`] task for at most `limit`; returns how long after `since` it acquired
/// (zero if before), and its guard.
pub async fn acquired_after(
    waiter: tokio::task::JoinHandle<(tokio::time::Instant, rlock_redisson::LockGuard)>,
    since: tokio::time::Instant,
    limit: Duration,
) -> (Duration, rlock_redisson::LockGuard) {
    let (at, guard) = tokio::time::timeout(limit, waiter)
        .await
        .expect("the waiter acquired in time")
        .expect("the waiter task did not panic");
    (at.saturating_duration_since(since), guard)
}

/// [`spawn_waiter`] on a single server, returning once the waiter's subscription is live there.
pub async fn park_subscribed_waiter(
    lock: rlock_redisson::Lock,
    conn: &mut redis::aio::MultiplexedConnection,
) -> tokio::task::JoinHandle<(tokio::time::Instant, rlock_redisson::LockGuard)> {
    let name = lock.name().to_owned();
    let waiting = spawn_waiter(lock);
    let subscribed = eventually(Duration::from_secs(5), async || {
        lock_channel_subscribers(conn, &name).await == 1
    })
    .await;
    assert!(subscribed, "the waiter on {name} subscribed");
    waiting
}
