//! The `rlock` binary against real, private redis-servers.

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Stdio};

use redis::Commands;
use rlock_tests::RedisServer;
use rlock_tests::harness::raw_blocking;
use serde_json::{Value, json};
use support::{assert_fails_cleanly, assert_usage_error, json_lines, rlock, run, run_ok};

/// A Redisson client id, as Java writes it in hash fields.
const JAVA_NODE: &str = "3b241101-e2bb-4255-8caf-4136c566a962";

#[test]
fn check_from_three_processes_counts_every_acquisition() {
    let server = RedisServer::start();
    let url = server.url();
    let args = ["check", "cli:check", "--tasks", "8", "--iterations", "25"];
    let children: Vec<Child> = (0..3)
        .map(|_| {
            rlock(Some(&url), &args)
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn rlock check")
        })
        .collect();
    let reports: Vec<Value> = children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().expect("wait for rlock check");
            assert!(output.status.success(), "check failed: {output:?}");
            let lines = json_lines(&output);
            assert_eq!(lines.len(), 1, "{lines:?}");
            lines.into_iter().next().expect("one report")
        })
        .collect();

    for report in &reports {
        assert_eq!(report["acquisitions"], 8 * 25, "{report}");
        for key in ["elapsed_ms", "per_s", "wait_p50_ms", "wait_p99_ms"] {
            assert!(report[key].is_number(), "{key} missing in {report}");
        }
    }
    // Each process reads the counter after its own last increment; the last read sees them all.
    let counters = reports
        .iter()
        .map(|r| r["counter"].as_u64().expect("counter"));
    assert_eq!(counters.max(), Some(3 * 8 * 25));
    let counter: u64 = raw_blocking(&server).get("cli:check:counter").expect("GET");
    assert_eq!(counter, 3 * 8 * 25);
}

#[test]
fn inspect_shows_holders_written_by_java() {
    let server = RedisServer::start();
    let mut redis = raw_blocking(&server);
    let _: () = redis
        .hset("cli:java", format!("{JAVA_NODE}:57"), 2)
        .expect("HSET");
    let _: () = redis.pexpire("cli:java", 30_000).expect("PEXPIRE");

    let report = run_ok(Some(&server.url()), &["inspect", "cli:java"]);
    assert_eq!(report.len(), 1);
    let report = &report[0];
    assert_eq!(report["name"], "cli:java");
    assert_eq!(report["exists"], true);
    let pttl = report["pttl"].as_i64().expect("pttl");
    assert!(0 < pttl && pttl <= 30_000, "{report}");
    assert_eq!(
        report["holders"],
        json!([{"node": JAVA_NODE, "owner": "57", "count": 2}])
    );

    let report = run_ok(Some(&server.url()), &["inspect", "cli:absent"]);
    assert_eq!(
        report,
        [json!({"name": "cli:absent", "exists": false, "pttl": -2, "holders": []})]
    );
}

#[test]
fn force_unlock_releases_once() {
    let server = RedisServer::start();
    let _: () = raw_blocking(&server)
        .hset("cli:forced", format!("{JAVA_NODE}:1"), 1)
        .expect("HSET");

    let first = run_ok(Some(&server.url()), &["force-unlock", "cli:forced"]);
    assert_eq!(first, [json!({"released": true})]);
    let second = run_ok(Some(&server.url()), &["force-unlock", "cli:forced"]);
    assert_eq!(second, [json!({"released": false})]);
}

#[test]
fn lock_reports_acquire_and_release() {
    let server = RedisServer::start();
    let events = run_ok(
        Some(&server.url()),
        &["lock", "cli:held", "--hold-ms", "200"],
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["event"], "acquired");
    assert_eq!(events[1]["event"], "released");
    let (acquired, released) = (events[0]["t"].as_u64(), events[1]["t"].as_u64());
    let (acquired, released) = (acquired.expect("t"), released.expect("t"));
    assert!(released >= acquired + 190, "{events:?}");
    let exists: bool = raw_blocking(&server).exists("cli:held").expect("EXISTS");
    assert!(!exists);
}

#[test]
fn lock_reports_a_lost_lease() {
    let server = RedisServer::start();
    let args = [
        "lock",
        "cli:leased",
        "--hold-ms",
        "1000",
        "--lease-ms",
        "100",
    ];
    let output = run(Some(&server.url()), &args);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let events: Vec<Value> = json_lines(&output);
    let names: Vec<&Value> = events.iter().map(|e| &e["event"]).collect();
    assert_eq!(names, ["acquired", "lease_lost"]);
}

