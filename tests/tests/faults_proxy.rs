//! Proxy faults under the history checker, in every topology: `rlock-torture` workers contend for
//! two locks through fault proxies (`rlock_tests::proxied`) while the proxies lose the replies of
//! scripts that ran, hold replies back, and reset every connection, at random.
//!
//! Besides the checker's verdict (no overlap outside signalled lease loss, every attempt completed,
//! no hold left in Redis), a monitor reads the lock hashes on the master directly every 2 ms: the
//! workers never re-enter, so a hold count of 2 is an acquire applied twice (what a client that
//! re-sends a script after a lost reply does), and must never be seen.
//!
//! The workers' tasks hand locks to each other locally (rlock's default); `hand_off_replies_lost_*`
//! loses the replies of exactly those hand-offs, next to a worker that races without hand-off.
//!
//! `failover_lost_replies_*` kills the locks' master in the middle of that (Sentinel, cluster) and
//! holds what survives the failover to README.md's "What a failover can lose".
//!
//! `a_black_holed_subscriber_under_force_unlocks` makes one worker's subscriber connection deaf
//! (`FaultProxy::black_hole_connection`) while other clients force-unlock the locks its tasks pass
//! among themselves.
//!
//! The workers contend for reentrant locks; `proxy_faults_single::<kind>` and
//! `hand_off_replies_lost_single::<kind>` play the same on the non-reentrant kinds (whose acquire
//! scripts refuse a re-entry) in one topology, the single server: the rest of what those kinds run
//! is their twins'.
//!
//! Each scenario runs a few seconds in the default suite (a failover about 20 s, so the default
//! suite plays the Sentinel one only, the cluster's takes longer); `scripts/soak.sh` runs them all, longer (`RLOCK_SOAK_SECS`),
//! and adds up their figures.

use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::Commands;
use rlock_tests::RedisServer;
use rlock_tests::harness::raw_blocking;
use rlock_tests::history::fleet::FleetKind;
use rlock_tests::history::monitor::LOCK_HAND_OFF;
use rlock_tests::history::{
    DoubleApplies, FaultKind, Fleet, Operator, Report, Summary, WorkerSpec, local_hand_offs,
    now_ns, publish, scenario_length, script_sha1,
};
use rlock_tests::kind_matrix;
use rlock_tests::proxied::{Deployment, Proxied};
use rlock_tests::proxy::{Direction, FaultProxy, Match};
use rlock_tests::topology::SentinelSetup;

const TORTURE: &str = env!("CARGO_BIN_EXE_rlock-torture");
/// One hash tag: every lock on one master, in a cluster too.
const NAMES: [&str; 2] = ["{proxied}a", "{proxied}b"];

/// The `rlock-torture work` flags that reach `proxied` through its proxies, with the fences on
/// the server at `fence_url`.
fn client_args(proxied: &Proxied, fence_url: String) -> (String, Vec<String>) {
    let config = proxied.config();
    let topology = match proxied.deployment {
        Deployment::Single => "single",
        Deployment::MasterReplica => "master-replica",
        Deployment::Sentinel => "sentinel",
        Deployment::Cluster | Deployment::ReplicatedCluster => "cluster",
    };
    let mut args = vec!["--topology".to_owned(), topology.to_owned()];
    if !config.nodes.is_empty() {
        args.extend(["--nodes".to_owned(), config.nodes.join(",")]);
    }
    if !config.nat_map.is_empty() {
        let pairs: Vec<String> = config
            .nat_map
            .iter()
            .map(|(from, to)| format!("{from}={to}"))
            .collect();
        args.extend(["--nat-map".to_owned(), pairs.join(",")]);
    }
    if proxied.deployment == Deployment::Sentinel {
        args.extend([
            "--master-name".to_owned(),
            SentinelSetup::MASTER_NAME.to_owned(),
        ]);
    }
    args.extend(["--fence-url".to_owned(), fence_url]);
    (config.url, args)
}

