//! A private `redis-server`: a child process on a free loopback port, without persistence, in a
//! temporary directory. Dropping it kills the child and removes the directory.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::{Instant, sleep, timeout};

use crate::Result;

/// Names the `redis-server` binary to use instead of the one on `PATH` (as for the test suite).
const BINARY_ENV: &str = "RLOCK_REDIS_SERVER";
/// How long a starting server may take to answer `PING`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The free port is released before redis binds it; if it is taken meanwhile, try another.
const START_ATTEMPTS: u32 = 3;

#[derive(Debug)]
pub(crate) struct PrivateRedis {
    // Declared first so that the server is gone before its directory is removed.
    _child: Reaped,
    port: u16,
    _dir: TempDir,
}

impl PrivateRedis {
    /// Starts a server and waits until it answers `PING`.
    pub(crate) async fn start() -> Result<Self> {
        let binary = find_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("rlock-bench-redis-")
            .tempdir()?;
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let log = std::fs::File::create(dir.path().join("redis.log"))?;
            let mut child = Reaped(
                Command::new(&binary)
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                    .arg("--dir")
                    .arg(dir.path())
                    .stdin(Stdio::null())
                    .stdout(log.try_clone()?)
                    .stderr(log)
                    .spawn()
                    .map_err(|e| format!("cannot run {}: {e}", binary.display()))?,
            );
            let url = format!("redis://127.0.0.1:{port}/");
            let deadline = Instant::now() + STARTUP_TIMEOUT;
            loop {
                if let Some(status) = child.0.try_wait()? {
                    failures.push(format!("port {port}: redis-server exited with {status}"));
                    break;
                }
                if timeout(Duration::from_secs(1), ping(&url))
                    .await
                    .is_ok_and(|pong| pong.is_ok())
                {
                    return Ok(Self {
                        _child: child,
                        port,
                        _dir: dir,
                    });
                }
                if Instant::now() >= deadline {
                    return Err(
                        format!("redis-server did not answer within {STARTUP_TIMEOUT:?}").into(),
                    );
                }
                sleep(Duration::from_millis(20)).await;
            }
        }
        Err(format!("redis-server did not start: {}", failures.join("; ")).into())
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

async fn ping(url: &str) -> redis::RedisResult<()> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    redis::cmd("PING").query_async(&mut conn).await
}

/// `$RLOCK_REDIS_SERVER`, else `redis-server` on `PATH`.
fn find_binary() -> Result<PathBuf> {
    if let Some(binary) = std::env::var_os(BINARY_ENV).filter(|b| !b.is_empty()) {
        return Ok(binary.into());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            "redis-server not found: install it, set RLOCK_REDIS_SERVER or pass --url".into()
        })
}

/// A child process that is killed and reaped when dropped.
#[derive(Debug)]
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // Both fail only when the child is already gone.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
