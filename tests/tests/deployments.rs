//! Where Java teams run Redis in 2026, and what rlock does there (docs/protocol.md §9.2, README
//! "Deployments"): a cluster behind one address, servers whose ACL or proxy refuses scripts,
//! `WAIT` or `SUBSCRIBE`, an eviction policy that may drop lock keys, and credentials that rotate.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rlock_redisson::{
    Client, Config, Credentials, CredentialsProvider, Error, Owner, ProxiedCluster, blocking,
};
use rlock_tests::RedisServer;
use rlock_tests::harness::raw_blocking;
use rlock_tests::harness::{command_calls, eventually, raw};
use rlock_tests::logs::Captured;
use rlock_tests::topology::Cluster;

const NAMES: [&str; 4] = ["proxied:a", "proxied:b", "proxied:c", "proxied:d"];

/// A one-node Redis Cluster that owns every slot, reached with a plain single-server URL: what a
/// proxy or a managed service's endpoint presents (it refuses scripts across slots).
fn cluster_behind_one_address() -> Cluster {
    let cluster = Cluster::start(1, 0);
    let slots: HashSet<u16> = NAMES
        .iter()
        .map(|name| {
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(name)
                .query(&mut raw_blocking(&cluster.masters()[0]))
                .expect("CLUSTER KEYSLOT")
        })
        .collect();
    assert_eq!(slots.len(), NAMES.len(), "the names lie in different slots");
    cluster
}

/// The default configuration for `node`'s plain URL, but for a 1.5 s watchdog (renewals every
/// 500 ms).
fn watchdog_config(node: &RedisServer) -> Config {
    let mut config = Config::new(node.url());
    config.watchdog_timeout = Duration::from_millis(1500);
    config
}

/// What became of [`NAMES`]' watchdog locks behind a cluster's one address.
#[derive(Debug, PartialEq, Eq)]
struct Held {
    /// The locks lost while held: signalled lost, or gone from Redis.
    lost: Vec<&'static str>,
    /// Whether unlock latches were still there a second after the unlocks.
    latches_left: bool,
}

/// Takes a watchdog lock on every name of [`NAMES`] with `config` (watchdog 1.5 s) from a blocking
/// thread, holds them for five renewal periods (past the lease a lock gets without renewal), then
/// unlocks them.
fn hold_watchdog_locks(node: &RedisServer, config: Config) -> Held {
    let client = blocking::Client::with_config(config).expect("connects");
    let guards: Vec<_> = NAMES
        .iter()
        .map(|name| client.lock(*name).lock().expect("locked"))
        .collect();
    std::thread::sleep(Duration::from_millis(2500));
    let mut redis = raw_blocking(node);
    let lost = NAMES
        .iter()
        .zip(&guards)
        .filter(|(name, guard)| {
            let exists: bool = redis::cmd("EXISTS")
                .arg(**name)
                .query(&mut redis)
                .expect("EXISTS");
            guard.is_lease_lost() || !exists
        })
        .map(|(name, _)| *name)
        .collect();
    for guard in guards {
        // A lost lock's unlock reports the loss; only the kept ones matter here.
        let _ = guard.unlock();
    }
    // The client deletes the unlock latches whose replies it saw a moment later, in batches.
    let latches_gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        let latches: Vec<String> = redis::cmd("KEYS")
            .arg("redisson_unlock_latch:*")
            .query(&mut redis)
            .expect("KEYS");
        latches.is_empty()
    });
    drop(client);
    Held {
        lost,
        latches_left: !latches_gone,
    }
}

#[test]
fn watchdog_locks_in_different_slots_are_kept_by_a_cluster_behind_one_address() {
    let cluster = cluster_behind_one_address();
    let node = &cluster.masters()[0];
    let config = watchdog_config(node);
    // The latches go in deletions that keep to one slot each, or they would stay behind (until
    // they expire) after a CROSSSLOT refusal.
    let expected = Held {
        lost: Vec::new(),
        latches_left: false,
    };
    assert_eq!(hold_watchdog_locks(node, config), expected);
}

#[test]
fn renewals_that_cross_slots_lose_every_lock_behind_a_proxy() {
    // What rlock did before it probed, and what a wrong `proxied_cluster` does: one renewal script
    // for all four names, refused with CROSSSLOT every period, until the leases run out.
    let cluster = cluster_behind_one_address();
    let node = &cluster.masters()[0];
    let mut config = watchdog_config(node);
    config.proxied_cluster = ProxiedCluster::No;
    assert_eq!(hold_watchdog_locks(node, config).lost, NAMES);
}

#[tokio::test]
async fn a_single_server_still_renews_all_its_locks_in_one_script_per_period() {
    let server = RedisServer::start();
    let mut config = Config::new(server.url());
    config.watchdog_timeout = Duration::from_millis(1500);
    let client = Client::with_config(config).await.expect("connects");
    let mut guards = Vec::new();
    for (owner, name) in NAMES.iter().enumerate() {
        let lock = client
            .lock(*name)
            .with_owner(Owner::from_id(owner as u64 + 1));
        guards.push(lock.lock().await.expect("locked"));
    }
    let mut admin = raw(&server).await;
    let before = command_calls(&mut admin).await;
    // Three renewal periods (500 ms each), and a little.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let after = command_calls(&mut admin).await;
    let renewals =
        after.get("evalsha").copied().unwrap_or(0) - before.get("evalsha").copied().unwrap_or(0);
    eprintln!(
        "{renewals} renewal scripts for {} locks in 1.6 s",
        NAMES.len()
    );
    // One script per period for all four names; per slot, it would be four.
    assert!((2..=4).contains(&renewals), "{renewals} renewal scripts");
    for guard in guards {
        assert!(!guard.is_lease_lost());
        guard.unlock().await.expect("unlocked");
    }
}