/// Injects proxy faults into `proxy` with `fault` until `until`, then records the lost replies
/// that fired as `lost` in the fleet's history (the other faults record themselves); returns how
/// many fired.
fn inject(
    proxy: &FaultProxy,
    until: Instant,
    fleet: &Mutex<Fleet>,
    lost: FaultKind,
    mut fault: impl FnMut(&FaultProxy, &Mutex<Fleet>),
) -> usize {
    let lost_before = proxy.lost_replies();
    while Instant::now() < until {
        fault(proxy, fleet);
    }
    let fired = proxy.lost_replies() - lost_before;
    for _ in 0..fired {
        fleet.lock().record_fault("proxy", lost);
    }
    fired
}

/// The pause before each injected fault.
fn pause() {
    thread::sleep(Duration::from_millis(fastrand::u64(100..300)));
}

/// A lost reply of any script, armed for one of the next five.
fn arm_lost_reply(proxy: &FaultProxy) {
    proxy.lose_reply(Match::command("EVALSHA"), fastrand::usize(1..=5));
}

/// One lost reply after a pause.
fn lost_reply(proxy: &FaultProxy, _: &Mutex<Fleet>) {
    pause();
    arm_lost_reply(proxy);
}

/// Random faults, the first of them a lost reply: however short the scenario runs (the soak may
/// give it only its floor), it loses a reply, which a run of nine other faults once left out.
fn random_faults() -> impl FnMut(&FaultProxy, &Mutex<Fleet>) {
    let mut first = true;
    move |proxy, fleet| {
        if std::mem::take(&mut first) {
            lost_reply(proxy, fleet);
        } else {
            random_fault(proxy, fleet);
        }
    }
}

/// One random fault after a pause: a lost reply of any script (armed for one of the next five),
/// replies held back for a while, or every connection reset.
fn random_fault(proxy: &FaultProxy, fleet: &Mutex<Fleet>) {
    pause();
    match fastrand::u8(0..4) {
        0 | 1 => arm_lost_reply(proxy),
        2 => {
            proxy.delay_replies(Duration::from_millis(fastrand::u64(20..200)));
            thread::sleep(Duration::from_millis(300));
            proxy.delay_replies(Duration::ZERO);
            fleet
                .lock()
                .record_fault("proxy", FaultKind::DelayedReplies);
        }
        _ => {
            proxy.reset();
            fleet
                .lock()
                .record_fault("proxy", FaultKind::ConnectionReset);
        }
    }
}

/// Runs `workers` (one process each) on `proxied` for `run_for` while `fault` keeps injecting
/// faults into the proxy of the locks' master (lost replies recorded as `lost`), and a monitor
/// looks for acquires applied twice. Publishes the figures of `scenario`, with the double applies
/// and the local hand-offs (script hand-offs of reentrant and non-reentrant locks, see
/// `local_hand_offs`, plus the free ones the workers report: `Summary::count_hand_offs`) counted
/// in, asserts that no
/// acquire was applied twice, and returns the checked history and its figures.
fn under_faults(
    scenario: &str,
    proxied: &Proxied,
    url: &str,
    workers: &[WorkerSpec],
    run_for: Duration,
    lost: FaultKind,
    fault: impl FnMut(&FaultProxy, &Mutex<Fleet>),
) -> (Report, Summary) {
    let master = proxied.master_of(NAMES[0]);
    let mut admin = raw_blocking(master);
    let hand_offs_before = local_hand_offs(&mut admin);
    let fleet = Mutex::new(Fleet::new(TORTURE, &master.url()));
    for spec in workers {
        let _ = fleet.lock().spawn_on(url, spec);
    }
    let doubles = DoubleApplies::watch(raw_blocking(master), &NAMES);
    let _ = inject(
        proxied.proxy_of(NAMES[0]),
        Instant::now() + run_for,
        &fleet,
        lost,
        fault,
    );
    let report = fleet.into_inner().finish(Duration::from_secs(3));
    let doubles = doubles.stop();
    let mut summary = report.summary(scenario);
    summary.double_applies = doubles.len();
    summary.count_hand_offs(local_hand_offs(&mut admin) - hand_offs_before);
    publish(&summary);
    assert!(doubles.is_empty(), "acquires applied twice: {doubles:?}");
    (report, summary)
}

