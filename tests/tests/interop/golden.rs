//! Golden traces of the lock family: for each script, the literal Redis commands that
//! docs/protocol.md's numbered steps imply for a given state (written from the document, not from
//! either side's code), checked with `MONITOR` against what rlock and the Redisson emulator (3.31
//! and HEAD) really ran. Where rlock deliberately differs (README), the difference is spelled out
//! for its side.
//!
//! A trace is, phase by phase, the invocations of that phase in order: the commands of a script,
//! or a command sent outside any script on one of the lock's keys (the spin lock's `forceUnlock` is
//! a plain `DEL` in the emulator, `getToken` a plain `GET`). Placeholders: `<node>` the client id,
//! `<id>` a request id, `<ttl>` the latch TTL, `<deadline>` a fair-lock deadline (or a permit's
//! expiry); a test masks the few values that depend on the clock (a PTTL plus a lease) with a
//! placeholder of its own, and may name raw values ([`Tracer::alias`]). A tracer may also record how
//! each script was called ([`Tracer::with_script_calls`]).
//!
//! `wire` holds the `RLock`'s trace; the other kinds' are here; `golden_synchronizers` has the
//! synchronizers'.

use std::ops::RangeInclusive;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use redis::AsyncCommands;
use rlock_tests::RedisServer;
use rlock_tests::redisson::{RedissonVersion, lock_channel, prefix_name};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::support::{
    Acquired, Acquisition, Hold, InteropKind, Party, PartyLock, Redis, Side, Unlocked, woken,
};
use crate::wire::lock_expected;

/// The invocations of one phase, normalized.
pub(crate) type Scripts = Vec<Vec<String>>;

/// Every phase with its invocations, in order.
pub(crate) type Trace = Vec<(String, Scripts)>;

/// A [`Trace`] with the time each invocation ran at (the server's clock, in seconds).
pub(crate) type TimedTrace = Vec<(String, Vec<(f64, Vec<String>)>)>;

/// Records, through `MONITOR`, the commands scripts run and the commands sent outside scripts on
/// the keys it traces, phase by phase. Its own connection ([`Tracer::redis`]) marks the phases and
/// pokes the server between them; its commands are left out.
pub(crate) struct Tracer {
    redis: Redis,
    /// The address of `redis` as `MONITOR` shows it.
    own_address: String,
    keys: Vec<String>,
    /// Whether each script's invocation starts with its call ([`Tracer::with_script_calls`]).
    script_calls: bool,
    /// Raw arguments (as [`monitor_args`] reads them) and the placeholders that name them.
    aliases: Vec<(String, String)>,
    lines: mpsc::UnboundedReceiver<String>,
    forward: JoinHandle<()>,
}

impl Tracer {
    /// Starts tracing; commands outside scripts count when their first argument is one of `keys`.
    pub(crate) async fn start(server: &RedisServer, keys: &[&str]) -> Self {
        let mut redis = Redis::connect(server).await;
        let info: String = redis::cmd("CLIENT")
            .arg("INFO")
            .query_async(&mut redis.conn)
            .await
            .expect("CLIENT INFO");
        let own_address = info
            .split_whitespace()
            .find_map(|field| field.strip_prefix("addr="))
            .expect("CLIENT INFO has addr=")
            .to_owned();
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
            own_address,
            keys: keys.iter().map(|&key| key.to_owned()).collect(),
            script_calls: false,
            aliases: Vec::new(),
            lines,
            forward,
        }
    }

    /// Makes every script invocation start with the line `call [<key>…] [<arg>…]`: the keys and
    /// arguments of its `EVAL` or `EVALSHA`.
    pub(crate) fn with_script_calls(mut self) -> Self {
        self.script_calls = true;
        self
    }

    /// Shows the argument `raw` (e.g. a binary permit id) as `placeholder` in the trace.
    pub(crate) fn alias(&mut self, raw: &[u8], placeholder: &str) {
        let raw = String::from_utf8_lossy(raw).into_owned();
        self.aliases.push((raw, placeholder.to_owned()));
    }

    /// `arg`, or the placeholder it was given an alias for.
    fn aliased(&self, arg: String) -> String {
        let alias = self.aliases.iter().find(|(raw, _)| *raw == arg);
        alias.map_or(arg, |(_, placeholder)| placeholder.clone())
    }

    /// The tracer's own connection, for poking the server between phases (left out of the trace).
    pub(crate) fn redis(&mut self) -> &mut Redis {
        &mut self.redis
    }

    /// Marks the start of `phase` in the stream.
    pub(crate) async fn mark(&mut self, phase: &str) {
        let _: String = redis::cmd("ECHO")
            .arg(format!("trace-phase:{phase}"))
            .query_async(&mut self.redis.conn)
            .await
            .expect("ECHO");
    }

    /// Ends the trace: every phase with its invocations (script runs that ran no command, such as
    /// a `NOSCRIPT` before the script was loaded, are left out), and the latch TTLs seen.
    pub(crate) async fn finish(self, node: &str) -> (Trace, Vec<u64>) {
        let (timed, ttls) = self.finish_timed(node).await;
        let untimed = |invocations: Vec<(f64, Vec<String>)>| {
            invocations
                .into_iter()
                .map(|(_, commands)| commands)
                .collect()
        };
        let trace = timed
            .into_iter()
            .map(|(phase, invocations)| (phase, untimed(invocations)))
            .collect();
        (trace, ttls)
    }

    /// [`Tracer::finish`], with the time each invocation ran at.
    pub(crate) async fn finish_timed(mut self, node: &str) -> (TimedTrace, Vec<u64>) {
        self.mark("end").await;
        let mut phases: TimedTrace = Vec::new();
        let mut ttls = Vec::new();
        // The call of the script invocation whose commands come next, until its first one.
        let mut script_call = None;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(5), self.lines.recv())
                .await
                .expect("MONITOR shows the end mark")
                .expect("MONITOR stream");
            let args: Vec<String> = monitor_args(&line)
                .into_iter()
                .map(|arg| self.aliased(arg))
                .collect();
            if let [echo, phase] = args.as_slice()
                && echo.eq_ignore_ascii_case("echo")
                && let Some(phase) = phase.strip_prefix("trace-phase:")
            {
                if phase == "end" {
                    break;
                }
                phases.push((phase.to_owned(), Vec::new()));
                continue;
            }
            let Some((_, scripts)) = phases.last_mut() else {
                continue;
            };
            let command = args.first().map(|c| c.to_lowercase()).unwrap_or_default();
            let client = monitor_client(&line);
            if client == Some("lua") {
                if let Some((_, script)) = scripts.last_mut() {
                    script.extend(script_call.take());
                    script.push(normalize(args, node, &mut ttls));
                }
            } else if command == "evalsha" || command == "eval" {
                scripts.push((monitor_time(&line), Vec::new()));
                if self.script_calls {
                    script_call = Some(call_line(&args, node));
                }
            } else if client != Some(self.own_address.as_str())
                && args.get(1).is_some_and(|key| self.keys.contains(key))
            {
                let invocation = vec![normalize(args, node, &mut ttls)];
                scripts.push((monitor_time(&line), invocation));
            }
        }
        self.forward.abort();
        for (_, scripts) in &mut phases {
            scripts.retain(|(_, script)| !script.is_empty());
        }
        (phases, ttls)
    }
}

