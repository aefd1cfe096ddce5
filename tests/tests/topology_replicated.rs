//! rlock with replicas: a master/replica pair with `WAIT` (and its rollback), and a Sentinel setup
//! (1 master, 2 replicas, 3 sentinels) through a failover in the middle of contention.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::Commands;
use rlock_redisson::{Client, Config, Error};
use rlock_tests::RedisServer;
use rlock_tests::harness::eventually;
use rlock_tests::harness::raw_blocking;
use rlock_tests::topology::SentinelSetup;

fn wait_calls(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut raw_blocking(server))
        .expect("INFO commandstats");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

fn quick_retries(config: &mut Config) {
    config.replicas_sync_timeout = Duration::from_millis(200);
    config.retry_attempts = 2;
    config.retry_delay = Duration::from_millis(50);
    config.retry_max_delay = Duration::from_millis(100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_replica_writes_wait_and_roll_back_when_no_replica_acknowledges() {
    let master = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()]);
    assert!(
        eventually(Duration::from_secs(10), async || {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut raw_blocking(&master))
                .expect("INFO");
            info.contains("connected_slaves:1") && info.contains("state=online")
        })
        .await
    );
    let healthy = Client::with_config(Config::master_replica(master.url()))
        .await
        .expect("client");
    let guard = healthy.lock("replicated:wait").lock().await.expect("lock");
    guard.unlock().await.expect("unlock");
    assert!(
        wait_calls(&master) >= 2,
        "acquire and unlock were followed by WAIT 1"
    );

    let mut config = Config::master_replica(master.url());
    quick_retries(&mut config);
    let client = Client::with_config(config).await.expect("client");
    let lock = client.lock("replicated:wait");
    replica.pause();
    let started = std::time::Instant::now();
    let outcome = lock.try_lock().await;
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::NoSyncedReplicas { replicas: 1, .. })),
        "{outcome:?}"
    );
    // One try plus two retries, each waiting 200 ms for the replica: bounded, not hanging.
    assert!(took < Duration::from_secs(3), "{took:?}");
    let undone = eventually(Duration::from_secs(3), async || {
        !raw_blocking(&master)
            .exists::<_, bool>("replicated:wait")
            .expect("exists")
    })
    .await;
    assert!(undone, "no hold is left behind by the failed acquires");

    // With the check off, the same write succeeds after the WAIT times out (Redisson's
    // checkLockSyncedSlaves = false).
    let mut config = Config::master_replica(master.url());
    quick_retries(&mut config);
    config.check_lock_synced_replicas = false;
    let lenient = Client::with_config(config).await.expect("client");
    let guard = lenient
        .lock("replicated:wait")
        .try_lock()
        .await
        .expect("try_lock")
        .expect("acquired");
    replica.resume();
    guard.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_locks_follow_the_master_through_a_failover() {
    let mut setup = SentinelSetup::start(2, 3);
    let mut config = setup.config();
    config.command_timeout = Duration::from_millis(500);
    config.retry_delay = Duration::from_millis(100);
    config.retry_max_delay = Duration::from_millis(300);
    config.watchdog_timeout = Duration::from_secs(3);
    let clients = [
        Client::with_config(config.clone()).await.expect("client"),
        Client::with_config(config).await.expect("client"),
    ];
    // Before the failover: exclusion and wake-ups through the sentinel-found master.
    let guard = clients[0].lock("sentinel:lock").lock().await.expect("lock");
    assert!(
        clients[1]
            .lock("sentinel:lock")
            .try_lock()
            .await
            .expect("try")
            .is_none()
    );
    guard.unlock().await.expect("unlock");

    // Contention across the failover: workers keep locking; errors must be typed, and work resumes.
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let lock = clients[i % 2].lock("sentinel:contended");
            let (done, errors, stop) = (done.clone(), errors.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    match lock.try_lock_for(Duration::from_secs(2)).await {
                        Ok(Some(guard)) => {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            let _ = guard.unlock().await;
                            let _ = done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            errors.lock().push(e.to_string());
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            })
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(10), async || done
            .load(Ordering::Relaxed)
            >= 20)
        .await
    );
    let old_master = setup.master.port();
    let new_master = setup.fail_over();
    assert_ne!(new_master, old_master);
    let after_failover = done.load(Ordering::Relaxed);
    let resumed = eventually(Duration::from_secs(30), async || {
        done.load(Ordering::Relaxed) >= after_failover + 20
    })
    .await;
    stop.cancel();
    for worker in workers {
        worker.await.expect("no worker panicked");
    }
    let errors = errors.lock().clone();
    let mut kinds: std::collections::BTreeMap<&String, usize> = std::collections::BTreeMap::new();
    for error in &errors {
        *kinds.entry(error).or_default() += 1;
    }
    eprintln!(
        "{} typed errors during the failover, by kind: {kinds:?}; last: {:?}",
        errors.len(),
        errors.last()
    );
    assert!(resumed, "acquisitions continue on the promoted master");

    // New clients and old ones both work against the new master.
    let guard = clients[1]
        .lock("sentinel:after")
        .lock()
        .await
        .expect("lock after failover");
    let promoted = setup
        .replicas
        .iter()
        .find(|r| r.port() == new_master)
        .expect("the promoted replica");
    assert!(
        raw_blocking(promoted)
            .exists::<_, bool>("sentinel:after")
            .expect("exists")
    );
    guard.unlock().await.expect("unlock");
}
