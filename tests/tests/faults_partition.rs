//! A holder cut off from Redis while it keeps running (a one-client network partition, simulated on
//! loopback by a TCP proxy that stops forwarding): its lease runs out in Redis and another client
//! takes the lock. Unlike a paused holder, a running one can be told in time: its watchdog knows when
//! the last confirmed renewal was sent, so it knows the earliest moment the lock can expire.

use std::sync::Arc;
use std::time::Duration;

use rlock_redisson::kind::LockKind;
use rlock_redisson::{Config, Lock};
use rlock_tests::RedisServer;
use rlock_tests::harness::client_with;
use rlock_tests::history::fleet::FleetKind;
use rlock_tests::kind_matrix;
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

/// Each lock kind's holder, cut off: `<scenario>::<kind>`. A read holder's contender is a writer,
/// and in the `rw` mix a reader waits for a writer; the others wait for a holder of their own kind.
macro_rules! partition_case {
    ($scenario:ident () [] $test:ident: $kind:ident $(($object:path))?) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            super::$scenario(super::FleetKind::$kind).await;
        }
    };
}

kind_matrix! {
    a_partitioned_holder_is_told_before_anyone_else_can_hold_the_lock => partition_case!(),
    also { rw: Rw },
}

/// A holder cut off from Redis (its renewals hang) is told its lease is lost by the time its last
/// confirmed renewal's lease ends, i.e. before another client can take the lock, not after a failed
/// renewal round.
async fn a_partitioned_holder_is_told_before_anyone_else_can_hold_the_lock(kind: FleetKind) {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let mut config = Config::new(proxy.url());
    fast(&mut config);
    let holder = rlock_redisson::Client::with_config(config)
        .await
        .expect("holder connects through the proxy");
    let other = client_with(&server, fast).await;
    // Each kind is cut off at another moment of the renewal period (a third of the 1 s watchdog
    // timeout), which together they cover: 400, 450, ... 800 ms after acquiring.
    let cut = 400 + 50 * kind as u64;
    let name = "partition";
    let (rw, other_rw) = (holder.read_write_lock(name), other.read_write_lock(name));
    // A holder and a contender of one kind: `holder.$lock(name)` and `other.$lock(name)`.
    macro_rules! own_kind {
        ($lock:ident) => {
            cut_off(&proxy, holder.$lock(name), other.$lock(name), cut).await
        };
    }
    let late = match kind {
        FleetKind::Lock => own_kind!(lock),
        FleetKind::Fair => own_kind!(fair_lock),
        FleetKind::Spin => own_kind!(spin_lock),
        FleetKind::Fenced => own_kind!(fenced_lock),
        FleetKind::NonReentrant => own_kind!(non_reentrant_lock),
        FleetKind::NonReentrantFair => own_kind!(non_reentrant_fair_lock),
        FleetKind::Read => cut_off(&proxy, rw.read(), other_rw.write(), cut).await,
        FleetKind::Write => cut_off(&proxy, rw.write(), other_rw.write(), cut).await,
        FleetKind::Rw => cut_off(&proxy, rw.write(), other_rw.read(), cut).await,
        FleetKind::Mixed => unreachable!("a partition is played kind by kind"),
    };
    if let Some(late) = late {
        panic!(
            "the holder was told its lease was lost only {late:?} after another client took the \
             lock (cut off {cut} ms after acquiring)"
        );
    }
}

/// `held` is acquired, then its client is cut off after `cut_ms` while `wanted` waits. Returns
/// `None` if the holder had been told its lease was lost by the time `wanted` was acquired, else
/// how much later it was told.
async fn cut_off<H: LockKind, W: LockKind>(
    proxy: &Proxy,
    held: Lock<H>,
    wanted: Lock<W>,
    cut_ms: u64,
) -> Option<Duration>
where
    H::Token: Sync,
{
    let guard = Arc::new(held.lock().await.expect("holder locks"));
    let holder = guard.clone();
    let waiting = tokio::spawn(async move {
        let guard = wanted.lock().await.expect("contender locks");
        // Asked at once: when the holder's own task gets to run does not matter.
        (holder.is_lease_lost(), Instant::now(), guard)
    });
    // Let a renewal or two go through, then cut the holder off.
    tokio::time::sleep(Duration::from_millis(cut_ms)).await;
    proxy.freeze(true);
    guard.lease_lost().await;
    let told = Instant::now();
    let (told_first, taken, taken_guard) = waiting.await.expect("contender task");
    proxy.freeze(false);
    taken_guard.unlock().await.expect("contender unlocks");
    (!told_first).then(|| told.saturating_duration_since(taken))
}
