//! What the server lets rlock do, found out once as a client connects: a few round trips then
//! rather than a stream of the same error on every lock operation later.
//!
//! - **Scripts.** Every lock operation is a Lua script sent as `EVALSHA`. A server whose ACL denies
//!   scripting, or a service that does not offer it, fails the connect with
//!   [`Error::Unsupported`] naming the command.
//! - **A cluster behind a proxy** (docs/protocol.md §9.2). Outside [`Topology::Cluster`], the same
//!   probe names two keys of different slots, as Redisson 4.x's does: a server that refuses it with
//!   `CROSSSLOT` is a cluster presented as one address, and from then on the client's commands stay
//!   within one slot ([`Commands::batch_slot`]). [`Config::proxied_cluster`] can say so instead.
//! - **`WAIT`.** Topologies with replicas wait for them after every lock write. A server without
//!   `WAIT` (serverless services) fails the connect with [`Error::Unsupported`], unless
//!   [`Config::check_lock_synced_replicas`] is off: then lock writes simply do not wait, as
//!   Redisson's do once its own probe found `WAIT` missing (docs/protocol.md §5.2).
//! - **Eviction.** Lock keys carry a TTL, so any `maxmemory-policy` but `noeviction` may evict a
//!   held lock under memory pressure, releasing it behind its owner's back: one warning. Managed
//!   services often deny `CONFIG`; then nothing is said.

use std::sync::LazyLock;

use redis::{RedisError, Script};

use super::commands::Commands;
use super::failure::refused;
use crate::config::{Config, ProxiedCluster, Topology};
use crate::error::{Error, Operation, Result, Subject};
use crate::scripts::ScriptCall;

/// Does nothing: whether it runs is the answer.
static PROBE: LazyLock<Script> = LazyLock::new(|| Script::new("return 1"));

/// Two keys of different slots (3300 and 15495: see the test), which no lock operation writes.
const PROBE_KEYS: [&str; 2] = ["rlock:probe:{b}", "rlock:probe:{a}"];

/// Probes the server behind `commands` (see the module docs) and adapts `commands` to it.
///
/// # Errors
///
/// [`Error::Unsupported`] when the server refuses what every lock operation needs; as
/// [`Commands::get`] when it cannot be reached.
///
/// # Cancel safety
///
/// Cancel safe: it writes nothing.
pub(crate) async fn probe(commands: &mut Commands, config: &Config) -> Result<()> {
    let detect = config.topology != Topology::Cluster;
    match (detect, config.proxied_cluster) {
        (false, _) => {
            let _ = retried(config, || scripts(commands, false)).await?;
        }
        (true, ProxiedCluster::Detect) => {
            if retried(config, || scripts(commands, true)).await? {
                tracing::info!(
                    "the server refuses scripts across slots (CROSSSLOT): it is a cluster behind a \
                     proxy, so every command stays within one slot (docs/protocol.md §9.2)"
                );
                commands.single_slot = true;
            }
        }
        (true, forced) => {
            let _ = retried(config, || scripts(commands, false)).await?;
            commands.single_slot = forced == ProxiedCluster::Yes;
        }
    }
    if commands.sync.is_some() {
        replica_wait(commands, config).await?;
    }
    eviction(commands).await;
    Ok(())
}

