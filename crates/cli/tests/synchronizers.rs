//! The `rlock` binary on Redisson's synchronizers (semaphore, permit-expirable semaphore, count-down
//! latch), against a private Redis.

mod support;

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use redis::Commands;
use rlock_tests::RedisServer;
use serde_json::{Value, json};
use support::{assert_fails_cleanly, assert_usage_error, json_lines, rlock, run, run_ok};

/// A running `rlock` process, whose JSON lines are read as they come.
struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Running {
    fn start(url: &str, args: &[&str]) -> Self {
        let mut child = rlock(Some(url), args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn rlock");
        let stdout = child.stdout.take().expect("piped stdout");
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next JSON line.
    fn next_line(&mut self) -> Value {
        let line = self.lines.next().expect("one more line").expect("stdout");
        serde_json::from_str(&line).expect("stdout line is not JSON")
    }

    /// Waits for the process to exit successfully; returns its remaining lines.
    fn finish(mut self) -> Vec<Value> {
        let rest = self.lines.by_ref().map(|line| {
            serde_json::from_str(&line.expect("stdout")).expect("stdout line is not JSON")
        });
        let rest = rest.collect();
        let status = self.child.wait().expect("wait for rlock");
        assert!(status.success(), "{status}");
        rest
    }
}

/// An event's `t`.
fn t(event: &Value) -> u64 {
    event["t"]
        .as_u64()
        .unwrap_or_else(|| panic!("no t in {event}"))
}

/// The most `acquired`–`released` intervals that were open at once. At equal times a release
/// comes first: it was stamped before it was sent, an acquisition once it was made.
fn most_holders_at_once(events: &[Value]) -> i32 {
    let mut changes: Vec<(u64, i32)> = events
        .iter()
        .map(|event| match event["event"].as_str() {
            Some("acquired") => (t(event), 1),
            Some("released") => (t(event), -1),
            _ => panic!("not a hold event: {event}"),
        })
        .collect();
    changes.sort_unstable();
    let open = changes.iter().scan(0, |open, (_, change)| {
        *open += change;
        Some(*open)
    });
    open.max().unwrap_or(0)
}

#[test]
fn a_semaphore_of_two_permits_never_has_three_holders() {
    let server = RedisServer::start();
    let url = server.url();
    let semaphore = |args: &[&str]| run_ok(Some(&url), &[&["semaphore", "cli:sem"], args].concat());

    assert_eq!(semaphore(&["set-permits", "2"]), [json!({"ok": true})]);
    assert_eq!(semaphore(&["set-permits", "5"]), [json!({"ok": false})]);
    assert_eq!(semaphore(&["available"]), [json!({"permits": 2})]);

    let args = ["semaphore", "cli:sem", "acquire", "--hold-ms", "300"];
    let holders: Vec<Child> = (0..3)
        .map(|_| {
            rlock(Some(&url), &args)
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn rlock semaphore acquire")
        })
        .collect();
    let mut events = Vec::new();
    for holder in holders {
        let output = holder.wait_with_output().expect("wait");
        assert!(output.status.success(), "{output:?}");
        let lines = json_lines(&output);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["event"], "acquired");
        assert_eq!(lines[1]["event"], "released");
        assert!(t(&lines[1]) >= t(&lines[0]) + 300, "{lines:?}");
        assert!(lines.iter().all(|event| event["permits"] == 1), "{lines:?}");
        events.extend(lines);
    }
    assert_eq!(most_holders_at_once(&events), 2, "{events:?}");
    assert_eq!(semaphore(&["available"]), [json!({"permits": 2})]);

    // Permits are not owned: two given back by hand while their taker holds them are two more
    // once it gives them back too.
    let mut held = Running::start(
        &url,
        &[
            "semaphore",
            "cli:sem",
            "acquire",
            "--permits",
            "2",
            "--hold-ms",
            "300",
        ],
    );
    assert_eq!(held.next_line()["permits"], 2);
    assert_eq!(semaphore(&["available"]), [json!({"permits": 0})]);
    assert_eq!(
        semaphore(&["release", "--permits", "2"]),
        [json!({"ok": true})]
    );
    let report = run_ok(Some(&url), &["inspect", "cli:sem", "--kind", "semaphore"]);
    assert_eq!(
        report,
        [json!({"name": "cli:sem", "exists": true, "pttl": -1, "available": 2})]
    );
    assert_eq!(held.finish()[0]["event"], "released");
    assert_eq!(semaphore(&["available"]), [json!({"permits": 4})]);
}

#[test]
fn an_expirable_permit_comes_back_after_its_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let inspect = || {
        let report = run_ok(
            Some(&url),
            &["inspect", "cli:exp", "--kind", "expirable-semaphore"],
        );
        report.into_iter().next().expect("a report")
    };
    let set = ["expirable-semaphore", "cli:exp", "set-permits", "1"];
    assert_eq!(run_ok(Some(&url), &set), [json!({"ok": true})]);
    assert_eq!(run_ok(Some(&url), &set), [json!({"ok": false})]);

    // A holder killed with its permit: the permit comes back when its lease runs out.
    let mut killed = Running::start(
        &url,
        &[
            "expirable-semaphore",
            "cli:exp",
            "acquire",
            "--lease-ms",
            "500",
            "--hold-ms",
            "60000",
        ],
    );
    let acquired = killed.next_line();
    assert_eq!(acquired["event"], "acquired", "{acquired}");
    let permit = acquired["permit"].as_str().expect("a permit id").to_owned();
    assert!(
        permit.len() == 32 && permit.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
        "{permit}"
    );
    let report = inspect();
    assert_eq!(report["exists"], true, "{report}");
    assert_eq!(report["available"], 0, "{report}");
    assert_eq!(report["acquired"], 1, "{report}");
    let permits = report["permits"].as_array().expect("permits");
    assert_eq!(permits.len(), 1, "{report}");
    assert_eq!(permits[0]["permit"], permit.as_str(), "{report}");
    let expiry = permits[0]["expiry_ms"].as_u64().expect("an expiry");
    assert!(
        (t(&acquired)..=t(&acquired) + 500).contains(&expiry),
        "{report} after {acquired}"
    );
    killed.child.kill().expect("kill -9 the holder");
    let _ = killed.child.wait();

    let next = run_ok(
        Some(&url),
        &[
            "expirable-semaphore",
            "cli:exp",
            "acquire",
            "--hold-ms",
            "10",
        ],
    );
    assert_eq!(next.len(), 2, "{next:?}");
    assert!(
        t(&next[0]) >= expiry,
        "acquired before the lease ran out: {next:?}"
    );
    assert!(t(&next[0]) < expiry + 2_000, "{next:?}");
    assert_ne!(next[0]["permit"], permit.as_str());
    assert_eq!(next[1]["event"], "released");
    assert_eq!(next[1]["permit"], next[0]["permit"]);
    assert_eq!(next[1]["expired"], false);

    // A hold longer than the lease: the release says the permit was gone.
    let outlived = run_ok(
        Some(&url),
        &[
            "expirable-semaphore",
            "cli:exp",
            "acquire",
            "--lease-ms",
            "100",
            "--hold-ms",
            "300",
        ],
    );
    assert_eq!(outlived[1]["event"], "released", "{outlived:?}");
    assert_eq!(outlived[1]["expired"], true, "{outlived:?}");

    // A permit without a lease never expires.
    let mut held = Running::start(
        &url,
        &[
            "expirable-semaphore",
            "cli:exp",
            "acquire",
            "--hold-ms",
            "300",
        ],
    );
    let acquired = held.next_line();
    let report = inspect();
    assert_eq!(
        report["permits"],
        json!([{"permit": acquired["permit"], "expiry_ms": null}]),
        "{report}"
    );
    let released = held.finish();
    assert_eq!(released[0]["expired"], false, "{released:?}");
    let report = inspect();
    assert_eq!(
        report,
        json!({"name": "cli:exp", "exists": true, "pttl": -1, "available": 1, "acquired": 0,
               "permits": []})
    );
}