/// How many lost replies of `kind` the figures show.
fn lost(summary: &Summary, kind: FaultKind) -> usize {
    summary.faults.get(kind.label()).copied().unwrap_or(0)
}

/// A scenario's name in the figures: `what::<deployment>`, then `::<kind>` but for the reentrant
/// lock.
fn named(what: &str, deployment: Deployment, kind: FleetKind) -> String {
    match kind {
        FleetKind::Lock => format!("{what}::{deployment:?}"),
        _ => format!("{what}::{deployment:?}::{}", kind.name()),
    }
}

fn scenario(deployment: Deployment, kind: FleetKind) {
    let proxied = Proxied::start(deployment);
    let (url, args) = client_args(&proxied, proxied.master_of(NAMES[0]).url());
    let run_for = scenario_length(Duration::from_secs(4));
    let spec = WorkerSpec {
        run_for,
        hold: Duration::from_millis(10),
        command_timeout: Duration::from_millis(500),
        kind,
        client_args: args,
        ..WorkerSpec::new(&NAMES)
    };
    let workers = vec![spec; 3];
    let (report, summary) = under_faults(
        &named("proxy_faults", deployment, kind),
        &proxied,
        &url,
        &workers,
        run_for,
        FaultKind::LostReply,
        random_faults(),
    );
    assert!(
        lost(&summary, FaultKind::LostReply) > 0,
        "some replies were lost: {:?}",
        summary.faults
    );
    report.assert_sound();
}

#[test]
fn proxy_faults_single() {
    scenario(Deployment::Single, FleetKind::Lock);
}

#[test]
fn proxy_faults_master_replica() {
    scenario(Deployment::MasterReplica, FleetKind::Lock);
}

#[test]
fn proxy_faults_sentinel() {
    scenario(Deployment::Sentinel, FleetKind::Lock);
}

#[test]
fn proxy_faults_cluster() {
    scenario(Deployment::Cluster, FleetKind::Lock);
}

/// Replies of the hand-off script lost again and again: processes of four tasks pass the locks
/// among their tasks (short holds, well inside the 10 ms hand-off window), next to a process whose
/// tasks race in Redis without hand-off (`--no-local-handoff`). A hand-off whose reply is lost is
/// re-sent under its latch, which replays its outcome, and its waiter takes the lock as that says:
/// no hold may be counted twice, left behind or overlap another. `kind` hands off with the
/// reentrant lock's script. The holds have a fixed lease: a watchdog hold passes to a watchdog
/// waiter freely, with no command whose reply could be lost.
fn hand_off_replies_lost(deployment: Deployment, kind: FleetKind) {
    let proxied = Proxied::start(deployment);
    let (url, args) = client_args(&proxied, proxied.master_of(NAMES[0]).url());
    let run_for = scenario_length(Duration::from_secs(3));
    let handing_off = WorkerSpec {
        run_for,
        tasks: 4,
        hold: Duration::from_millis(2),
        think: Duration::from_millis(1),
        command_timeout: Duration::from_millis(500),
        kind,
        client_args: args,
        // Far longer than any hold: no lease runs out.
        lease: Some(Duration::from_secs(30)),
        ..WorkerSpec::new(&NAMES)
    };
    let racing = WorkerSpec {
        tasks: 2,
        local_handoff: false,
        ..handing_off.clone()
    };
    let workers = [handing_off.clone(), handing_off, racing];
    let hand_off = Match::command("EVALSHA").with_arg(script_sha1(LOCK_HAND_OFF));
    let (report, summary) = under_faults(
        &named("lost hand-off replies", deployment, kind),
        &proxied,
        &url,
        &workers,
        run_for,
        FaultKind::LostHandOffReply,
        |proxy, _| {
            thread::sleep(Duration::from_millis(fastrand::u64(50..150)));
            proxy.lose_reply(hand_off.clone(), fastrand::usize(1..=3));
        },
    );
    assert!(summary.hand_offs > 0, "locks were handed off locally");
    assert!(
        lost(&summary, FaultKind::LostHandOffReply) > 0,
        "some hand-offs' replies were lost: {:?}",
        summary.faults
    );
    report.assert_sound();
}

