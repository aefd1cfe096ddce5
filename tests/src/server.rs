//! A private, throwaway `redis-server` for tests and benchmarks.
//!
//! [`RedisServer::start`] spawns `redis-server` as a child process listening on
//! a free port of `127.0.0.1`, with persistence off and its working directory
//! in a fresh temporary directory, and returns once the server answers `PING`.
//! Dropping the [`RedisServer`] kills the child, waits for it and removes the
//! directory, so tests never share state and never leave servers behind (as
//! long as the test process unwinds normally).
//!
//! The binary is taken from the `RLOCK_REDIS_SERVER` environment variable when
//! it is set, else `redis-server` is looked up on `PATH`. `scripts/test.sh`
//! and `scripts/bench.sh` install it when it is missing.
//!
//! Besides start and stop, a server can be restarted on the same port and
//! directory (data survives when AOF is enabled through
//! [`RedisServer::start_with`]), killed hard to simulate a crash, and frozen
//! with `SIGSTOP` / `SIGCONT` to simulate a hung or partitioned server.
//!
//! Everything here panics on failure with a descriptive message: it is test
//! support, and a test (or a benchmark) cannot do anything useful without its
//! server.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Environment variable naming the `redis-server` binary to run.
pub const SERVER_BINARY_ENV: &str = "RLOCK_REDIS_SERVER";

/// How long a starting server may take to answer `PING`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`RedisServer::stop`] waits after `SIGTERM` before `SIGKILL`.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times a start is retried (with a new port on first start) when
/// the child exits during startup, typically because the port was taken.
const START_ATTEMPTS: u32 = 5;
/// Pause between two readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Name of the server's log file inside its directory.
const LOG_FILE: &str = "redis.log";

/// A `redis-server` child process on a private loopback port.
///
/// Dropping it kills the process and deletes its directory.
#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    /// A configuration file passed before every other argument (Sentinel needs one).
    config_file: Option<PathBuf>,
    /// `user:password@` (or `:password@`) for servers that require authentication.
    credentials: String,
    extra_args: Vec<String>,
    port: u16,
    /// Process id of the current (or, when stopped, the last) child.
    pid: u32,
    /// `None` while the server is stopped.
    child: Option<Child>,
    dir: TempDir,
}

impl RedisServer {
    /// Starts a server with the default configuration: no RDB snapshots, no
    /// AOF, bound to `127.0.0.1` only.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found or does not become ready in time.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra command-line configuration appended after
    /// the defaults, so it overrides them, e.g.
    /// `RedisServer::start_with(&["--appendonly", "yes"])`.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found or does not become ready in time.
    pub fn start_with(args: &[&str]) -> Self {
        Self::start_configured(None, args)
    }

    /// Starts a server that requires authentication: `args` configure it (e.g. `--requirepass`,
    /// `--user`), and `user`/`password` are what [`RedisServer::url`] and [`RedisServer::client`] log
    /// in with.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found or does not become ready in time.
    pub fn start_authenticated(user: Option<&str>, password: &str, args: &[&str]) -> Self {
        Self::start_configured_as(None, args, format!("{}:{password}@", user.unwrap_or("")))
    }

    /// Starts a server whose only user is the ACL user `user` with `password` and every right (the
    /// default user is off), which [`RedisServer::url`] and [`RedisServer::client`] log in as.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found or does not become ready in time.
    pub fn start_acl_user(user: &str, password: &str) -> Self {
        let secret = format!(">{password}");
        let args = [
            "--user", user, "on", &secret, "~*", "&*", "+@all", "--user", "default", "off",
        ];
        Self::start_authenticated(Some(user), password, &args)
    }

    /// Starts a Sentinel (`redis-server sentinel.conf --sentinel`) whose configuration file holds
    /// `config`; Sentinel rewrites that file as it learns the topology.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found or does not become ready in time.
    pub fn start_sentinel(config: &str) -> Self {
        Self::start_configured(Some(config), &["--sentinel"])
    }

    fn start_configured(config: Option<&str>, args: &[&str]) -> Self {
        Self::start_configured_as(config, args, String::new())
    }

