//! The Rust side of a lock shared with a Java service that uses Redisson.
//!
//! Both services read the same Redisson config file (`redisson.yaml`, Redisson's
//! `Config.fromYAML`) and use the same lock name, so they are one lock: each side excludes the
//! other, wakes the other's waiters on unlock, and sees the other's holds. The Java side is in the
//! README ("Sharing locks with Java"); run both at once to watch them take turns, or run this alone.
//!
//! ```sh
//! cargo run -p rlock-examples --example java_interop [path/to/redisson.yaml]
//! ```
//!
//! Without a path it uses the file below, as a Java service would have it (with Redisson's own
//! settings that mean nothing to rlock, such as `codec` and `threads`, which are skipped).

use std::time::Duration;

use rlock_redisson::{Client, Config};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The Java service's `redisson.yaml`. `${REDIS_URL:-...}` is Redisson's environment placeholder.
const JAVA_SERVICE_CONFIG: &str = r#"
singleServerConfig:
  address: "${REDIS_URL:-redis://127.0.0.1:6379}"
  password: null
  database: 0
  timeout: 3000
  retryAttempts: 3
  retryInterval: 1500
lockWatchdogTimeout: 30000
threads: 16
nettyThreads: 32
codec: !<org.redisson.codec.Kryo5Codec> {}
transportMode: "NIO"
"#;

/// The name both services use: `redisson.getLock("example:orders:42")` on the Java side.
const LOCK: &str = "example:orders:42";

#[tokio::main]
async fn main() -> Result<(), Error> {
    let config = match std::env::args().nth(1) {
        Some(path) => Config::from_redisson_yaml_file(path)?,
        None => Config::from_redisson_yaml(JAVA_SERVICE_CONFIG)?,
    };
    let client = Client::with_config(config).await?;
    let lock = client.lock(LOCK);

    // Java's holds are listed like ours: the Redisson client's UUID and the Java thread id.
    for holder in lock.holders().await? {
        println!(
            "{LOCK} is held by client {} thread {} (hold count {}); waiting for its unlock",
            holder.node, holder.owner, holder.count
        );
    }
    // Wakes on the other side's unlock message, whichever side it is; bounded here so that the
    // example ends even if a Java holder never lets go.
    let Some(guard) = lock.try_lock_for(Duration::from_secs(60)).await? else {
        return Err(format!("{LOCK} was not released within 60 s").into());
    };
    // What a Java `lock.isLocked()` / `isHeldByThread` reads now: the field `<uuid>:<owner>`.
    let holders = lock.holders().await?;
    println!("holding {LOCK}; Redis shows {holders:?}");
    let ours = holders
        .iter()
        .any(|holder| holder.node == client.node_id() && holder.count == 1);
    tokio::time::sleep(Duration::from_millis(200)).await; // the critical section
    guard.unlock().await?; // publishes the unlock message a Java waiter is woken by
    let still_ours = lock
        .holders()
        .await?
        .iter()
        .any(|holder| holder.node == client.node_id());
    client.close().await;

    if !ours || still_ours {
        return Err("the hold was not written as Redisson reads it, or was not released".into());
    }
    println!("released {LOCK}");
    Ok(())
}