#[test]
fn hand_off_replies_lost_single() {
    hand_off_replies_lost(Deployment::Single, FleetKind::Lock);
}

/// A scenario's case in `$deployment` on a kind other than the reentrant lock, as
/// `<scenario>::<kind>` next to the reentrant lock's `<scenario>`: `$play($deployment, kind)`.
macro_rules! proxy_case {
    ($scenario:ident ($play:ident, $deployment:ident) [] $test:ident: $kind:ident($object:path)) => {
        #[test]
        fn $test() {
            super::$play(super::Deployment::$deployment, super::FleetKind::$kind);
        }
    };
}

// The non-reentrant kinds behind the proxies of a single server.
kind_matrix! {
    proxy_faults_single => proxy_case!(scenario, Single),
    skip {
        lock: "its case is the test `proxy_faults_single` itself",
        fair: "not behind the proxies: lost_replies.rs loses each of its scripts' replies",
        spin: "not behind the proxies: lost_replies.rs loses each of its scripts' replies",
        fenced: "not behind the proxies: lost_replies.rs loses each of its scripts' replies",
        read: "not behind the proxies: lost_replies.rs loses each of its scripts' replies",
        write: "not behind the proxies: lost_replies.rs loses each of its scripts' replies",
    },
}

// The fair kinds hand nothing off.
kind_matrix! {
    hand_off_replies_lost_single => proxy_case!(hand_off_replies_lost, Single),
    skip {
        lock: "its case is the test `hand_off_replies_lost_single` itself",
        fair: "no local hand-off: the queue's head takes the lock",
        spin: "no local hand-off: its waiters poll",
        fenced: "not behind the proxies: lost_replies.rs loses its hand-off script's replies",
        read: "readers share: nothing is handed off",
        write: "not behind the proxies: lost_replies.rs loses its hand-off script's replies",
        non_reentrant_fair: "no local hand-off: the queue's head takes the lock",
    },
}

#[test]
fn hand_off_replies_lost_master_replica() {
    hand_off_replies_lost(Deployment::MasterReplica, FleetKind::Lock);
}

#[test]
fn hand_off_replies_lost_sentinel() {
    hand_off_replies_lost(Deployment::Sentinel, FleetKind::Lock);
}

#[test]
fn hand_off_replies_lost_cluster() {
    hand_off_replies_lost(Deployment::Cluster, FleetKind::Lock);
}

/// The failover scenarios' locks: one held across the failover by a worker whose acquisitions a
/// replica acknowledges, one by a worker whose acquisitions do not wait for that.
const FAILOVER_NAMES: [&str; 2] = ["{failover}kept", "{failover}losable"];
/// The longest failover a scenario accepts, from the master's death until the promoted replica
/// takes writes as every node sees it. With Sentinel, `down-after-milliseconds` (1 s), then the
/// election: 2.1 to 2.3 s measured. In the cluster, the node timeout (2 s), the masters' agreement
/// that the node failed, then the replica's election delay (0.5 to 1 s): 3.4 to 4.8 s measured.
fn max_outage(deployment: Deployment) -> Duration {
    match deployment {
        Deployment::Sentinel => Duration::from_secs(4),
        _ => Duration::from_secs(8),
    }
}