/// Runs `step` again while it fails on the way (a broken connection, a lost reply): every step of
/// the probe is read-only, so a copy that ran changes nothing, and one lost reply must not fail the
/// connect. At most [`Config::retry_attempts`] times more, with the usual back-off.
async fn retried<T, F, Fut>(config: &Config, mut step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut attempt = 0;
    loop {
        match step().await {
            Err(e) if e.is_transient() && attempt < config.retry_attempts => {
                tokio::time::sleep(config.retry_backoff(attempt)).await;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Runs the probe script, on both [`PROBE_KEYS`] when `across_slots`. Returns whether the server
/// refused keys of different slots.
async fn scripts(commands: &Commands, across_slots: bool) -> Result<bool> {
    let keys = if across_slots {
        &PROBE_KEYS[..]
    } else {
        &PROBE_KEYS[..1]
    };
    let call = keys
        .iter()
        .fold(ScriptCall::new(&PROBE), |call, key| call.key(*key));
    let mut conn = commands.get(Operation::Connect, Subject::CLIENT).await?;
    let reply = match commands.invoke(&mut conn, &call).await {
        Ok(reply) => reply,
        Err(_) => {
            return Err(Error::timeout(
                Operation::Connect,
                Subject::CLIENT,
                commands.timeout,
            ));
        }
    };
    match reply {
        Ok(_) => Ok(false),
        Err(e) if across_slots && e.code() == Some("CROSSSLOT") => Ok(true),
        Err(e) if refused(&e) && !about_keys(&e) => Err(Error::Unsupported {
            command: "EVALSHA",
            reason: format!(
                "{e}. rlock runs every lock operation as a Lua script (EVALSHA, and SCRIPT LOAD \
                 after a restart): allow the scripting commands for this user \
                 (ACL SETUSER <user> +@scripting)"
            ),
        }),
        Err(e) if refused(&e) => {
            // An ACL that limits keys: the probe's keys are not the application's. The scripts
            // themselves are allowed, which is what matters here.
            tracing::debug!(error = %e, "the scripting probe's keys are not allowed; not probed");
            Ok(false)
        }
        Err(e) => Err(Error::from_redis(Operation::Connect, Subject::CLIENT, e)),
    }
}

/// Checks that `WAIT` works where lock writes wait for replicas.
async fn replica_wait(commands: &mut Commands, config: &Config) -> Result<()> {
    let wait = redis::cmd("WAIT").arg(0).arg(0).clone();
    let reply = retried(config, || {
        commands.query::<redis::Value>(Operation::Connect, Subject::CLIENT, &wait)
    })
    .await;
    let e = match reply {
        Err(Error::Backend { source, .. }) if refused(&source) => source,
        other => return other.map(drop),
    };
    if config.check_lock_synced_replicas {
        return Err(Error::Unsupported {
            command: "WAIT",
            reason: format!(
                "{e}. In this topology every lock write waits for the master's replicas \
                 (Redisson's checkLockSyncedSlaves). Set Config::check_lock_synced_replicas to \
                 false (checkLockSyncedSlaves: false) to lock without waiting for replicas, as \
                 Redisson does where WAIT is missing, or connect as a single server \
                 (Topology::Single)"
            ),
        });
    }
    tracing::warn!(
        error = %e,
        "the server refuses WAIT: lock writes do not wait for replicas \
         (check_lock_synced_replicas is off)"
    );
    commands.sync = None;
    Ok(())
}

/// Warns when the server may evict lock keys.
async fn eviction(commands: &Commands) {
    let settings = commands
        .query::<std::collections::HashMap<String, String>>(
            Operation::Connect,
            Subject::CLIENT,
            redis::cmd("CONFIG").arg("GET").arg("maxmemory*"),
        )
        .await;
    let settings = match settings {
        Ok(settings) => settings,
        Err(e) => {
            tracing::debug!(error = %e, "cannot read the eviction policy (CONFIG GET)");
            return;
        }
    };
    let limited = settings
        .get("maxmemory")
        .is_some_and(|bytes| bytes.parse::<u64>().is_ok_and(|bytes| bytes > 0));
    match settings.get("maxmemory-policy") {
        Some(policy) if limited && policy != "noeviction" => tracing::warn!(
            policy = %policy,
            "the server may evict lock keys under memory pressure (maxmemory-policy {policy}; lock \
             keys carry a TTL, so volatile-* policies pick them too): an evicted lock is free for \
             anyone while its owner still believes it holds it. Use maxmemory-policy noeviction"
        ),
        _ => {}
    }
}

/// Whether a refusal is about the keys named rather than the command (an ACL key pattern).
fn about_keys(e: &RedisError) -> bool {
    e.to_string().to_ascii_lowercase().contains("access a key")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::Slot;

    #[test]
    fn the_probe_keys_lie_in_different_slots() {
        let slots = PROBE_KEYS.map(|key| Some(Slot::for_key(key)));
        assert_eq!(slots, [Slot::new(3300), Slot::new(15495)]);
    }
}
