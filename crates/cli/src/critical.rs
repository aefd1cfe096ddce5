//! The critical section shared by `check` and the demo: a deliberately non-atomic increment.

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// The counter key of lock `name`.
pub(crate) fn counter_key(name: &str) -> String {
    format!("{name}:counter")
}

/// Reads the counter, optionally sleeps, and writes it back plus one. Two of these overlapping lose an
/// increment, which is how a broken lock shows.
pub(crate) async fn increment(
    redis: &mut MultiplexedConnection,
    counter: &str,
    hold: Duration,
) -> redis::RedisResult<()> {
    let value: Option<u64> = redis.get(counter).await?;
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    redis.set(counter, value.unwrap_or(0) + 1).await
}

/// The counter's value; 0 when unset.
pub(crate) async fn read(
    redis: &mut MultiplexedConnection,
    counter: &str,
) -> redis::RedisResult<u64> {
    Ok(redis.get::<_, Option<u64>>(counter).await?.unwrap_or(0))
}