/// A failover while the proxies lose replies of scripts that ran. Two processes contend for both
/// locks through the proxies, one whose acquisitions wait for the replica (`WAIT`, rlock's
/// default), one whose acquisitions do not (`check_lock_synced_replicas` off), while replies are
/// lost, first on the master's proxy. Then each lock is taken by a long holder of its kind, the
/// master is killed (`SIGKILL`) while both hold, and a replica is promoted; the losses go on on the
/// promoted replica's proxy.
///
/// README.md, "What a failover can lose": an acquisition that a replica acknowledged survives a
/// failover to that replica (here the only one); one that may have reached the master alone may be
/// lost, and its holder is then told so. The test checks the first in Redis itself (the
/// acknowledged hold is on the promoted replica) and the checker holds the whole history to
/// exactly that rule (`rlock_tests::history::checker`, "What a failover may lose"), besides what
/// `scenario` checks; the monitor looks for acquires applied twice on the master, then on the
/// promoted replica.
fn failover_lost_replies(deployment: Deployment) {
    let mut proxied = Proxied::start(deployment);
    // The fences live on a server of their own: the failover must not take them with it.
    let fences = RedisServer::start();
    let (url, args) = client_args(&proxied, fences.url());
    let max_outage = max_outage(deployment);
    // The workers' leases (watchdog timeout): more than three outages. A lease renewed up to a third
    // of it before the master died has two thirds left, more than an outage and the renewal
    // interval after it: a hold lost by then was lost by the failover, not by its lease running out.
    let lease = max_outage * 7 / 2;
    // The long holders hold through the whole outage, then long enough for the others to try their
    // locks on the promoted replica.
    let long_hold = max_outage + Duration::from_secs(2);
    let run_for = scenario_length(long_hold + Duration::from_secs(6));
    let contender = WorkerSpec {
        run_for,
        hold: Duration::from_millis(10),
        wait: Some(Duration::from_secs(2)),
        watchdog: lease,
        command_timeout: Duration::from_millis(500),
        client_args: args,
        ..WorkerSpec::new(&FAILOVER_NAMES)
    };
    let long_holder = |name: &str, replica_acks| WorkerSpec {
        names: vec![name.to_owned()],
        tasks: 1,
        // One attempt: its hold outlasts the run.
        run_for: Duration::from_millis(500),
        hold: long_hold,
        steady_hold: true,
        wait: None,
        replica_acks,
        ..contender.clone()
    };
    let master = proxied.master_of(FAILOVER_NAMES[0]);
    let fleet = Mutex::new(Fleet::new(TORTURE, &master.url()));
    let started = Instant::now();
    for replica_acks in [true, false] {
        let spec = WorkerSpec {
            replica_acks,
            ..contender.clone()
        };
        let _ = fleet.lock().spawn_on(&url, &spec);
    }
    let doubles = DoubleApplies::watch(raw_blocking(master), &FAILOVER_NAMES);
    let lost_before = inject(
        proxied.proxy_of(FAILOVER_NAMES[0]),
        started + run_for / 6,
        &fleet,
        FaultKind::LostReply,
        lost_reply,
    );
    // The unacknowledged holder first, so that the acknowledged one's hold is fresh at the kill.
    let [losable, kept] =
        [(FAILOVER_NAMES[1], false), (FAILOVER_NAMES[0], true)].map(|(name, replica_acks)| {
            let mut fleet = fleet.lock();
            let index = fleet.spawn_on(&url, &long_holder(name, replica_acks));
            let held = fleet.wait_holding(index, Duration::from_secs(10));
            assert_eq!(
                held.as_deref(),
                Some(name),
                "the long holder of {name} holds it"
            );
            index
        });
    // README's exception: a write reaches the master alone when no replica is connected.
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut raw_blocking(master))
        .expect("INFO replication");
    assert!(
        info.contains("connected_slaves:1"),
        "a replica is connected to the master before the failover: {info}"
    );
    let mut doubles_seen = doubles.stop();
    let mut killed = None;
    let _ = proxied.fail_over(FAILOVER_NAMES[0], || {
        fleet.lock().record_fault("redis", FaultKind::Failover);
        killed = Some(Instant::now());
    });
    let outage = killed.expect("the master was killed").elapsed();
    let promoted_ns = now_ns();
    assert!(
        outage < max_outage,
        "the failover took {outage:?}: the scenario's leases last long enough for {max_outage:?}"
    );
    let promoted = proxied.master_of(FAILOVER_NAMES[0]);
    // The acknowledged hold is on the promoted replica; the other one may or may not be.
    let on_promoted = |index: usize| {
        let held = fleet.lock().held_field(index);
        held.map(|(name, field)| {
            raw_blocking(promoted)
                .hexists::<_, _, bool>(name, field)
                .expect("HEXISTS")
        })
    };
    assert_eq!(
        on_promoted(kept),
        Some(true),
        "the hold a replica acknowledged, still held, survived the failover"
    );
    let losable_fate = match on_promoted(losable) {
        Some(true) => "kept",
        Some(false) => "lost",
        None => "over before the promotion",
    };
    fleet.lock().moved_to(&promoted.url());
    let doubles = DoubleApplies::watch(raw_blocking(promoted), &FAILOVER_NAMES);
    let lost_after = inject(
        proxied.proxy_of(FAILOVER_NAMES[0]),
        started + run_for,
        &fleet,
        FaultKind::LostReply,
        lost_reply,
    );
    let report = fleet.into_inner().finish(Duration::from_secs(3));
    doubles_seen.extend(doubles.stop());
    let mut summary = report.summary(&format!("failover with lost replies::{deployment:?}"));
    summary.double_applies = doubles_seen.len();
    publish(&summary);
    eprintln!(
        "failover::{deployment:?}: outage {outage:?}; replies lost {lost_before} before, {lost_after} after; \
         the unacknowledged hold across it was {losable_fate}"
    );
    assert!(
        doubles_seen.is_empty(),
        "acquires applied twice: {doubles_seen:?}"
    );
    assert!(
        lost_before > 0 && lost_after > 0,
        "replies were lost before ({lost_before}) and after ({lost_after}) the failover"
    );
    // The acknowledged long hold was checked as kept, and lasted past the promotion.
    let kept_hold = report
        .holds
        .values()
        .flatten()
        .find(|hold| hold.id.process == format!("w{kept}"))
        .expect("the long holder's hold is in the history");
    assert!(
        kept_hold.kept_by_failover && kept_hold.end_ns > promoted_ns,
        "{kept_hold:?} spans the failover"
    );
    report.assert_sound();
}

