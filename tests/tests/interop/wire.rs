//! The commands each side's scripts run, as `MONITOR` shows them: for every lock operation, rlock
//! and the Redisson emulator (3.31 and HEAD) execute exactly the Redis commands that PROTOCOL.md's
//! numbered steps list (§2.2, §2.3, §2.5), with the same arguments: the expected traces below are
//! literals, not computed by either side.

use std::time::Duration;

use futures::StreamExt;
use rlock_tests::RedisServer;
use rlock_tests::redisson::RedissonVersion;
use tokio::sync::mpsc;

use crate::support::{Party, Redis, Side, Unlocked};

const NAME: &str = "interop:wire";
const CHANNEL: &str = "redisson_lock__channel:{interop:wire}";
const LATCH: &str = "redisson_unlock_latch:{interop:wire}:<id>";
const FIELD: &str = "<node>:1";

/// What the scripts of `side` run in each phase (`<node>`: the client id, `<id>`: a fresh 32-hex
/// request id, `<ttl>`: the latch TTL).
fn expected(side: Side) -> Vec<(String, Vec<String>)> {
    let cmd = |parts: &[&str]| parts.join(" ");
    let mut force_unlock = vec![cmd(&["del", NAME]), cmd(&["publish", CHANNEL, "0"])];
    if side == Side::Rlock {
        // rlock refuses to delete a key that is not a lock hash (a known difference).
        force_unlock.insert(0, cmd(&["type", NAME]));
    }
    vec![
        (
            "acquire",
            vec![
                cmd(&["exists", NAME]),
                cmd(&["hincrby", NAME, FIELD, "1"]),
                cmd(&["pexpire", NAME, "30000"]),
            ],
        ),
        (
            "re-enter",
            vec![
                cmd(&["exists", NAME]),
                cmd(&["hexists", NAME, FIELD]),
                cmd(&["hincrby", NAME, FIELD, "1"]),
                cmd(&["pexpire", NAME, "30000"]),
            ],
        ),
        (
            "partial unlock",
            vec![
                cmd(&["get", LATCH]),
                cmd(&["hexists", NAME, FIELD]),
                cmd(&["hincrby", NAME, FIELD, "-1"]),
                cmd(&["pexpire", NAME, "30000"]),
                cmd(&["set", LATCH, "0", "px", "<ttl>"]),
            ],
        ),
        (
            "full unlock",
            vec![
                cmd(&["get", LATCH]),
                cmd(&["hexists", NAME, FIELD]),
                cmd(&["hincrby", NAME, FIELD, "-1"]),
                cmd(&["del", NAME]),
                cmd(&["publish", CHANNEL, "0"]),
                cmd(&["set", LATCH, "1", "px", "<ttl>"]),
            ],
        ),
        (
            "contended try",
            vec![
                cmd(&["exists", NAME]),
                cmd(&["hexists", NAME, FIELD]),
                cmd(&["pttl", NAME]),
            ],
        ),
        (
            "unlock by a non-owner",
            vec![cmd(&["get", LATCH]), cmd(&["hexists", NAME, FIELD])],
        ),
        ("force unlock", force_unlock),
    ]
    .into_iter()
    .map(|(phase, commands)| (phase.to_owned(), commands))
    .collect()
}

