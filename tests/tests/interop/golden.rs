//! Golden traces of the lock family: for each script, the literal Redis commands that PROTOCOL.md's
//! numbered steps imply for a given state (written from the document, not from either side's code),
//! checked with `MONITOR` against what the script really ran. A trace is the commands of each script
//! invocation of a phase, in order (`<node>`: the client id, `<id>`: a request id, `<ttl>`: the latch
//! TTL, `<deadline>`: a fair-lock deadline, `<wait>`: minus the queue wait).

use std::time::Duration;

use futures::StreamExt;
use rlock::Owner;
use rlock_tests::RedisServer;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::support::Redis;

/// The scripts a phase ran: each invocation's commands, normalized.
pub(crate) type Scripts = Vec<Vec<String>>;

/// Records the commands scripts run, phase by phase, through `MONITOR`.
pub(crate) struct Tracer {
    redis: Redis,
    lines: mpsc::UnboundedReceiver<String>,
    forward: JoinHandle<()>,
}

impl Tracer {
    pub(crate) async fn start(server: &RedisServer) -> Self {
        let redis = Redis::connect(server).await;
        let monitor = server.client().get_async_monitor().await.expect("MONITOR");
        let (sender, lines) = mpsc::unbounded_channel();
        let forward = tokio::spawn(async move {
            let mut stream = monitor.into_on_message::<String>();
            while let Some(line) = stream.next().await {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            redis,
            lines,
            forward,
        }
    }

    /// Marks the start of `phase` in the stream.
    pub(crate) async fn mark(&mut self, phase: &str) {
        let _: String = redis::cmd("ECHO")
            .arg(format!("trace-phase:{phase}"))
            .query_async(&mut self.redis.conn)
            .await
            .expect("ECHO");
    }

    /// Ends the trace: every phase with the scripts it ran (invocations that ran no command, such as
    /// a `NOSCRIPT` before the script was loaded, are left out), and the latch TTLs seen.
    pub(crate) async fn finish(mut self, node: &str) -> (Vec<(String, Scripts)>, Vec<u64>) {
        self.mark("end").await;
        let mut phases: Vec<(String, Scripts)> = Vec::new();
        let mut ttls = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(5), self.lines.recv())
                .await
                .expect("MONITOR shows the end mark")
                .expect("MONITOR stream");
            let args = monitor_args(&line);
            if let [echo, phase] = args.as_slice()
                && echo.eq_ignore_ascii_case("echo")
                && let Some(phase) = phase.strip_prefix("trace-phase:")
            {
                if phase == "end" {
                    break;
                }
                phases.push((phase.to_owned(), Vec::new()));
            } else if let Some((_, scripts)) = phases.last_mut() {
                let command = args.first().map(|c| c.to_lowercase()).unwrap_or_default();
                if line.contains(" lua] ") {
                    if let Some(script) = scripts.last_mut() {
                        script.push(normalize(args, node, &mut ttls));
                    }
                } else if command == "evalsha" || command == "eval" {
                    scripts.push(Vec::new());
                }
            }
        }
        self.forward.abort();
        for (_, scripts) in &mut phases {
            scripts.retain(|script| !script.is_empty());
        }
        (phases, ttls)
    }
}