#[test]
fn a_latch_opens_its_waiter_when_counted_down_to_zero() {
    let server = RedisServer::start();
    let url = server.url();
    let latch = |args: &[&str]| run_ok(Some(&url), &[&["latch", "cli:latch"], args].concat());
    let inspect = || run_ok(Some(&url), &["inspect", "cli:latch", "--kind", "latch"]);

    assert_eq!(latch(&["set-count", "2"]), [json!({"ok": true})]);
    assert_eq!(latch(&["set-count", "3"]), [json!({"ok": false})]);
    let mut waiter = Running::start(&url, &["latch", "cli:latch", "await"]);
    // The waiter is waiting once it has subscribed to the latch's channel.
    let mut redis = server.client().get_connection().expect("raw connection");
    let channel = "redisson_countdownlatch__channel__{cli:latch}";
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let subscribers: Vec<(String, u64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut redis)
            .expect("PUBSUB NUMSUB");
        if subscribers[0].1 > 0 {
            break;
        }
        assert!(Instant::now() < until, "the waiter never subscribed");
        std::thread::sleep(Duration::from_millis(20));
    }

    let counted = latch(&["count-down"]);
    assert_eq!(counted[0]["event"], "counted", "{counted:?}");
    assert_eq!(
        inspect(),
        [json!({"name": "cli:latch", "exists": true, "pttl": -1, "count": 1})]
    );
    let timeout = latch(&["await", "--timeout-ms", "100"]);
    assert_eq!(timeout[0]["event"], "timeout", "{timeout:?}");

    let counted = latch(&["count-down"]);
    let opened = waiter.next_line();
    assert_eq!(opened["event"], "opened", "{opened}");
    let after = t(&opened) - t(&counted[0]);
    assert!(after < 500, "opened {after} ms after the count-down");
    assert!(waiter.finish().is_empty());
    assert_eq!(
        inspect(),
        [json!({"name": "cli:latch", "exists": false, "pttl": -2, "count": 0})]
    );
    assert_eq!(
        latch(&["await", "--timeout-ms", "100"])[0]["event"],
        "opened"
    );
}

