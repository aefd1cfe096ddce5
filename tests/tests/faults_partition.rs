//! A holder cut off from Redis while it keeps running (a one-client network partition, simulated on
//! loopback by a TCP proxy that stops forwarding): its lease runs out in Redis and another client
//! takes the lock. Unlike a paused holder, a running one can be told in time: its watchdog knows when
//! the last confirmed renewal was sent, so it knows the earliest moment the lock can expire.

use std::sync::Arc;
use std::time::Duration;

use rlock::Config;
use rlock_tests::RedisServer;
use rlock_tests::harness::client_with;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

/// A loopback TCP proxy to Redis that can be frozen: while frozen it neither reads nor writes, so
/// requests and replies wait in the socket buffers, as in a network partition (no reset, no error).
struct Proxy {
    port: u16,
    frozen: watch::Sender<bool>,
}

impl Proxy {
    async fn start(target: u16) -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let (frozen, _) = watch::channel(false);
        let proxy = Arc::new(Self { port, frozen });
        let accepting = proxy.clone();
        drop(tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                drop(tokio::spawn(forward(
                    client_read,
                    server_write,
                    accepting.frozen.subscribe(),
                )));
                drop(tokio::spawn(forward(
                    server_read,
                    client_write,
                    accepting.frozen.subscribe(),
                )));
            }
        }));
        proxy
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn freeze(&self, frozen: bool) {
        let _ = self.frozen.send_replace(frozen);
    }
}

async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        if frozen.wait_for(|f| !f).await.is_err() {
            return;
        }
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Bytes read just before a freeze are held back until the thaw.
        if frozen.wait_for(|f| !f).await.is_err() || to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

fn fast(config: &mut Config) {
    config.watchdog_timeout = Duration::from_secs(1);
    config.command_timeout = Duration::from_millis(300);
    config.retry_delay = Duration::from_millis(100);
    config.retry_max_delay = Duration::from_millis(200);
}

/// A holder cut off from Redis (its renewals hang) is told its lease is lost by the time its last
/// confirmed renewal's lease ends, i.e. before another client can take the lock, not after a failed
/// renewal round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_is_told_before_anyone_else_can_hold_the_lock() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let mut config = Config::new(proxy.url());
    fast(&mut config);
    let holder = rlock::Client::with_config(config)
        .await
        .expect("holder connects through the proxy");
    let contender = client_with(&server, fast).await;
    let mut lateness = Vec::new();
    for round in 0..3 {
        let name = format!("partition:{round}");
        let guard = holder
            .lock(name.as_str())
            .lock()
            .await
            .expect("holder locks");
        let lock = contender.lock(name.as_str());
        let waiting = tokio::spawn(async move {
            let guard = lock.lock().await.expect("contender locks");
            (Instant::now(), guard)
        });
        // Let a renewal or two go through, then cut the holder off.
        tokio::time::sleep(Duration::from_millis(400 + 150 * round)).await;
        proxy.freeze(true);
        guard.lease_lost().await;
        let told = Instant::now();
        let (taken, taken_guard) = waiting.await.expect("contender task");
        proxy.freeze(false);
        lateness.push(told.saturating_duration_since(taken));
        taken_guard.unlock().await.expect("contender unlocks");
        drop(guard);
    }
    eprintln!("holder told after the contender acquired, by: {lateness:?}");
    assert!(
        lateness.iter().all(Duration::is_zero),
        "the holder was told its lease was lost only {lateness:?} after another client took the lock"
    );
}