#[test]
fn demo_on_a_given_server_holds_exclusion() {
    let server = RedisServer::start();
    let args = [
        "demo",
        "--processes",
        "2",
        "--tasks",
        "3",
        "--locks",
        "2",
        "--iterations",
        "20",
        "--hold-ms",
        "1",
    ];
    let output = run(Some(&server.url()), &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{output:?}");
    assert!(stderr.contains("mutual exclusion held: yes"), "{stderr}");
    let totals = json_lines(&output).pop().expect("a totals line");
    assert_eq!(totals["mutual_exclusion"], true, "{totals}");
    assert_eq!(totals["acquisitions"], 2 * 3 * 20, "{totals}");
    assert_eq!(totals["workers_failed"], 0, "{totals}");
    let counters: Vec<u64> = raw_blocking(&server)
        .mget(&["demo:lock:0:counter", "demo:lock:1:counter"])
        .expect("MGET");
    assert_eq!(counters, [60, 60]);
}

#[test]
fn bad_input_fails_without_panicking() {
    let server = RedisServer::start();
    let url = server.url();
    let _: () = raw_blocking(&server).set("cli:string", "x").expect("SET");
    // Rejected by the argument parser: usage errors, exit 2.
    let usage: [&[&str]; 5] = [
        &["inspect", ""],
        &["force-unlock", ""],
        &["lock", "", "--hold-ms", "1"],
        &["check", "", "--tasks", "1", "--iterations", "1"],
        &["check", "x", "--tasks", "many", "--iterations", "1"],
    ];
    for args in usage {
        assert_usage_error(&run(Some(&url), args), &format!("{args:?}"));
    }
    // Failures at run time, exit 1.
    let failures: [(Option<&str>, &[&str]); 4] = [
        (Some(&url), &["inspect", "cli:string"]),
        (
            Some(&url),
            &["lock", "x", "--hold-ms", "1", "--lease-ms", "0"],
        ),
        (None, &["inspect", "x"]),
        (None, &["check", "x", "--tasks", "1", "--iterations", "1"]),
    ];
    for (url, args) in failures {
        assert_fails_cleanly(&run(url, args), &format!("{args:?}"));
    }
}

#[test]
fn demo_without_url_runs_its_own_server_and_stops_it() {
    let args = [
        "demo",
        "--processes",
        "2",
        "--tasks",
        "2",
        "--iterations",
        "5",
    ];
    let output = run(None, &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{output:?}");
    let totals = json_lines(&output).pop().expect("a totals line");
    assert_eq!(totals["mutual_exclusion"], true, "{totals}");
    let pid = stderr
        .lines()
        .find_map(|line| line.strip_prefix("redis-server pid "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the demo names its server's pid");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "redis-server {pid} outlived the demo"
    );
}

/// A redis-server that also listens with TLS, on a certificate of a private CA.
struct TlsServer {
    _server: RedisServer,
    url: String,
    ca_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl TlsServer {
    fn start() -> Self {
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = ca.self_signed(&ca_key).expect("CA certificate").pem();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().expect("server key");
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .expect("server params")
            .signed_by(&key, &issuer)
            .expect("server certificate");

        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, pem: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("write a PEM file");
            path
        };
        let ca_file = write("ca.pem", &ca_pem);
        let cert_file = write("cert.pem", &cert.pem());
        let key_file = write("key.pem", &key.serialize_pem());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port()
            .to_string();
        let path = |file: &PathBuf| file.to_string_lossy().into_owned();
        let server = RedisServer::start_with(&[
            "--tls-port",
            &port,
            "--tls-cert-file",
            &path(&cert_file),
            "--tls-key-file",
            &path(&key_file),
            "--tls-auth-clients",
            "no",
        ]);
        Self {
            _server: server,
            url: format!("rediss://127.0.0.1:{port}/"),
            ca_file,
            _dir: dir,
        }
    }
}

#[test]
fn tls_ca_is_trusted_by_check_and_by_demo_workers() {
    let tls = TlsServer::start();
    let ca = tls.ca_file.to_str().expect("a UTF-8 path");
    let check = ["check", "cli:tls", "--tasks", "2", "--iterations", "10"];
    let report = run_ok(Some(&tls.url), &[&["--tls-ca", ca][..], &check].concat());
    assert_eq!(report[0]["counter"], 20, "{report:?}");

    let demo = [
        "--tls-ca",
        ca,
        "demo",
        "--processes",
        "2",
        "--tasks",
        "1",
        "--locks",
        "1",
        "--iterations",
        "5",
    ];
    let totals = run_ok(Some(&tls.url), &demo).pop().expect("a totals line");
    assert_eq!(totals["mutual_exclusion"], true, "{totals}");
    assert_eq!(totals["workers_failed"], 0, "{totals}");

    // Without the CA, the server's certificate is not trusted.
    assert_fails_cleanly(&run(Some(&tls.url), &check), "check without --tls-ca");
}

/// `rlock --url URL --name-prefix app: ARGS`, expecting success: its JSON lines.
fn prefixed(server: &RedisServer, args: &[&str]) -> Vec<Value> {
    run_ok(
        Some(&server.url()),
        &[&["--name-prefix", "app:"], args].concat(),
    )
}

#[test]
fn name_prefix_puts_every_command_under_the_prefix() {
    let server = RedisServer::start();
    let mut redis = raw_blocking(&server);
    let exists =
        |redis: &mut redis::Connection, key: &str| -> bool { redis.exists(key).expect("EXISTS") };
    // A Java service whose NameMapper prepends `app:` holds its lock `cli:mapped`.
    let _: () = redis
        .hset("app:cli:mapped", format!("{JAVA_NODE}:57"), 1)
        .expect("HSET");
    let _: () = redis.pexpire("app:cli:mapped", 30_000).expect("PEXPIRE");

    let report = prefixed(&server, &["inspect", "cli:mapped"]);
    assert_eq!(report.len(), 1, "{report:?}");
    assert_eq!(report[0]["name"], "cli:mapped", "{report:?}");
    assert_eq!(report[0]["key"], "app:cli:mapped", "{report:?}");
    assert_eq!(report[0]["exists"], true, "{report:?}");
    assert_eq!(
        report[0]["holders"],
        json!([{"node": JAVA_NODE, "owner": "57", "count": 1}])
    );
    // Without the prefix, the same name is another lock (and the report has no `key`).
    assert_eq!(
        run_ok(Some(&server.url()), &["inspect", "cli:mapped"]),
        [json!({"name": "cli:mapped", "exists": false, "pttl": -2, "holders": []})]
    );
    let watched = prefixed(&server, &["watch", "cli:mapped", "--json", "--count", "1"]);
    assert_eq!(watched.len(), 1, "{watched:?}");
    assert_eq!(
        (&watched[0]["name"], &watched[0]["key"], &watched[0]["kind"]),
        (
            &json!("cli:mapped"),
            &json!("app:cli:mapped"),
            &json!("lock")
        ),
        "{watched:?}"
    );
    assert_eq!(watched[0]["holders"][0]["owner"], "57", "{watched:?}");

    // `lock` holds app:cli:held, and nothing at cli:held.
    let mut args = vec!["--name-prefix", "app:"];
    args.extend(["lock", "cli:held", "--hold-ms", "2000"]);
    let holder = rlock(Some(&server.url()), &args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn rlock lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !exists(&mut redis, "app:cli:held") {
        assert!(std::time::Instant::now() < deadline, "never acquired");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!exists(&mut redis, "cli:held"));
    let report = prefixed(&server, &["inspect", "cli:held"]);
    assert_eq!(report[0]["key"], "app:cli:held", "{report:?}");
    assert_eq!(report[0]["holders"].as_array().map(Vec::len), Some(1));
    let output = holder.wait_with_output().expect("rlock lock ends");
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = json_lines(&output);
    let events: Vec<&Value> = events.iter().map(|e| &e["event"]).collect();
    assert_eq!(events, ["acquired", "released"]);

    // `check`'s lock and counter are both under the prefix.
    let check = ["check", "cli:counted", "--tasks", "2", "--iterations", "5"];
    assert_eq!(prefixed(&server, &check)[0]["counter"], 10);
    let counter: u64 = redis.get("app:cli:counted:counter").expect("GET");
    assert_eq!(counter, 10);
    assert!(!exists(&mut redis, "cli:counted:counter"));

    // The synchronizers too.
    let set = ["semaphore", "cli:sem", "set-permits", "2"];
    assert_eq!(prefixed(&server, &set), [json!({"ok": true})]);
    let permits: u64 = redis.get("app:cli:sem").expect("GET");
    assert_eq!(permits, 2);
    assert_eq!(
        prefixed(&server, &["inspect", "cli:sem", "--kind", "semaphore"]),
        [
            json!({"name": "cli:sem", "key": "app:cli:sem", "exists": true, "pttl": -1,
                "available": 2})
        ]
    );
    let set = ["expirable-semaphore", "cli:exp", "set-permits", "1"];
    assert_eq!(prefixed(&server, &set), [json!({"ok": true})]);
    assert!(exists(&mut redis, "app:cli:exp"));
    let set = ["latch", "cli:latch", "set-count", "3"];
    assert_eq!(prefixed(&server, &set), [json!({"ok": true})]);
    let count: u64 = redis.get("app:cli:latch").expect("GET");
    assert_eq!(count, 3);
    for unmapped in ["cli:sem", "cli:exp", "cli:latch"] {
        assert!(!exists(&mut redis, unmapped), "{unmapped}");
    }

    // `force-unlock` deletes the Java hold under the prefix.
    assert_eq!(
        prefixed(&server, &["force-unlock", "cli:mapped"]),
        [json!({"released": true})]
    );
    assert!(!exists(&mut redis, "app:cli:mapped"));
}

#[test]
fn demo_workers_inherit_the_name_prefix() {
    let server = RedisServer::start();
    let demo =
        "--name-prefix app: demo --processes 2 --tasks 2 --locks 2 --iterations 10 --hold-ms 1";
    let args: Vec<&str> = demo.split(' ').collect();
    let totals = run_ok(Some(&server.url()), &args)
        .pop()
        .expect("a totals line");
    // The parent counts under the prefix: workers that ignored it would leave its counters at 0.
    assert_eq!(totals["mutual_exclusion"], true, "{totals}");
    assert_eq!(totals["acquisitions"], 2 * 2 * 10, "{totals}");
    let counters: Vec<Option<u64>> = raw_blocking(&server)
        .mget(&[
            "app:demo:lock:0:counter",
            "app:demo:lock:1:counter",
            "demo:lock:0:counter",
            "demo:lock:1:counter",
        ])
        .expect("MGET");
    assert_eq!(counters, [Some(20), Some(20), None, None]);
}
