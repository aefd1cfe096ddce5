//! `--kind`: the `rlock` binary on every lock kind of Redisson's family, against a private Redis.

mod support;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use redis::Commands;
use rlock_tests::RedisServer;
use rlock_tests::harness::raw_blocking;
use serde_json::{Value, json};
use support::{assert_fails_cleanly, json_lines, rlock, run, run_ok};

#[test]
fn check_holds_exclusion_for_every_exclusive_kind() {
    let server = RedisServer::start();
    let url = server.url();
    for kind in [
        "lock",
        "fair",
        "spin",
        "fenced",
        "write",
        "nonreentrant",
        "nonreentrant-fair",
    ] {
        let name = format!("cli:check:{kind}");
        let args = [
            "check",
            &name,
            "--kind",
            kind,
            "--tasks",
            "4",
            "--iterations",
            "15",
        ];
        let children: Vec<Child> = (0..2)
            .map(|_| {
                rlock(Some(&url), &args)
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("spawn rlock check")
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().expect("wait");
            assert!(output.status.success(), "{kind}: {output:?}");
            assert_eq!(json_lines(&output)[0]["acquisitions"], 4 * 15, "{kind}");
        }
        let counter: u64 = raw_blocking(&server)
            .get(format!("{name}:counter"))
            .expect("GET");
        assert_eq!(counter, 2 * 4 * 15, "{kind}: every increment kept");
    }
    let refused = run(
        Some(&url),
        &[
            "check",
            "cli:r",
            "--kind",
            "read",
            "--tasks",
            "1",
            "--iterations",
            "1",
        ],
    );
    assert_fails_cleanly(&refused, "check --kind read");
}

#[test]
fn lock_reports_a_fencing_token_and_every_kind_acquires_and_releases() {
    let server = RedisServer::start();
    let url = server.url();
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let events = run_ok(
            Some(&url),
            &["lock", "cli:fenced", "--kind", "fenced", "--hold-ms", "10"],
        );
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0]["event"], "acquired");
        tokens.push(events[0]["token"].as_u64().expect("a token on acquired"));
        assert_eq!(events[1]["event"], "released");
        assert!(events[1].get("token").is_none(), "{events:?}");
    }
    assert!(tokens[0] < tokens[1], "{tokens:?}");
    for kind in [
        "lock",
        "fair",
        "spin",
        "read",
        "write",
        "nonreentrant",
        "nonreentrant-fair",
    ] {
        let name = format!("cli:lock:{kind}");
        let events = run_ok(
            Some(&url),
            &[
                "lock",
                &name,
                "--kind",
                kind,
                "--hold-ms",
                "10",
                "--lease-ms",
                "5000",
            ],
        );
        let names: Vec<&Value> = events.iter().map(|e| &e["event"]).collect();
        assert_eq!(names, ["acquired", "released"], "{kind}");
        assert!(events[0].get("token").is_none(), "{kind}");
        let exists: bool = raw_blocking(&server).exists(&name).expect("EXISTS");
        assert!(!exists, "{kind} released");
    }
}

