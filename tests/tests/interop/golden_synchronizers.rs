//! Golden traces of the synchronizers (docs/protocol.md §8.5–§8.7, §11.4, §11.7, §11.15, §11.16):
//! for a short tour of each, the literal Redis commands the protocol's tables imply, checked with
//! `MONITOR` against what rlock and the Redisson emulator (3.31 and HEAD) really ran. Keys,
//! channels and messages are literals here, for a plain name and for one that has its own braces
//! (`redisson_sc:` follows `prefixName`, the timeouts `suffixName`, and the count-down latch's
//! channel always wraps the name in braces).
//!
//! Every script invocation starts with its call, `call [<key>…] [<arg>…]`, where the protocol
//! gives it: the semaphore's `tryAcquire` and `release`, the permit-expirable semaphore's acquire
//! and `tryRelease(id)`, the latch's `trySetCount` and `countDown`. The other scripts it only
//! names or describes by their effects, so their keys and arguments are not compared (their call
//! line reads [`UNFIXED`]): what is compared for them is what the protocol fixes, the commands they
//! run on which keys, the channel and the message.
//!
//! Placeholders besides `golden`'s: `<now>` and `<now + 1 min>` for epoch milliseconds (the call's
//! clock, and an expiry a 60 s lease away), `<permit k>` for the tour's `k`-th permit id (its raw
//! 16 bytes), `<a fresh id>` for the id of an acquire that failed, `<expired permit>` for a permit
//! planted with an expiry long past.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;

use crate::golden::{Trace, Tracer, check_synchronizer_every_side, commands, mask, trace};
use crate::support::{Party, SemaphoreKind, Side};

/// The call line of a script whose keys and arguments the protocol does not fix.
const UNFIXED: &str = "call <keys and arguments not fixed by docs/protocol.md>";

/// The score of a permit that never expires (§8.6).
const NON_EXPIRING: &str = "922337203685477";

/// The publish command every script is passed on a single server (§2.6).
const PUBLISH: &str = "PUBLISH";

/// A script call with these keys and arguments, as [`Tracer::with_script_calls`] writes it.
fn call(keys: &[&str], args: &[&str]) -> String {
    format!("call [{}] [{}]", keys.join(" "), args.join(" "))
}

/// A script invocation: its call line, then its commands.
fn script(call: String, parts: &[&[&str]]) -> Vec<String> {
    [vec![call], commands(parts)].concat()
}

/// Deletes `keys`, which the previous party's tour left behind (the parties tour one server).
async fn start_afresh(tracer: &mut Tracer, keys: &[&str]) {
    let _: () = tracer.redis().conn.del(keys).await.expect("DEL");
}

/// Makes the call lines of `trace` read [`UNFIXED`] wherever `expected` has it.
fn mask_unfixed_calls(trace: &mut Trace, expected: &Trace) {
    for ((_, scripts), (_, expected)) in trace.iter_mut().zip(expected) {
        for (script, expected) in scripts.iter_mut().zip(expected) {
            if expected.first().is_some_and(|line| line == UNFIXED)
                && let Some(line) = script.first_mut()
                && line.starts_with("call ")
            {
                UNFIXED.clone_into(line);
            }
        }
    }
}

/// Epoch milliseconds a tour just used: `<now>`, or `<now + k min>` for an expiry `k` minutes
/// ahead (the tour takes well under half a minute).
fn mask_clock(trace: &mut Trace) {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH);
    let now = i64::try_from(since_epoch.expect("after 1970").as_millis()).expect("ms");
    let placeholder = |word: &str| {
        let ms: i64 = word.parse().ok()?;
        let minutes = (ms - now + 30_000).div_euclid(60_000);
        (minutes.abs() < 60).then(|| match minutes {
            0 => "<now>".to_owned(),
            minutes => format!("<now + {minutes} min>"),
        })
    };
    for line in trace
        .iter_mut()
        .flat_map(|(_, scripts)| scripts.iter_mut().flatten())
    {
        let words: Vec<String> = line
            .split(' ')
            .map(|word| {
                let bare = word.trim_matches(['[', ']']);
                match placeholder(bare) {
                    Some(placeholder) => word.replacen(bare, &placeholder, 1),
                    None => word.to_owned(),
                }
            })
            .collect();
        *line = words.join(" ");
    }
}

