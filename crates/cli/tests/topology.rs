//! The `rlock` binary on real local topologies: a Redis Cluster, a Sentinel setup, and the ones that
//! `scripts/topology.sh` starts.

mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use redis::Commands;
use rlock_tests::RedisServer;
use rlock_tests::harness::raw_blocking;
use rlock_tests::topology::{Cluster, SentinelSetup};
use serde_json::Value;
use support::{assert_fails_cleanly, assert_usage_error, json_lines, rlock, run, run_ok};

const CHECK_TASKS: u64 = 4;
const CHECK_ITERATIONS: u64 = 20;

/// `FLAGS --url URL...`: how the CLI reaches a topology.
fn topology_flags(flags: &[&str], urls: &[String]) -> Vec<String> {
    let urls = urls
        .iter()
        .flat_map(|url| ["--url".to_owned(), url.clone()]);
    flags
        .iter()
        .map(|&flag| flag.to_owned())
        .chain(urls)
        .collect()
}

/// `FLAGS ARGS`.
fn with(flags: &[String], args: &[&str]) -> Vec<String> {
    let args = args.iter().map(|&arg| arg.to_owned());
    flags.iter().cloned().chain(args).collect()
}

/// Runs `rlock check NAME` from `processes` processes at once, asserts that each made every
/// acquisition, and returns the counter as the last of them read it.
fn check_from_processes(flags: &[String], name: &str, processes: u64) -> u64 {
    let tasks = CHECK_TASKS.to_string();
    let iterations = CHECK_ITERATIONS.to_string();
    let args = with(
        flags,
        &[
            "check",
            name,
            "--tasks",
            &tasks,
            "--iterations",
            &iterations,
        ],
    );
    let children: Vec<_> = (0..processes)
        .map(|_| {
            let child = rlock(None, &args).stdout(Stdio::piped()).spawn();
            child.expect("spawn rlock check")
        })
        .collect();
    let counters = children.into_iter().map(|child| {
        let output = child.wait_with_output().expect("wait for rlock check");
        assert!(output.status.success(), "check failed: {output:?}");
        let report = &json_lines(&output)[0];
        assert_eq!(
            report["acquisitions"],
            CHECK_TASKS * CHECK_ITERATIONS,
            "{report}"
        );
        report["counter"].as_u64().expect("a counter")
    });
    counters.max().expect("some process")
}

/// Runs a small demo and asserts that it held exclusion.
fn demo_holds_exclusion(flags: &[String]) {
    let args = [
        "demo",
        "--processes",
        "2",
        "--tasks",
        "2",
        "--locks",
        "2",
        "--iterations",
        "20",
        "--hold-ms",
        "1",
    ];
    let output = run(None, &with(flags, &args));
    assert!(output.status.success(), "{output:?}");
    let totals = json_lines(&output).pop().expect("a totals line");
    assert_eq!(totals["mutual_exclusion"], true, "{totals}");
    assert_eq!(totals["acquisitions"], 2 * 2 * 20, "{totals}");
    assert_eq!(totals["workers_failed"], 0, "{totals}");
}

fn get_counter(server: &RedisServer, name: &str) -> u64 {
    raw_blocking(server)
        .get(format!("{name}:counter"))
        .expect("GET the counter")
}

#[test]
fn cluster_runs_check_demo_and_inspect() {
    let cluster = Cluster::start(3, 1);
    let flags = topology_flags(&["--cluster"], &cluster.seeds());

    let name = "cli:cluster";
    let expected = 2 * CHECK_TASKS * CHECK_ITERATIONS;
    assert_eq!(check_from_processes(&flags, name, 2), expected);
    let counter = format!("{name}:counter");
    assert_eq!(get_counter(cluster.master_of(&counter), name), expected);

    demo_holds_exclusion(&flags);
    inspect_shows_a_holder(&cluster, &flags);
}