/// When the server ran the command of a `MONITOR` line (`<seconds>.<micros> [...] ...`), in
/// seconds.
fn monitor_time(line: &str) -> f64 {
    let time = line.split_whitespace().next().and_then(|t| t.parse().ok());
    time.expect("a MONITOR line starts with its time")
}

/// An `EVAL`/`EVALSHA` (`<command> <script> <numkeys> <key>… <arg>…`) as the line
/// `call [<key>…] [<arg>…]`.
fn call_line(args: &[String], node: &str) -> String {
    let count: usize = args.get(2).and_then(|n| n.parse().ok()).expect("numkeys");
    let words = |words: &[String]| words.join(" ").replace(node, "<node>");
    let (keys, args) = args[3..].split_at(count);
    format!("call [{}] [{}]", words(keys), words(args))
}

/// The score of a permit that never expires (§8.6): kept, not masked as a deadline.
const NON_EXPIRING_SCORE: &str = "922337203685477";

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
        } else if command == Some("zadd") && i == 2 && arg != NON_EXPIRING_SCORE {
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

/// Who sent a MONITOR line (`<time> [<db> <client>] "arg" …`): `lua` inside a script, else the
/// client's address.
fn monitor_client(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once('[')?;
    let (db_client, _) = rest.split_once(']')?;
    Some(db_client.split_once(' ')?.1)
}

/// The quoted arguments of a MONITOR line: `<time> [<db> <client>] "arg" "arg" …`, unescaped
/// (Redis writes `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b` and `\xHH` for the other unprintable
/// bytes), as text: bytes that are not UTF-8 read as U+FFFD.
pub(crate) fn monitor_args(line: &str) -> Vec<String> {
    let Some((_, rest)) = line.split_once("] ") else {
        return Vec::new();
    };
    let mut args = Vec::new();
    let mut bytes = rest.bytes();
    while let Some(byte) = bytes.next() {
        if byte != b'"' {
            continue;
        }
        let mut arg = Vec::new();
        while let Some(byte) = bytes.next() {
            match byte {
                b'"' => break,
                b'\\' => match bytes.next() {
                    Some(b'n') => arg.push(b'\n'),
                    Some(b'r') => arg.push(b'\r'),
                    Some(b't') => arg.push(b'\t'),
                    Some(b'a') => arg.push(0x07),
                    Some(b'b') => arg.push(0x08),
                    Some(b'x') => {
                        let hex = [bytes.next(), bytes.next()];
                        let hex: Vec<u8> = hex.into_iter().flatten().collect();
                        let hex = std::str::from_utf8(&hex).expect("ASCII hex digits");
                        arg.push(u8::from_str_radix(hex, 16).expect("an escaped byte"));
                    }
                    escaped => arg.extend(escaped),
                },
                byte => arg.push(byte),
            }
        }
        args.push(String::from_utf8_lossy(&arg).into_owned());
    }
    args
}

/// Commands from their words.
pub(crate) fn commands(parts: &[&[&str]]) -> Vec<String> {
    parts.iter().map(|command| command.join(" ")).collect()
}

/// `script` as `side` runs it for an owner that already holds `name` under `field` (a re-entry, or a
/// non-reentrant lock's refused one): rlock first asks whether the field is still there
/// (docs/protocol.md §2.2 step 0), so that a re-entry of a hold that was deleted writes nothing
/// (README, "Nested holds of one owner"); Java goes straight to the script's steps.
pub(crate) fn reentered(side: Side, name: &str, field: &str, script: Vec<String>) -> Vec<String> {
    match side {
        Side::Rlock => [vec![format!("hexists {name} {field}")], script].concat(),
        Side::Java => script,
    }
}

/// A trace from literal phases.
pub(crate) fn trace(phases: Vec<(&str, Scripts)>) -> Trace {
    phases
        .into_iter()
        .map(|(phase, scripts)| (phase.to_owned(), scripts))
        .collect()
}

// ===== checking every side =====

/// Masks a value that depends on the clock: in `phase`, the last argument of the commands that
/// start with `command` becomes `placeholder` if it lies in `range`.
pub(crate) fn mask(
    trace: &mut Trace,
    phase: &str,
    command: &str,
    range: RangeInclusive<u64>,
    placeholder: &str,
) {
    let prefix = format!("{command} ");
    let phases = trace.iter_mut().filter(|(name, _)| name == phase);
    for line in phases.flat_map(|(_, scripts)| scripts.iter_mut().flatten()) {
        let value = line.strip_prefix(&prefix).and_then(|v| v.parse().ok());
        if value.is_some_and(|value| range.contains(&value)) {
            *line = format!("{prefix}{placeholder}");
        }
    }
}

/// Keeps the first and the last invocation of `phase`: a waiting phase's literal steps are its
/// first attempt and its give-up; the retries between them depend on timing.
fn first_and_last(trace: &mut Trace, phase: &str) {
    for (_, scripts) in trace.iter_mut().filter(|(name, _)| name == phase) {
        if scripts.len() > 2 {
            let last = scripts.pop().expect("a last invocation");
            scripts.truncate(1);
            scripts.push(last);
        }
    }
}

/// The parties a trace is checked against, each with the latch TTLs its unlocks set (§2.4;
/// rlock's: `(command_timeout + retry_max_delay) × retry_attempts`, 20 s, or the released hold's
/// lease if longer, 30 s for a watchdog hold): Java 3.31 and HEAD
/// (those of them from `since` on, for a kind that younger releases added) and rlock.
pub(crate) async fn parties(
    server: &RedisServer,
    since: RedissonVersion,
) -> Vec<(Party, RangeInclusive<u64>)> {
    let mut parties = Vec::new();
    for (version, latch_ttls) in [
        (RedissonVersion::V3_31, 13_500..=13_500),
        (RedissonVersion::V4, 16_000..=20_000),
    ] {
        if version >= since {
            parties.push((Party::java(server, version, None).await, latch_ttls));
        }
    }
    parties.push((Party::connect(Side::Rlock, server).await, 20_000..=30_000));
    parties
}

/// Which party a trace is of.
fn label(party: &Party) -> String {
    match party {
        Party::Java(java) => format!("java {:?}", java.version()),
        Party::Rlock(_) => "rlock".to_owned(),
    }
}

/// Runs `tour` for every party of [`parties`] (one after the other, on one server), tracing
/// `keys`, and compares the trace, once `adjust`ed, with `expected` of the party's side; every
/// latch TTL must be the party's.
pub(crate) async fn check_every_side(
    keys: &[&str],
    tour: impl AsyncFn(&mut Tracer, &Party),
    adjust: impl Fn(&mut Trace),
    expected: impl Fn(Side) -> Trace,
) {
    check_every_side_since(RedissonVersion::ALL[0], keys, tour, adjust, expected).await;
}

/// [`check_every_side`] for a kind that Redisson has from `since` on: the older Java parties are
/// left out.
async fn check_every_side_since(
    since: RedissonVersion,
    keys: &[&str],
    tour: impl AsyncFn(&mut Tracer, &Party),
    adjust: impl Fn(&mut Trace),
    expected: impl Fn(Side) -> Trace,
) {
    let latches = |label: &str, latch_ttls: &RangeInclusive<u64>, ttls: &[u64]| {
        assert!(!ttls.is_empty(), "{label}: no latch");
        assert!(
            ttls.iter().all(|ttl| latch_ttls.contains(ttl)),
            "{label}: {ttls:?}"
        );
    };
    let sides = Sides {
        since,
        script_calls: false,
    };
    compare_every_side(sides, keys, tour, adjust, expected, latches).await;
}

/// [`check_every_side`] for a synchronizer: every script invocation starts with its call
/// ([`Tracer::with_script_calls`]), and the TTLs the tour sets (`SET … PX`) are exactly `ttls`.
pub(crate) async fn check_synchronizer_every_side(
    keys: &[&str],
    ttls: &[u64],
    tour: impl AsyncFn(&mut Tracer, &Party),
    adjust: impl Fn(&mut Trace),
    expected: impl Fn(Side) -> Trace,
) {
    let exactly = |label: &str, _: &RangeInclusive<u64>, seen: &[u64]| {
        assert_eq!(seen, ttls, "{label}: TTLs set");
    };
    let sides = Sides {
        since: RedissonVersion::ALL[0],
        script_calls: true,
    };
    compare_every_side(sides, keys, tour, adjust, expected, exactly).await;
}

/// Which parties a comparison runs, and how it traces them.
struct Sides {
    /// The oldest Java version to run ([`parties`]).
    since: RedissonVersion,
    /// Whether every script's call is traced ([`Tracer::with_script_calls`]).
    script_calls: bool,
}

/// Runs `tour` for every party of [`parties`] from `sides.since` on (one after the other, on one
/// server), tracing `keys` (and the call of every script, with `sides.script_calls`), compares the
/// trace, once `adjust`ed, with `expected` of the party's side, and hands the TTLs it set to
/// `check_ttls` with the party's label and latch TTLs.
async fn compare_every_side(
    sides: Sides,
    keys: &[&str],
    tour: impl AsyncFn(&mut Tracer, &Party),
    adjust: impl Fn(&mut Trace),
    expected: impl Fn(Side) -> Trace,
    check_ttls: impl Fn(&str, &RangeInclusive<u64>, &[u64]),
) {
    let server = RedisServer::start();
    for (party, latch_ttls) in parties(&server, sides.since).await {
        let mut tracer = Tracer::start(&server, keys).await;
        if sides.script_calls {
            tracer = tracer.with_script_calls();
        }
        tour(&mut tracer, &party).await;
        let (mut trace, ttls) = tracer.finish(&node_of(&party)).await;
        adjust(&mut trace);
        let label = label(&party);
        assert_same_trace(&label, &trace, &expected(party.side()));
        check_ttls(&label, &latch_ttls, &ttls);
    }
}

/// The client id of `party`, which traces show as `<node>`.
pub(crate) fn node_of(party: &Party) -> String {
    let field = party.field(1);
    let node = field.strip_suffix(":1").expect("an owner field");
    node.to_owned()
}

/// Asserts that `actual` is `expected`, listing every phase that differs.
pub(crate) fn assert_same_trace(label: &str, actual: &Trace, expected: &Trace) {
    let phases = actual.len().max(expected.len());
    let differences: Vec<String> = (0..phases)
        .filter(|&i| actual.get(i) != expected.get(i))
        .map(|i| {
            format!(
                "phase {i}:\n  ran:      {:?}\n  expected: {:?}",
                actual.get(i),
                expected.get(i)
            )
        })
        .collect();
    assert!(
        differences.is_empty(),
        "{label}: {} phase(s) differ from the expected trace:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// The tour of the kinds that hold like the `RLock` (thread 1 of `party`, the `kind` lock `name`):
/// acquire, re-enter, a partial and a full unlock, a try while a third client holds the lock, an
/// unlock by a non-owner, a force unlock.
pub(crate) async fn lock_tour(tracer: &mut Tracer, party: &Party, kind: InteropKind, name: &str) {
    let lock = party.get(kind, name);
    let outer = reentered_once(tracer, &lock).await;
    lock_tour_end(tracer, &lock, name, outer).await;
}

/// The lock tour from its full unlock (of `outer`, thread 1's hold of `lock`, which is `name`) on.
async fn lock_tour_end(tracer: &mut Tracer, lock: &PartyLock, name: &str, outer: Hold) {
    tracer.mark("full unlock").await;
    outer.release().await;
    tracer.redis().hold_foreign(name, 30_000).await;
    tracer.mark("contended try").await;
    assert!(lock.try_lock(1, Duration::ZERO, None).await.is_none());
    tracer.mark("unlock by a non-owner").await;
    assert_eq!(lock.unlock_as(1).await, Unlocked::NotOwner);
    tracer.mark("force unlock").await;
    assert!(lock.force_unlock().await);
}

/// Every tour's opening, by thread 1: the phases "acquire", "re-enter" and "partial unlock" (of
/// the re-entry). Returns the first hold.
async fn reentered_once(tracer: &mut Tracer, lock: &PartyLock) -> Hold {
    tracer.mark("acquire").await;
    let outer = lock.lock(1).await;
    tracer.mark("re-enter").await;
    let inner = lock.lock(1).await;
    tracer.mark("partial unlock").await;
    inner.release().await;
    outer
}

/// The owner field of thread 1 in every trace.
pub(crate) const FIELD: &str = "<node>:1";

/// The latch key of lock `name` (§1.4), normalized.
pub(crate) fn latch(name: &str) -> String {
    format!("{}:<id>", prefix_name("redisson_unlock_latch", name))
}

// ===== the fair lock (§6) =====

const FAIR: &str = "golden:fair";

/// A third client's waiter, queued by hand, with a deadline far away.
const FOREIGN_WAITER: &str = "00000000-0000-4000-8000-000000000000:9";

/// Thread 1's tour of the fair lock `FAIR`: the lock tour's steps, plus an unlock that wakes a
/// queued head, a wait that queues and gives up, and the unlock of a lock that no longer exists.
async fn fair_tour(tracer: &mut Tracer, party: &Party) {
    let lock = party.get(InteropKind::FAIR, FAIR);
    let outer = reentered_once(tracer, &lock).await;
    queue_foreign_waiter(tracer).await;
    fair_tour_end(tracer, party, &lock, outer).await;
}

/// Queues [`FOREIGN_WAITER`] by hand, with a deadline far away.
async fn queue_foreign_waiter(tracer: &mut Tracer) {
    let (queue, timeouts) = fair_keys();
    let far_away = 4_000_000_000_000_u64;
    let redis = tracer.redis();
    let _: () = redis
        .conn
        .rpush(&queue, FOREIGN_WAITER)
        .await
        .expect("RPUSH");
    let _: () = redis
        .conn
        .zadd(&timeouts, FOREIGN_WAITER, far_away)
        .await
        .expect("ZADD");
}

/// The fair tour from the full unlock (of `outer`, thread 1's hold of `lock`) that wakes the
/// queued [`FOREIGN_WAITER`] on.
async fn fair_tour_end(tracer: &mut Tracer, party: &Party, lock: &PartyLock, outer: Hold) {
    let (queue, timeouts) = fair_keys();
    tracer.mark("full unlock wakes the head").await;
    outer.release().await;
    let redis = tracer.redis();
    let _: () = redis.conn.del(&[&queue, &timeouts]).await.expect("DEL");
    redis.hold_foreign(FAIR, 30_000).await;
    tracer.mark("try while held").await;
    assert!(lock.try_lock(1, Duration::ZERO, None).await.is_none());
    tracer.mark("queue and give up").await;
    let waited = lock.try_lock(1, Duration::from_millis(300), None).await;
    assert!(waited.is_none());
    tracer.mark("unlock by a non-owner").await;
    assert_eq!(lock.unlock_as(1).await, Unlocked::NotOwner);
    tracer.mark("force unlock").await;
    assert!(lock.force_unlock().await);
    tracer.mark("unlock of a missing lock").await;
    // Redisson reports success; rlock reports a lost hold (README).
    let missing = match party.side() {
        Side::Java => Unlocked::Released,
        Side::Rlock => Unlocked::NotOwner,
    };
    assert_eq!(lock.unlock_as(1).await, missing);
}

/// The fair lock's queue and deadlines.
fn fair_keys() -> (String, String) {
    (
        prefix_name("redisson_lock_queue", FAIR),
        prefix_name("redisson_lock_timeout", FAIR),
    )
}

/// The fair lock's scripts (§6.3–§6.8) in the states of [`fair_tour`].
fn fair_expected(side: Side) -> Trace {
    let (queue, timeouts) = fair_keys();
    let (q, t, l) = (queue.as_str(), timeouts.as_str(), &latch(FAIR));
    let head_channel = format!("{}:{FOREIGN_WAITER}", lock_channel(FAIR));
    // §6.3 on an empty queue; with the foreign head, its deadline stops it.
    let purge: &[&str] = &["lindex", q, "0"];
    let mut give_up = commands(&[
        &["lrange", q, "0", "-1"],
        &["zrem", t, FIELD],
        &["lrem", q, "0", FIELD],
    ]);
    if side == Side::Rlock {
        // rlock's give-up wakes the new head of a free lock (README); the lock is held here.
        give_up.push(format!("exists {FAIR}"));
    }
    trace(vec![
        (
            // §6.4 step 2: free, nobody queued.
            "acquire",
            vec![commands(&[
                purge,
                &["exists", FAIR],
                &["exists", q],
                &["lpop", q],
                &["zrem", t, FIELD],
                &["zrange", t, "0", "-1"],
                &["hset", FAIR, FIELD, "1"],
                &["pexpire", FAIR, "30000"],
            ])],
        ),
        (
            // §6.4 step 3; rlock also looks whether the owner is queued, to leave the queue.
            "re-enter",
            vec![if side == Side::Rlock {
                reentered(
                    side,
                    FAIR,
                    FIELD,
                    commands(&[
                        purge,
                        &["exists", FAIR],
                        &["hexists", FAIR, FIELD],
                        &["zscore", t, FIELD],
                        &["hincrby", FAIR, FIELD, "1"],
                        &["pexpire", FAIR, "30000"],
                    ]),
                )
            } else {
                commands(&[
                    purge,
                    &["exists", FAIR],
                    &["hexists", FAIR, FIELD],
                    &["hincrby", FAIR, FIELD, "1"],
                    &["pexpire", FAIR, "30000"],
                ])
            }],
        ),
        (
            // §6.7 step 5.
            "partial unlock",
            vec![commands(&[
                &["get", l],
                purge,
                &["exists", FAIR],
                &["hexists", FAIR, FIELD],
                &["hincrby", FAIR, FIELD, "-1"],
                &["pexpire", FAIR, "30000"],
                &["set", l, "0", "px", "<ttl>"],
            ])],
        ),
        (
            // §6.7 step 6: the queue head hears `0` on its own channel.
            "full unlock wakes the head",
            vec![commands(&[
                &["get", l],
                purge,
                &["zscore", t, FOREIGN_WAITER],
                &["exists", FAIR],
                &["hexists", FAIR, FIELD],
                &["hincrby", FAIR, FIELD, "-1"],
                &["del", FAIR],
                &["set", l, "1", "px", "<ttl>"],
                &["lindex", q, "0"],
                &["publish", &head_channel, "0"],
            ])],
        ),
        (
            // §6.5: held by another, the non-waiting form answers 1 without queueing.
            "try while held",
            vec![commands(&[
                purge,
                &["exists", FAIR],
                &["hexists", FAIR, FIELD],
            ])],
        ),
        (
            // §6.4 step 5, then (after retries that depend on timing) §6.6.
            "queue and give up",
            vec![
                commands(&[
                    purge,
                    &["exists", FAIR],
                    &["hexists", FAIR, FIELD],
                    &["zscore", t, FIELD],
                    &["lindex", q, "-1"],
                    &["pttl", FAIR],
                    &["zadd", t, "<deadline>", FIELD],
                    &["rpush", q, FIELD],
                ]),
                give_up,
            ],
        ),
        (
            // §6.7 step 4.
            "unlock by a non-owner",
            vec![commands(&[
                &["get", l],
                purge,
                &["exists", FAIR],
                &["hexists", FAIR, FIELD],
            ])],
        ),
        (
            // §6.8, nobody queued; rlock also publishes the unlock on the lock's channel (README).
            "force unlock",
            vec![if side == Side::Rlock {
                let channel = lock_channel(FAIR);
                commands(&[
                    purge,
                    &["del", FAIR],
                    &["lindex", q, "0"],
                    &["publish", &channel, "0"],
                ])
            } else {
                commands(&[purge, &["del", FAIR], &["lindex", q, "0"]])
            }],
        ),
        (
            // §6.7 step 3: success, and nobody to wake.
            "unlock of a missing lock",
            vec![commands(&[
                &["get", l],
                purge,
                &["exists", FAIR],
                &["lindex", q, "0"],
                // rlock stores (and replies) a lost hold, Redisson a release (README).
                &[
                    "set",
                    l,
                    if side == Side::Rlock { "nil" } else { "1" },
                    "px",
                    "<ttl>",
                ],
            ])],
        ),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_scripts_follow_the_protocol() {
    let (queue, timeouts) = fair_keys();
    let adjust = |trace: &mut Trace| first_and_last(trace, "queue and give up");
    check_every_side(&[FAIR, &queue, &timeouts], fair_tour, adjust, fair_expected).await;
}

// ===== the non-reentrant locks (§8.8, §6.9) =====

const NON_REENTRANT: &str = "golden:non-reentrant";

/// The phases of thread 1's refused re-entries, one per acquisition form.
const REFUSALS: [(&str, Acquisition); 3] = [
    ("re-entry refused: lock()", Acquisition::Lock),
    (
        "re-entry refused: tryLock()",
        Acquisition::Try(Duration::ZERO),
    ),
    (
        "re-entry refused: tryLock(wait)",
        Acquisition::Try(Duration::from_millis(300)),
    ),
];

/// Thread 1, which holds `lock`, tries to take it again by every form ([`REFUSALS`]).
async fn refused_reentries(tracer: &mut Tracer, lock: &PartyLock) {
    for (phase, how) in REFUSALS {
        tracer.mark(phase).await;
        let outcome = lock.acquire(1, how, None).await;
        assert!(
            matches!(outcome, Acquired::ReentryRefused),
            "{phase}: {outcome:?}"
        );
    }
}

/// `trace` of a reentrant twin's tour with its re-entry and partial unlock replaced by the
/// refusals, each running `refusal`.
fn refusing(mut trace: Trace, refusal: &[String]) -> Trace {
    trace.retain(|(phase, _)| phase != "re-enter" && phase != "partial unlock");
    let refusals = REFUSALS.map(|(phase, _)| (phase.to_owned(), vec![refusal.to_vec()]));
    let _ = trace.splice(1..1, refusals);
    trace
}

/// The lock tour with the re-entry refused instead: acquire, the refusals, then as the lock tour.
async fn non_reentrant_tour(tracer: &mut Tracer, party: &Party) {
    let lock = party.get(InteropKind::NON_REENTRANT, NON_REENTRANT);
    tracer.mark("acquire").await;
    let hold = lock.lock(1).await;
    refused_reentries(tracer, &lock).await;
    lock_tour_end(tracer, &lock, NON_REENTRANT, hold).await;
}

/// §8.8: a free lock is taken as the `RLock` takes it, a busy one answers its PTTL as the `RLock`'s
/// does, and the holder's re-entry stops at its field's `HEXISTS`, writing nothing; the rest is
/// the `RLock`'s.
fn non_reentrant_expected(side: Side) -> Trace {
    let name = NON_REENTRANT;
    let refusal = commands(&[&["exists", name], &["hexists", name, FIELD]]);
    let refusal = reentered(side, name, FIELD, refusal);
    refusing(lock_expected(name, side), &refusal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_lock_scripts_follow_the_protocol() {
    let (since, keys) = (RedissonVersion::V4, [NON_REENTRANT]);
    let expected = non_reentrant_expected;
    check_every_side_since(since, &keys, non_reentrant_tour, |_| (), expected).await;
}

/// The fair tour with the re-entry refused instead, while [`FOREIGN_WAITER`] queues: acquire, the
/// refusals, then as the fair tour (whose queueing waiter gives up).
async fn non_reentrant_fair_tour(tracer: &mut Tracer, party: &Party) {
    let lock = party.get(InteropKind::NON_REENTRANT_FAIR, FAIR);
    tracer.mark("acquire").await;
    let hold = lock.lock(1).await;
    queue_foreign_waiter(tracer).await;
    refused_reentries(tracer, &lock).await;
    fair_tour_end(tracer, party, &lock, hold).await;
}

/// §6.9: both acquire forms run the fair lock's steps (a free lock is written with `HSET`, a busy
/// one queues), but the holder's re-entry stops at its field's `HEXISTS`, after the purge and
/// before the enqueue: it never queues, however many wait.
fn non_reentrant_fair_expected(side: Side) -> Trace {
    let (queue, timeouts) = fair_keys();
    let refusal = commands(&[
        &["lindex", &queue, "0"],
        &["zscore", &timeouts, FOREIGN_WAITER],
        &["exists", FAIR],
        &["hexists", FAIR, FIELD],
    ]);
    let refusal = reentered(side, FAIR, FIELD, refusal);
    refusing(fair_expected(side), &refusal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_fair_lock_scripts_follow_the_protocol() {
    let (queue, timeouts) = fair_keys();
    let keys = [FAIR, &queue, &timeouts];
    let adjust = |trace: &mut Trace| first_and_last(trace, "queue and give up");
    let (since, tour) = (RedissonVersion::V4, non_reentrant_fair_tour);
    check_every_side_since(since, &keys, tour, adjust, non_reentrant_fair_expected).await;
}

// ===== the spin lock (§8.1) =====

const SPIN: &str = "golden:spin";

/// §8.1: the `RLock`'s acquire (its older two-block form runs the same commands in these states)
/// and its unlock without the publish; Java's force unlock is a `DEL` alone, rlock's is the
/// `RLock`'s, which also publishes the unlock on the lock's channel (README).
fn spin_expected(side: Side) -> Trace {
    let mut trace = lock_expected(SPIN, side);
    for (phase, scripts) in &mut trace {
        match phase.as_str() {
            "full unlock" => scripts[0].retain(|command| !command.starts_with("publish ")),
            "force unlock" if side == Side::Java => *scripts = vec![vec![format!("del {SPIN}")]],
            _ => {}
        }
    }
    trace
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_scripts_follow_the_protocol() {
    let tour = async |tracer: &mut _, party: &Party| {
        lock_tour(tracer, party, InteropKind::SPIN, SPIN).await;
    };
    check_every_side(&[SPIN], tour, |_| (), spin_expected).await;
}

// ===== the fenced lock (§8.2) =====

const FENCED: &str = "golden:fenced";

fn token_key() -> String {
    prefix_name("redisson_lock_token", FENCED)
}

/// The lock tour on the fenced lock (plain acquisitions), then `getToken`, and an acquisition
/// through the token call (Java's `lockAndGetToken`).
async fn fenced_tour(tracer: &mut Tracer, party: &Party) {
    lock_tour(tracer, party, InteropKind::FENCED, FENCED).await;
    let lock = party.get(InteropKind::FENCED, FENCED);
    tracer.mark("get token").await;
    let _ = lock.token().await;
    tracer.mark("acquire with a token").await;
    let (hold, _) = lock.lock_with_token(1).await;
    tracer.mark("cleanup").await;
    hold.release().await;
}

/// §8.2: the `RLock`'s scripts, with `INCR` of the token before the hold on every acquisition;
/// `getToken` is a `GET`, and the token call's script runs the same commands as a plain acquire.
fn fenced_expected(side: Side) -> Trace {
    let token = token_key();
    let mut trace = lock_expected(FENCED, side);
    for (phase, scripts) in &mut trace {
        if phase == "acquire" || phase == "re-enter" {
            let script = &mut scripts[0];
            let hold = script.iter().position(|c| c.starts_with("hincrby "));
            script.insert(hold.expect("a hold"), format!("incr {token}"));
        }
    }
    let acquire = trace[0].1.clone();
    let full_unlock = trace
        .iter()
        .find(|(phase, _)| phase == "full unlock")
        .map(|(_, scripts)| scripts.clone())
        .expect("a full unlock");
    trace.extend([
        ("get token".to_owned(), vec![vec![format!("get {token}")]]),
        ("acquire with a token".to_owned(), acquire),
        ("cleanup".to_owned(), full_unlock),
    ]);
    trace
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_lock_scripts_follow_the_protocol() {
    let token = token_key();
    check_every_side(&[FENCED, &token], fenced_tour, |_| (), fenced_expected).await;
}

// ===== the read-write lock (§7) =====

const RW: &str = "golden:rw";
/// Thread 1's write field.
const WRITE_FIELD: &str = "<node>:1:write";

/// The read-write lock's channel and thread 1's read timeout key `k` (§1.4, §7.1).
fn rw_names(k: u32) -> (String, String) {
    let timeout = format!("{{{RW}}}:{FIELD}:rwlock_timeout:{k}");
    (prefix_name("redisson_rwlock", RW), timeout)
}

/// Holds the read-write lock as a third client would, in `mode`.
async fn hold_foreign_rw(tracer: &mut Tracer, mode: &str) {
    let field = match mode {
        "write" => format!("{FOREIGN_WAITER}:write"),
        _ => FOREIGN_WAITER.to_owned(),
    };
    let redis = tracer.redis();
    let _: () = redis.conn.del(RW).await.expect("DEL");
    let entries = [("mode", mode), (field.as_str(), "1")];
    let _: () = redis.conn.hset_multiple(RW, &entries).await.expect("HSET");
    let _: () = redis.conn.pexpire(RW, 30_000).await.expect("PEXPIRE");
}

/// Phases that come after a tour's own: a try while a third client writes, an unlock by a
/// non-owner, a force unlock of the other mode (refused), one of this mode, and the unlock of a
/// lock that no longer exists, which both sides refuse (3.31: accepts, §7.3 / §7.5 step 2).
async fn rw_tour_end(tracer: &mut Tracer, party: &Party, kind: InteropKind) {
    let lock = party.get(kind, RW);
    hold_foreign_rw(tracer, "write").await;
    tracer.mark("contended try").await;
    assert!(lock.try_lock(1, Duration::ZERO, None).await.is_none());
    tracer.mark("unlock by a non-owner").await;
    assert_eq!(lock.unlock_as(1).await, Unlocked::NotOwner);
    let (other, mine) = if kind == InteropKind::READ {
        ("write", "read")
    } else {
        ("read", "write")
    };
    hold_foreign_rw(tracer, other).await;
    tracer.mark("force unlock of the other mode").await;
    assert!(!lock.force_unlock().await);
    hold_foreign_rw(tracer, mine).await;
    tracer.mark("force unlock").await;
    assert!(lock.force_unlock().await);
    tracer.mark("unlock of a missing lock").await;
    let missing = match party {
        Party::Java(java) if java.version() < RedissonVersion::V3_44 => Unlocked::Released,
        _ => Unlocked::NotOwner,
    };
    assert_eq!(lock.unlock_as(1).await, missing);
}

/// The phases of [`rw_tour_end`] for the half whose hash field is `field` and whose message is
/// `message`.
fn rw_end_expected(field: &str, message: &str) -> Vec<(&'static str, Scripts)> {
    let (channel, _) = rw_names(1);
    let l = &latch(RW);
    vec![
        (
            // §7.2 step 3 / §7.4 step 2, then step 4 / 3: written by another (the read lock
            // asks whether it is the writer, the write lock whether it holds the write).
            "contended try",
            vec![commands(&[
                &["hget", RW, "mode"],
                &["hexists", RW, WRITE_FIELD],
                &["pttl", RW],
            ])],
        ),
        (
            // §7.3 step 3 / §7.5 step 3.
            "unlock by a non-owner",
            vec![commands(&[
                &["get", l],
                &["hget", RW, "mode"],
                &["hexists", RW, field],
            ])],
        ),
        // §7.6.
        (
            "force unlock of the other mode",
            vec![commands(&[&["hget", RW, "mode"]])],
        ),
        (
            "force unlock",
            vec![commands(&[
                &["hget", RW, "mode"],
                &["del", RW],
                &["publish", &channel, message],
            ])],
        ),
        (
            // §7.3 / §7.5 step 2: the message is published all the same.
            "unlock of a missing lock",
            vec![commands(&[
                &["get", l],
                &["hget", RW, "mode"],
                &["publish", &channel, message],
                &["set", l, "1", "px", "<ttl>"],
            ])],
        ),
    ]
}

/// §7.3 steps 1–5 for thread 1's read hold `k` (its count going from `k` to `k - 1`; at 0 the
/// field goes).
fn read_unlock_start(k: u32) -> Vec<String> {
    let (_, timeout) = rw_names(k);
    let l = latch(RW);
    let mut script = commands(&[
        &["get", &l],
        &["hget", RW, "mode"],
        &["hexists", RW, FIELD],
        &["hincrby", RW, FIELD, "-1"],
    ]);
    if k == 1 {
        script.push(format!("hdel {RW} {FIELD}"));
    }
    script.extend(commands(&[&["del", &timeout], &["hlen", RW]]));
    script
}

/// §7.3 step 7: the last hold goes, the hash with it, and `0` is published.
fn read_release_end() -> Vec<String> {
    let (channel, _) = rw_names(1);
    let l = latch(RW);
    commands(&[
        &["del", RW],
        &["publish", &channel, "0"],
        &["set", &l, "1", "px", "<ttl>"],
    ])
}

/// §7.2 step 3 for thread 1's `k`-th read hold, after `HGET mode` and whatever decides it may
/// read: the count, the hold's timeout key, the hash's TTL raised to the lease.
fn read_hold(k: u32) -> Vec<String> {
    let (_, timeout) = rw_names(k);
    commands(&[
        &["hincrby", RW, FIELD, "1"],
        &["set", &timeout, "1"],
        &["pexpire", &timeout, "30000"],
        &["pttl", RW],
        &["pexpire", RW, "30000"],
    ])
}

/// Thread 1's tour of the read lock.
async fn read_tour(tracer: &mut Tracer, party: &Party) {
    let lock = party.get(InteropKind::READ, RW);
    let outer = reentered_once(tracer, &lock).await;
    tracer.mark("full unlock").await;
    outer.release().await;
    rw_tour_end(tracer, party, InteropKind::READ).await;
}

/// The read lock's scripts (§7.2, §7.3, §7.6) in the states of [`read_tour`].
fn read_expected(side: Side) -> Trace {
    let (_, first) = rw_names(1);
    let l = latch(RW);
    let mut partial = read_unlock_start(2);
    // §7.3 step 6 reads "every hash field whose value parses as a number" without naming the
    // command: the emulator reads the hash whole, rlock its fields one by one.
    match side {
        Side::Java => partial.push(format!("hgetall {RW}")),
        Side::Rlock => partial.extend(commands(&[
            &["hkeys", RW],
            &["hget", RW, "mode"],
            &["hget", RW, FIELD],
        ])),
    }
    partial.extend(commands(&[
        &["pttl", &first],
        &["pexpire", RW, "<longest read hold>"],
        &["set", &l, "0", "px", "<ttl>"],
    ]));
    let mut phases = vec![
        (
            // §7.2 step 2.
            "acquire",
            vec![commands(&[
                &["hget", RW, "mode"],
                &["hset", RW, "mode", "read"],
                &["hset", RW, FIELD, "1"],
                &["set", &first, "1"],
                &["pexpire", &first, "30000"],
                &["pexpire", RW, "30000"],
            ])],
        ),
        (
            // §7.2 step 3, in read mode.
            "re-enter",
            vec![reentered(
                side,
                RW,
                FIELD,
                [vec![format!("hget {RW} mode")], read_hold(2)].concat(),
            )],
        ),
        // §7.3 step 6: the other hold's timeout key keeps the lock.
        ("partial unlock", vec![partial]),
        (
            "full unlock",
            vec![[read_unlock_start(1), read_release_end()].concat()],
        ),
    ];
    phases.extend(rw_end_expected(FIELD, "0"));
    trace(phases)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_lock_scripts_follow_the_protocol() {
    let (_, first) = rw_names(1);
    let (_, second) = rw_names(2);
    let adjust = |trace: &mut Trace| {
        let command = format!("pexpire {RW}");
        let placeholder = "<longest read hold>";
        mask(
            trace,
            "partial unlock",
            &command,
            29_000..=30_000,
            placeholder,
        );
    };
    let keys = [RW, first.as_str(), second.as_str()];
    check_every_side(&keys, read_tour, adjust, read_expected).await;
}

/// Thread 1's tour of the write lock, with a read hold taken while writing and the write unlock
/// that leaves it (the downgrade).
async fn write_tour(tracer: &mut Tracer, party: &Party) {
    let lock = party.get(InteropKind::WRITE, RW);
    let outer = reentered_once(tracer, &lock).await;
    tracer.mark("read while writing").await;
    let read = party.get(InteropKind::READ, RW).lock(1).await;
    tracer.mark("downgrade").await;
    outer.release().await;
    tracer.mark("read unlock after the downgrade").await;
    read.release().await;
    tracer.mark("write again").await;
    let write = lock.lock(1).await;
    tracer.mark("full unlock").await;
    write.release().await;
    rw_tour_end(tracer, party, InteropKind::WRITE).await;
}

/// The write lock's scripts (§7.4, §7.5, §7.6), and the read lock's where the writer reads, in
/// the states of [`write_tour`].
fn write_expected(side: Side) -> Trace {
    let (channel, _) = rw_names(1);
    let l = &latch(RW);
    let acquire = commands(&[
        &["hget", RW, "mode"],
        &["hset", RW, "mode", "write"],
        &["hset", RW, WRITE_FIELD, "1"],
        &["pexpire", RW, "30000"],
    ]);
    // §7.5 step 3 up to the decrement that leaves no write hold, and the field's removal.
    let last_write = commands(&[
        &["get", l],
        &["hget", RW, "mode"],
        &["hexists", RW, WRITE_FIELD],
        &["hincrby", RW, WRITE_FIELD, "-1"],
        &["hdel", RW, WRITE_FIELD],
        &["hlen", RW],
    ]);
    let mut phases = vec![
        ("acquire", vec![acquire.clone()]),
        (
            // §7.4 step 2: the lease is added to what is left.
            "re-enter",
            vec![reentered(
                side,
                RW,
                WRITE_FIELD,
                commands(&[
                    &["hget", RW, "mode"],
                    &["hexists", RW, WRITE_FIELD],
                    &["hincrby", RW, WRITE_FIELD, "1"],
                    &["pttl", RW],
                    &["pexpire", RW, "<pttl + 30000>"],
                ]),
            )],
        ),
        (
            // §7.5 step 3, still held.
            "partial unlock",
            vec![commands(&[
                &["get", l],
                &["hget", RW, "mode"],
                &["hexists", RW, WRITE_FIELD],
                &["hincrby", RW, WRITE_FIELD, "-1"],
                &["pexpire", RW, "30000"],
                &["set", l, "0", "px", "<ttl>"],
            ])],
        ),
        (
            // §7.2 step 3, the writer taking a read hold.
            "read while writing",
            vec![
                [
                    commands(&[&["hget", RW, "mode"], &["hexists", RW, WRITE_FIELD]]),
                    read_hold(1),
                ]
                .concat(),
            ],
        ),
        (
            // §7.5 step 3: the read hold remains, in read mode; nothing is published.
            "downgrade",
            vec![
                [
                    last_write.clone(),
                    commands(&[
                        &["hset", RW, "mode", "read"],
                        &["set", l, "1", "px", "<ttl>"],
                    ]),
                ]
                .concat(),
            ],
        ),
        (
            "read unlock after the downgrade",
            vec![[read_unlock_start(1), read_release_end()].concat()],
        ),
        ("write again", vec![acquire]),
        (
            // §7.5 step 3: the last hold; `1` wakes every waiter.
            "full unlock",
            vec![
                [
                    last_write,
                    commands(&[
                        &["del", RW],
                        &["publish", &channel, "1"],
                        &["set", l, "1", "px", "<ttl>"],
                    ]),
                ]
                .concat(),
            ],
        ),
    ];
    phases.extend(rw_end_expected(WRITE_FIELD, "1"));
    trace(phases)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_lock_scripts_follow_the_protocol() {
    let (_, first) = rw_names(1);
    let adjust = |trace: &mut Trace| {
        let command = format!("pexpire {RW}");
        mask(
            trace,
            "re-enter",
            &command,
            59_000..=60_000,
            "<pttl + 30000>",
        );
    };
    check_every_side(&[RW, &first], write_tour, adjust, write_expected).await;
}

// ===== the local hand-off (rlock alone, README) =====

/// The reentrant lock of the hand-off trace.
const HAND_OFF: &str = "golden:hand-off";

/// Thread `n`'s owner field, as thread 1's is [`FIELD`].
pub(crate) fn owner(n: u64) -> String {
    format!("<node>:{n}")
}

/// The thread of a Java waiter, and its owner field once aliased ([`Tracer::alias`]).
pub(crate) const JAVA_THREAD: u64 = 7;
pub(crate) const JAVA_FIELD: &str = "<java>:7";

/// The lock name of the hand-off tour of `kind`, and the keys to trace: the names the kind's other
/// traces use, so that its acquire and unlock are theirs.
fn hand_off_keys(kind: InteropKind) -> (&'static str, Vec<String>) {
    if kind == InteropKind::REENTRANT {
        (HAND_OFF, vec![HAND_OFF.to_owned()])
    } else if kind == InteropKind::FENCED {
        (FENCED, vec![FENCED.to_owned(), token_key()])
    } else if kind == InteropKind::WRITE {
        (RW, vec![RW.to_owned()])
    } else if kind == InteropKind::NON_REENTRANT {
        (NON_REENTRANT, vec![NON_REENTRANT.to_owned()])
    } else {
        panic!("{kind} does not hand off")
    }
}

/// How thread 2 of the hand-off tour waits, and so how thread 1's hold passes to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Passing {
    /// With a fixed lease (30 s), which Redis must be told of: one hand-off script.
    Script,
    /// With the watchdog, as thread 1 holds: a free hand-off, no command at all, once thread 1's
    /// hold came while rlock listened on the lock's channel. So thread 2 waits, is passed the lock by
    /// script before the trace, and passes it to a thread 3 freely: Redis keeps thread 2's hold
    /// until thread 3's release unlocks it. By script still for the kinds that must write per
    /// acquisition (the fenced lock's token) or never pass freely (the write lock).
    Free,
}

impl Passing {
    /// How a hold of `kind` passes when thread 2 waits as `self` says.
    fn of(self, kind: InteropKind) -> Self {
        if kind == InteropKind::FENCED || kind == InteropKind::WRITE {
            Self::Script
        } else {
            self
        }
    }
}

/// Thread 1 of an rlock client holds the `kind` lock; a Java (HEAD) waiter and then rlock's thread
/// 2 wait for it, before anything is traced. Phases:
///
/// - "hand-off": thread 1 releases, and its hold passes to thread 2 (queued behind it in the
///   client's local queue) `passing` as it says: no instant without a holder, nothing published.
///   The Java waiter is not woken (it runs no script) and still waits at the end of the phase.
///   (Free: thread 2 passes to thread 3, as [`Passing::Free`] says.)
/// - "unlock": the last holder releases for real, publishing the unlock message; the Java waiter
///   wakes and acquires.
async fn hand_off_tour(kind: InteropKind, passing: Passing) -> Trace {
    let (name, keys) = hand_off_keys(kind);
    let server = RedisServer::start();
    // A streak may last a minute (default 10 ms): the release hands off however slow this run is.
    let rlock = Party::Rlock(
        rlock_tests::harness::client_with(&server, |config| {
            config.local_handoff_window = Duration::from_secs(60);
        })
        .await,
    );
    let java = Party::connect(Side::Java, &server).await;
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut tracer = Tracer::start(&server, &keys).await;
    let java_field = kind.field(&java.field(JAVA_THREAD));
    tracer.alias(java_field.as_bytes(), &kind.field(JAVA_FIELD));

    let lock = rlock.get(kind, name);
    let mut first = lock.lock(1).await;
    let java_waiting = java.get(kind, name).spawn_lock(JAVA_THREAD);
    tracer.redis().wait_waiting(kind, name, &java_field).await;
    let (mut next, to) = match passing.of(kind) {
        Passing::Script => (lock.lock_with_lease(2, Duration::from_secs(30)).boxed(), 2),
        Passing::Free => {
            // Thread 2, listening on the channel, is passed the lock by script; thread 3 waits.
            let mut second = lock.lock(2).boxed();
            assert!(futures::poll!(&mut second).is_pending(), "thread 2 waits");
            let channel = kind.channel(name, &rlock.field(2)).expect("a channel");
            let _ = tracer.redis().wait_parked(&channel, 2).await;
            first.release().await;
            first = tokio::time::timeout(Duration::from_secs(5), second)
                .await
                .expect("thread 2 is handed the lock");
            (lock.lock(3).boxed(), 3)
        }
    };
    // The acquire joins the local queue before its first await: the release finds it there.
    assert!(futures::poll!(&mut next).is_pending(), "thread {to} waits");

    tracer.mark("hand-off").await;
    first.release().await;
    let last = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the next thread is handed the lock");
    let held = tracer.redis().hash(name).await;
    assert_eq!(
        held,
        kind.holds(&rlock.field(2), 1),
        "thread 2 holds, once, in Redis"
    );
    assert!(!java_waiting.is_finished(), "the Java waiter still waits");

    tracer.mark("unlock").await;
    last.release().await;
    let (_, java_hold) = woken(java_waiting).await;

    let (trace, _) = tracer.finish(&node_of(&rlock)).await;
    java_hold.release().await;
    trace
}

/// What a hand-off of `kind` from owner `from` to owner `to` runs (`lua/*_hand_off.lua`): its latch
/// read (a re-send replays the stored outcome), the releasing owner's count read (a write lock's
/// mode first), the hash's size (the owner alone, besides a write lock's `mode`), the next owner's
/// field set, the releasing owner's deleted, the next owner's lease applied; a fenced lock then
/// takes the next owner's token, as every acquisition does; the outcome stored at the latch.
pub(crate) fn hand_off_script(kind: InteropKind, name: &str, from: &str, to: &str) -> Vec<String> {
    let (from, to, latch) = (kind.field(from), kind.field(to), latch(name));
    let mut script = commands(&[&["get", &latch]]);
    if kind == InteropKind::WRITE {
        script.extend(commands(&[&["hget", name, "mode"]]));
    }
    script.extend(commands(&[
        &["hget", name, &from],
        &["hlen", name],
        &["hset", name, &to, "1"],
        &["hdel", name, &from],
        &["pexpire", name, "30000"],
    ]));
    // The latch keeps the outcome (1, or the next owner's token) for a re-send to replay. A fenced
    // hand-off is traced in the hand-off tour alone, where thread 1 took token 1: the next is 2.
    let outcome = if kind == InteropKind::FENCED {
        script.push(format!("incr {}", token_key()));
        "2"
    } else {
        "1"
    };
    script.extend(commands(&[&["set", &latch, outcome, "px", "<ttl>"]]));
    script
}

/// The one script of `phase` in `trace`, run by owner `field` instead of thread 1.
pub(crate) fn script_of(trace: &Trace, phase: &str, field: &str) -> Vec<String> {
    let (_, scripts) = trace
        .iter()
        .find(|(name, _)| name == phase)
        .unwrap_or_else(|| panic!("no {phase:?} phase"));
    let [script] = scripts.as_slice() else {
        panic!("{phase:?} has one script");
    };
    script.iter().map(|c| c.replace(FIELD, field)).collect()
}

/// The hand-off tour's trace: the hand-off script alone (nothing for a free one), then the full
/// unlock of thread 2's field and the Java waiter's acquire, both as the kind's own trace has
/// them.
fn hand_off_expected(kind: InteropKind, passing: Passing) -> Trace {
    let (name, _) = hand_off_keys(kind);
    let own = if kind == InteropKind::REENTRANT {
        lock_expected(name, Side::Rlock)
    } else if kind == InteropKind::FENCED {
        fenced_expected(Side::Rlock)
    } else if kind == InteropKind::NON_REENTRANT {
        non_reentrant_expected(Side::Rlock)
    } else {
        write_expected(Side::Rlock)
    };
    let second = owner(2);
    let hand_off = match passing.of(kind) {
        Passing::Script => vec![hand_off_script(kind, name, FIELD, &second)],
        // No script: the streak's confirmation that the first owner's field is still there, which
        // the lending release waits for (docs/protocol.md §2.10).
        Passing::Free => vec![commands(&[&["hget", name, &second]])],
    };
    trace(vec![
        ("hand-off", hand_off),
        (
            "unlock",
            vec![
                script_of(&own, "full unlock", &second),
                script_of(&own, "acquire", JAVA_FIELD),
            ],
        ),
    ])
}

async fn hand_off_follows_its_script(kind: InteropKind, passing: Passing) {
    let trace = hand_off_tour(kind, passing).await;
    let label = format!("rlock {kind}, {passing:?}");
    assert_same_trace(&label, &trace, &hand_off_expected(kind, passing));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_hand_off_runs_one_script_and_publishes_nothing() {
    hand_off_follows_its_script(InteropKind::REENTRANT, Passing::Script).await;
}

/// Between watchdog holds the lock passes freely: to Java, one hold of thread 2's field, from the
/// hand-off that gave it to thread 3's release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_free_hand_off_runs_nothing_and_the_release_unlocks_the_first_field() {
    hand_off_follows_its_script(InteropKind::REENTRANT, Passing::Free).await;
}

/// A fenced acquisition must take a new token: even a watchdog waiter is passed the lock by script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_hand_off_runs_one_script_and_publishes_nothing() {
    hand_off_follows_its_script(InteropKind::FENCED, Passing::Free).await;
}

/// The write lock is never passed freely: this client's read acquire would be admitted as the
/// streak's first owner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_hand_off_runs_one_script_and_publishes_nothing() {
    hand_off_follows_its_script(InteropKind::WRITE, Passing::Free).await;
}

/// The non-reentrant lock hands off with its twin's (the `RLock`'s) script, and freely as it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_hand_off_runs_one_script_and_publishes_nothing() {
    hand_off_follows_its_script(InteropKind::NON_REENTRANT, Passing::Script).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_free_hand_off_runs_nothing() {
    hand_off_follows_its_script(InteropKind::NON_REENTRANT, Passing::Free).await;
}