/// One command as `command arg…`, lower-case command, with the client id, latch ids, latch TTLs and
/// fair-lock deadlines replaced by placeholders (the TTLs are collected).
pub(crate) fn normalize(args: Vec<String>, node: &str, ttls: &mut Vec<u64>) -> String {
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    for (i, arg) in args.into_iter().enumerate() {
        let command = out.first().map(String::as_str);
        let arg = if i == 0 {
            arg.to_lowercase()
        } else if let Some(latch) = arg.strip_prefix("redisson_unlock_latch:") {
            let (prefix, id) = latch.rsplit_once(':').expect("latch key with an id");
            assert_eq!(id.len(), 32, "request id {id:?}");
            format!("redisson_unlock_latch:{prefix}:<id>")
        } else if command == Some("set") && i == 4 {
            ttls.push(arg.parse().expect("latch TTL"));
            "<ttl>".to_owned()
        } else if command == Some("zadd") && i == 2 {
            "<deadline>".to_owned()
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
pub(crate) fn monitor_args(line: &str) -> Vec<String> {
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

fn commands(parts: &[&[&str]]) -> Vec<String> {
    parts.iter().map(|command| command.join(" ")).collect()
}

const FAIR: &str = "golden:fair";
const QUEUE: &str = "redisson_lock_queue:{golden:fair}";
const TIMEOUTS: &str = "redisson_lock_timeout:{golden:fair}";
const FAIR_LATCH: &str = "redisson_unlock_latch:{golden:fair}:<id>";

/// The fair lock's scripts (PROTOCOL.md §6.3–§6.8) as rlock runs them. rlock's acquire is one script
/// for both forms (§6.4, §6.5): the same commands, in the same order. `field` is `<node>:<owner>`.
fn fair_expected(field: &str) -> Vec<(String, Scripts)> {
    let purge: &[&str] = &["lindex", QUEUE, "0"];
    let phases: Vec<(&str, Vec<Vec<String>>)> = vec![
        (
            // §6.4 step 2: free, nobody queued.
            "acquire",
            vec![commands(&[
                purge,
                &["exists", FAIR],
                &["exists", QUEUE],
                &["lpop", QUEUE],
                &["zrem", TIMEOUTS, field],
                &["zrange", TIMEOUTS, "0", "-1"],
                &["hset", FAIR, field, "1"],
                &["pexpire", FAIR, "30000"],
            ])],
        ),
        (
            // §6.4 step 3.
            "re-enter",
            vec![commands(&[
                purge,
                &["exists", FAIR],
                &["hexists", FAIR, field],
                &["hincrby", FAIR, field, "1"],
                &["pexpire", FAIR, "30000"],
            ])],
        ),
        (
            // §6.7 step 5.
            "partial unlock",
            vec![commands(&[
                &["get", FAIR_LATCH],
                purge,
                &["exists", FAIR],
                &["hexists", FAIR, field],
                &["hincrby", FAIR, field, "-1"],
                &["pexpire", FAIR, "30000"],
                &["set", FAIR_LATCH, "0", "px", "<ttl>"],
            ])],
        ),
        (
            // §6.7 step 6, nobody queued: no publish.
            "full unlock",
            vec![commands(&[
                &["get", FAIR_LATCH],
                purge,
                &["exists", FAIR],
                &["hexists", FAIR, field],
                &["hincrby", FAIR, field, "-1"],
                &["del", FAIR],
                &["set", FAIR_LATCH, "1", "px", "<ttl>"],
                &["lindex", QUEUE, "0"],
            ])],
        ),
        (
            // §6.5: held by another, the non-waiting form answers 1 without queueing.
            "try while held",
            vec![commands(&[
                purge,
                &["exists", FAIR],
                &["hexists", FAIR, field],
            ])],
        ),
        (
            // §6.4 step 5 then §6.6 (plus rlock's wake of a free lock's head: the lock is held).
            "queue and give up",
            vec![
                commands(&[
                    purge,
                    &["exists", FAIR],
                    &["hexists", FAIR, field],
                    &["zscore", TIMEOUTS, field],
                    &["lindex", QUEUE, "-1"],
                    &["pttl", FAIR],
                    &["zadd", TIMEOUTS, "<deadline>", field],
                    &["rpush", QUEUE, field],
                ]),
                commands(&[
                    &["lrange", QUEUE, "0", "-1"],
                    &["zrem", TIMEOUTS, field],
                    &["lrem", QUEUE, "0", field],
                    &["exists", FAIR],
                ]),
            ],
        ),
        (
            // §6.8, nobody queued.
            "force unlock",
            vec![commands(&[purge, &["del", FAIR], &["lindex", QUEUE, "0"]])],
        ),
    ];
    phases
        .into_iter()
        .map(|(phase, scripts)| (phase.to_owned(), scripts))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rlock_fair_lock_scripts_follow_the_protocol() {
    let server = RedisServer::start();
    let client = rlock_tests::harness::client(&server).await;
    let node = client.node_id().to_owned();
    let mut redis = Redis::connect(&server).await;
    let owner = Owner::from_id(1);
    let lock = client.fair_lock(FAIR).with_owner(owner);
    let mut tracer = Tracer::start(&server).await;
    tracer.mark("acquire").await;
    let outer = lock.lock().await.expect("lock");
    tracer.mark("re-enter").await;
    let inner = lock.lock().await.expect("re-enter");
    tracer.mark("partial unlock").await;
    inner.unlock().await.expect("unlock");
    tracer.mark("full unlock").await;
    outer.unlock().await.expect("unlock");
    redis.hold_foreign(FAIR, 30_000).await;
    tracer.mark("try while held").await;
    assert!(lock.try_lock().await.expect("try").is_none());
    tracer.mark("queue and give up").await;
    // Dropped while it waits: its first script queues it, its give-up takes it out.
    let waiting = tokio::time::timeout(Duration::from_millis(300), lock.lock()).await;
    assert!(waiting.is_err());
    client.close().await;
    tracer.mark("force unlock").await;
    assert!(lock.force_unlock().await.expect("force"));
    let (trace, ttls) = tracer.finish(&node).await;
    let mut trace = trace;
    // Only the first (queueing) and last (give-up) scripts of the waiting phase are the protocol's
    // literal steps; the retries between them depend on timing.
    for (phase, scripts) in &mut trace {
        if phase == "queue and give up" && scripts.len() > 2 {
            let last = scripts.pop().expect("give-up");
            scripts.truncate(1);
            scripts.push(last);
        }
    }
    assert_eq!(trace, fair_expected("<node>:1"));
    assert!(
        ttls.iter().all(|ttl| (1..=60_000).contains(ttl)),
        "{ttls:?}"
    );
}