/// `inspect` finds the holder of a lock that `rlock lock` holds, on the lock's node, and refuses a
/// key that is not a lock.
fn inspect_shows_a_holder(cluster: &Cluster, flags: &[String]) {
    let name = "cli:cluster:held";
    let mut holder = rlock(None, &with(flags, &["lock", name, "--hold-ms", "1500"]))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn rlock lock");
    let stdout = holder.stdout.take().expect("piped stdout");
    let mut events = BufReader::new(stdout)
        .lines()
        .map(|line| line.expect("an event"));
    let acquired = events.next().expect("an acquired event");
    assert!(acquired.contains("acquired"), "{acquired}");

    let report = run_ok(None, &with(flags, &["inspect", name]));
    let report = &report[0];
    assert_eq!(report["exists"], true, "{report}");
    let pttl = report["pttl"].as_i64().expect("pttl");
    assert!(0 < pttl && pttl <= 30_000, "{report}");
    let holders = report["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 1, "{report}");
    assert_eq!(holders[0]["count"], 1, "{report}");
    let released = events.next().expect("a released event");
    assert!(released.contains("released"), "{released}");
    assert!(holder.wait().expect("wait for rlock lock").success());

    let _: () = raw_blocking(cluster.master_of("cli:cluster:string"))
        .set("cli:cluster:string", "x")
        .expect("SET");
    let output = run(None, &with(flags, &["inspect", "cli:cluster:string"]));
    assert_fails_cleanly(&output, "inspect of a string");
}

#[test]
fn sentinel_runs_check_and_demo() {
    let setup = SentinelSetup::start(2, 3);
    let flags = topology_flags(
        &["--sentinel-master", SentinelSetup::MASTER_NAME],
        &setup.sentinel_urls(),
    );
    let name = "cli:sentinel";
    let expected = 2 * CHECK_TASKS * CHECK_ITERATIONS;
    assert_eq!(check_from_processes(&flags, name, 2), expected);
    assert_eq!(get_counter(&setup.master, name), expected);
    demo_holds_exclusion(&flags);
}

#[test]
fn bad_topology_options_fail_cleanly() {
    let (a, b) = ("redis://127.0.0.1:1/", "redis://127.0.0.1:2/");
    let password = "pw-that-must-not-show";
    // Flags that exclude each other: clap refuses them, a usage error (exit 2).
    let usage: [&[&str]; 2] = [
        &[
            "--cluster",
            "--sentinel-master",
            "x",
            "--url",
            a,
            "inspect",
            "x",
        ],
        &["--cluster", "--master-replica", "--url", a, "inspect", "x"],
    ];
    for args in usage {
        assert_usage_error(&run(None, args), &format!("{args:?}"));
    }
    // Combinations the topology checks when it builds its configuration (exit 1).
    let failures: [&[&str]; 6] = [
        &["--url", a, "--url", b, "inspect", "x"],
        &["--master-replica", "--url", a, "--url", b, "inspect", "x"],
        &["--sharded-pubsub", "on", "--url", a, "inspect", "x"],
        &["--cluster", "demo", "--processes", "1"],
        &[
            "--tls-ca",
            "/nonexistent/ca.pem",
            "--url",
            a,
            "inspect",
            "x",
        ],
        &["--sentinel-password", password, "--url", a, "inspect", "x"],
    ];
    for args in failures {
        let output = run(None, args);
        assert_fails_cleanly(&output, &format!("{args:?}"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains(password), "{args:?}: {stderr}");
    }
}

/// `scripts/topology.sh` with its state in a directory of its own, so it never touches a topology
/// that a developer started.
struct Script {
    state: tempfile::TempDir,
}

impl Script {
    fn new() -> Self {
        let state = tempfile::tempdir().expect("a state directory");
        Self { state }
    }

    fn run(&self, args: &[&str]) -> Output {
        let script: PathBuf = [
            env!("CARGO_MANIFEST_DIR"),
            "..",
            "..",
            "scripts",
            "topology.sh",
        ]
        .iter()
        .collect();
        Command::new("bash")
            .arg(script)
            .args(args)
            .env("RLOCK_TOPOLOGY_DIR", self.state.path())
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/topology.sh")
    }

    fn run_ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(output.status.success(), "topology.sh {args:?}: {output:?}");
        String::from_utf8(output.stdout).expect("UTF-8 output")
    }

    fn state(&self, file: &str) -> PathBuf {
        self.state.path().join(file)
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        // Never leave a topology behind, even when an assertion failed.
        let _ = self.run(&["stop", "cluster"]);
    }
}

fn port_answers(url: &str) -> bool {
    let address = url.trim_start_matches("redis://").trim_end_matches('/');
    TcpStream::connect(address).is_ok()
}

#[test]
fn topology_script_starts_and_stops_a_cluster() {
    let script = Script::new();
    let started = script.run_ok(&["start", "cluster"]);
    let mut lines = started.lines();
    let description: Value =
        serde_json::from_str(lines.next().expect("a JSON line")).expect("JSON");
    assert_eq!(description["kind"], "cluster", "{description}");
    let seeds: Vec<String> = serde_json::from_value(description["seeds"].clone()).expect("seeds");
    assert_eq!(seeds.len(), 6, "{description}");
    let flags: Vec<String> = lines
        .next()
        .expect("a line of flags")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(flags, topology_flags(&["--cluster"], &seeds));
    assert!(Path::new(&script.state("rlock-topology-cluster.pid")).is_file());

    let report = run_ok(
        None,
        &with(
            &flags,
            &["check", "cli:script", "--tasks", "2", "--iterations", "10"],
        ),
    );
    assert_eq!(report[0]["counter"], 20, "{report:?}");
    assert!(script.run_ok(&["status"]).contains("cluster: running"));

    script.run_ok(&["stop", "cluster"]);
    assert!(script.run_ok(&["status"]).contains("cluster: stopped"));
    for seed in &seeds {
        assert!(!port_answers(seed), "{seed} still answers after stop");
    }
}
