//! The `rlock` binary on the objects of map, multimap and set entries: `entry-name`, and
//! `--entry CONTAINER:NAME --key KEY` in place of every command's NAME, against a private Redis.
//!
//! The expected names are Redisson's (docs/protocol.md §13): `{<map>}:<hash>:<suffix>`, where the
//! hash is `Hash.hash128toBase64` of the key as the codec encodes it, computed on the JVM by
//! Redisson's own code (Kryo 5.6.2's `Output` for `Kryo5Codec`).

mod support;

use redis::Commands;
use rlock_tests::RedisServer;
use rlock_tests::harness::raw_blocking;
use serde_json::{Value, json};
use support::{assert_fails_cleanly, assert_usage_error, run, run_ok};

/// A Java client's id, whose holds the tests write.
const JAVA_NODE: &str = "2f1bd1a0-6a51-4b77-9c3b-6c5f0e1c2a11";

/// The one JSON line of `rlock entry-name ARGS`, without a server.
fn entry_name(args: &[&str]) -> Value {
    let lines = run_ok(None, &[&["entry-name"], args].concat());
    assert_eq!(lines.len(), 1, "{lines:?}");
    lines[0].clone()
}

#[test]
fn entry_name_prints_javas_names_for_every_codec_and_key_type() {
    // (arguments, the key's hash as Redisson computed it on the JVM)
    let cases: &[(&[&str], &str)] = &[
        // StringCodec, LongCodec and IntegerCodec write `toString()`: "42" whatever the type.
        (&["42", "--codec", "string"], "RE0IojEvPTY8Dofe3IkBNA"),
        (
            &["42", "--codec", "long", "--key-type", "long"],
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            &["42", "--codec", "int", "--key-type", "int"],
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            &["-1", "--codec", "string", "--key-type", "long"],
            "Erwt0d03qvNX2RVaoeFZSw",
        ),
        (&["orders", "--codec", "string"], "fkpb4qUHoaX1lP+lHM7glg"),
        (
            &[
                "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed",
                "--codec",
                "string",
                "--key-type",
                "uuid",
            ],
            "Fe8f/lt+AUzaof9Hbl4xtw",
        ),
        // JsonJacksonCodec: a Long and a UUID carry their class.
        (&["orders", "--codec", "json"], "kJYNoec82SpeS6V2nPgVDQ"),
        (
            &["42", "--codec", "json", "--key-type", "int"],
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            &["42", "--codec", "json", "--key-type", "long"],
            "WwNbBTVB1zGkaLw39wufaA",
        ),
        (
            &[
                "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed",
                "--codec",
                "json",
                "--key-type",
                "uuid",
            ],
            "DloBjnAfWlk2eaMXBAYxGg",
        ),
        // TypedJsonJacksonCodec: plain JSON.
        (
            &["42", "--codec", "typed-json", "--key-type", "long"],
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            &[
                "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed",
                "--codec",
                "typed-json",
                "--key-type",
                "uuid",
            ],
            "mICbI9xNLjqZEwL26tC2iQ",
        ),
        // Kryo5Codec, the default: the class id, then the value.
        (&["42", "--key-type", "long"], "VQXPsX8R0Nuk4PCULzvfjg"),
        (&["42", "--key-type", "int"], "Y5MJ+mge9H+XMmohFCsrTg"),
        (&["orders"], "C0xoxP9hLjXvqHeh/EoBFA"),
        (&["héllo", "--codec", "kryo5"], "HQvB+8Qy7DfRFKzQpsKmrA"),
        (
            &["1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed", "--key-type", "uuid"],
            "VS9LcfZgC20suZo2gYj2zQ",
        ),
        // The bytes any codec wrote.
        (&["3432", "--key-type", "hex"], "RE0IojEvPTY8Dofe3IkBNA"),
    ];
    for (args, hash) in cases {
        for container in ["map", "multimap", "set"] {
            let name = entry_name(&[&[container, "orders"], *args].concat());
            assert_eq!(
                name,
                json!({"name": format!("{{orders}}:{hash}:lock")}),
                "{container} {args:?}"
            );
        }
    }
}

