//! The read-write lock against a real Redis: readers share, writers exclude, per-hold timeout keys
//! kept alive by the watchdog, the writer's downgrade, and the refused upgrade.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_redisson::{Error, Owner};
use rlock_tests::RedisServer;
use rlock_tests::harness::{self, eventually};

const SHORT: Duration = Duration::from_millis(100);

#[tokio::test]
async fn readers_share_and_writers_exclude() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let rw = client.read_write_lock("rw");
    let a = rw.read().lock().await.expect("read");
    let b = rw.read().lock().await.expect("readers share");
    let mode: String = redis.hget("rw", "mode").await.expect("HGET");
    assert_eq!(mode, "read");
    for guard in [&a, &b] {
        let timeout = format!("{{rw}}:{}:rwlock_timeout:1", guard.field());
        let pttl: i64 = redis.pttl(&timeout).await.expect("PTTL");
        assert!(pttl > 0, "each read hold has its timeout key");
    }
    assert!(rw.read().is_locked().await.expect("is_locked"));
    assert!(!rw.write().is_locked().await.expect("is_locked"));
    assert!(rw.write().try_lock_for(SHORT).await.expect("try").is_none());

    // A writer waits for both readers, and is woken when the last one leaves.
    let writer = tokio::spawn({
        let write = rw.write();
        async move { write.lock().await.expect("write") }
    });
    a.unlock().await.expect("unlock");
    tokio::time::sleep(SHORT).await;
    assert!(!writer.is_finished(), "one reader is still in");
    b.unlock().await.expect("unlock");
    let w = tokio::time::timeout(Duration::from_secs(5), writer)
        .await
        .expect("woken by the last reader's unlock")
        .expect("task");
    assert!(w.field().ends_with(":write"));
    assert!(rw.write().is_locked().await.expect("is_locked"));

    // Readers wait for the writer; its unlock (`1`) wakes them all.
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let read = rw.read();
            tokio::spawn(async move { read.lock().await.expect("read") })
        })
        .collect();
    tokio::time::sleep(SHORT).await;
    assert!(readers.iter().all(|r| !r.is_finished()));
    w.unlock().await.expect("unlock");
    for reader in readers {
        let guard = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("every reader woken by one write unlock")
            .expect("task");
        guard.unlock().await.expect("unlock");
    }
    assert!(!rw.read().is_locked().await.expect("is_locked"));
}

#[tokio::test]
async fn a_writer_may_read_and_downgrade_but_a_reader_cannot_upgrade() {
    let server = RedisServer::start();
    let client = harness::client(&server).await;
    let mut redis = harness::raw(&server).await;
    let rw = client.read_write_lock("rw");
    Owner::scope(Owner::new(), async {
        let write = rw.write().lock().await.expect("write");
        let read = rw.read().lock().await.expect("the writer also reads");
        assert!(rw.read().is_locked().await.expect("is_locked"));
        write.unlock().await.expect("unlock");
        // The write hold is gone, the writer's read hold remains: a read lock now.
        let mode: String = redis.hget("rw", "mode").await.expect("HGET");
        assert_eq!(mode, "read");
        // Holding a read lock, asking for the write lock would wait forever: refused at once.
        let refused = tokio::time::timeout(SHORT, rw.write().lock())
            .await
            .expect("refused without waiting");
        assert!(
            matches!(refused, Err(Error::WouldDeadlock { .. })),
            "{refused:?}"
        );
        read.unlock().await.expect("unlock");
        let write = rw
            .write()
            .lock()
            .await
            .expect("no read hold left: the write lock is free");
        write.unlock().await.expect("unlock");
    })
    .await;
    assert!(!rw.write().is_locked().await.expect("is_locked"));
}

#[tokio::test]
async fn the_watchdog_keeps_read_holds_and_their_timeout_keys_alive() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let client = harness::client_with(&server, |config| config.watchdog_timeout = watchdog).await;
    let mut redis = harness::raw(&server).await;
    let rw = client.read_write_lock("rw");
    let owner = Owner::new();
    let read = rw.read().with_owner(owner);
    let first = read.lock().await.expect("read");
    let second = read.lock().await.expect("re-enters");
    tokio::time::sleep(watchdog * 3).await;
    for k in [1, 2] {
        let timeout = format!("{{rw}}:{}:rwlock_timeout:{k}", first.field());
        let pttl: i64 = redis.pttl(&timeout).await.expect("PTTL");
        assert!(pttl > 0, "timeout key {k} renewed (pttl {pttl})");
    }
    assert!(!first.is_lease_lost());
    second.unlock().await.expect("unlock");
    first.unlock().await.expect("unlock");
    assert!(
        eventually(Duration::from_secs(2), async || !redis
            .exists::<_, bool>("rw")
            .await
            .expect("EXISTS"))
        .await
    );
}
