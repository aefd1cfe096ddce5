//! The critical section shared by `check` and the demo: a deliberately non-atomic increment.
//!
//! The counters go through the client's own connections, so in a cluster each command goes to the
//! node that owns its key.

use std::time::Duration;

use rlock_redisson::Client;

/// The counter key of the lock whose name in Redis (mapped by `--name-prefix`) is `name`.
pub(crate) fn counter_key(name: &str) -> String {
    format!("{name}:counter")
}

/// Reads the counter, optionally sleeps, and writes it back plus one. Two of these overlapping lose an
/// increment, which is how a broken lock shows.
pub(crate) async fn increment(
    client: &Client,
    counter: &str,
    hold: Duration,
) -> rlock_redisson::Result<()> {
    let value = read(client, counter).await?;
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    client
        .query(redis::cmd("SET").arg(counter).arg(value + 1))
        .await
}

/// The counter's value; 0 when unset.
pub(crate) async fn read(client: &Client, counter: &str) -> rlock_redisson::Result<u64> {
    let value: Option<u64> = client.query(redis::cmd("GET").arg(counter)).await?;
    Ok(value.unwrap_or(0))
}

/// Deletes the counters, one by one: in a cluster they may live on different nodes.
pub(crate) async fn reset(client: &Client, counters: &[String]) -> rlock_redisson::Result<()> {
    for counter in counters {
        client.query::<()>(redis::cmd("DEL").arg(counter)).await?;
    }
    Ok(())
}
