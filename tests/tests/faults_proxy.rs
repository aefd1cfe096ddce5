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
//! Each scenario runs a few seconds in the default suite; `scripts/soak.sh` runs them longer
//! (`RLOCK_SOAK_SECS`) and adds up their figures.

use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rlock_tests::history::monitor::LOCK_HAND_OFF;
use rlock_tests::history::{
    DoubleApplies, FaultKind, Fleet, Report, Summary, WorkerSpec, local_hand_offs, publish,
    scenario_length, script_sha1,
};
use rlock_tests::proxied::{Deployment, Proxied};
use rlock_tests::proxy::{FaultProxy, Match};
use rlock_tests::topology::{SentinelSetup, connect};

const TORTURE: &str = env!("CARGO_BIN_EXE_rlock-torture");
/// One hash tag: every lock on one master, in a cluster too.
const NAMES: [&str; 2] = ["{proxied}a", "{proxied}b"];

/// The `rlock-torture work` flags that reach `proxied` through its proxies.
fn client_args(proxied: &Proxied) -> (String, Vec<String>) {
    let config = proxied.config();
    let topology = match proxied.deployment {
        Deployment::Single => "single",
        Deployment::MasterReplica => "master-replica",
        Deployment::Sentinel => "sentinel",
        Deployment::Cluster => "cluster",
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
    let master = proxied.master_of(NAMES[0]).url();
    args.extend(["--fence-url".to_owned(), master]);
    (config.url, args)
}

/// Injects proxy faults into `proxy` with `fault` until `until`, then records the lost replies
/// that fired as `lost` in the fleet's history (the other faults record themselves).
fn inject(
    proxy: &FaultProxy,
    until: Instant,
    fleet: &Mutex<Fleet>,
    lost: FaultKind,
    mut fault: impl FnMut(&FaultProxy, &Mutex<Fleet>),
) {
    let lost_before = proxy.lost_replies();
    while Instant::now() < until {
        fault(proxy, fleet);
    }
    for _ in lost_before..proxy.lost_replies() {
        fleet.lock().record_fault("proxy", lost);
    }
}

/// One random fault after a pause: a lost reply of any script (armed for one of the next five),
/// replies held back for a while, or every connection reset.
fn random_fault(proxy: &FaultProxy, fleet: &Mutex<Fleet>) {
    thread::sleep(Duration::from_millis(fastrand::u64(100..300)));
    match fastrand::u8(0..4) {
        0 | 1 => proxy.lose_reply(Match::command("EVALSHA"), fastrand::usize(1..=5)),
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
/// and the local hand-offs (every worker contends for reentrant locks) counted in, asserts that no
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
    let mut admin = connect(master);
    let hand_offs_before = local_hand_offs(&mut admin);
    let fleet = Mutex::new(Fleet::new(TORTURE, &master.url()));
    for spec in workers {
        let _ = fleet.lock().spawn_on(url, spec);
    }
    let doubles = DoubleApplies::watch(connect(master), &NAMES);
    inject(
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
    summary.hand_offs =
        usize::try_from(local_hand_offs(&mut admin) - hand_offs_before).expect("a count that fits");
    publish(&summary);
    assert!(doubles.is_empty(), "acquires applied twice: {doubles:?}");
    (report, summary)
}

/// How many lost replies of `kind` the figures show.
fn lost(summary: &Summary, kind: FaultKind) -> usize {
    summary.faults.get(kind.label()).copied().unwrap_or(0)
}

fn scenario(deployment: Deployment) {
    let proxied = Proxied::start(deployment);
    let (url, args) = client_args(&proxied);
    let run_for = scenario_length(Duration::from_secs(4));
    let spec = WorkerSpec {
        run_for,
        hold: Duration::from_millis(10),
        command_timeout: Duration::from_millis(500),
        client_args: args,
        ..WorkerSpec::new(&NAMES)
    };
    let workers = vec![spec; 3];
    let (report, summary) = under_faults(
        &format!("proxy_faults::{deployment:?}"),
        &proxied,
        &url,
        &workers,
        run_for,
        FaultKind::LostReply,
        random_fault,
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
    scenario(Deployment::Single);
}

#[test]
fn proxy_faults_master_replica() {
    scenario(Deployment::MasterReplica);
}

#[test]
fn proxy_faults_sentinel() {
    scenario(Deployment::Sentinel);
}

#[test]
fn proxy_faults_cluster() {
    scenario(Deployment::Cluster);
}

/// Replies of the hand-off script lost again and again: processes of four tasks pass the locks
/// among their tasks (short holds, well inside the 10 ms hand-off window), next to a process whose
/// tasks race in Redis without hand-off (`--no-local-handoff`). A hand-off whose reply is lost is
/// never re-sent but undone (both owners' holds), and its waiter takes the lock in Redis: no hold
/// may be counted twice, left behind or overlap another.
fn hand_off_replies_lost(deployment: Deployment) {
    let proxied = Proxied::start(deployment);
    let (url, args) = client_args(&proxied);
    let run_for = scenario_length(Duration::from_secs(3));
    let handing_off = WorkerSpec {
        run_for,
        tasks: 4,
        hold: Duration::from_millis(2),
        think: Duration::from_millis(1),
        command_timeout: Duration::from_millis(500),
        client_args: args,
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
        &format!("lost hand-off replies::{deployment:?}"),
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
    hand_off_replies_lost(Deployment::Single);
}

#[test]
fn hand_off_replies_lost_master_replica() {
    hand_off_replies_lost(Deployment::MasterReplica);
}

#[test]
fn hand_off_replies_lost_sentinel() {
    hand_off_replies_lost(Deployment::Sentinel);
}

#[test]
fn hand_off_replies_lost_cluster() {
    hand_off_replies_lost(Deployment::Cluster);
}