#[test]
fn failover_lost_replies_sentinel() {
    failover_lost_replies(Deployment::Sentinel);
}

#[test]
#[ignore = "suite budget: it takes about 25 s and the Sentinel failover is in the suite; scripts/soak.sh runs it"]
fn failover_lost_replies_cluster() {
    failover_lost_replies(Deployment::ReplicatedCluster);
}

/// A deaf subscriber under force unlocks. One process of four tasks reaches a single server through
/// a fault proxy and passes two locks among its tasks (watchdog holds of 2 ms: free hand-offs),
/// next to a process that does the same directly and one whose tasks race in Redis without
/// hand-off. Again and again the proxy stops forwarding what Redis sends on that process's
/// subscriber connection alone (`FaultProxy::black_hole_connection`): its client still believes it
/// listens and hears nothing, its command connections go on. Meanwhile another client force-unlocks
/// the locks every 100–300 ms through any kind that shares their hash (each such force unlock
/// publishes on the lock's channel, which the deaf process does not hear).
///
/// The client finds a deaf subscriber out by its keepalive (`ping_connection_interval`, here
/// [`PING`] apart, unanswered within the command timeout) and makes it anew; until then its free
/// hand-offs rest on its confirmations of the first owner's field (README: "What a successful
/// `unlock()` proves"). The checker allows an overlap only where a holder was told.
#[test]
fn a_black_holed_subscriber_under_force_unlocks() {
    /// How often the deafened process pings its subscriber connection.
    const PING: Duration = Duration::from_millis(500);
    /// How long each deafness lasts at most: past a ping and its command timeout.
    const DEAF: Duration = Duration::from_millis(1500);
    let proxied = Proxied::start(Deployment::Single);
    let master = proxied.master_of(NAMES[0]);
    let (url, args) = client_args(&proxied, master.url());
    let run = scenario_length(Duration::from_secs(5));
    let streaking = WorkerSpec {
        run_for: run,
        tasks: 4,
        hold: Duration::from_millis(2),
        think: Duration::from_millis(1),
        command_timeout: Duration::from_millis(300),
        try_after_release: true,
        ..WorkerSpec::new(&NAMES)
    };
    let mut redis = raw_blocking(master);
    let hand_offs_before = local_hand_offs(&mut redis);
    let mut fleet = Fleet::new(TORTURE, &master.url());
    let deafened = fleet.spawn_on(
        &url,
        &WorkerSpec {
            client_args: args,
            ping_interval: Some(PING),
            ..streaking.clone()
        },
    );
    let victim = fleet.name(deafened).to_owned();
    let racing = WorkerSpec {
        tasks: 2,
        local_handoff: false,
        ..streaking.clone()
    };
    for spec in [&streaking, &racing] {
        let _ = fleet.spawn(spec);
    }
    let doubles = DoubleApplies::watch(raw_blocking(master), &NAMES);
    let operator = Operator::connect(&master.url());
    let proxy = proxied.proxy_of(NAMES[0]);
    let started = Instant::now();
    let (mut deafnesses, mut remade) = (0, 0);
    while started.elapsed() + DEAF + Duration::from_millis(600) < run {
        thread::sleep(Duration::from_millis(300));
        // Its client has one subscriber connection, made when a task first waits.
        let Some(subscriber) = proxy.open_connections().into_iter().find(|c| c.subscribed) else {
            continue;
        };
        assert!(proxy.black_hole_connection(subscriber.id, Direction::ToClient, true));
        fleet.record_fault(&victim, FaultKind::BlackHoledSubscriber);
        deafnesses += 1;
        let deaf_until = Instant::now() + DEAF;
        while Instant::now() < deaf_until {
            let name = NAMES[fastrand::usize(..NAMES.len())];
            if let Some(fault) = operator.any_force_unlock(name) {
                fleet.record_fault("redis", fault);
            }
            thread::sleep(Duration::from_millis(fastrand::u64(100..300)));
        }
        // Healed, unless the client found it deaf and made another.
        if !proxy.black_hole_connection(subscriber.id, Direction::ToClient, false) {
            remade += 1;
        }
    }
    let report = fleet.finish(Duration::from_secs(3));
    let doubles = doubles.stop();
    let mut summary = report.summary("black-holed subscriber, force unlocks");
    summary.double_applies = doubles.len();
    summary.count_hand_offs(local_hand_offs(&mut redis) - hand_offs_before);
    publish(&summary);
    eprintln!(
        "black-holed subscriber: {deafnesses} connections deafened, {remade} of them found out \
         and made anew by the client within {DEAF:?}"
    );
    report.assert_sound();
    assert!(doubles.is_empty(), "acquires applied twice: {doubles:?}");
    assert!(deafnesses > 0, "a subscriber connection was black-holed");
    assert!(
        lost(&summary, FaultKind::ForceUnlock) > 0,
        "force unlocks found the locks held: {summary}"
    );
    assert!(summary.free_hand_offs > 0, "locks passed freely: {summary}");
}