/// A server (default user without a password) plus an ACL user `app` (password `pw`) with every
/// permission but `denied`; returns the server and `app`'s URL.
fn server_with_user(denied: &[&str]) -> (RedisServer, String) {
    let server = RedisServer::start();
    let mut rules = vec!["on", ">pw", "~*", "&*", "+@all"];
    rules.extend_from_slice(denied);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg(&rules)
        .query(&mut raw_blocking(&server))
        .expect("ACL SETUSER");
    let url = format!("redis://app:pw@127.0.0.1:{}/", server.port());
    (server, url)
}

#[tokio::test]
async fn a_server_that_denies_scripts_is_refused_at_connect_with_the_cause() {
    let (_server, url) = server_with_user(&["-@scripting"]);
    match Client::with_config(Config::new(url)).await {
        Err(Error::Unsupported {
            command, reason, ..
        }) => {
            assert_eq!(command, "EVALSHA");
            assert!(
                reason.contains("'evalsha'") && reason.contains("+@scripting"),
                "{reason}"
            );
        }
        other => panic!("expected Error::Unsupported, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_without_wait_is_refused_unless_replica_checks_are_off() {
    let (server, url) = server_with_user(&["-wait"]);
    match Client::with_config(Config::master_replica(url.clone())).await {
        Err(Error::Unsupported {
            command, reason, ..
        }) => {
            assert_eq!(command, "WAIT");
            assert!(reason.contains("check_lock_synced_replicas"), "{reason}");
        }
        other => panic!("expected Error::Unsupported, got {other:?}"),
    }
    let mut unchecked = Config::master_replica(url);
    unchecked.check_lock_synced_replicas = false;
    let client = Client::with_config(unchecked).await.expect("connects");
    let guard = client.lock("no-wait").lock().await.expect("locked");
    guard.unlock().await.expect("unlocked");
    let calls = command_calls(&mut raw(&server).await).await;
    assert_eq!(
        calls.get("wait").copied().unwrap_or(0),
        0,
        "no WAIT ran: {calls:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_refuses_subscriptions_makes_waiters_poll_after_one_warning() {
    let (_server, url) = server_with_user(&["-subscribe", "-ssubscribe", "-psubscribe"]);
    let logs = Captured::default();
    let _capturing = logs.install();
    let client = Client::with_config(Config::new(url))
        .await
        .expect("connects");
    let lock = client.lock("no-pubsub");
    let held = lock.lock().await.expect("locked");
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let lock = lock.clone();
            tokio::spawn(async move {
                let guard = lock
                    .try_lock_for(Duration::from_secs(6))
                    .await
                    .expect("no error while polling")
                    .expect("acquired before the wait ran out");
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.unlock().await.expect("unlocked");
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    held.unlock().await.expect("unlocked");
    let started = tokio::time::Instant::now();
    for waiter in waiters {
        waiter.await.expect("waiter");
    }
    // Polling (at most a second between tries), not the 7.5 s subscription timeout per waiter.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let warnings = logs.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains("refuses subscriptions"),
        "{warnings:#?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_eviction_policy_that_may_drop_lock_keys_is_warned_about_once() {
    let server = RedisServer::start_with(&["--maxmemory", "1gb"]);
    let mut admin = raw(&server).await;
    for (policy, warned) in [
        ("allkeys-lru", true),
        ("volatile-ttl", true),
        ("noeviction", false),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg(policy)
            .query_async(&mut admin)
            .await
            .expect("CONFIG SET");
        let logs = Captured::default();
        let capturing = logs.install();
        let client = Client::connect(server.url()).await.expect("connects");
        let guard = client.lock("evictable").lock().await.expect("locked");
        guard.unlock().await.expect("unlocked");
        drop(capturing);
        let warnings = logs.warnings();
        let expected = usize::from(warned);
        assert_eq!(warnings.len(), expected, "{policy}: {warnings:#?}");
        assert!(
            warnings.iter().all(|w| w.contains(policy)),
            "{policy}: {warnings:#?}"
        );
    }
}

#[tokio::test]
async fn every_new_connection_asks_the_credentials_provider() {
    let (server, _) = server_with_user(&[]);
    let password = Arc::new(parking_lot::Mutex::new("pw".to_owned()));
    let asked = Arc::new(AtomicUsize::new(0));
    let mut config = Config::new(format!("redis://127.0.0.1:{}/", server.port()));
    config.credentials_provider = Some(CredentialsProvider::new({
        let (password, asked) = (password.clone(), asked.clone());
        move || {
            let password = password.lock().clone();
            let _ = asked.fetch_add(1, Ordering::SeqCst);
            async move { Ok(Credentials::new("app", password)) }
        }
    }));
    let client = Client::with_config(config).await.expect("connects");
    let lock = client.lock("rotating");
    lock.lock()
        .await
        .expect("locked")
        .unlock()
        .await
        .expect("unlocked");
    let before = asked.load(Ordering::SeqCst);
    assert!(before >= 1, "asked {before} times");

    // Rotate: the old password stops working, and the client's connections are dropped.
    let mut admin = raw(&server).await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("resetpass")
        .arg(">pw2")
        .query_async(&mut admin)
        .await
        .expect("ACL SETUSER");
    *password.lock() = "pw2".to_owned();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("app")
        .query_async(&mut admin)
        .await
        .expect("CLIENT KILL");
    let relocked = eventually(Duration::from_secs(5), async || match lock.lock().await {
        Ok(guard) => guard.unlock().await.is_ok(),
        Err(_) => false,
    })
    .await;
    assert!(relocked, "locks work again on the rotated password");
    assert!(
        asked.load(Ordering::SeqCst) > before,
        "new connections asked again"
    );
}