    fn start_configured_as(config: Option<&str>, args: &[&str], credentials: String) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rlock-redis-")
            .tempdir()
            .expect("cannot create a temporary directory for redis-server");
        let config_file = config.map(|text| {
            let path = dir.path().join("redis.conf");
            fs::write(&path, text).expect("cannot write the redis-server configuration file");
            path
        });
        let mut server = Self {
            binary: server_binary(),
            config_file,
            credentials,
            extra_args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            port: 0,
            pid: 0,
            child: None,
            dir,
        };
        // The port is free when picked but released before redis binds it, so
        // another process may grab it meanwhile: then redis exits and we retry
        // with a fresh port.
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            server.port = free_port();
            match server.launch() {
                Ok(()) => return server,
                Err(failure) => failures.push(failure),
            }
        }
        panic!(
            "redis-server failed to start {START_ATTEMPTS} times:\n{}",
            failures.join("\n")
        );
    }

    /// The URL to connect to this server: `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://{}127.0.0.1:{}/", self.credentials, self.port)
    }

    /// The loopback port the server listens on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the running server, or of the last one if stopped.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's working directory (where AOF or RDB files go).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether the server process is currently running (paused counts).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// A `redis` client for [`url`](Self::url).
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a loopback redis URL is always valid")
    }

    /// Shuts the server down gracefully with `SIGTERM` (resuming it first if
    /// paused), falling back to `SIGKILL` after a few seconds, and waits for
    /// it. Does nothing if it is already stopped.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Best effort: a stopped-but-not-yet-reaped child still accepts signals.
        let _ = signal(self.pid, "CONT");
        let _ = signal(self.pid, "TERM");
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) => thread::sleep(POLL_INTERVAL),
                Err(_) => break,
            }
        }
        reap(&mut child);
    }

    /// Kills the server with `SIGKILL`, like a crash, and waits for it.
    /// Does nothing if it is already stopped.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            reap(&mut child);
        }
    }

    /// Stops the server (see [`stop`](Self::stop)) and starts it again with
    /// the same port, directory and configuration, so clients can reconnect to
    /// the same URL and AOF data survives when AOF is enabled. Works on a
    /// stopped server too.
    ///
    /// # Panics
    ///
    /// If the server does not come back.
    pub fn restart(&mut self) {
        self.stop();
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match self.launch() {
                Ok(()) => return,
                Err(failure) => failures.push(failure),
            }
            thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "redis-server failed to restart on port {} {START_ATTEMPTS} times:\n{}",
            self.port,
            failures.join("\n")
        );
    }

    /// Freezes the server with `SIGSTOP`: connections stay open but nothing is
    /// answered until [`resume`](Self::resume).
    ///
    /// # Panics
    ///
    /// If the server is stopped.
    pub fn pause(&self) {
        assert!(self.is_running(), "cannot pause a stopped redis-server");
        assert!(signal(self.pid, "STOP"), "`kill -STOP {}` failed", self.pid);
    }

    /// Resumes a server frozen by [`pause`](Self::pause) with `SIGCONT`.
    ///
    /// # Panics
    ///
    /// If the server is stopped.
    pub fn resume(&self) {
        assert!(self.is_running(), "cannot resume a stopped redis-server");
        assert!(signal(self.pid, "CONT"), "`kill -CONT {}` failed", self.pid);
    }

    /// Spawns the child on `self.port` and waits until it answers.
    ///
    /// Returns an error if the child exits during startup (worth retrying);
    /// panics if the binary is missing or the server hangs.
    fn launch(&mut self) -> Result<(), String> {
        // Only this attempt's part of the (appended-to) log goes into errors.
        let log_start = fs::metadata(self.log_path()).map_or(0, |meta| meta.len());
        let mut child = self.spawn();
        self.pid = child.id();
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "redis-server (port {}) exited during startup with {status}; log:\n{}",
                    self.port,
                    self.log_since(log_start)
                ));
            }
            if self.answers_ping() {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() >= deadline {
                reap(&mut child);
                panic!(
                    "redis-server (port {}) did not answer PING within {STARTUP_TIMEOUT:?}; log:\n{}",
                    self.port,
                    self.log_since(log_start)
                );
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    fn spawn(&self) -> Child {
        let dir = self.dir.path();
        let log = self.open_log();
        let log_err = log
            .try_clone()
            .expect("cannot duplicate the redis-server log handle");
        let result = Command::new(&self.binary)
            .args(&self.config_file)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .args(["--daemonize", "no"])
            .args(["--protected-mode", "no"])
            .args(&self.extra_args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn();
        match result {
            Ok(child) => child,
            Err(err) if err.kind() == io::ErrorKind::NotFound => panic!(
                "redis-server binary `{}` not found: run `scripts/test.sh` or \
                 `scripts/bench.sh` (they install redis-server), or set {SERVER_BINARY_ENV} to \
                 its path",
                self.binary.display()
            ),
            Err(err) => panic!("cannot run `{}`: {err}", self.binary.display()),
        }
    }

    /// True once the server on our port answers `PING` (not `-LOADING`) and
    /// reports our child's pid, so a foreign server that won the port race
    /// is never mistaken for ours.
    fn answers_ping(&self) -> bool {
        let probe = || -> redis::RedisResult<bool> {
            let mut con = self
                .client()
                .get_connection_with_timeout(Duration::from_millis(250))?;
            con.set_read_timeout(Some(Duration::from_secs(1)))?;
            con.set_write_timeout(Some(Duration::from_secs(1)))?;
            let pong: String = redis::cmd("PING").query(&mut con)?;
            let info: String = redis::cmd("INFO").arg("server").query(&mut con)?;
            let ours = format!("process_id:{}", self.pid);
            Ok(pong == "PONG" && info.lines().any(|line| line.trim() == ours))
        };
        probe().unwrap_or(false)
    }

    fn open_log(&self) -> File {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("cannot open the redis-server log file")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(LOG_FILE)
    }

    /// The last lines of the server's log written after byte `start`, for
    /// failure messages.
    fn log_since(&self, start: u64) -> String {
        let log = fs::read(self.log_path()).unwrap_or_default();
        let start = usize::try_from(start).unwrap_or(usize::MAX).min(log.len());
        let log = String::from_utf8_lossy(&log[start..]);
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The binary to run: `$RLOCK_REDIS_SERVER` if set, else `redis-server`.
fn server_binary() -> PathBuf {
    std::env::var_os(SERVER_BINARY_ENV)
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from)
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
        .port()
}

/// Sends `SIG<name>` to `pid` with the `kill` command; true on success.
fn signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Kills a child with `SIGKILL` (effective on a stopped process too) and
/// waits for it so no zombie is left.
fn reap(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}