/// Polls `rlock inspect NAME` until `ready` holds for its report.
fn inspect_until(url: &str, name: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let report = run_ok(Some(url), &["inspect", name]).remove(0);
        if ready(&report) || Instant::now() > until {
            return report;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn inspect_shows_the_fair_queue_the_read_write_mode_and_the_token() {
    let server = RedisServer::start();
    let url = server.url();

    // A fair lock held by one process with another queued behind it.
    let holder = rlock(
        Some(&url),
        &["lock", "cli:fair", "--kind", "fair", "--hold-ms", "3000"],
    )
    .stdout(Stdio::null())
    .spawn()
    .expect("spawn holder");
    let _ = inspect_until(&url, "cli:fair", |r| r["exists"] == true);
    let waiter = rlock(
        Some(&url),
        &["lock", "cli:fair", "--kind", "fair", "--hold-ms", "10"],
    )
    .stdout(Stdio::null())
    .spawn()
    .expect("spawn waiter");
    let report = inspect_until(&url, "cli:fair", |r| r.get("queue").is_some());
    let queue = report["queue"].as_array().expect("a queue");
    assert_eq!(queue.len(), 1, "{report}");
    assert!(
        queue[0]["deadline_ms"].as_i64().is_some_and(|d| d > 0),
        "{report}"
    );
    assert_eq!(
        report["holders"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    for mut child in [holder, waiter] {
        assert!(child.wait().expect("wait").success());
    }

    // A read lock: mode and readers.
    let reader = rlock(
        Some(&url),
        &["lock", "cli:rw", "--kind", "read", "--hold-ms", "2000"],
    )
    .stdout(Stdio::null())
    .spawn()
    .expect("spawn reader");
    // Ready once a reader shows: inspect reads the key, the mode and the readers in separate
    // round trips, so a report taken while the reader acquires can show the mode alone.
    let report = inspect_until(&url, "cli:rw", |r| {
        r["readers"]
            .as_array()
            .is_some_and(|readers| !readers.is_empty())
    });
    assert_eq!(report["mode"], "read", "{report}");
    assert_eq!(report["readers"], report["holders"], "{report}");
    assert_eq!(
        report["readers"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    let refused = run_ok(Some(&url), &["force-unlock", "cli:rw", "--kind", "write"]);
    assert_eq!(
        refused,
        [json!({"released": false})],
        "a read lock is not a write lock"
    );
    let forced = run_ok(Some(&url), &["force-unlock", "cli:rw", "--kind", "read"]);
    assert_eq!(forced, [json!({"released": true})]);
    let _ = reader.wait_with_output().expect("wait");

    // A fenced lock's token, once one was handed out.
    let _ = run_ok(
        Some(&url),
        &["lock", "cli:fenced", "--kind", "fenced", "--hold-ms", "1"],
    );
    let report = run_ok(Some(&url), &["inspect", "cli:fenced"]).remove(0);
    assert_eq!(report["token"], 1, "{report}");
    assert_eq!(report["exists"], false);
}

/// The non-reentrant kinds on the command line: spelled `nonreentrant` and `nonreentrant-fair` (the
/// hyphenated spellings are aliases), held by one process, seen by `inspect` and `watch` as the lock
/// and the fair lock they share a layout with, and force-unlocked by another.
#[test]
fn the_non_reentrant_kinds_are_held_inspected_and_force_unlocked() {
    let server = RedisServer::start();
    let url = server.url();
    for (kind, alias, shown) in [
        ("nonreentrant", "non-reentrant", "lock"),
        ("nonreentrant-fair", "non-reentrant-fair", "fair"),
    ] {
        let name = format!("cli:nr:{kind}");
        let holder = rlock(
            Some(&url),
            &["lock", &name, "--kind", kind, "--hold-ms", "20000"],
        )
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn holder");
        let report = inspect_until(&url, &name, |r| r["exists"] == true);
        assert_eq!(report["holders"][0]["count"], 1, "{kind}: {report}");
        // A waiter of the same kind queues behind the holder (the fair one in Redis's queue).
        let waiter = rlock(
            Some(&url),
            &["lock", &name, "--kind", alias, "--hold-ms", "1"],
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn waiter");
        if shown == "fair" {
            let queued = inspect_until(&url, &name, |r| r.get("queue").is_some());
            assert_eq!(
                queued["queue"].as_array().map(Vec::len),
                Some(1),
                "{queued}"
            );
        }
        let watched = run_ok(Some(&url), &["watch", &name, "--count", "1", "--json"]);
        assert_eq!(watched[0]["kind"], shown, "{kind}: {watched:?}");
        let forced = run_ok(Some(&url), &["force-unlock", &name, "--kind", kind]);
        assert_eq!(forced, [json!({"released": true})], "{kind}");
        let output = waiter.wait_with_output().expect("wait");
        assert!(output.status.success(), "{kind}: {output:?}");
        let events = json_lines(&output);
        assert_eq!(
            events[0]["event"], "acquired",
            "{kind}: the waiter was woken"
        );
        let mut holder = holder;
        let _ = holder.kill();
        let _ = holder.wait();
    }
}