// ===== RSemaphore (§8.5) =====

/// The semaphore names of the tours, with their channel.
const SEMAPHORES: &[(&str, &str)] = &[
    ("golden:semaphore", "redisson_sc:{golden:semaphore}"),
    ("{golden}:semaphore", "redisson_sc:{golden}:semaphore"),
];

/// The time to live of the tour's last `trySetPermits`.
const SEMAPHORE_TTL: Duration = Duration::from_secs(60);

/// Every call of the table of §8.5, in the states that make each step run: setting up (and again),
/// taking a permit, a try that finds too few, giving it back, adding and removing permits,
/// draining, counting, `releaseIfExists` of a semaphore that exists and of one that does not, and
/// `trySetPermits` with a time to live.
async fn semaphore_tour(tracer: &mut Tracer, party: &Party, name: &str) {
    let semaphore = party.semaphore(SemaphoreKind::Plain, name);
    start_afresh(tracer, &[name]).await;
    tracer.mark("try set permits").await;
    assert!(semaphore.try_set_permits(2).await);
    tracer.mark("try set permits again").await;
    assert!(!semaphore.try_set_permits(5).await);
    tracer.mark("acquire").await;
    let permit = semaphore.acquire(1).await;
    tracer.mark("contended try").await;
    assert!(semaphore.try_acquire_for(2, Duration::ZERO).await.is_none());
    tracer.mark("release").await;
    permit.release().await;
    tracer.mark("add permits").await;
    semaphore.add_permits(3).await;
    tracer.mark("remove permits").await;
    semaphore.add_permits(-1).await;
    tracer.mark("drain").await;
    assert_eq!(semaphore.drain_permits().await, 4);
    tracer.mark("available permits").await;
    assert_eq!(semaphore.available_permits().await, 0);
    tracer.mark("release if exists").await;
    assert!(semaphore.release_if_exists(1).await);
    let _: () = tracer.redis().conn.del(name).await.expect("DEL");
    tracer.mark("release if missing").await;
    assert!(!semaphore.release_if_exists(1).await);
    tracer.mark("try set permits with a ttl").await;
    assert!(semaphore.try_set_permits_with_ttl(3, SEMAPHORE_TTL).await);
}