#[test]
fn entry_name_names_every_object_of_an_entry_under_the_prefix_as_java_maps_it() {
    let kinds = [
        ("lock", "lock"),
        ("fair", "fairlock"),
        ("rw", "rw_lock"),
        ("read", "rw_lock"),
        ("write", "rw_lock"),
        ("semaphore", "semaphore"),
        ("expirable-semaphore", "permitexpirablesemaphore"),
        ("latch", "countdownlatch"),
    ];
    for (kind, suffix) in kinds {
        let args = ["map", "orders", "42", "--codec", "string", "--kind", kind];
        assert_eq!(
            entry_name(&args),
            json!({"name": format!("{{orders}}:RE0IojEvPTY8Dofe3IkBNA:{suffix}")})
        );
        // A Java NameMapper prepending `app:` maps the map's name, then the object's.
        assert_eq!(
            entry_name(&[&["--name-prefix", "app:"][..], &args].concat()),
            json!({"name": format!("app:{{app:orders}}:RE0IojEvPTY8Dofe3IkBNA:{suffix}")})
        );
    }
    // A map name with a hash tag of its own is not wrapped again.
    assert_eq!(
        entry_name(&["set", "{shop}:orders", "42", "--codec", "string"]),
        json!({"name": "{shop}:orders:RE0IojEvPTY8Dofe3IkBNA:lock"})
    );
}

#[test]
fn the_redisson_config_files_codec_is_the_default() {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(
        file.path(),
        "singleServerConfig:\n  address: redis://127.0.0.1:1\ncodec: !<org.redisson.client.codec.StringCodec> {}\n",
    )
    .expect("write");
    let config = file.path().to_str().expect("utf-8 path");
    assert_eq!(
        entry_name(&["--redisson-config", config, "map", "orders", "42"]),
        json!({"name": "{orders}:RE0IojEvPTY8Dofe3IkBNA:lock"})
    );
    // --codec beats the file.
    assert_eq!(
        entry_name(&[
            "--redisson-config",
            config,
            "map",
            "orders",
            "42",
            "--codec",
            "kryo5",
            "--key-type",
            "long"
        ]),
        json!({"name": "{orders}:VQXPsX8R0Nuk4PCULzvfjg:lock"})
    );
}

#[test]
fn bad_keys_and_kinds_without_an_entry_form_are_refused() {
    assert_fails_cleanly(
        &run(
            None,
            &["entry-name", "map", "orders", "4x2", "--key-type", "long"],
        ),
        "a long that does not parse",
    );
    assert_fails_cleanly(
        &run(
            None,
            &["entry-name", "map", "orders", "zz", "--key-type", "hex"],
        ),
        "hex that does not parse",
    );
    assert_usage_error(
        &run(
            None,
            &["entry-name", "map", "orders", "1", "--kind", "spin"],
        ),
        "spin",
    );
    assert_usage_error(&run(None, &["entry-name", "list", "orders", "1"]), "a list");
    // Nothing is sent: the URL leads nowhere.
    let url = Some("redis://127.0.0.1:1");
    for kind in ["spin", "fenced", "nonreentrant", "nonreentrant-fair"] {
        let args = [
            "lock",
            "--entry",
            "map:orders",
            "--key",
            "1",
            "--hold-ms",
            "1",
            "--kind",
            kind,
        ];
        let output = run(url, &args);
        assert_fails_cleanly(&output, kind);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("no entry form"), "{kind}: {stderr}");
    }
    assert_usage_error(
        &run(
            url,
            &[
                "lock",
                "cli:x",
                "--entry",
                "map:orders",
                "--key",
                "1",
                "--hold-ms",
                "1",
            ],
        ),
        "NAME and --entry",
    );
    assert_usage_error(
        &run(url, &["lock", "--key", "1", "--hold-ms", "1"]),
        "--key alone",
    );
    assert_usage_error(
        &run(url, &["lock", "--entry", "map:orders", "--hold-ms", "1"]),
        "--entry without --key",
    );
    assert_usage_error(
        &run(
            url,
            &["lock", "--entry", "orders", "--key", "1", "--hold-ms", "1"],
        ),
        "--entry without a container",
    );
}

