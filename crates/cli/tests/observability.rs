//! What an operator sees of the `rlock` binary: `rlock watch` (in a real terminal, under tmux, and
//! as JSON lines) on locks that an emulated Redisson client holds or queues for and `rlock lock`
//! processes wait for, on one server and in a cluster with sharded pub/sub; and the logs that
//! `RUST_LOG` turns on (stderr only: stdout stays JSON lines).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rlock_tests::RedisServer;
use rlock_tests::harness;
use rlock_tests::redisson::{JavaClient, RedissonVersion};
use rlock_tests::topology::Cluster;
use serde_json::Value;
use support::{assert_usage_error, json_lines, rlock, run, run_ok};

/// The Java thread that holds the lock.
const JAVA_THREAD: u64 = 7;
/// How long the screen or the lines may take to show something.
const SHOW_LIMIT: Duration = Duration::from_secs(10);

/// A child process killed (and reaped) when the test ends, failed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Java client holding `name` on [`JAVA_THREAD`], and an `rlock lock` process waiting for it
/// (subscribed: returned once the channel has its subscriber).
async fn java_holds_and_rlock_waits(
    server: &RedisServer,
    name: &str,
    hold_ms: u64,
) -> (JavaClient, Killed) {
    let java = JavaClient::connect(&server.url(), RedissonVersion::V4)
        .await
        .expect("emulated java client connects");
    java.get_lock(name)
        .lock(JAVA_THREAD)
        .await
        .expect("java lock");
    let waiter = rlock(
        Some(&server.url()),
        &["lock", name, "--hold-ms", &hold_ms.to_string()],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn rlock lock");
    let waiter = Killed(waiter);
    let mut conn = harness::raw(server).await;
    let subscribed = harness::eventually(SHOW_LIMIT, async || {
        harness::lock_channel_subscribers(&mut conn, name).await == 1
    })
    .await;
    assert!(subscribed, "the rlock process waits on the channel");
    (java, waiter)
}

/// The only hash field of the lock `name` right now (its one holder).
async fn holder_field(server: &RedisServer, name: &str) -> Option<String> {
    let mut conn = harness::raw(server).await;
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(name)
        .query_async(&mut conn)
        .await
        .expect("HKEYS");
    match fields.as_slice() {
        [field] => Some(field.clone()),
        _ => None,
    }
}

/// A tmux server of its own (its socket in a private directory) running one session; killed, and
/// its socket removed, when dropped.
struct Tmux {
    directory: tempfile::TempDir,
}

impl Tmux {
    /// Starts `program` with `args` in a detached 160×40 session, with `RUST_LOG` at its default
    /// (the caller's could put logs, on stderr, on the screen being read). bash runs it and writes
    /// its exit status to a file: on Ctrl-C, bash waits for the program and carries on unless the
    /// program died of the signal (tmux's own `pane_dead_status` is sometimes never filled in).
    fn start(program: &str, args: &[&str]) -> Self {
        let directory = tempfile::tempdir().expect("a directory for the tmux socket");
        let tmux = Self { directory };
        let status = tmux.status_file();
        let started = tmux
            .command()
            .args(["new-session", "-d", "-s", "watch", "-x", "160", "-y", "40"])
            .args(["-e", "RUST_LOG=warn", "bash", "-c"])
            .arg(r#"status="$1"; shift; "$@"; echo "$?" > "$status""#)
            .args(["bash".as_ref(), status.as_os_str(), program.as_ref()])
            .args(args)
            .status()
            .expect("tmux runs (scripts/test.sh installs it)");
        assert!(started.success(), "tmux new-session failed");
        tmux
    }

    /// Where the program's exit status is written when it exits.
    fn status_file(&self) -> std::path::PathBuf {
        self.directory.path().join("status")
    }

    /// Presses Ctrl-C in the session and returns how the command ended once it has: `exit N`.
    async fn interrupt(&self) -> String {
        let sent = self
            .command()
            .args(["send-keys", "-t", "watch", "C-c"])
            .status()
            .expect("tmux send-keys");
        assert!(sent.success(), "tmux send-keys failed");
        let deadline = Instant::now() + SHOW_LIMIT;
        loop {
            if let Ok(status) = std::fs::read_to_string(self.status_file())
                && status.ends_with('\n')
            {
                return format!("exit {}", status.trim());
            }
            assert!(
                Instant::now() < deadline,
                "no exit status after Ctrl-C (killed by the signal?)\n{}",
                self.screen().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(self.directory.path().join("socket"));
        command
    }

    /// The visible screen, line by line.
    fn screen(&self) -> Vec<String> {
        let output = self
            .command()
            .args(["capture-pane", "-p", "-t", "watch"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server is gone already when the program exited (its session closed with it).
        let _ = self
            .command()
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
}

/// The columns of the table row of `name` on `screen`: name, kind, TTL, holder, count, queue,
/// subscribers, releases/s (`-` for the holder and the count of a lock nobody holds).
fn row(screen: &[String], name: &str) -> Option<Vec<String>> {
    let line = screen
        .iter()
        .find(|line| line.starts_with(&format!("{name} ")))?;
    let columns: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    (columns.len() == 8).then_some(columns)
}

/// Polls the screen until `check` accepts the row of `name`; returns that row and the screen.
async fn screen_until(
    tmux: &Tmux,
    name: &str,
    mut check: impl FnMut(&[String]) -> bool,
) -> (Vec<String>, Vec<String>) {
    let deadline = Instant::now() + SHOW_LIMIT;
    loop {
        let screen = tmux.screen();
        if let Some(row) = row(&screen, name)
            && check(&row)
        {
            return (row, screen);
        }
        assert!(
            Instant::now() < deadline,
            "the screen never showed what was expected:\n{}",
            screen.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn is_ttl(text: &str) -> bool {
    text.strip_suffix('s')
        .and_then(|seconds| seconds.split_once('.'))
        .is_some_and(|(whole, tenth)| whole.parse::<u64>().is_ok() && tenth.parse::<u8>().is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_in_a_terminal_shows_the_java_holder_the_waiter_and_the_hand_over() {
    let server = RedisServer::start();
    let name = "watch:terminal";
    let (java, mut waiter) = java_holds_and_rlock_waits(&server, name, 60_000).await;
    let java_field = java.lock_name(JAVA_THREAD);

    let url = server.url();
    let watch = ["--url", &url, "watch", name, "--interval-ms", "500"];
    let tmux = Tmux::start(env!("CARGO_BIN_EXE_rlock"), &watch);
    let (held, screen) = screen_until(&tmux, name, |row| row[3] == java_field).await;
    println!("{}", screen.join("\n"));
    assert_eq!(held[1], "lock", "kind: {held:?}");
    assert!(is_ttl(&held[2]), "a TTL: {held:?}");
    assert_eq!(held[4], "1", "the Java hold count: {held:?}");
    assert_eq!(held[5], "0", "no fair queue: {held:?}");
    let subscribers: u64 = held[6].parse().expect("a subscriber count");
    assert!(subscribers >= 1, "the rlock process waits: {held:?}");
    assert!(
        screen[0].contains("releases/s") && screen[0].contains("local hand-offs publish none"),
        "the heading says what releases are counted: {}",
        screen[0]
    );

    let unlocked = java.get_lock(name).unlock(JAVA_THREAD).await;
    assert_eq!(unlocked.expect("java unlock"), Some(1));
    let (taken, screen) =
        screen_until(&tmux, name, |row| row[3] != java_field && row[3] != "-").await;
    println!("{}", screen.join("\n"));
    let rlock_field = holder_field(&server, name).await;
    assert_eq!(
        Some(&taken[3]),
        rlock_field.as_ref(),
        "the rlock process holds it"
    );
    assert_eq!(taken[4], "1", "{taken:?}");
    // The Java unlock was published: some refresh counts it (the one showing the new holder, or
    // the one before).
    let (counted, screen) = screen_until(&tmux, name, |row| {
        row[7].parse::<f64>().is_ok_and(|rate| rate > 0.0)
    })
    .await;
    println!("{}", screen.join("\n"));
    assert_eq!(Some(&counted[3]), rlock_field.as_ref(), "{counted:?}");
    assert!(
        waiter.0.try_wait().expect("poll rlock lock").is_none(),
        "still holding"
    );

    assert_eq!(
        tmux.interrupt().await,
        "exit 0",
        "Ctrl-C ends the watch cleanly"
    );
}

/// `rlock [URL] FLAGS watch NAMES --json --interval-ms 250 --count COUNT`, started.
fn watch_json(url: Option<&str>, flags: &[String], names: &[&str], count: u64) -> Child {
    let mut args: Vec<String> = flags.to_vec();
    args.push("watch".into());
    args.extend(names.iter().map(|&name| name.to_owned()));
    args.extend(["--json", "--interval-ms", "250", "--count"].map(str::to_owned));
    args.push(count.to_string());
    rlock(url, &args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn rlock watch")
}

/// The JSON lines of an `rlock watch --count` process once it has succeeded, after checking that
/// each one is a sample of one of the locks `names` with every field.
fn samples(watch: Child, names: &[&str]) -> Vec<Value> {
    let output = watch
        .wait_with_output()
        .expect("rlock watch ends after --count");
    assert!(output.status.success(), "{output:?}");
    let lines = json_lines(&output);
    for line in &lines {
        let object = line.as_object().expect("a JSON object");
        for field in [
            "t",
            "refresh",
            "name",
            "exists",
            "pttl",
            "kind",
            "holders",
            "subscribers",
            "releases",
            "releases_per_s",
            "elapsed_ms",
        ] {
            assert!(object.contains_key(field), "{field} missing: {line}");
        }
        assert!(
            names.contains(&line["name"].as_str().expect("a name")),
            "{line}"
        );
    }
    lines
}

/// The releases that `samples` counted, all refreshes together.
fn releases_in<'a>(samples: impl IntoIterator<Item = &'a Value>) -> u64 {
    let counts = samples
        .into_iter()
        .filter_map(|line| line["releases"].as_u64());
    counts.sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_json_reports_holders_waiters_and_releases_of_both_sides() {
    let server = RedisServer::start();
    let name = "watch:json";
    let idle = "watch:json:idle";
    let (java, waiter) = java_holds_and_rlock_waits(&server, name, 300).await;
    let java_field = java.lock_name(JAVA_THREAD);
    let watch = watch_json(Some(&server.url()), &[], &[name, idle], 12);
    // Once the watcher listens too, its first refreshes see the Java hold.
    let mut conn = harness::raw(&server).await;
    let listening = harness::eventually(SHOW_LIMIT, async || {
        harness::lock_channel_subscribers(&mut conn, name).await == 2
    })
    .await;
    assert!(listening, "rlock watch subscribes to the lock's channel");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let unlocked = java.get_lock(name).unlock(JAVA_THREAD).await;
    assert_eq!(unlocked.expect("java unlock"), Some(1));
    let lines = samples(watch, &[name, idle]);
    assert_eq!(lines.len(), 2 * 12, "one line per lock and refresh");
    for (index, line) in lines.iter().enumerate() {
        let refresh = u64::try_from(index / 2 + 1).expect("small");
        assert_eq!(line["refresh"], refresh, "{line}");
        assert_eq!(
            line["name"],
            [name, idle][index % 2],
            "in the order given: {line}"
        );
    }
    let (watched, idle): (Vec<&Value>, Vec<&Value>) = lines.iter().partition(|l| l["name"] == name);

    let first = watched[0];
    assert_eq!(first["kind"], "lock", "{first}");
    assert_eq!(first["exists"], true, "{first}");
    assert!(
        first["pttl"].as_i64().is_some_and(|pttl| pttl > 0),
        "{first}"
    );
    let holder = &first["holders"][0];
    assert_eq!(
        format!(
            "{}:{}",
            holder["node"].as_str().unwrap_or_default(),
            holder["owner"].as_str().unwrap_or_default()
        ),
        java_field,
        "{first}"
    );
    assert_eq!(holder["count"], 1, "{first}");
    assert!(
        first["subscribers"].as_u64().is_some_and(|n| n >= 1),
        "the rlock process waits: {first}"
    );
    assert_eq!(first["releases"], 0, "{first}");

    let held_by_rlock = watched.iter().find(|line| {
        line["holders"][0]["node"]
            .as_str()
            .is_some_and(|node| !java_field.starts_with(node))
    });
    assert!(
        held_by_rlock.is_some(),
        "the rlock process took it over: {watched:#?}"
    );
    // The Java unlock and the rlock process's own release were both published.
    let releases = releases_in(watched.iter().copied());
    assert_eq!(releases, 2, "{watched:#?}");
    let last = watched.last().expect("samples");
    assert_eq!(last["exists"], false, "released at the end: {last}");
    assert_eq!(last["subscribers"], 0, "nobody waits any more: {last}");

    assert!(
        idle.iter()
            .all(|line| line["exists"] == false && line["releases"] == 0)
    );
    drop(waiter);
}

#[test]
fn debug_logs_go_to_stderr_and_stdout_stays_json_lines() {
    let server = RedisServer::start();
    let output = rlock(
        Some(&server.url()),
        &["lock", "logs:lock", "--hold-ms", "10"],
    )
    .env("RUST_LOG", "debug")
    .output()
    .expect("run rlock lock");
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = json_lines(&output);
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(names, ["acquired", "released"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("DEBUG") && line.contains("rlock_redisson")),
        "the library's debug logs on stderr: {stderr}"
    );

    let quiet = rlock(
        Some(&server.url()),
        &["lock", "logs:lock", "--hold-ms", "10"],
    )
    .env_remove("RUST_LOG")
    .output()
    .expect("run rlock lock");
    assert!(quiet.status.success(), "{quiet:?}");
    assert!(
        quiet.stderr.is_empty(),
        "nothing below warn by default: {quiet:?}"
    );
}

#[test]
fn watch_refuses_bad_arguments_and_reports_unreadable_keys_per_refresh() {
    let server = RedisServer::start();
    let url = server.url();
    let refused: [&[&str]; 3] = [
        &["watch"],
        &["watch", "x", "--interval-ms", "0"],
        &["watch", "x", "--count", "0"],
    ];
    for args in refused {
        assert_usage_error(&run(Some(&url), args), &format!("{args:?}"));
    }

    let mut conn = server.client().get_connection().expect("raw connection");
    let () = redis::Commands::set(&mut conn, "watch:string", "x").expect("SET");
    let lines = run_ok(
        Some(&url),
        &[
            "watch",
            "watch:string",
            "watch:none",
            "--json",
            "--count",
            "1",
        ],
    );
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["name"], "watch:string");
    let error = lines[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("not a lock hash"), "{}", lines[0]);
    assert_eq!(lines[1]["name"], "watch:none");
    assert_eq!(lines[1]["exists"], false);
}

/// Subscribers of `channel` on `server`: `PUBSUB NUMSUB`, or with `count` = `SHARDNUMSUB` the
/// sharded ones.
async fn channel_subscribers(server: &RedisServer, count: &str, channel: &str) -> i64 {
    let mut conn = harness::raw(server).await;
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg(count)
        .arg(channel)
        .query_async(&mut conn)
        .await
        .expect("PUBSUB");
    counts.first().map_or(0, |(_, n)| *n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_json_follows_a_java_fair_locks_queue_and_its_waiters_channel() {
    let server = RedisServer::start();
    let name = "watch:fair";
    let java = JavaClient::connect(&server.url(), RedissonVersion::V4)
        .await
        .expect("emulated java client connects");
    let fair = java.get_fair_lock(name);
    fair.lock(1).await.expect("java thread 1 locks");
    let queued = fair.clone();
    let waiting = tokio::spawn(async move { queued.lock(2).await });
    let waiter_channel = fair.thread_channel(2);
    let subscribed = harness::eventually(SHOW_LIMIT, async || {
        channel_subscribers(&server, "NUMSUB", &waiter_channel).await == 1
    })
    .await;
    assert!(subscribed, "java thread 2 waits in the queue, subscribed");

    let watch = watch_json(Some(&server.url()), &[], &[name], 8);
    // The watcher follows the queue: after a refresh it listens on the waiter's channel too.
    let following = harness::eventually(SHOW_LIMIT, async || {
        channel_subscribers(&server, "NUMSUB", &waiter_channel).await == 2
    })
    .await;
    assert!(
        following,
        "rlock watch subscribes to the queued waiter's channel"
    );
    assert_eq!(fair.unlock(1).await.expect("java unlock"), Some(1));
    tokio::time::timeout(SHOW_LIMIT, waiting)
        .await
        .expect("java thread 2 acquires in time")
        .expect("no panic")
        .expect("java thread 2 locks");

    let lines = samples(watch, &[name]);
    let first = &lines[0];
    assert_eq!(first["kind"], "fair", "{first}");
    assert_eq!(first["holders"][0]["owner"], "1", "{first}");
    assert_eq!(first["queue"][0]["field"], java.lock_name(2), "{first}");
    assert!(
        first["queue"][0]["deadline_ms"].as_i64().is_some(),
        "{first}"
    );
    assert_eq!(first["subscribers"], 1, "the queued java waiter: {first}");
    let last = lines.last().expect("samples");
    assert_eq!(last["holders"][0]["owner"], "2", "{last}");
    assert!(last.get("queue").is_none(), "the queue is empty: {last}");
    assert_eq!(
        last["kind"], "lock",
        "a fair lock without waiters looks like a lock: {last}"
    );
    let releases = releases_in(&lines);
    assert_eq!(
        releases, 1,
        "the unlock published to the queue head: {lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_counts_sharded_subscribers_and_releases_in_a_cluster() {
    let cluster = Cluster::start(3, 0);
    let name = "watch:cluster";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let node = cluster.master_of(name);
    let mut flags = vec!["--cluster".to_owned()];
    for seed in cluster.seeds() {
        flags.extend(["--url".to_owned(), seed]);
    }
    let with = |args: &[&str]| -> Vec<String> {
        let args = args.iter().map(|&arg| arg.to_owned());
        flags.iter().cloned().chain(args).collect()
    };
    let holder = rlock(None, &with(&["lock", name, "--hold-ms", "3000"]))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    let _holder = Killed(holder);
    let holding = harness::eventually(SHOW_LIMIT, async || {
        let mut conn = harness::raw(node).await;
        redis::cmd("EXISTS")
            .arg(name)
            .query_async::<bool>(&mut conn)
            .await
            .expect("EXISTS")
    })
    .await;
    assert!(holding, "the holder holds the lock");
    let waiter = rlock(None, &with(&["lock", name, "--hold-ms", "100"]))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the waiter");
    let _waiter = Killed(waiter);
    let subscribed = harness::eventually(SHOW_LIMIT, async || {
        channel_subscribers(node, "SHARDNUMSUB", &channel).await == 1
    })
    .await;
    assert!(
        subscribed,
        "the waiter subscribes with SSUBSCRIBE on the slot's node"
    );

    let watch = watch_json(None, &flags, &[name], 20);
    let lines = samples(watch, &[name]);
    assert_eq!(lines[0]["holders"][0]["count"], 1, "{}", lines[0]);
    assert_eq!(lines[0]["subscribers"], 1, "the waiter: {}", lines[0]);
    let releases = releases_in(&lines);
    assert_eq!(
        releases, 2,
        "the holder's and the waiter's releases: {lines:#?}"
    );
    let last = lines.last().expect("samples");
    assert_eq!(last["exists"], false, "{last}");
}