/// Marks the start of `phase` in the MONITOR stream.
async fn mark(redis: &mut Redis, phase: &str) {
    let _: String = redis::cmd("ECHO")
        .arg(format!("interop-phase:{phase}"))
        .query_async(&mut redis.conn)
        .await
        .expect("ECHO");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_run_the_same_commands() {
    let server = RedisServer::start();
    let parties = [
        (
            Party::java(&server, RedissonVersion::V3_31, None).await,
            13_500..=13_500,
        ),
        (
            Party::java(&server, RedissonVersion::V4, None).await,
            16_000..=20_000,
        ),
        (Party::connect(Side::Rlock, &server).await, 20_000..=20_000),
    ];
    for (party, latch_ttls) in parties {
        let (trace, ttls) = trace(&server, &party).await;
        let label = match &party {
            Party::Java(java) => format!("java {:?}", java.version()),
            Party::Rlock(_) => "rlock".to_owned(),
        };
        assert_eq!(trace, expected(party.side()), "{label}");
        assert_eq!(ttls.len(), 2, "{label}");
        assert!(
            ttls.iter().all(|ttl| latch_ttls.contains(ttl)),
            "{label}: {ttls:?}"
        );
    }
}

/// Runs every phase with `party` and returns what its scripts ran (normalized) and the latch TTLs.
async fn trace(server: &RedisServer, party: &Party) -> (Vec<(String, Vec<String>)>, Vec<u64>) {
    let mut redis = Redis::connect(server).await;
    let monitor = server.client().get_async_monitor().await.expect("MONITOR");
    let (lines, mut received) = mpsc::unbounded_channel();
    let forward = tokio::spawn(async move {
        let mut stream = monitor.into_on_message::<String>();
        while let Some(line) = stream.next().await {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let lock = party.lock(NAME);
    mark(&mut redis, "acquire").await;
    let outer = lock.lock(1).await;
    mark(&mut redis, "re-enter").await;
    let inner = lock.lock(1).await;
    mark(&mut redis, "partial unlock").await;
    inner.release().await;
    mark(&mut redis, "full unlock").await;
    outer.release().await;
    redis.hold_foreign(NAME, 30_000).await;
    mark(&mut redis, "contended try").await;
    assert!(lock.try_lock(1, Duration::ZERO, None).await.is_none());
    mark(&mut redis, "unlock by a non-owner").await;
    assert_eq!(lock.unlock_as(1).await, Unlocked::NotOwner);
    mark(&mut redis, "force unlock").await;
    assert!(lock.force_unlock().await);
    mark(&mut redis, "end").await;

    let node = party.field(1).replace(":1", "");
    let mut phases: Vec<(String, Vec<String>)> = Vec::new();
    let mut ttls = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(5), received.recv())
            .await
            .expect("MONITOR shows the end mark")
            .expect("MONITOR stream");
        let args = monitor_args(&line);
        if let [echo, phase] = args.as_slice()
            && echo.eq_ignore_ascii_case("echo")
            && let Some(phase) = phase.strip_prefix("interop-phase:")
        {
            if phase == "end" {
                break;
            }
            phases.push((phase.to_owned(), Vec::new()));
        } else if line.contains(" lua] ")
            && let Some((_, commands)) = phases.last_mut()
        {
            commands.push(normalize(args, &node, &mut ttls));
        }
    }
    forward.abort();
    (phases, ttls)
}

/// One command as `command arg…`, lower-case command, with the client id, latch ids and latch TTLs
/// replaced by placeholders (the TTLs are collected).
fn normalize(args: Vec<String>, node: &str, ttls: &mut Vec<u64>) -> String {
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    for (i, arg) in args.into_iter().enumerate() {
        let arg = if i == 0 {
            arg.to_lowercase()
        } else if let Some(latch) = arg.strip_prefix("redisson_unlock_latch:") {
            let (prefix, id) = latch.rsplit_once(':').expect("latch key with an id");
            assert_eq!(id.len(), 32, "request id {id:?}");
            format!("redisson_unlock_latch:{prefix}:<id>")
        } else if out.first().is_some_and(|c| c == "set") && i == 4 {
            ttls.push(arg.parse().expect("latch TTL"));
            "<ttl>".to_owned()
        } else {
            arg.replace(node, "<node>")
        };
        out.push(arg);
    }
    if out.first().is_some_and(|c| c == "set") && out.len() == 5 {
        out[3] = out[3].to_lowercase();
    }
    out.join(" ")
}

/// The quoted arguments of a MONITOR line: `<time> [<db> <client>] "arg" "arg" …`.
fn monitor_args(line: &str) -> Vec<String> {
    let Some((_, rest)) = line.split_once("] ") else {
        return Vec::new();
    };
    let mut args = Vec::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut arg = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => arg.extend(chars.next()),
                c => arg.push(c),
            }
        }
        args.push(arg);
    }
    args
}