/// §8.5's table, step by step, for semaphore `n` and its channel `c`. Every publish carries the
/// new count; taking and draining publish nothing; the count is a plain `GET`.
fn semaphore_expected(n: &str, c: &str) -> Trace {
    trace(vec![
        (
            "try set permits",
            vec![script(
                UNFIXED.into(),
                &[&["get", n], &["set", n, "2"], &["publish", c, "2"]],
            )],
        ),
        (
            "try set permits again",
            vec![script(UNFIXED.into(), &[&["get", n]])],
        ),
        (
            // §8.5: `tryAcquire` is called with its value alone, `KEYS = [N]`, `ARGV = [p]`.
            "acquire",
            vec![script(
                call(&[n], &["1"]),
                &[&["get", n], &["decrby", n, "1"]],
            )],
        ),
        (
            "contended try",
            vec![script(call(&[n], &["2"]), &[&["get", n]])],
        ),
        (
            "release",
            vec![script(
                call(&[n, c], &["1", PUBLISH]),
                &[&["incrby", n, "1"], &["publish", c, "2"]],
            )],
        ),
        (
            "add permits",
            vec![script(
                UNFIXED.into(),
                &[&["get", n], &["set", n, "5"], &["publish", c, "5"]],
            )],
        ),
        (
            // A Lua number, written without a decimal point (§11.15).
            "remove permits",
            vec![script(
                UNFIXED.into(),
                &[&["get", n], &["set", n, "4"], &["publish", c, "4"]],
            )],
        ),
        (
            "drain",
            vec![script(UNFIXED.into(), &[&["get", n], &["set", n, "0"]])],
        ),
        ("available permits", vec![commands(&[&["get", n]])]),
        (
            "release if exists",
            vec![script(
                UNFIXED.into(),
                &[&["exists", n], &["incrby", n, "1"], &["publish", c, "1"]],
            )],
        ),
        (
            "release if missing",
            vec![script(UNFIXED.into(), &[&["exists", n]])],
        ),
        (
            "try set permits with a ttl",
            vec![script(
                UNFIXED.into(),
                &[
                    &["get", n],
                    &["set", n, "3", "px", "<ttl>"],
                    &["publish", c, "3"],
                ],
            )],
        ),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_scripts_follow_the_protocol() {
    let ttl = u64::try_from(SEMAPHORE_TTL.as_millis()).expect("ms");
    for &(name, channel) in SEMAPHORES {
        let tour = async |tracer: &mut Tracer, party: &Party| {
            semaphore_tour(tracer, party, name).await;
        };
        let expected = semaphore_expected(name, channel);
        let adjust = |trace: &mut Trace| mask_unfixed_calls(trace, &expected);
        let expected = |_| expected.clone();
        check_synchronizer_every_side(&[name], &[ttl], tour, adjust, expected).await;
    }
}

// ===== RPermitExpirableSemaphore (§8.6) =====

/// The permit-expirable semaphore names of the tours, with their timeouts and channel.
const EXPIRABLES: &[(&str, &str, &str)] = &[
    (
        "golden:expirable",
        "{golden:expirable}:timeout",
        "redisson_sc:{golden:expirable}",
    ),
    (
        "{golden}:expirable",
        "{golden}:expirable:timeout",
        "redisson_sc:{golden}:expirable",
    ),
];

/// The lease of the tour's expiring permits: `<now + 1 min>`.
const LEASE: Duration = Duration::from_secs(60);

/// The PTTL the tour gives the semaphore before its last acquire, which gives it to the timeouts.
const PTTL: i64 = 60_000;

/// A permit planted in the timeouts with an expiry long past (a printable id, so that no random
/// id reads like it).
const EXPIRED: &[u8; 16] = b"expired-permit!!";

/// The raw bytes of a hex permit id.
fn id_bytes(hex: &str) -> Vec<u8> {
    hex.parse::<rlock_redisson::PermitId>()
        .expect("a hex permit id")
        .as_bytes()
        .to_vec()
}

/// Plants [`EXPIRED`] in `timeouts`, as a permit some client took and never gave back.
async fn plant_expired_permit(tracer: &mut Tracer, timeouts: &str) {
    let redis = tracer.redis();
    let _: () = redis.conn.zadd(timeouts, EXPIRED, 1).await.expect("ZADD");
}

/// Every call of §8.6 in the states that make each step run: set-up; acquires of a permit that
/// never expires and of one with a lease; a try that finds none (and answers the nearest expiry);
/// the lease read and renewed; an expired permit counted back in by a count and by an acquire;
/// releases of one permit (and again, and of one that expired), of a list; adding, removing and
/// setting permits (and again, unchanged); an acquire while the semaphore has a TTL.
async fn expirable_tour(tracer: &mut Tracer, party: &Party, name: &str, timeouts: &str) {
    let semaphore = party.expirable(name);
    start_afresh(tracer, &[name, timeouts]).await;
    tracer.alias(EXPIRED, "<expired permit>");
    tracer.mark("try set permits").await;
    assert!(semaphore.try_set_permits(2).await);
    tracer.mark("acquire").await;
    let forever = semaphore.acquire(None).await;
    tracer.alias(&id_bytes(&forever), "<permit 1>");
    tracer.mark("acquire with a lease").await;
    let leased = semaphore.acquire(Some(LEASE)).await;
    tracer.alias(&id_bytes(&leased), "<permit 2>");
    tracer.mark("contended try").await;
    assert_eq!(semaphore.try_acquire(Duration::ZERO, None).await, None);
    tracer.mark("lease time").await;
    assert!(semaphore.lease_time(&leased).await.is_some());
    tracer.mark("update lease time").await;
    assert!(semaphore.update_lease_time(&leased, 2 * LEASE).await);
    plant_expired_permit(tracer, timeouts).await;
    tracer
        .mark("available permits reclaim an expired permit")
        .await;
    assert_eq!(semaphore.available_permits().await, 1);
    let _: () = tracer.redis().conn.decr(name, 1).await.expect("DECRBY");
    plant_expired_permit(tracer, timeouts).await;
    tracer.mark("acquire reclaims an expired permit").await;
    let third = semaphore.acquire(Some(LEASE)).await;
    tracer.alias(&id_bytes(&third), "<permit 3>");
    tracer.mark("release").await;
    semaphore.release(&forever).await;
    tracer.mark("release a released permit").await;
    assert!(!semaphore.try_release(&forever).await);
    plant_expired_permit(tracer, timeouts).await;
    tracer.mark("release an expired permit").await;
    let expired: String = EXPIRED.iter().map(|byte| format!("{byte:02x}")).collect();
    assert!(!semaphore.try_release(&expired).await);
    tracer.mark("release many").await;
    assert_eq!(semaphore.try_release_many(&[leased, third]).await, 2);
    tracer.mark("add permits").await;
    semaphore.add_permits(2).await;
    tracer.mark("remove permits").await;
    semaphore.add_permits(-1).await;
    tracer.mark("set permits").await;
    semaphore.set_permits(6).await;
    tracer.mark("set permits unchanged").await;
    semaphore.set_permits(6).await;
    let _: () = tracer
        .redis()
        .conn
        .pexpire(name, PTTL)
        .await
        .expect("PEXPIRE");
    tracer.mark("acquire while the semaphore expires").await;
    let fourth = semaphore.acquire(None).await;
    tracer.alias(&id_bytes(&fourth), "<permit 4>");
}

/// §8.6 step by step for semaphore `n`, its timeouts `t` and its channel `c` on `side`.
fn expirable_expected(n: &str, t: &str, c: &str, side: Side) -> Trace {
    let p = NON_EXPIRING;
    let reclaim_one: &[&str] = &["zrangebyscore", t, "0", "<now>", "limit", "0", "1"];
    let reclaim_all: &[&str] = &["zrangebyscore", t, "0", "<now>"];
    let acquire =
        |expiry: &str, id: &str| call(&[n, t, c], &["1", expiry, "<now>", p, PUBLISH, id]);
    let release = |id: &str| call(&[n, c, t], &[id, "1", "<now>", PUBLISH]);
    let mut available = commands(&[
        reclaim_all,
        &["zrem", t, "<expired permit>"],
        &["incrby", n, "1"],
        &["publish", c, "1"],
        &["get", n],
    ]);
    if side == Side::Rlock {
        // rlock counts available and taken permits in one script, for all three counts.
        available.push(format!("zcard {t}"));
    }
    trace(vec![
        (
            "try set permits",
            vec![script(
                UNFIXED.into(),
                &[&["get", n], &["set", n, "2"], &["publish", c, "2"]],
            )],
        ),
        (
            // Steps 1 (nothing expired) and 2: the permit's score never expires.
            "acquire",
            vec![script(
                acquire(p, "<permit 1>"),
                &[
                    reclaim_one,
                    &["get", n],
                    &["decrby", n, "1"],
                    &["zadd", t, p, "<permit 1>"],
                    &["pttl", n],
                ],
            )],
        ),
        (
            "acquire with a lease",
            vec![script(
                acquire("<now + 1 min>", "<permit 2>"),
                &[
                    reclaim_one,
                    &["get", n],
                    &["decrby", n, "1"],
                    &["zadd", t, "<deadline>", "<permit 2>"],
                    &["pttl", n],
                ],
            )],
        ),
        (
            // Step 3: the nearest expiry is the leased permit's.
            "contended try",
            vec![script(
                acquire(p, "<a fresh id>"),
                &[
                    reclaim_one,
                    &["get", n],
                    &["zrange", t, "0", "0", "withscores"],
                ],
            )],
        ),
        (
            "lease time",
            vec![script(
                UNFIXED.into(),
                &[reclaim_all, &["zscore", t, "<permit 2>"]],
            )],
        ),
        (
            "update lease time",
            vec![script(
                UNFIXED.into(),
                &[
                    reclaim_all,
                    &["zscore", t, "<permit 2>"],
                    &["zadd", t, "<deadline>", "<permit 2>"],
                ],
            )],
        ),
        (
            "available permits reclaim an expired permit",
            vec![[vec![UNFIXED.to_owned()], available].concat()],
        ),
        (
            // Step 1 counts the expired permit back in (and publishes), step 2 takes it.
            "acquire reclaims an expired permit",
            vec![script(
                acquire("<now + 1 min>", "<permit 3>"),
                &[
                    reclaim_one,
                    &["zrem", t, "<expired permit>"],
                    &["incrby", n, "1"],
                    &["publish", c, "1"],
                    &["get", n],
                    &["decrby", n, "1"],
                    &["zadd", t, "<deadline>", "<permit 3>"],
                    &["pttl", n],
                ],
            )],
        ),
        (
            "release",
            vec![script(
                release("<permit 1>"),
                &[
                    &["zscore", t, "<permit 1>"],
                    &["zrem", t, "<permit 1>"],
                    &["incrby", n, "1"],
                    &["publish", c, "1"],
                ],
            )],
        ),
        (
            "release a released permit",
            vec![script(
                release("<permit 1>"),
                &[&["zscore", t, "<permit 1>"], &["zrem", t, "<permit 1>"]],
            )],
        ),
        (
            // `tryRelease(id)` step 4: counted back in (and published), but answered 0.
            "release an expired permit",
            vec![script(
                release("<expired permit>"),
                &[
                    &["zscore", t, "<expired permit>"],
                    &["zrem", t, "<expired permit>"],
                    &["incrby", n, "1"],
                    &["publish", c, "2"],
                ],
            )],
        ),
        (
            // HEAD's list form: every id held, the reclaim, then the number released is published.
            "release many",
            vec![script(
                UNFIXED.into(),
                &[
                    &["zscore", t, "<permit 2>"],
                    &["zscore", t, "<permit 3>"],
                    reclaim_all,
                    &["zrem", t, "<permit 2>", "<permit 3>"],
                    &["incrby", n, "2"],
                    &["publish", c, "2"],
                ],
            )],
        ),
        (
            // The amount added is published, not the new count.
            "add permits",
            vec![script(
                UNFIXED.into(),
                &[&["get", n], &["set", n, "6"], &["publish", c, "2"]],
            )],
        ),
        (
            "remove permits",
            vec![script(UNFIXED.into(), &[&["get", n], &["set", n, "5"]])],
        ),
        (
            // The total is published.
            "set permits",
            vec![script(
                UNFIXED.into(),
                &[
                    &["get", n],
                    &["zcard", t],
                    &["incrby", n, "1"],
                    &["publish", c, "6"],
                ],
            )],
        ),
        (
            "set permits unchanged",
            vec![script(UNFIXED.into(), &[&["get", n], &["zcard", t]])],
        ),
        (
            // Step 2: the timeouts get the semaphore's PTTL.
            "acquire while the semaphore expires",
            vec![script(
                acquire(p, "<permit 4>"),
                &[
                    reclaim_one,
                    &["get", n],
                    &["decrby", n, "1"],
                    &["zadd", t, p, "<permit 4>"],
                    &["pttl", n],
                    &["pexpire", t, "<pttl>"],
                ],
            )],
        ),
    ])
}

/// The id a failed acquire sent (after the publish command, §8.6) is random: `<a fresh id>`.
fn mask_fresh_id(trace: &mut Trace) {
    let publish = format!("{PUBLISH} ");
    for (_, scripts) in trace
        .iter_mut()
        .filter(|(phase, _)| phase == "contended try")
    {
        for line in scripts.iter_mut().flat_map(|script| script.first_mut()) {
            if let Some(at) = line.find(&publish) {
                line.truncate(at + publish.len());
                line.push_str("<a fresh id>]");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_semaphore_scripts_follow_the_protocol() {
    for &(name, timeouts, channel) in EXPIRABLES {
        let tour = async |tracer: &mut Tracer, party: &Party| {
            expirable_tour(tracer, party, name, timeouts).await;
        };
        let adjust = |trace: &mut Trace| {
            mask_clock(trace);
            mask_fresh_id(trace);
            // §8.6: the calls other than the acquire begin with "the same" reclaim, of every
            // expired permit: rlock asks for all with `LIMIT 0 -1`, the emulator without a LIMIT.
            for line in trace.iter_mut().flat_map(|(_, s)| s.iter_mut().flatten()) {
                if let Some(all) = line.strip_suffix(" limit 0 -1") {
                    *line = all.to_owned();
                }
            }
            let pexpire = format!("pexpire {timeouts}");
            let pttl = PTTL.unsigned_abs();
            mask(
                trace,
                "acquire while the semaphore expires",
                &pexpire,
                pttl - 1_000..=pttl,
                "<pttl>",
            );
            mask_unfixed_calls(
                trace,
                &expirable_expected(name, timeouts, channel, Side::Java),
            );
        };
        let expected = |side| expirable_expected(name, timeouts, channel, side);
        check_synchronizer_every_side(&[name, timeouts], &[], tour, adjust, expected).await;
    }
}

// ===== RCountDownLatch (§8.7) =====

/// The latch names of the tours, with their channel: braces always added.
const LATCHES: &[(&str, &str)] = &[
    (
        "golden:latch",
        "redisson_countdownlatch__channel__{golden:latch}",
    ),
    (
        "{golden}:latch",
        "redisson_countdownlatch__channel__{{golden}:latch}",
    ),
];

/// Every call of §8.7's table in the states that make each step run: setting a count (and again),
/// reading it, counting down (to zero, and past it), waiting on an open latch, deleting a latch
/// (and one that is gone).
async fn latch_tour(tracer: &mut Tracer, party: &Party, name: &str) {
    let latch = party.count_down_latch(name);
    start_afresh(tracer, &[name]).await;
    tracer.mark("try set count").await;
    assert!(latch.try_set_count(2).await);
    tracer.mark("try set count again").await;
    assert!(!latch.try_set_count(5).await);
    tracer.mark("count").await;
    assert_eq!(latch.count().await, 2);
    tracer.mark("count down").await;
    latch.count_down().await;
    tracer.mark("last count down").await;
    latch.count_down().await;
    tracer.mark("count down an open latch").await;
    latch.count_down().await;
    tracer.mark("await an open latch").await;
    assert!(latch.await_for(Duration::ZERO).await);
    let _: () = tracer.redis().conn.set(name, 3).await.expect("SET");
    tracer.mark("delete").await;
    assert!(latch.delete().await);
    tracer.mark("delete a missing latch").await;
    assert!(!latch.delete().await);
}

/// §8.7 step by step for latch `n` and its channel `c`: `1` closes (a count was set, the latch
/// deleted), `0` opens (zero reached); a missing count goes to -1 and is deleted silently.
fn latch_expected(n: &str, c: &str) -> Trace {
    let count_down = call(&[n, c], &["0", PUBLISH]);
    trace(vec![
        (
            "try set count",
            vec![script(
                call(&[n, c], &["1", "2", PUBLISH]),
                &[&["exists", n], &["set", n, "2"], &["publish", c, "1"]],
            )],
        ),
        (
            "try set count again",
            vec![script(
                call(&[n, c], &["1", "5", PUBLISH]),
                &[&["exists", n]],
            )],
        ),
        ("count", vec![commands(&[&["get", n]])]),
        (
            "count down",
            vec![script(count_down.clone(), &[&["decr", n]])],
        ),
        (
            "last count down",
            vec![script(
                count_down.clone(),
                &[&["decr", n], &["del", n], &["publish", c, "0"]],
            )],
        ),
        (
            "count down an open latch",
            vec![script(count_down, &[&["decr", n], &["del", n]])],
        ),
        ("await an open latch", vec![commands(&[&["get", n]])]),
        (
            "delete",
            vec![script(UNFIXED.into(), &[&["del", n], &["publish", c, "1"]])],
        ),
        (
            "delete a missing latch",
            vec![script(UNFIXED.into(), &[&["del", n]])],
        ),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_down_latch_scripts_follow_the_protocol() {
    for &(name, channel) in LATCHES {
        let tour = async |tracer: &mut Tracer, party: &Party| {
            latch_tour(tracer, party, name).await;
        };
        let expected = latch_expected(name, channel);
        let adjust = |trace: &mut Trace| mask_unfixed_calls(trace, &expected);
        let expected = |_| expected.clone();
        check_synchronizer_every_side(&[name], &[], tour, adjust, expected).await;
    }
}