/// The entry `orders` → `42L` (default codec) of the map, and its lock's name.
const ENTRY: [&str; 6] = ["--entry", "map:orders", "--key", "42", "--key-type", "long"];
const LOCK: &str = "{orders}:VQXPsX8R0Nuk4PCULzvfjg:lock";

/// `command ENTRY rest`.
fn with_entry<'a>(command: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    [command, &ENTRY[..], rest].concat()
}

#[test]
fn commands_work_on_an_entrys_objects() {
    let server = RedisServer::start();
    let url = Some(server.url());
    let url = url.as_deref();
    let mut redis = raw_blocking(&server);

    // Java's orders.getLock(42L), held by a Java thread: inspect shows it, watch sees it.
    let _: () = redis
        .hset(LOCK, format!("{JAVA_NODE}:57"), 1)
        .expect("HSET");
    let _: () = redis.pexpire(LOCK, 30_000).expect("PEXPIRE");
    let report = run_ok(url, &with_entry(&["inspect"], &[]));
    assert_eq!(report[0]["name"], LOCK, "{report:?}");
    assert_eq!(
        report[0]["holders"],
        json!([{"node": JAVA_NODE, "owner": "57", "count": 1}])
    );
    let frames = run_ok(url, &with_entry(&["watch"], &["--count", "1", "--json"]));
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["name"], LOCK, "{frames:?}");

    // Force-unlocked, then taken and released by rlock under the same name.
    assert_eq!(
        run_ok(url, &with_entry(&["force-unlock"], &[])),
        [json!({"released": true})]
    );
    let exists: bool = redis.exists(LOCK).expect("EXISTS");
    assert!(!exists);
    let events = run_ok(
        url,
        &with_entry(&["lock"], &["--hold-ms", "10", "--kind", "fair"]),
    );
    let events: Vec<&Value> = events.iter().map(|e| &e["event"]).collect();
    assert_eq!(events, ["acquired", "released"]);
    let report = run_ok(
        url,
        &with_entry(&["check"], &["--tasks", "2", "--iterations", "5"]),
    );
    assert_eq!(report[0]["acquisitions"], 10, "{report:?}");
    let counter: u64 = redis.get(format!("{LOCK}:counter")).expect("GET");
    assert_eq!(counter, 10);

    // The entry's synchronizers: getSemaphore(42L), getPermitExpirableSemaphore, getCountDownLatch.
    let ok = [json!({"ok": true})];
    assert_eq!(
        run_ok(url, &with_entry(&["semaphore"], &["set-permits", "3"])),
        ok
    );
    let permits: String = redis
        .get("{orders}:VQXPsX8R0Nuk4PCULzvfjg:semaphore")
        .expect("GET");
    assert_eq!(permits, "3");
    let expirable = with_entry(&["expirable-semaphore"], &["set-permits", "2"]);
    assert_eq!(run_ok(url, &expirable), ok);
    let report = run_ok(
        url,
        &with_entry(&["inspect"], &["--kind", "expirable-semaphore"]),
    );
    assert_eq!(
        report[0]["name"],
        "{orders}:VQXPsX8R0Nuk4PCULzvfjg:permitexpirablesemaphore"
    );
    assert_eq!(report[0]["available"], 2, "{report:?}");
    assert_eq!(
        run_ok(url, &with_entry(&["latch"], &["set-count", "1"])),
        ok
    );
    let count: String = redis
        .get("{orders}:VQXPsX8R0Nuk4PCULzvfjg:countdownlatch")
        .expect("GET");
    assert_eq!(count, "1");
}
