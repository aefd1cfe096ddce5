//! A fenced write to a downstream store.
//!
//! A lock alone cannot protect a store from a holder that stalls (a GC pause, a frozen VM, a slow
//! disk) past its lease: the lock expires, another client takes it and writes, then the stalled
//! holder wakes up and writes too, over the newer data. A fenced lock (Redisson's `RFencedLock`)
//! gives every acquisition a strictly greater token; the store remembers the greatest token it
//! has seen and refuses writes that carry an older one. The check happens where the data lives,
//! so no pause can get around it.
//!
//! Here the downstream store is a Redis hash whose writes go through a small script that compares
//! tokens (any store with a conditional write does: SQL `UPDATE ... WHERE token <= ?`, an object
//! store's preconditions, ...). Writer A takes the lock with a 300 ms lease and stalls for 600 ms;
//! writer B takes the lock meanwhile and writes; A's late write is refused.
//!
//! ```sh
//! cargo run -p rlock-examples --example fenced_write
//! ```

use std::time::Duration;

use rlock_redisson::{Client, redis};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The store's conditional write: applies `value` only if `token` is not older than the last
/// applied one. Returns 1 when written, 0 when refused.
const FENCED_SET: &str = r"
local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < last then
    return 0
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1
";

/// Writes `value` to the store under `token`; false when the store refused an older token.
/// The store is a hash in the same Redis here, written through the writer's own rlock client.
async fn write(store: &Client, key: &str, token: u64, value: &str) -> Result<bool, Error> {
    let written: i64 = store
        .query(
            redis::cmd("EVAL")
                .arg(FENCED_SET)
                .arg(1)
                .arg(key)
                .arg(token)
                .arg(value),
        )
        .await?;
    Ok(written == 1)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = rlock_examples::redis_url();
    let (a, b) = (Client::connect(&url).await?, Client::connect(&url).await?);
    let name = format!("example:fenced:{}", std::process::id());
    let store_key = format!("{name}:store");

    let held_by_a = a
        .fenced_lock(&name)
        .lock_with_lease(Duration::from_millis(300))
        .await?;
    let token_a = *held_by_a.token();
    println!("A holds the lock with token {token_a}, then stalls for 600 ms");
    tokio::time::sleep(Duration::from_millis(600)).await; // A's lease runs out meanwhile

    let held_by_b = b.fenced_lock(&name).lock().await?; // free again: A's lease expired
    let token_b = *held_by_b.token();
    let b_written = write(&b, &store_key, token_b, "written by B").await?;
    println!("B holds the lock with token {token_b}; its write applied: {b_written}");
    held_by_b.unlock().await?;

    // A wakes up, unaware it lost the lock, and writes with its old token.
    let a_written = write(&a, &store_key, token_a, "written by A").await?;
    println!("A writes with token {token_a}; applied: {a_written}");
    drop(held_by_a); // its hold is long gone; dropping the guard is harmless

    let value: String = a
        .query(redis::cmd("HGET").arg(&store_key).arg("value"))
        .await?;
    println!("the store holds: {value:?}");
    let () = a
        .query(
            redis::cmd("DEL")
                .arg(&store_key)
                .arg(format!("redisson_lock_token:{{{name}}}")),
        )
        .await?;
    a.close().await;
    b.close().await;

    if token_b <= token_a || !b_written || a_written || value != "written by B" {
        return Err("the store accepted a stale holder's write".into());
    }
    Ok(())
}
