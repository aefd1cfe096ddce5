//! A private `redis-server` for the demo: a child process on a free loopback port, without
//! persistence, in a temporary directory. Dropping it kills the child, waits for it and removes the
//! directory, so an error or Ctrl-C leaves nothing behind.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::{Instant, sleep, timeout};

use crate::Result;

/// Names the `redis-server` binary to use instead of the one on `PATH`, as for the test suite.
const BINARY_ENV: &str = "RLOCK_REDIS_SERVER";
/// How long a starting server may take to answer `PING`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The free port we pick is released before redis binds it; if someone takes it meanwhile, redis
/// exits and we try again on another.
const START_ATTEMPTS: u32 = 3;
/// How long one readiness probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
const LOG_FILE: &str = "redis.log";

#[derive(Debug)]
pub(crate) struct PrivateRedis {
    // Declared before `_dir` so the server is gone before its directory is removed.
    child: Reaped,
    port: u16,
    _dir: TempDir,
}

impl PrivateRedis {
    /// Starts a server, installing `redis-server` first when it is missing and we are root, and
    /// waits until it answers.
    pub(crate) async fn start() -> Result<Self> {
        let binary = match find_binary() {
            Some(binary) => binary,
            None => install().await?,
        };
        let dir = tempfile::Builder::new()
            .prefix("rlock-demo-redis-")
            .tempdir()?;
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let mut child = Reaped(spawn(&binary, port, dir.path())?);
            match wait_ready(&mut child.0, port, dir.path()).await? {
                None => {
                    return Ok(Self {
                        child,
                        port,
                        _dir: dir,
                    });
                }
                Some(failure) => failures.push(failure),
            }
        }
        Err(format!("redis-server did not start:\n{}", failures.join("\n")).into())
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.0.id()
    }
}

/// A child process that is killed and waited for when dropped.
#[derive(Debug)]
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // Either may fail only because the child is already gone (Ctrl-C reaches it too).
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(binary: &Path, port: u16, dir: &Path) -> Result<Child> {
    let log = std::fs::File::create(dir.join(LOG_FILE))?;
    let child = Command::new(binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    Ok(child)
}

/// Waits until the server on `port` answers as `child`: `None` when it does, the reason when it
/// exited during startup (worth another port), an error when it hangs.
async fn wait_ready(child: &mut Child, port: u16, dir: &Path) -> Result<Option<String>> {
    let url = format!("redis://127.0.0.1:{port}/");
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(dir.join(LOG_FILE)).unwrap_or_default();
            return Ok(Some(format!("redis-server exited with {status}:\n{log}")));
        }
        let probe = timeout(PROBE_TIMEOUT, is_ours(&url, child.id())).await;
        if probe.is_ok_and(|ours| ours.unwrap_or(false)) {
            return Ok(None);
        }
        if Instant::now() >= deadline {
            return Err(format!("redis-server did not answer within {STARTUP_TIMEOUT:?}").into());
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// Whether the server at `url` answers and is process `pid`, not one that took the port first.
async fn is_ours(url: &str, pid: u32) -> Result<bool> {
    let mut config = rlock_redisson::Config::new(url);
    config.connect_timeout = PROBE_TIMEOUT;
    config.command_timeout = PROBE_TIMEOUT;
    let client = rlock_redisson::Client::with_config(config).await?;
    let info: String = client.query(redis::cmd("INFO").arg("server")).await?;
    Ok(info
        .lines()
        .any(|line| line.trim() == format!("process_id:{pid}")))
}

/// A loopback port that was free a moment ago.
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `$RLOCK_REDIS_SERVER`, or `redis-server` on `PATH`.
fn find_binary() -> Option<PathBuf> {
    if let Some(binary) = std::env::var_os(BINARY_ENV).filter(|b| !b.is_empty()) {
        return Some(binary.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

/// Installs Debian's `redis-server` package, which only root may do.
async fn install() -> Result<PathBuf> {
    let uid = tokio::process::Command::new("id")
        .arg("-u")
        .output()
        .await?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err(
            "redis-server is not installed: install it (e.g. `apt-get install redis-server`) or pass --url"
                .into(),
        );
    }
    eprintln!("redis-server is not installed: installing it with apt-get");
    run_to_stderr(tokio::process::Command::new("apt-get").arg("update")).await?;
    run_to_stderr(
        tokio::process::Command::new("apt-get")
            .args(["install", "-y", "redis-server"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .await?;
    // The package starts its own server on 6379; we want ours only. Without a service manager
    // there is nothing to stop, so a failure here is fine.
    let _ = tokio::process::Command::new("service")
        .args(["redis-server", "stop"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    find_binary().ok_or_else(|| "redis-server is still missing after installing it".into())
}

/// Runs `command` with its output on our stderr, keeping stdout for results.
async fn run_to_stderr(command: &mut tokio::process::Command) -> Result<()> {
    let status = command
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .await?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed with {status}").into())
    }
}