#[test]
fn inspect_keeps_the_lock_report_for_every_lock_kind() {
    let server = RedisServer::start();
    let url = server.url();
    let _: () = server
        .client()
        .get_connection()
        .expect("raw connection")
        .hset("cli:lock", "3b241101-e2bb-4255-8caf-4136c566a962:57", 1)
        .expect("HSET");
    let default = run_ok(Some(&url), &["inspect", "cli:lock"]);
    assert_eq!(default[0]["holders"][0]["owner"], "57", "{default:?}");
    for kind in [
        "lock",
        "fair",
        "spin",
        "fenced",
        "read",
        "write",
        "nonreentrant",
        "nonreentrant-fair",
    ] {
        let report = run_ok(Some(&url), &["inspect", "cli:lock", "--kind", kind]);
        assert_eq!(report, default, "{kind}");
    }
    let absent = run_ok(Some(&url), &["inspect", "cli:none", "--kind", "semaphore"]);
    assert_eq!(
        absent,
        [json!({"name": "cli:none", "exists": false, "pttl": -2, "available": 0})]
    );
}

#[test]
fn synchronizer_kinds_and_bad_input_fail_cleanly() {
    let server = RedisServer::start();
    let url = server.url();
    let _: () = server
        .client()
        .get_connection()
        .expect("raw connection")
        .hset("cli:hash", "field", 1)
        .expect("HSET");
    // Rejected by the argument parser: usage errors, exit 2.
    let usage: [&[&str]; 7] = [
        &["lock", "x", "--kind", "semaphore", "--hold-ms", "1"],
        &["force-unlock", "x", "--kind", "latch"],
        &[
            "check",
            "x",
            "--kind",
            "expirable-semaphore",
            "--tasks",
            "1",
            "--iterations",
            "1",
        ],
        &["inspect", "x", "--kind", "queue"],
        &["semaphore", "", "available"],
        &[
            "semaphore",
            "x",
            "acquire",
            "--permits",
            "0",
            "--hold-ms",
            "1",
        ],
        &["semaphore", "x", "set-permits", "-1"],
    ];
    for args in usage {
        assert_usage_error(&run(Some(&url), args), &format!("{args:?}"));
    }
    // Failures at run time, exit 1.
    let failures: [&[&str]; 3] = [
        &["inspect", "cli:hash", "--kind", "semaphore"],
        &[
            "expirable-semaphore",
            "x",
            "acquire",
            "--lease-ms",
            "0",
            "--hold-ms",
            "1",
        ],
        &["latch", "cli:hash", "count-down"],
    ];
    for args in failures {
        assert_fails_cleanly(&run(Some(&url), args), &format!("{args:?}"));
    }
}
